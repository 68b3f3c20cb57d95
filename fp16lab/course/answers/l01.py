"""Checks of lesson 01's exercises: each computes its own answer and shows only the verdict or a hint."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import torch

from fp16lab.course.answers import verdict
from fp16lab.course.i18n import tr
from fp16lab.numerics import cast_stats, format_info

__all__ = ["check_storage", "check_static_scale", "check_decisions"]


def _need(ok: bool, hint: str) -> None:
    """Raise AssertionError with ``hint`` unless ``ok`` (prints nothing: the last check calls verdict)."""
    if not ok:
        raise AssertionError(hint)

_ORDER = ("fp16", "bf16", "fp32")


def _smallest_exact(n: int) -> str:
    """The first of fp16, bf16, fp32 that stores every integer in [0, n) exactly."""
    ints = torch.arange(n, dtype=torch.float64)
    return next(f for f in _ORDER if torch.equal(ints.to(format_info(f).dtype).double(), ints))


def check_storage(storage: object, ranges: Mapping[str, int]) -> None:
    """Exercise 1: the smallest format that holds every integer of each range exactly."""
    _need(storage is not None, tr("Hint: assign a dict {name: 'fp16' | 'bf16' | 'fp32'} to storage"))
    _need(isinstance(storage, Mapping) and set(storage) == set(ranges),
            tr("Hint: storage needs one entry per name in ranges, keyed by those names"))
    assert isinstance(storage, Mapping)
    _need(set(storage.values()) <= set(_ORDER), tr("Hint: the values are the strings 'fp16', 'bf16' or 'fp32'"))
    want = {name: _smallest_exact(n) for name, n in ranges.items()}
    lossy = sorted(k for k in ranges if _ORDER.index(storage[k]) < _ORDER.index(want[k]))
    _need(not lossy, tr("Hint: {lossy} would change values: range is not precision. A format reaches far "
                          "beyond the integers it stores exactly; cast torch.arange to it and back", lossy=lossy))
    wasteful = sorted(k for k in ranges if storage[k] != want[k])
    _need(not wasteful, tr("Hint: {wasteful} fit a smaller (or, between the 16-bit two, the finer) format",
                             wasteful=wasteful))
    verdict(True, "", done=tr("correct"))


def _overflows(grads: Sequence[torch.Tensor], scale: float) -> bool:
    return cast_stats(list(grads), "fp16", scale=scale).overflow > 0


def check_static_scale(max_scale: object, grads: Sequence[torch.Tensor]) -> None:
    """Exercise 2: the largest power of two at which no gradient overflows fp16."""
    _need(max_scale is not None, tr("Hint: assign your answer to max_scale"))
    _need(isinstance(max_scale, (int, float)) and not isinstance(max_scale, bool) and max_scale > 0
            and math.log2(max_scale).is_integer(), tr("Hint: a power of two, please (1, 2, 4, ...)"))
    assert isinstance(max_scale, (int, float))
    _need(not _overflows(grads, float(max_scale)),
            tr("Hint: at that scale some gradient overflows fp16: count with cast_stats(...).overflow on all the "
            "gradients, parameters and activations"))
    _need(_overflows(grads, 2.0 * max_scale), tr("Hint: twice that scale overflows nothing yet: keep doubling"))
    verdict(True, "", done=tr("correct"))


def _fits_fp16(grads: torch.Tensor, limit: float = 0.001) -> bool:
    """Some power-of-two scale 2^0..2^40 with no overflow and at most ``limit`` of the non-zeros flushed."""
    stats = (cast_stats(grads, "fp16", scale=2.0**k) for k in range(41))
    return any(s.overflow == 0 and s.underflow <= limit * s.nonzero for s in stats)


def check_decisions(choice_a: object, choice_b: object, best_scale_a: object,
                    grads_a: torch.Tensor, grads_b: torch.Tensor) -> None:
    """Exercise 3: fp16 or bf16 for two gradient spreads, and the largest safe scale for the first."""
    _need(choice_a is not None and choice_b is not None and best_scale_a is not None,
            tr("Hint: assign choice_a, choice_b (each 'fp16' or 'bf16') and best_scale_a (a power of two)"))
    _need({choice_a, choice_b} <= {"fp16", "bf16"}, tr("Hint: the choices are the strings 'fp16' or 'bf16'"))
    for name, g, choice in (("grads_a", grads_a, choice_a), ("grads_b", grads_b, choice_b)):
        _need(choice == ("fp16" if _fits_fp16(g) else "bf16"),
                tr("Hint: look again at {name}: for each scale 2^k count overflow and underflow with cast_stats; "
                   "fp16 needs one k where both are acceptable", name=name))
    _need(isinstance(best_scale_a, (int, float)) and not isinstance(best_scale_a, bool) and best_scale_a > 0
            and math.log2(best_scale_a).is_integer(), tr("Hint: best_scale_a is a power of two"))
    assert isinstance(best_scale_a, (int, float))
    _need(not _overflows([grads_a], float(best_scale_a)), tr("Hint: at best_scale_a something overflows"))
    _need(_overflows([grads_a], 2.0 * best_scale_a), tr("Hint: twice best_scale_a still overflows nothing"))
    verdict(True, "", done=tr("correct: both decisions follow from the histograms, and the scale is the largest that fits"))
