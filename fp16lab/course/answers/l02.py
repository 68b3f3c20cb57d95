"""Checks of lesson 02's exercises: each computes its own answer and shows only the verdict or a hint."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn

from fp16lab.course.answers import verdict
from fp16lab.course.i18n import tr
from fp16lab.precision import autocast

__all__ = ["check_fixed_loop", "check_first_applied", "check_resume"]


def _need(ok: bool, hint: str) -> None:
    """Raise AssertionError with ``hint`` unless ``ok`` (prints nothing: the last check calls verdict)."""
    if not ok:
        raise AssertionError(hint)


def _flat(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def _reference(model: nn.Module, batches: Sequence[Any], device: torch.device) -> nn.Module:
    """The recipe of the lesson's section 2, written out: SGD lr 0.05, FP16 autocast, clip 0.5 after unscale_."""
    want = copy.deepcopy(model)
    opt = torch.optim.SGD(want.parameters(), lr=0.05)
    scaler = torch.amp.GradScaler(device.type)
    for x, y in batches:
        with autocast("fp16", device):  # torch.autocast(device.type, dtype=torch.float16), built in one place
            loss = nn.functional.cross_entropy(want(x.to(device)), y.to(device))
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(want.parameters(), 0.5)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
    return want


def check_fixed_loop(amp_train: object, model: nn.Module, batches: Sequence[Any], device: torch.device) -> None:
    """Exercise 1: the corrected loop trains exactly as the recipe does."""
    _need(amp_train is not None and callable(amp_train),
          tr("Hint: assign your corrected training function itself (not its result) to amp_train"))
    assert callable(amp_train)
    want = _reference(model, batches, device)
    try:
        got = amp_train(copy.deepcopy(model), batches)
    except Exception as err:
        hint = (tr("GradScaler cannot unscale fp16 gradients: the weights must stay fp32 (autocast runs the "
                   "layers in fp16)") if "FP16 gradients" in str(err)
                else tr("run your loop on ex_batches yourself and read where it fails"))
        raise AssertionError(tr("your loop raised {kind}: {err}. Hint: {hint}", kind=type(err).__name__, err=err,
                                hint=hint)) from err
    _need(isinstance(got, nn.Module), tr("Hint: amp_train must return the trained model"))
    assert isinstance(got, nn.Module)
    _need(all(p.dtype == torch.float32 for p in got.parameters()),
          tr("Hint: your weights are not float32: keep the master weights in fp32 and let autocast cast the layers"))
    start = _flat(model)
    moved, wanted = _flat(got) - start, _flat(want) - start
    _need(bool(moved.norm() > 0), tr("Hint: the weights did not change: is the optimizer stepped on this model's parameters?"))
    _need(bool(moved.norm() > 0.01 * wanted.norm()),
          tr("Hint: the updates are thousands of times too small: the clipping saw gradients still multiplied by the "
          "loss scale"))
    _need(bool(moved.norm() < 1.5 * wanted.norm()),
          tr("Hint: the updates are larger than clipped ones: the clipping did not act on the gradients the optimizer used"))
    _need(torch.allclose(moved, wanted, rtol=1e-3, atol=1e-5),
          tr("Hint: close, but not the same updates: compare the order of your calls with section 2"))
    verdict(True, "", done=tr("correct: your loop trains exactly as the recipe of section 2"))


def check_first_applied(h_probe: object, first_applied: object, init_scale: float = 2.0**22) -> None:
    """Exercise 2: the number of the first step whose update was applied."""
    _need(isinstance(h_probe, pd.DataFrame) and len(h_probe) > 0, tr("Hint: h_probe should be the History that fit returned"))
    assert isinstance(h_probe, pd.DataFrame)
    _need(len(h_probe) == 20, tr("Hint: train for 20 steps (steps=20)"))
    _need(h_probe["scale"].iloc[0] in (init_scale, init_scale / 2),
          tr("Hint: the first scale is not 2**22 or half of it: pass scaler=torch.amp.GradScaler(device.type, "
          "init_scale=2.0**22)"))
    _need(bool(h_probe["skipped"].iloc[0]), tr("Hint: the first step was not skipped: is the scaler starting at 2**22, in fp16?"))
    _need(not h_probe["skipped"].all(), tr("Hint: every step was skipped: the scale did not get low enough in 20 steps"))
    _need(first_applied is not None, tr("Hint: assign the step number (an int) to first_applied"))
    expected = 1 + sum(1 for _ in itertools.takewhile(bool, h_probe["skipped"]))
    _need(first_applied == expected, tr("Hint: not that step: steps are numbered from 1 (the 'step' column, not the "
                                     "row index), and a skipped step has skipped=True"))
    verdict(True, "", done=tr("correct: the scaler halved its scale on every overflow until the gradients fit in fp16"))


def check_resume(h_resumed: object, crashed: pd.DataFrame, steps: int,
                 uninterrupted: Callable[[], pd.DataFrame]) -> None:
    """Exercise 3: the resumed run continues from the checkpoint and ends where a run that never crashed ends."""
    _need(isinstance(h_resumed, pd.DataFrame) and len(h_resumed) > 0,
          tr("Hint: h_resumed should be the History that fit returned"))
    assert isinstance(h_resumed, pd.DataFrame)
    _need(h_resumed["step"].iloc[-1] == steps,
          tr("Hint: the run should end at step {steps}: steps= counts every step of the run, also those before "
             "the crash", steps=steps))
    _need(h_resumed["step"].tolist() == list(range(1, steps + 1)),
          tr("Hint: the history should start at step 1: resume from the checkpoint (Checkpoint(ex_ckpt, resume=True))"))
    saved = crashed["time_s"].to_numpy()
    _need(bool(np.allclose(h_resumed["time_s"].to_numpy()[:len(saved)], saved, rtol=1e-9, atol=0)),
          tr("Hint: the steps before the crash were trained again: continue from the checkpoint instead of starting over"))
    reference = uninterrupted()
    _need(h_resumed["loss"].tolist() == reference["loss"].tolist(),
          tr("Hint: the losses differ from an uninterrupted run: resume with the same precision and data, from "
          "ex_ckpt, with a model and optimizer built by fresh()"))
    verdict(True, "", done=tr("correct: the resumed run matches one that never crashed, bit for bit"))
