"""Checks of lesson 02's exercises: each computes its own answer and shows only the verdict or a hint."""

from __future__ import annotations

import contextlib
import copy
import itertools
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn

from fp16lab.course.answers import cannot_check, require, verdict
from fp16lab.labs.runtime.i18n import tr
from fp16lab.precision import autocast

__all__ = ["check_fixed_loop", "check_first_applied", "check_resume_by_hand"]


def _flat(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in model.parameters()])


# The check calls the learner's loop with other values than the exercise's defaults (0.05, 0.5): a loop that
# types the numbers in instead of using its arguments trains differently.
LR, MAX_NORM = 0.03, 0.3


def _reference(model: nn.Module, batches: Sequence[Any], device: torch.device) -> nn.Module:
    """The recipe of the lesson's section 2, written out: SGD lr LR, FP16 autocast, clip to MAX_NORM after unscale_."""
    want = copy.deepcopy(model)
    opt = torch.optim.SGD(want.parameters(), lr=LR)
    scaler = torch.amp.GradScaler(device.type)
    for x, y in batches:
        with autocast("fp16", device):  # torch.autocast(device.type, dtype=torch.float16), built in one place
            loss = nn.functional.cross_entropy(want(x.to(device)), y.to(device))
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(want.parameters(), MAX_NORM)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
    return want


@contextlib.contextmanager
def _recording() -> Iterator[list[str]]:
    """Record the GradScaler and zero_grad calls a learner's loop makes, in order (the loop's outputs alone miss them)."""
    events: list[str] = []
    originals = {name: getattr(torch.amp.GradScaler, name) for name in ("scale", "unscale_", "step", "update")}
    zero_grad, module_zero_grad = torch.optim.Optimizer.zero_grad, nn.Module.zero_grad
    enter, clip = torch.autocast.__enter__, torch.nn.utils.clip_grad_norm_

    def recorded_enter(self: torch.autocast) -> Any:
        events.append(f"autocast {self.fast_dtype}" if self._enabled else "autocast (disabled)")
        return enter(self)

    def recorded_clip(parameters: Any, max_norm: float, *args: Any, **kwargs: Any) -> Any:
        events.append(f"clip {float(max_norm)!r}")
        return clip(parameters, max_norm, *args, **kwargs)

    def wrap(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def recorded(self: torch.amp.GradScaler, *args: Any, **kwargs: Any) -> Any:
            events.append(name if self.is_enabled() else f"{name} (disabled)")
            optimizer = args[0] if args else kwargs.get("optimizer")
            if name == "step" and isinstance(optimizer, torch.optim.Optimizer):
                events.append(f"lr {float(optimizer.param_groups[0]['lr'])!r}")   # the optimizer it steps
            return fn(self, *args, **kwargs)
        return recorded

    def recorded_zero_grad(self: torch.optim.Optimizer, *args: Any, **kwargs: Any) -> Any:
        events.append("zero_grad")
        return zero_grad(self, *args, **kwargs)

    def recorded_module_zero_grad(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
        events.append("zero_grad")   # model.zero_grad() clears the same gradients
        return module_zero_grad(self, *args, **kwargs)

    try:
        for name, fn in originals.items():
            setattr(torch.amp.GradScaler, name, wrap(name, fn))
        torch.optim.Optimizer.zero_grad = recorded_zero_grad  # type: ignore[method-assign]
        nn.Module.zero_grad = recorded_module_zero_grad  # type: ignore[method-assign]
        torch.autocast.__enter__ = recorded_enter  # type: ignore[method-assign]
        torch.nn.utils.clip_grad_norm_ = recorded_clip
        yield events
    finally:
        for name, fn in originals.items():
            setattr(torch.amp.GradScaler, name, fn)
        torch.optim.Optimizer.zero_grad = zero_grad  # type: ignore[method-assign]
        nn.Module.zero_grad = module_zero_grad  # type: ignore[method-assign]
        torch.autocast.__enter__ = enter  # type: ignore[method-assign]
        torch.nn.utils.clip_grad_norm_ = clip


def check_fixed_loop(amp_train: object, model: nn.Module, batches: Sequence[Any], device: torch.device) -> None:
    """Exercise 1: the corrected loop trains exactly as the recipe does, with a GradScaler, clearing gradients each step."""
    require(amp_train is not None and callable(amp_train),
            tr("Hint: assign your corrected training function itself (not its result) to amp_train"))
    assert callable(amp_train)
    if len(batches) < 2:
        cannot_check(tr("it needs at least two batches in ex_batches: run the cell above the exercise"))
    want = _reference(model, batches, device)
    failure: Exception | None = None
    with _recording() as events:
        try:
            got = amp_train(copy.deepcopy(model), batches, lr=LR, max_norm=MAX_NORM)
        except Exception as err:  # a learner's loop may raise anything: turn it into a hint
            failure = err
    if failure is not None:
        message = str(failure)
        # torch says "unscale_() is being called after step()" both for an unscale_ after this step's scaler.step
        # (step -> unscale_ -> clip) and for a forgotten update (the next step's unscale_): the call order tells which
        calls = [e for e in events if e in ("scale", "step")]   # step's own unscale_ is recorded too: left out
        hint = (tr("GradScaler cannot unscale fp16 gradients: the weights must stay fp32 (autocast runs the "
                   "layers in fp16)") if "FP16 gradients" in message
                else tr("unscale_ and the clip go before scaler.step(optimizer): step already unscales and applies the "
                        "gradients, so clipping after it changes nothing this step") if (
                    "after step()" in message and calls[-1:] == ["step"])
                else tr("scaler.update() must follow every scaler.step(optimizer): it readies the scaler for the next "
                        "step") if "after step()" in message
                else tr("run your loop on ex_batches yourself and read where it fails"))
        require(False, tr("your loop raised {kind}: {err}. Hint: {hint}", kind=type(failure).__name__, err=failure,
                          hint=hint))
    require(isinstance(got, nn.Module), tr("Hint: amp_train must return the trained model"))
    require(all(p.dtype == torch.float32 for p in got.parameters()),
            tr("Hint: your weights are not float32: keep the master weights in fp32 and let autocast cast the layers"))
    n = len(batches)
    require(events.count("scale") == n,
            tr("Hint: the loss is not multiplied by an enabled GradScaler once per step: without "
               "scaler.scale(loss).backward(), small fp16 gradients underflow to zero"))
    require(events.count("update") == n,
            tr("Hint: call scaler.update() once per step, after scaler.step(optimizer): without it the scale never "
               "adapts"))
    require(events.count(f"autocast {torch.float16}") >= n,
            tr("Hint: the forward pass does not run under torch.autocast(device_type=..., dtype=torch.float16) in "
               "every step: without it, or with bfloat16, the layers do not compute in fp16"))
    clips = {e.removeprefix("clip ") for e in events if e.startswith("clip ")}
    lrs = {e for e in events if e.startswith("lr ")}   # empty if scaler.step was never called: hinted below
    require(not lrs or lrs == {f"lr {float(LR)!r}"},
            tr("Hint: the optimizer does not use the learning rate passed in: SGD(..., lr=lr), not a number typed in"))
    require(len(clips) > 0, tr("Hint: the gradients are never clipped: call torch.nn.utils.clip_grad_norm_ after "
                               "scaler.unscale_(optimizer)"))
    require(clips == {repr(float(MAX_NORM))},
            tr("Hint: wrong clip threshold: clip to max_norm, the function's argument, not a number typed in"))
    start = _flat(model)
    moved, wanted = _flat(got) - start, _flat(want) - start
    error = float((moved - wanted).norm() / wanted.norm())
    # Without zero_grad the stale gradients are divided by the scale at each unscale_: about 1e-5 of the update,
    # inside a loose tolerance. So the calls are counted; clearing .grad by hand passes only bit for bit (<= 1e-6).
    require(events.count("zero_grad") >= n - 1 or error <= 1e-6,
            tr("Hint: the gradients are not cleared every step: backward() adds to .grad, so each update also "
               "carries the earlier steps' gradients"))
    require(bool(moved.norm() > 0),
            tr("Hint: the weights did not change: are the gradients cleared between backward() and "
               "scaler.step()? Clear them at the start of a step (or after the previous update), never between "
               "backward() and step()"))
    require(bool(moved.norm() > 0.01 * wanted.norm()),
            tr("Hint: the updates are thousands of times too small: the clipping saw gradients still multiplied by the "
               "loss scale"))
    require(bool(moved.norm() < 1.5 * wanted.norm()),
            tr("Hint: the updates are larger than clipped ones: the clipping did not act on the gradients the optimizer "
               "used"))
    verdict(error <= 1e-4,
            tr("Hint: close, but not the same updates: are the forward pass and the loss both inside the fp16 "
               "autocast block, and your calls in section 2's order?"),
            done=tr("correct: your loop trains exactly as the recipe of section 2"))


def check_first_applied(h_probe: object, first_applied: object, init_scale: float = 2.0**22) -> None:
    """Exercise 2: the number of the first step whose update was applied."""
    require(isinstance(h_probe, pd.DataFrame) and len(h_probe) > 0, tr("Hint: h_probe should be the History that fit returned"))
    assert isinstance(h_probe, pd.DataFrame)
    require(len(h_probe) == 20, tr("Hint: train for 20 steps (steps=20)"))
    require(bool(h_probe["skipped"].iloc[0]), tr("Hint: the first step was not skipped: is the scaler starting at 2**22, in fp16?"))
    require(h_probe["scale"].iloc[0] == init_scale / 2,   # the scale after step 1, which overflowed: half the start
            tr("Hint: the scaler did not start at 2**22: pass scaler=torch.amp.GradScaler(device.type, "
               "init_scale=2.0**22)"))
    require(not h_probe["skipped"].all(), tr("Hint: every step was skipped: the scale did not get low enough in 20 steps"))
    require(isinstance(first_applied, (int, np.integer)) and not isinstance(first_applied, bool),
            tr("Hint: assign the step number itself, an int, to first_applied (not a Series or a row: "
               "int(...iloc[0]))"))
    expected = 1 + sum(1 for _ in itertools.takewhile(bool, h_probe["skipped"]))
    require(first_applied != expected - 1,   # the row index (from 0), the last skipped step, or the count of skips
            tr("Hint: one step too early: that step was still skipped. The 'step' column counts from 1 (the row index "
               "from 0), and a count of skipped steps is not a step number"))
    require(first_applied == expected, tr("Hint: not that step: steps are numbered from 1 (the 'step' column, not the "
                                     "row index), and a skipped step has skipped=True"))
    verdict(True, "", done=tr("correct: the scaler halved its scale on every overflow until the gradients fit in fp16"))


def _same(a: Any, b: Any) -> bool:
    """Whether two state_dicts (nested dicts, lists, tensors, numbers) are equal, tensors bit for bit."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape and torch.equal(
            a.cpu(), b.cpu())
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _states(model: nn.Module, optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler) -> dict[str, Any]:
    """Deep copies of the three state_dicts a resume must restore."""
    return copy.deepcopy({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                          "scaler": scaler.state_dict()})


def check_resume_by_hand(save_state: object, load_state: object, run_by_hand: Callable[..., Any], folder: str,
                         crash_in: int) -> None:
    """Exercise 3: a run saved and loaded by the learner's functions continues exactly where it crashed."""
    require(callable(save_state) and callable(load_state),
            tr("Hint: define both functions, save_state and load_state, and run their cell"))
    assert callable(save_state) and callable(load_state)
    if not Path(folder).is_dir():
        cannot_check(tr("the exercise folder {folder} is gone: run the cell above the exercise again", folder=folder))
    snapshots: dict[int, dict[str, Any]] = {}

    def remember(path: object, model: nn.Module, optimizer: torch.optim.Optimizer, scaler: torch.amp.GradScaler,
                 step: int) -> None:
        snapshots[step] = _states(model, optimizer, scaler)

    final = _states(*run_by_hand(remember, None, None))   # never crashes: the reference
    path = Path(folder) / "check.pt"
    path.unlink(missing_ok=True)
    try:
        run_by_hand(save_state, load_state, path, crash_in=crash_in)
    except RuntimeError as err:
        require("simulated crash" in str(err),
                tr("your save_state raised {kind}: {err}", kind=type(err).__name__, err=err))
    except Exception as err:  # a learner's function may raise anything: turn it into a hint
        require(False, tr("your save_state raised {kind}: {err}", kind=type(err).__name__, err=err))
    require(path.exists(), tr("Hint: save_state wrote nothing to the path it was given: torch.save(..., path)"))
    last = max(s for s in snapshots if s < crash_in)
    loaded: dict[str, Any] = {}

    def load_and_look(p: Path, model: nn.Module, optimizer: torch.optim.Optimizer,
                      scaler: torch.amp.GradScaler) -> int:
        step = load_state(p, model, optimizer, scaler)
        loaded.update(_states(model, optimizer, scaler), step=step)
        return step if isinstance(step, int) else last   # a wrong step is reported below, not as a crash

    real_load, unsafe = torch.load, []

    def watched_load(*args: Any, **kwargs: Any) -> Any:
        if kwargs.get("weights_only") is False:
            unsafe.append(True)
        return real_load(*args, **kwargs)

    try:
        torch.load = watched_load
        got = _states(*run_by_hand(save_state, load_and_look, path, resume=True))
    except Exception as err:  # torch.load(weights_only=True) refuses pickled objects, for one
        require("weights only" not in str(err).lower().replace("_", " "),   # torch's own message is a page long
                tr("Hint: torch.load(weights_only=True) loads tensors and plain containers only: save the "
                   "state_dict()s, not the objects"))
        require(False, tr("resuming raised {kind}: {err}. Hint: {hint}", kind=type(err).__name__, err=err,
                          hint=tr("run your functions yourself on ex_ckpt and read where they fail")))
    finally:
        torch.load = real_load
    require(not unsafe, tr("Hint: load with torch.load(path, weights_only=True): weights_only=False can run code from "
                           "the file; save the state_dict()s, which load without it"))
    want = snapshots[last]
    require(isinstance(loaded.get("step"), int) and not isinstance(loaded.get("step"), bool),
            tr("Hint: load_state must return the step the checkpoint was saved at, an int"))
    require(loaded["step"] == last,
            tr("Hint: load_state returned another step than the one saved with the state: return the saved step "
               "itself (the loop continues from the next one)"))
    require(_same(loaded["model"], want["model"]),
            tr("Hint: the weights after load_state are not the saved ones: save model.state_dict() and load it back"))
    require(_same(loaded["optimizer"], want["optimizer"]),
            tr("Hint: the optimizer's state (Adam's moments and step count) was not restored: save "
               "optimizer.state_dict() and load it back"))
    require(_same(loaded["scaler"], want["scaler"]),
            tr("Hint: the scaler's state (its scale and growth tracker) was not restored: a checkpoint must hold "
               "scaler.state_dict(), loaded back with scaler.load_state_dict"))
    verdict(_same(got, final),
            tr("Hint: the state after load_state is right but the run ends elsewhere: did save_state save the "
               "state of the step it was given?"),
            done=tr("correct: the resumed run ends bit for bit where a run that never crashed ends"))
