"""Checks of lesson 00's exercises: each computes its own answer and shows only the verdict or a hint."""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd
import torch

from fp16lab.course.answers import verdict
from fp16lab.course.i18n import tr
from fp16lab.hardware import PEAK_TFLOPS, chip_features

__all__ = ["check_tolerance", "check_fp16_accumulation", "check_classroom"]


def _need(ok: bool, hint: str) -> None:
    """Raise AssertionError with ``hint`` unless ``ok`` (prints nothing: the last check calls verdict)."""
    if not ok:
        raise AssertionError(hint)


def _rel_err(a: torch.Tensor, b: torch.Tensor, dtype: torch.dtype) -> float:
    """||a@b in dtype - exact|| / ||exact||, the exact product in float64 (on the CPU for MPS)."""
    ref_device = a.device if a.device.type != "mps" else torch.device("cpu")
    ref = a.to(ref_device, torch.float64) @ b.to(ref_device, torch.float64)
    out = (a.to(dtype) @ b.to(dtype)).to(ref_device, torch.float64)
    return ((out - ref).norm() / ref.norm()).item()


def check_tolerance(tol: object, bf16_err: object, a: torch.Tensor, b: torch.Tensor) -> None:
    """Exercise 1: ``tol`` passes a correct FP16 product of new matrices and fails a BF16 one."""
    _need(tol is not None and bf16_err is not None, tr("Hint: assign both bf16_err and tol (floats)"))
    _need(isinstance(bf16_err, float) and isinstance(tol, (int, float)) and not isinstance(tol, bool),
            tr("Hint: bf16_err and tol must be Python floats: call .item() on a 0-d tensor"))
    assert isinstance(bf16_err, float) and isinstance(tol, (int, float))
    measured = _rel_err(a, b, torch.bfloat16)
    _need(math.isfinite(bf16_err) and abs(bf16_err / measured - 1) < 0.05,
            tr("Hint: bf16_err is not the BF16 error of a @ b: cast both inputs with .bfloat16(), multiply, and "
            "compare with the FP64 product as ||out - ref|| / ||ref||"))
    g = torch.Generator(device=a.device).manual_seed(1)
    a2 = torch.randn(a.shape, device=a.device, generator=g)
    b2 = torch.randn(b.shape, device=b.device, generator=g)
    fp16_new, bf16_new = _rel_err(a2, b2, torch.float16), _rel_err(a2, b2, torch.bfloat16)
    _need(tol > 1.5 * fp16_new,
            tr("Hint: your test fails a correct FP16 product (or passes it only by luck): tol must sit well above "
            "the FP16 error you measured in 5a (rel_err), which new matrices repeat only roughly"))
    _need(tol < bf16_new / 1.5,
            tr("Hint: your test passes a BF16 product: tol must sit well below the BF16 error you measured"))
    verdict(True, "", done=tr("correct: your tolerance passes FP16 and catches BF16 on new matrices"))


def check_fp16_accumulation(pays_on: object, cards: list[str]) -> None:
    """Exercise 2: the chips whose cited FP16-accumulate peak is clearly above the FP32-accumulate one."""
    _need(pays_on is not None, tr("Hint: assign a set of chip names to pays_on"))
    _need(isinstance(pays_on, (set, frozenset, list, tuple)) and all(isinstance(c, str) for c in pays_on),
            tr("Hint: pays_on must be a set of chip names (strings) taken from cards"))
    assert isinstance(pays_on, (set, frozenset, list, tuple))
    chosen = set(pays_on)
    _need(chosen <= set(cards), tr("Hint: use the names exactly as they are written in cards"))
    want = {c for c in cards if (PEAK_TFLOPS[c].fp16_acc16 or 0) >= 1.5 * (PEAK_TFLOPS[c].fp16 or math.inf)}
    _need(chosen == want,
            tr("Hint: compare fp16_acc16 with fp16 for each chip in PEAK_TFLOPS: a bigger chip is not the question; "
            "data-center parts run both accumulations at the same rate"))
    verdict(True, "", done=tr("correct"))


def _recommend(name: str, capability: tuple[int, int]) -> str:
    f = chip_features(capability, name)
    return "bf16" if f["bf16_native"] else "fp16" if f["fp16_tensor_cores"] else "fp32"


def check_classroom(classroom: object, room: Mapping[str, tuple[int, int]]) -> None:
    """Exercise 3: one recommended training precision per GPU of the classroom."""
    _need(classroom is not None, tr("Hint: assign a DataFrame to classroom"))
    _need(isinstance(classroom, pd.DataFrame) and "recommended" in classroom.columns,
            tr("Hint: classroom must be a DataFrame with a 'recommended' column"))
    assert isinstance(classroom, pd.DataFrame)
    _need(set(classroom.index) == set(room), tr("Hint: one row per GPU, indexed by the names in room"))
    _need(set(classroom["recommended"]) <= {"bf16", "fp16", "fp32"}, tr("Hint: use the values 'bf16', 'fp16', 'fp32'"))
    wrong = sorted(n for n, cap in room.items() if classroom.loc[n, "recommended"] != _recommend(n, cap))
    _need(not wrong, tr("Hint: look again at {wrong}: did you pass the name to chip_features, and check "
                          "bf16_native before fp16_tensor_cores?", wrong=wrong))
    verdict(True, "", done=tr("correct: every GPU gets the precision its hardware runs best"))
