"""Checks of lesson 04's exercises: each computes its own answer and shows only the verdict or a hint."""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable
from typing import Any

import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

from fp16lab.course.answers import WrongAnswer, cannot_check, require, verdict
from fp16lab.debug import FP16_MAX, dtype_trace
from fp16lab.labs.runtime.i18n import tr
from fp16lab.precision import autocast

_CASTS = {torch.ops.aten._to_copy, torch.ops.aten.copy_, torch.ops.aten.clone, torch.ops.aten.detach,
          torch.ops.aten.empty_like, torch.ops.aten.ones_like, torch.ops.aten.zeros_like, torch.ops.aten.new_empty_strided}

__all__ = ["check_overflow_fix", "check_clip_threshold", "check_safe_function", "CLIP_SEEDS"]

# the seeds exercise 2 is judged on: those the lesson's solution tries (range(3)), so a threshold it picks passes
CLIP_SEEDS: tuple[int, ...] = (0, 1, 2)


def _peak(value: object) -> float:
    """Largest magnitude of a tensor (or the first tensor of a tuple): what must fit FP16's range."""
    t = value[0] if isinstance(value, (tuple, list)) and value else value
    return t.detach().float().abs().max().item() if isinstance(t, torch.Tensor) else 0.0


def _fp32_peaks(model: nn.Module, x: torch.Tensor) -> tuple[list[tuple[str, float, float]], torch.Tensor]:
    """(child name, largest input, largest output) of each direct child in an FP32 pass, and the output."""
    peaks: list[tuple[str, float, float]] = []
    hooks = [m.register_forward_hook(lambda m, i, o, n=n: peaks.append((n, _peak(i), _peak(o))))
             for n, m in model.named_children()]
    try:
        with torch.no_grad():
            ref = model(x)
    finally:
        for h in hooks:
            h.remove()
    return peaks, ref


def _run_learners(fn: Callable[[], Any], hint: Callable[[str], str]) -> Any:
    """Run the learner's code; an exception it raises becomes a hint naming it (no checker traceback)."""
    try:
        return fn()
    except Exception as err:  # the learner's code failed: say so, with its message, not our source
        message = str(err).splitlines()[0] if str(err) else ""
        raise WrongAnswer(hint(f"{type(err).__name__}: {message}")) from None


def _twin(module: nn.Module, model: nn.Module) -> str | None:
    """The name of model's child with module's type and weights: layers match by what they compute, not by name."""
    own = list(module.parameters(recurse=False))
    for name, child in model.named_children():
        theirs = list(child.parameters(recurse=False))
        if type(child) is type(module) and own and len(own) == len(theirs) and all(
                a.shape == b.shape and torch.equal(a.detach().cpu(), b.detach().cpu()) for a, b in zip(own, theirs, strict=True)):
            return name
    return None


def _leaf_dtypes(model: nn.Module, x: torch.Tensor) -> list[tuple[nn.Module, torch.dtype | None]]:
    """(leaf module, output dtype) of each leaf in call order, in one forward under FP16 autocast."""
    dtypes: dict[nn.Module, torch.dtype | None] = {}

    def hook(m: nn.Module, i: Any, o: Any) -> None:
        t = o[0] if isinstance(o, (tuple, list)) and o else o
        dtypes[m] = t.dtype if isinstance(t, torch.Tensor) else None

    handles = [m.register_forward_hook(hook) for m in model.modules() if not list(m.children())]
    try:
        with torch.no_grad(), autocast("fp16", x.device):
            model(x)
    finally:
        for h in handles:
            h.remove()
    return list(dtypes.items())


def _forward_hint(error: str) -> str:
    """The hint for a forward that raised: the autocast reminder only where the error is about dtypes."""
    if "dtype" in error or "Half" in error or "Float" in error:
        return tr("Hint: safe_model's forward raised {error}: inside autocast(enabled=False) nothing is cast for you",
                  error=error)
    return tr("Hint: safe_model's forward raised {error}", error=error)


def check_overflow_fix(first_bad: object, safe_model: object, model: nn.Module, x: torch.Tensor) -> None:
    """Exercise 1: the first overflowing module, and a model with an FP32 island exactly where it is needed."""
    require(first_bad is not None and safe_model is not None, tr("Hint: assign both first_bad and safe_model"))
    require(isinstance(first_bad, str) and bool(first_bad),
            tr("Hint: first_bad must be a module name (a string such as 'inp')"))
    peaks, ref = _fp32_peaks(model, x)
    want = next((n for n, _, out in peaks if out > FP16_MAX), None)
    if want is None:
        cannot_check(tr("no layer of the model overflows FP16 on this input (was ex1_model or ex1_x changed?)"))
    require(first_bad in dict(model.named_children()),
            tr("Hint: {first_bad!r} is not a module of ex1_model: read report.first", first_bad=first_bad))
    require(first_bad == want, tr("Hint: {first_bad!r} is not the first module whose output overflows: look at the "
                                  "first row with inf/NaN in first_nonfinite's table", first_bad=first_bad))
    require(isinstance(safe_model, nn.Module),
            tr("Hint: safe_model must be an nn.Module (e.g. a subclass of Ex1Net with a new forward)"))
    assert isinstance(safe_model, nn.Module)

    def forward16() -> torch.Tensor:
        with torch.no_grad(), autocast("fp16", x.device):
            return safe_model(x).float()

    got = _run_learners(forward16, _forward_hint)
    require(bool(torch.isfinite(got).all()), tr("Hint: safe_model's output still holds inf/NaN under FP16 autocast: the "
                                                "island must start before the layer that overflows and end after the "
                                                "values are small again"))
    rel = ((got - ref).abs().max() / ref.abs().max()).item()
    weighted = [m for m in safe_model.modules() if not list(m.children()) and list(m.parameters(recurse=False))]
    copied = bool(weighted) and all(_twin(m, model) is not None for m in weighted)
    require(rel < 0.05, tr("Hint: safe_model has ex1_model's weights, but its output is far from ex1_model's FP32 "
                           "output: its forward computes something other than Ex1Net.forward (a step left out?)")
            if copied else tr("Hint: safe_model's output is far from ex1_model's FP32 output: did you copy the weights?"))
    peak_of = {n: max(i, o) for n, i, o in peaks}  # measured on ex1_model in FP32: the learner's model runs once, in FP16
    leaves = _run_learners(lambda: _leaf_dtypes(safe_model, x), _forward_hint)
    runs = [(n, peak_of.get(n, math.inf) if n is not None else math.inf, dtype)
            for n, dtype in ((_twin(m, model), dtype) for m, dtype in leaves)]
    plain = dtype_trace(model, x, precision="fp16")
    autocast_lowers = dict(zip(plain["module"], plain["low_precision"], strict=True))
    require(any(dtype == torch.float16 for _, _, dtype in runs),
            tr("Hint: nothing runs in FP16 any more: keep autocast on outside the island"))
    bad = [dtype for n, _, dtype in runs if n == want]
    require(bool(bad), tr("Hint: safe_model has no layer with {name}'s weights: build it from ex1_model's layers "
                          "(copy its state_dict)", name=want))
    low = next((str(d).replace("torch.", "") for d in bad if d != torch.float32), "")
    require(not low,
            tr("Hint: {name} itself runs in {dtype}: this exercise asks for an FP32 island, the layer that overflows "
               "running in FP32 (other fixes, such as rescaling or bf16, are section 1's)",
               name=want, dtype=low))
    # Layers autocast runs in FP16 whose FP32 inputs and outputs fit FP16 easily need no island.
    needless = list(dict.fromkeys(n for n, peak, dtype in runs if n is not None and n != want
                                  and autocast_lowers.get(n) and peak < FP16_MAX / 4 and dtype == torch.float32))
    verdict(not needless, tr("Hint: {names} run in FP32 but never see values near FP16's limit: start the island "
                             "at the layer that overflows and end it once the values are small again",
                             names=", ".join(needless)),
            done=tr("correct: the overflowing layer runs in FP32, the rest in FP16"))


def check_clip_threshold(max_norm: object, run: Callable[..., tuple[Any, Any]], steps: int,
                         seeds: tuple[int, ...] = CLIP_SEEDS) -> None:
    """Exercise 2: a threshold that, on each of ``seeds`` (default :data:`CLIP_SEEDS`: 0, 1, 2), stops the explosion,
    lets the run learn and clips at most 60 % of steps.

    ``run(max_norm, seed)`` is the lesson's ``explosion_run``. One seed is not enough: which seed is strictest (the
    one a threshold must clip most often, or whose explosion it lets through) depends on the chip and the run: a
    CPU quick run explodes on other seeds than a GPU full run, so a threshold tuned on one seed can fail another.

    ``run`` is the learner's own function, so the check first runs it without clipping (``run(None, seed)``): on at
    least one of ``seeds`` fit must stop it, as it stops some seeds of section 4's grid. A run weakened in the notebook (a
    lower learning rate, fewer steps, the steep feature removed) no longer explodes, and any threshold would pass it.
    """
    require(max_norm is not None, tr("Hint: assign a threshold (a positive float) to max_norm"))
    require(isinstance(max_norm, numbers.Real) and not isinstance(max_norm, bool) and 0 < float(max_norm) < math.inf,
            tr("Hint: max_norm must be a positive, finite number"))
    assert isinstance(max_norm, numbers.Real)
    require(any(run(None, seed)[1] is not None for seed in seeds),
            tr("Hint: without clipping, explosion_run no longer explodes on seeds {seeds}: the threshold is judged on "
               "section 4's run, so re-run its cell unchanged (learning rate, data, explode_steps) and change only "
               "max_norm", seeds=", ".join(map(str, seeds))))
    for seed in seeds:
        hist, err = run(float(max_norm), seed)
        require(err is None and len(hist) == steps,
                tr("Hint: on seed {seed} the run still explodes with that threshold and fit stops it: clip lower",
                   seed=seed))
        first, last = hist["loss"].iloc[:5].mean(), hist["loss"].iloc[-5:].mean()
        finite = hist["loss"][hist["loss"].apply(math.isfinite)]
        peak = float(finite.max()) / first if len(finite) else math.inf
        require(peak <= 3, tr("Hint: on seed {seed} the run finishes, but on the way its loss rose to {peak:.0f}× "
                              "that of the first steps: an explosion the threshold let through; clip lower",
                              seed=seed, peak=peak))
        applied = hist[~hist["skipped"]]
        clipped = float((applied["grad_norm"] > float(max_norm)).mean())
        require(clipped <= 0.6, tr("Hint: on seed {seed} the threshold acts on {share:.0%} of the applied steps, more "
                                   "than 60 %: it caps most updates (a brake, not a safety net): compare it with the "
                                   "gradient norms of the steps that were not clipped", seed=seed, share=clipped))
        require(bool(last < 0.7 * first), tr("Hint: on seed {seed} the run finishes but does not learn: the threshold "
                                             "lets too large updates through; look at the loss of each step",
                                             seed=seed))
    verdict(True, "", done=tr("correct: a safety net that stops the explosion and lets the run learn"))


def check_safe_function(fn: object, layer: nn.Module, x: torch.Tensor) -> None:
    """Exercise 3: an autograd.Function with SumSquares' math that runs in FP32 under FP16 autocast."""
    require(fn is not None, tr("Hint: assign your autograd.Function class to SafeSumSquares"))
    require(isinstance(fn, type) and issubclass(fn, torch.autograd.Function),
            tr("Hint: SafeSumSquares must be a subclass of torch.autograd.Function"))
    assert isinstance(fn, type) and issubclass(fn, torch.autograd.Function)
    with torch.no_grad(), autocast("fp16", x.device):
        h16 = layer(x)  # an FP16 activation, as autocast makes it
    if h16.dtype != torch.float16 or bool(torch.isfinite(h16 * h16).all()):
        cannot_check(tr("the activations do not overflow FP16 when squared (was ex3_layer or ex3_x changed?)"))
    h = h16.detach().requires_grad_()

    def forward16() -> torch.Tensor:
        with autocast("fp16", x.device):
            return fn.apply(h)

    out = _run_learners(forward16, lambda e: tr("Hint: SafeSumSquares.apply raised {error}", error=e))
    require(isinstance(out, torch.Tensor) and out.shape == h.shape[:-1],
            tr("Hint: forward must return one tensor with one value per row"))
    require(bool(torch.isfinite(out).all()),
            tr("Hint: the output still overflows: in which dtype does x reach forward, and in which dtype does x * x run?"))
    require(out.dtype == torch.float32, tr("Hint: the output is {dtype}: the math must run in FP32 inside the function",
                                           dtype=str(out.dtype).replace("torch.", "")))
    expected = (h.detach().double() ** 2).sum(-1)
    require(torch.allclose(out.double(), expected, rtol=1e-4),
            tr("Hint: the values are wrong: the forward must compute the same math as SumSquares"))
    upstream = torch.rand(out.shape, generator=torch.Generator().manual_seed(0), dtype=torch.float64).add_(0.5)
    upstream = upstream.to(device=out.device, dtype=out.dtype)  # not ones: a backward must use it

    computed: list[torch.dtype] = []

    class _Dtypes(TorchDispatchMode):
        """Records the output dtype of each arithmetic op the backward runs (casts and copies aside)."""

        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            result = func(*args, **(kwargs or {}))
            if func.overloadpacket not in _CASTS and isinstance(result, torch.Tensor) and result.is_floating_point():
                computed.append(result.dtype)
            return result

    def backward() -> torch.Tensor | None:
        with _Dtypes():
            out.backward(upstream)  # backward outside autocast, as in training
        return h.grad

    grad = _run_learners(backward, lambda e: tr("Hint: backward raised {error}", error=e))
    low = sorted({str(d).replace("torch.", "") for d in computed if d != torch.float32})
    require(not low, tr("Hint: the backward computes in {dtype}: the gradient's math must run in FP32 too (the "
                        "tensors it uses: as forward received them, in FP32)", dtype=", ".join(low)))
    require(grad is not None and bool(torch.isfinite(grad).all()),
            tr("Hint: the gradient is not finite: in which dtype does backward compute?"))
    assert grad is not None
    x64, g64 = h.detach().double(), upstream.double().unsqueeze(-1)
    want = 2 * x64 * g64

    def close(a: torch.Tensor) -> bool:
        return bool(torch.allclose(grad.double(), a, rtol=2e-3, atol=1e-3 * a.abs().max().item()))

    require(not close(2 * x64), tr("Hint: the gradient ignores the upstream gradient that backward receives: "
                                   "a backward returns (its local derivative) × (the incoming grad)"))
    ratio = (grad.double() / want).median().item()
    require(close(want) or not (0 < ratio < math.inf and close(ratio * want)),
            tr("Hint: the gradient is off by a constant factor ({ratio:.3g}×): differentiate the forward again",
               ratio=ratio))
    verdict(close(want), tr("Hint: the gradient does not match autograd's gradient of the same math: compare your "
                            "backward with torch.autograd.grad on an FP32 copy"),
            done=tr("correct: FP32 inside the function, finite output and gradient"))
