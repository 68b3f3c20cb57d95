"""Checks of lesson 04's exercises: each computes its own answer and shows only the verdict or a hint."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from fp16lab.course.answers import verdict
from fp16lab.course.i18n import tr
from fp16lab.debug import FP16_MAX, dtype_trace
from fp16lab.precision import autocast

__all__ = ["check_overflow_fix", "check_clip_threshold", "check_safe_function"]


def _need(ok: bool, hint: str) -> None:
    """Raise AssertionError with ``hint`` unless ``ok`` (prints nothing: the last check calls verdict)."""
    if not ok:
        raise AssertionError(hint)


def _first_overflowing_child(model: nn.Module, x: torch.Tensor) -> tuple[str | None, torch.Tensor]:
    """The first direct child whose FP32 output leaves FP16's range, and the model's FP32 output."""
    peaks: list[tuple[str, float]] = []
    hooks = [m.register_forward_hook(lambda m, i, o, n=n: peaks.append((n, o.abs().max().item())))
             for n, m in model.named_children()]
    try:
        with torch.no_grad():
            ref = model(x)
    finally:
        for h in hooks:
            h.remove()
    return next((n for n, peak in peaks if peak > FP16_MAX), None), ref


def check_overflow_fix(first_bad: object, safe_model: object, model: nn.Module, x: torch.Tensor) -> None:
    """Exercise 1: the first overflowing module, and a model with an FP32 island only where needed."""
    _need(first_bad is not None and safe_model is not None, tr("Hint: assign both first_bad and safe_model"))
    _need(isinstance(first_bad, str) and bool(first_bad), tr("Hint: first_bad must be a module name (a string such as 'inp')"))
    want, ref = _first_overflowing_child(model, x)
    _need(first_bad in dict(model.named_children()), tr("Hint: {first_bad!r} is not a module of ex1_model: read report.first",
                                                          first_bad=first_bad))
    _need(first_bad == want, tr("Hint: {first_bad!r} is not the first module whose output overflows: look at the "
                                "first row with inf/NaN in first_nonfinite's table", first_bad=first_bad))
    _need(isinstance(safe_model, nn.Module),
          tr("Hint: safe_model must be an nn.Module (e.g. a subclass of Ex1Net with a new forward)"))
    assert isinstance(safe_model, nn.Module)
    with torch.no_grad(), autocast("fp16", x.device):
        got = safe_model(x).float()
    _need(bool(torch.isfinite(got).all()), tr("Hint: safe_model's output still holds inf/NaN under FP16 autocast: the "
                                           "island must start before the layer that overflows and end after the "
                                           "values are small again"))
    rel = ((got - ref).abs().max() / ref.abs().max()).item()
    _need(rel < 0.05, tr("Hint: safe_model's output is far from ex1_model's FP32 output: did you copy the weights?"))
    _need(bool(dtype_trace(safe_model, x, precision="fp16")["low_precision"].any()),
          tr("Hint: nothing runs in FP16 any more: keep autocast on outside the island"))
    verdict(True, "", done=tr("correct: the overflowing layer runs in FP32, the rest in FP16"))


def check_clip_threshold(max_norm: object, run: Callable[[float | None], tuple[Any, Any]], steps: int) -> None:
    """Exercise 2: a threshold that stops the explosion, lets the run learn, and clips at most 60 % of steps."""
    _need(max_norm is not None, tr("Hint: assign a threshold (a positive float) to max_norm"))
    _need(isinstance(max_norm, (int, float)) and not isinstance(max_norm, bool) and 0 < max_norm < math.inf,
          tr("Hint: max_norm must be a positive, finite number"))
    assert isinstance(max_norm, (int, float))
    hist, err = run(float(max_norm))
    _need(err is None and len(hist) == steps,
          tr("Hint: with that threshold the run still explodes and fit stops it: clip lower"))
    first, last = hist["loss"].iloc[:5].mean(), hist["loss"].iloc[-5:].mean()
    applied = hist[~hist["skipped"]]
    clipped = float((applied["grad_norm"] > max_norm).mean())
    _need(bool(last < 0.7 * first), tr("Hint: the run finishes but does not learn: the threshold lets too large "
                                    "updates through; look at the loss of each step"))
    _need(clipped <= 0.6, tr("Hint: the threshold acts on almost every step, so it caps every update (a brake, not a "
                          "safety net): compare it with the gradient norms of the steps that were not clipped"))
    verdict(True, "", done=tr("correct: a safety net that stops the explosion and lets the run learn"))


def check_safe_function(fn: object, layer: nn.Module, x: torch.Tensor) -> None:
    """Exercise 3: an autograd.Function with SumSquares' math that runs in FP32 under FP16 autocast."""
    _need(fn is not None, tr("Hint: assign your autograd.Function class to SafeSumSquares"))
    _need(isinstance(fn, type) and issubclass(fn, torch.autograd.Function),
          tr("Hint: SafeSumSquares must be a subclass of torch.autograd.Function"))
    assert isinstance(fn, type) and issubclass(fn, torch.autograd.Function)
    with autocast("fp16", x.device):
        h16 = layer(x).detach().requires_grad_()  # an FP16 activation, as autocast makes it
        out = fn.apply(h16)
    _need(bool(torch.isfinite(out).all()), tr("Hint: the output still overflows: do the inputs reach forward in FP16?"))
    expected = (h16.detach().double() ** 2).sum(-1)
    _need(torch.allclose(out.double(), expected, rtol=2e-3), tr("Hint: the values are wrong: the math must stay x*x "
                                                             "summed per row"))
    out.float().sum().backward()  # backward outside autocast, as in training
    grad = h16.grad
    _need(grad is not None and bool(torch.isfinite(grad).all()), tr("Hint: the gradient is not finite: how does backward run?"))
    assert grad is not None
    _need(torch.allclose(grad.double(), 2 * h16.detach().double(), rtol=2e-3, atol=1e-2),
          tr("Hint: the gradient is wrong: d/dx of x*x is 2*x"))
    verdict(True, "", done=tr("correct: FP32 inside the function, finite output and gradient"))
