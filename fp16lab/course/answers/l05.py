"""Lesson 05's exercise checks: each computes the expected answer itself and shows only the verdict or a hint."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd
import torch

from fp16lab.course.answers import cannot_check, require, verdict
from fp16lab.labs.memory.allocator import track_tensor_memory
from fp16lab.labs.runtime.i18n import tr

__all__ = ["check_batch_plan", "check_lean", "check_gated"]


def _largest_fit(fits: pd.DataFrame, precision: str) -> int:
    """The largest batch the max-batch search ran without running out of memory, 0 if none."""
    ok = fits[(fits["precision"] == precision) & fits["ok"].astype(bool)]
    return int(ok["batch_size"].max()) if len(ok) else 0


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _largest_divisor(target: int, limit: int) -> int:
    """The largest micro-batch that divides ``target`` and is at most ``limit`` (0 if none)."""
    return max((d for d in range(1, min(limit, target) + 1) if target % d == 0), default=0)


def check_batch_plan(fits: pd.DataFrame | None, micro_batch: Any, accum_steps: Any, target: int = 1536) -> None:
    """Exercise 1: the largest FP16 micro-batch that fits and divides ``target``, and the accumulation to reach it."""
    if fits is None:
        cannot_check(tr("no max-batch search here (no GPU and no committed reference): fits.frame is None"))
    if not isinstance(fits, pd.DataFrame) or not {"precision", "batch_size", "ok"} <= set(fits.columns):
        cannot_check(tr("pass the search's table, fits.frame (columns precision, batch_size, ok)"))
    require(_is_int(micro_batch) and _is_int(accum_steps) and micro_batch > 0 and accum_steps > 0,
            tr("Hint: micro_batch and accum_steps are positive ints"))
    require(micro_batch * accum_steps == target,
            tr("Hint: micro_batch × accum_steps must be the effective batch, {target}: pick a micro-batch that "
               "divides it", target=target))
    fp16 = _largest_fit(fits, "fp16")
    best = _largest_divisor(target, fp16)
    for other in sorted(set(fits["precision"].astype(str)) - {"fp16"}):  # fp32, and bf16 or fp8 rows if the search had them
        if micro_batch != best and micro_batch == _largest_divisor(target, _largest_fit(fits, other)):
            require(False, tr("Hint: that is what fits in {precision}; you train in FP16 AMP: read the fp16 rows",
                              precision=other.upper()))
    require(micro_batch <= fp16, tr("Hint: that micro-batch did not fit: read the fp16 rows with ok=True"))
    verdict(micro_batch == best,
            tr("Hint: a larger micro-batch that divides {target} fits too, and fewer micro-batches per step are faster",
               target=target),
            done=tr("correct: the largest micro-batch that fits, accumulated to the effective batch"))


def check_lean(normalise_lean: Any, normalise: Callable[[torch.Tensor], torch.Tensor], x: torch.Tensor) -> None:
    """Exercise 2: the same values as ``normalise``, input untouched, about one input-sized allocation."""
    require(callable(normalise_lean), tr("Hint: assign your function (x -> tensor) to normalise_lean"))
    x_copy = x.clone()
    with track_tensor_memory() as mem:
        out = normalise_lean(x)
    unchanged = torch.equal(x, x_copy)
    x.copy_(x_copy)  # the next try starts from the same input
    require(unchanged, tr("Hint: normalise_lean changed its input: the caller still needs x"))
    require(isinstance(out, torch.Tensor) and out.shape == x.shape, tr("Hint: the values differ from normalise(x)"))
    require(out.dtype == x.dtype, tr("Hint: normalise_lean returns {got}, its input is {want}: keep the input's dtype",
                                     got=str(out.dtype), want=str(x.dtype)))
    want = normalise(x_copy)
    if not torch.allclose(out, want, atol=1e-5):
        centred = x_copy - x_copy.mean(dim=1, keepdim=True)
        if torch.allclose(out, centred / centred.std(dim=1, keepdim=True), atol=1e-5):
            require(False, tr("Hint: some values lie beyond ±3: the clamp is missing"))
        if torch.allclose(out, (centred / centred.std(dim=1, keepdim=True, correction=0)).clamp(-3, 3), atol=1e-5):
            require(False, tr("Hint: the values are off by a constant factor per row: compute the standard deviation "
                              "as normalise does (torch's default correction)"))
        require(False, tr("Hint: the values differ from normalise(x)"))
    used = mem.allocated_bytes / x.nbytes
    require(used < 1.1, tr("Hint: normalise_lean allocated {used:.1f} times its input's size: create one new tensor, "
                           "then update it with in-place ops (their names end in an underscore)", used=used))
    verdict(True, "", done=tr("correct: {used:.2f} times the input's size", used=used))


def check_gated(gated_fixed: Any, x: torch.Tensor, w: torch.Tensor) -> None:
    """Exercise 3: h * sigmoid(h) with h = x @ w, with a backward pass that runs and is right."""
    require(callable(gated_fixed), tr("Hint: assign your function (x, w -> tensor) to gated_fixed"))
    w_try = w.detach().clone().requires_grad_()
    out = gated_fixed(x, w_try)
    require(isinstance(out, torch.Tensor), tr("Hint: the values differ from h * sigmoid(h)"))
    require(out.requires_grad, tr("Hint: the output does not require grad: torch.no_grad() or .detach() cut w out of "
                                  "the graph, so there is no backward pass to run"))
    try:
        out.sum().backward()
    except RuntimeError as err:
        require(False, tr("Hint: the backward pass fails ({err}...): which tensor does sigmoid's "
                          "backward need, and who changes it?", err=str(err)[:60]))
    with torch.no_grad():
        h = x.double() @ w.detach().double()
        s = torch.sigmoid(h)
        want_grad = x.double().T @ (s * (1 + h * (1 - s)))  # d(h*sigmoid(h))/dh, summed over the batch
    require(torch.allclose(out.double(), h * s, atol=1e-4), tr("Hint: the values differ from h * sigmoid(h)"))
    require(w_try.grad is not None and torch.allclose(w_try.grad.double(), want_grad, atol=1e-3),
            tr("Hint: the gradient for w is wrong: does every path from w to the output keep its gradient "
            "(no .detach())?"))
    verdict(True, "", done=tr("correct: the same values, and autograd can run the backward pass"))
