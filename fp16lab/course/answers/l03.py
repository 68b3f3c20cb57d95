"""Lesson 03's exercise checks: each computes the expected answer itself and shows only the verdict or a hint."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pandas as pd
import torch
from torch import nn

from fp16lab.align import audit
from fp16lab.course.answers import verdict
from fp16lab.course.i18n import tr
from fp16lab.hardware import PROFILES, chip_features

__all__ = ["check_padded_copy", "check_card_audit", "check_layout_choice", "card_precision"]


def _need(ok: bool, hint: str) -> None:
    """One condition of a check: raise the hint when it fails, print nothing when it holds."""
    if not ok:
        raise AssertionError(hint)


def _pairs(report: Any) -> set[tuple[str, str]]:
    """The (module, dim) pairs an audit found misaligned."""
    return {(f.module, f.dim) for f in report.misaligned}


def check_padded_copy(make_model: Callable[[], nn.Module], unseen: nn.Module, fixed: Any, fixed_opt: Any,
                      must_change: Any, probe: torch.Tensor) -> None:
    """Exercise 1: a padded copy that computes the same, its optimizer, and what needs a model change."""
    _need(fixed is not None and fixed_opt is not None and must_change is not None,
            tr("Hint: assign fixed (the padded copy), fixed_opt (its optimizer) and must_change (a set)"))
    _need(isinstance(fixed, nn.Module) and fixed is not unseen,
            tr("Hint: fixed must be a padded *copy* (copy.deepcopy); unseen stays as it is"))
    before = audit(make_model())
    _need(_pairs(audit(unseen)) == _pairs(before), tr("Hint: unseen itself was changed: pad a copy"))
    _need(audit(fixed).pad_names() == [],
            tr("Hint: something paddable is left: audit(fixed).pad_names() is not empty"))
    with torch.no_grad():
        want, got = unseen(probe), fixed(probe)
    _need(len(got) == len(want) and all(g.shape == w.shape and torch.allclose(g, w, atol=1e-6)
                                         for g, w in zip(got, want, strict=True)),
            tr("Hint: fixed computes something else: pad with pad_layers (it slices padded outputs back)"))
    held = {id(p) for g in getattr(fixed_opt, "param_groups", []) for p in g["params"]}
    _need(isinstance(fixed_opt, torch.optim.Optimizer) and all(id(p) in held for p in fixed.parameters()),
            tr("Hint: fixed_opt does not hold fixed's parameters: build the optimizer after padding"))
    must = {(f.module, f.dim) for f in before.misaligned if not f.paddable}
    _need(isinstance(must_change, set) and must_change == must,
            tr("Hint: must_change is off: only the findings pad_layers cannot fix (the audit's paddable column is "
            "False) need a change of the model's definition"))
    verdict(True, "", done=tr("correct: the copy is padded, computes the same, its optimizer holds the new parameters"))


def card_precision(profile_key: str) -> str:
    """The Tensor Core precision an FP32 model gets on a card: TF32 where the chip has it, else FP16 autocast."""
    profile = PROFILES[profile_key]
    return "tf32" if chip_features(profile.capability, profile.name)["tf32"] else "fp16"


def check_card_audit(model: nn.Module, needs_fix: Any, cards: tuple[str, ...] = ("a100-40gb", "t4")) -> None:
    """Exercise 2: per card, the misaligned (module, dim) pairs for the precision that card runs."""
    _need(isinstance(needs_fix, dict) and set(needs_fix) == set(cards),
            tr("Hint: needs_fix must be a dict with one entry per card: keys {keys}", keys=list(cards)))
    _need(all(isinstance(v, set) for v in needs_fix.values()),
            tr("Hint: each value is a set of (module, dim) pairs, e.g. {('0', 'in_features')}"))
    for card in cards:
        want = _pairs(audit(model, precision=card_precision(card)))
        if needs_fix[card] == want:
            continue
        other = "fp16" if card_precision(card) == "tf32" else "tf32"
        if needs_fix[card] == _pairs(audit(model, precision=other)):
            cap = PROFILES[card].capability
            sm = f"sm_{cap[0]}{cap[1]}"
            why = (tr("{sm} has TF32 (Ampere and newer), so the FP32 model runs TF32 there: multiples of 4", sm=sm)
                   if other == "fp16" else
                   tr("{sm} has no TF32 (it came with Ampere), so this card trains in FP16 autocast: multiples "
                      "of 8", sm=sm))
            _need(False, tr("Hint: {card}: that is the {other} audit, but {why}", card=card, other=other, why=why))
        _need(False, tr("Hint: {card}: not the audit's findings: audit(model, precision=...) with the card's "
                        "precision, then its (module, dim) pairs", card=card))
    verdict(True, "", done=tr("correct: the alignment a card needs follows from the precision it runs"))


def _layout_rows(measured: pd.DataFrame) -> pd.DataFrame:
    rows = measured[(measured["section"] == "resnet50") & (measured.get("status", "ok") == "ok")]
    return rows.set_index("variant")


def check_layout_choice(measured: pd.DataFrame | None, layout: Any, kernel_gain: Any) -> None:
    """Exercise 3: the faster memory format for the measured card, defended with its kernel-time ratio."""
    if measured is None or "gpu_kernel_ms" not in measured:
        print(tr("no ResNet-50 kernel times on this machine (no GPU and no reference): nothing to check"))
        return
    rows = _layout_rows(measured)
    nchw, cl = "NCHW (default format)", "channels_last"
    kern = rows["gpu_kernel_ms"].astype(float)
    best = cl if kern[cl] < kern[nchw] else nchw
    _need(layout in (nchw, cl, "NCHW"),
            tr("Hint: layout is one of {cl!r} or 'NCHW' (the table's variant names)", cl=cl))
    _need((cl if layout == cl else nchw) == best,
            tr("Hint: the measurement favours the other layout: compare gpu_kernel_ms of the two rows"))
    _need(isinstance(kernel_gain, (int, float)) and not isinstance(kernel_gain, bool),
            tr("Hint: kernel_gain is a number: the NCHW kernel time over the channels_last kernel time"))
    want = float(kern[nchw] / kern[cl])
    images = float(rows["per_s"][cl] / rows["per_s"][nchw])
    if abs(kernel_gain / want - 1) > 0.02 and abs(kernel_gain / images - 1) <= 0.02:
        _need(False, tr("Hint: that is the images/s ratio: on a host-bound step images/s shows only part of the "
                       "kernels' gain; use gpu_kernel_ms"))
    _need(abs(kernel_gain / want - 1) <= 0.02,
            tr("Hint: kernel_gain is off: NCHW gpu_kernel_ms / channels_last gpu_kernel_ms (more than 1 when "
            "channels_last is faster)"))
    verdict(True, "", done=tr("correct: the layout and the kernel-time evidence for it"))
