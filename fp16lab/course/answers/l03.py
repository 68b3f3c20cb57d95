"""Lesson 03's exercise checks: each computes the expected answer itself and shows only the verdict or a hint."""

from __future__ import annotations

import numbers
from collections.abc import Callable, Collection
from typing import Any

import pandas as pd
import torch
from torch import nn

from fp16lab.align import audit
from fp16lab.course.answers import WrongAnswer, cannot_check, require, verdict
from fp16lab.hardware import PROFILES, Profile, chip_features
from fp16lab.labs.alignment import summarize
from fp16lab.labs.runtime.i18n import tr

__all__ = ["check_padded_copy", "check_card_audit", "check_layout_choice", "card_precision"]


def _pairs(report: Any) -> set[tuple[str, str]]:
    """The (module, dim) pairs an audit found misaligned."""
    return {(f.module, f.dim) for f in report.misaligned}


def check_padded_copy(make_model: Callable[[], nn.Module], unseen: nn.Module, fixed: Any, fixed_opt: Any,
                      must_change: Any, probe: torch.Tensor) -> None:
    """Exercise 1: a padded copy that computes the same, its optimizer, and what needs a model change."""
    require(fixed is not None and fixed_opt is not None and must_change is not None,
            tr("Hint: assign fixed (the padded copy), fixed_opt (its optimizer) and must_change (a set)"))
    require(isinstance(fixed, nn.Module) and fixed is not unseen,
            tr("Hint: fixed must be a padded *copy* (copy.deepcopy); unseen stays as it is"))
    before = audit(make_model())
    require(_pairs(audit(unseen)) == _pairs(before), tr("Hint: unseen itself was changed: pad a copy"))
    left = audit(fixed)
    if left.pad_names():
        sizes = {(f.module, f.dim): f.size for f in before.misaligned}
        # findings the learner did pad (a changed size, or a name pad_layers wrapped), yet only to a multiple of 4
        repadded = [f for f in left.misaligned if f.paddable and sizes.get((f.module, f.dim)) != f.size]
        require(not (repadded and all(f.size % 4 == 0 for f in repadded)),
                tr("Hint: fixed is padded to TF32's multiple (4), but the exercise audits for fp16: its multiple is 8"))
        require(False, tr("Hint: something paddable is left: {names} (audit(fixed).pad_names())",
                          names=", ".join(left.pad_names())))
    with torch.no_grad():
        want, got = unseen(probe), fixed(probe)
    require(len(got) == len(want) and all(g.shape == w.shape and torch.allclose(g, w, atol=1e-6)
                                         for g, w in zip(got, want, strict=True)),
            tr("Hint: fixed computes something else: pad with pad_layers (it slices padded outputs back)"))
    held = {id(p) for g in getattr(fixed_opt, "param_groups", []) for p in g["params"]}
    require(isinstance(fixed_opt, torch.optim.Optimizer) and all(id(p) in held for p in fixed.parameters()),
            tr("Hint: fixed_opt does not hold fixed's parameters: build the optimizer after padding"))
    must = {(f.module, f.dim) for f in before.misaligned if not f.paddable}
    require(isinstance(must_change, Collection) and not isinstance(must_change, (str, bytes, dict)),
            tr("Hint: must_change is a set of (module, dim) pairs, e.g. {('layer', 'in_features')}"))
    given = set(must_change)
    require(not (given and given <= {f.module for f in before.misaligned}),
            tr("Hint: must_change holds module names: give (module, dim) pairs, the audit's module and dim columns"))
    require(given or not must,
            tr("Hint: must_change is empty, but padding does not fix everything: audit(fixed) still lists a "
               "misaligned size that pad_layers cannot pad"))
    require(not (given - must) & {(f.module, f.dim) for f in before.misaligned if f.paddable},
            tr("Hint: must_change holds findings pad_layers can pad (their paddable column is True): only the "
               "others need a change of the model's definition"))
    require(given == must,
            tr("Hint: must_change is off: only the findings pad_layers cannot fix (the audit's paddable column is "
            "False) need a change of the model's definition"))
    verdict(True, "", done=tr("correct: the copy is padded, computes the same, its optimizer holds the new parameters"))


# Cards the check alone uses, never shown in the exercise: a rule typed for the two named cards (or a set
# typed for mlp) fails on them. Their facts are the real cards' (capability, SMs, memory as reported).
_CHECK_CARDS = (
    Profile("check-v100", "Tesla V100-SXM2-16GB", (7, 0), 16160, 80, "check only: Volta, no TF32"),
    Profile("check-h100", "NVIDIA H100 80GB HBM3", (9, 0), 81559, 132, "check only: Hopper, TF32"),
    Profile("check-rtx3060", "NVIDIA GeForce RTX 3060", (8, 6), 12288, 28, "check only: Ampere GeForce, TF32"),
)


def _check_model() -> nn.Module:
    """A model the exercise never shows, whose TF32 and FP16 audits differ from each other and from mlp's."""
    return nn.Sequential(nn.Linear(36, 90), nn.ReLU(), nn.Linear(90, 6), nn.ReLU(), nn.Linear(6, 16))


def _precision_of(profile: Profile) -> str:
    return "tf32" if chip_features(profile.capability, profile.name)["tf32"] else "fp16"


def card_precision(profile_key: str) -> str:
    """The Tensor Core precision an FP32 model gets on a card: TF32 where the chip has it, else FP16 autocast."""
    return _precision_of(PROFILES[profile_key])


def _call(needs_fix: Callable[..., Any], model: nn.Module, card: Profile) -> tuple[Any, str | None]:
    """needs_fix(model, card), or the error it raised, as a short text for a hint."""
    try:
        return needs_fix(model, card), None
    except Exception as err:  # noqa: BLE001 - the learner's code: any error becomes a hint
        return None, f"{type(err).__name__}: {err}"[:160]


def check_card_audit(model: nn.Module, needs_fix: Any, cards: tuple[str, ...] = ("a100-40gb", "t4")) -> None:
    """Exercise 2: ``needs_fix(model, card)``, the misaligned (module, dim) pairs for the precision ``card`` runs.

    Checked on ``model`` for each of ``cards`` (keys of PROFILES), then on check-only cards and a
    check-only model, so that sets or a rule typed for the named cards fail.
    """
    require(callable(needs_fix) and not isinstance(needs_fix, (dict, set, type)),
            tr("Hint: needs_fix must be a function of (model, card) returning a set, e.g. needs_fix(mlp, "
               "PROFILES['t4']); got {kind}", kind=type(needs_fix).__name__))
    for card in cards:
        profile = PROFILES[card]
        got, err = _call(needs_fix, model, profile)
        require(err is None, tr("Hint: needs_fix(mlp, PROFILES[{card!r}]) raised {err}", card=card, err=err))
        require(isinstance(got, (set, frozenset)),
                tr("Hint: needs_fix must return a set of (module, dim) pairs, e.g. {example}; got {kind}",
                   example="{('0', 'in_features')}", kind=type(got).__name__))
        want = _pairs(audit(model, precision=_precision_of(profile)))
        if got == want:
            continue
        other = "fp16" if _precision_of(profile) == "tf32" else "tf32"
        if got == _pairs(audit(model, precision=other)):
            sm = f"sm_{profile.capability[0]}{profile.capability[1]}"
            why = (tr("{sm} has TF32 (Ampere and newer), so the FP32 model runs TF32 there: multiples of 4", sm=sm)
                   if other == "fp16" else
                   tr("{sm} has no TF32 (it came with Ampere), so this card trains in FP16 autocast: multiples "
                      "of 8", sm=sm))
            require(False, tr("Hint: {card}: that is the {other} audit, but {why}", card=card, other=other, why=why))
        require(False, tr("Hint: {card}: not the audit's findings: audit(model, precision=...) with the card's "
                          "precision, then its (module, dim) pairs", card=card))
    unseen = _check_model()
    for profile in _CHECK_CARDS:
        for probe in (model, unseen):
            got, err = _call(needs_fix, probe, profile)
            require(err is None and got == _pairs(audit(probe, precision=_precision_of(profile))),
                    tr("Hint: needs_fix is right for mlp on these two cards but not for a card or model it was not "
                       "shown: decide the precision from card.capability (chip_features) and audit the model "
                       "passed in; do not type the sets or the cards"))
    verdict(True, "", done=tr("correct: the alignment a card needs follows from the precision it runs"))


_NCHW, _CL = "NCHW (default format)", "channels_last"


def _judge(measured: pd.DataFrame, layout: Any, kernel_gain: Any) -> None:
    """The layout and kernel_gain for ``measured`` (section 10's table): pass, or a WrongAnswer naming the mistake."""
    rows = summarize(measured[measured["section"] == "resnet50"]).set_index("variant")
    kern, wall = rows["gpu_kernel_ms"].astype(float), rows["ms"].astype(float)
    best = _CL if kern[_CL] < kern[_NCHW] else _NCHW
    require(layout in (_NCHW, _CL, "NCHW"),
            tr("Hint: layout is one of {cl!r} or 'NCHW' (the table's variant names)", cl=_CL))
    require((_CL if layout == _CL else _NCHW) == best,
            tr("Hint: the measurement favours the other layout: compare gpu_kernel_ms of the two rows"))
    require(isinstance(kernel_gain, numbers.Real) and not isinstance(kernel_gain, bool) and float(kernel_gain) > 0,
            tr("Hint: kernel_gain must be a positive number (a ratio of two times), got {got!r}", got=kernel_gain))
    gain = float(kernel_gain)
    want = float(kern[_NCHW] / kern[_CL])
    near = lambda x: x > 0 and abs(gain / x - 1) <= 0.02  # noqa: E731
    if not near(want):
        require(not near(float(wall[_NCHW] / wall[_CL])),
                tr("Hint: that is the step's wall-time (images/s) ratio: on a host-bound step it shows only part "
                   "of the kernels' gain; use gpu_kernel_ms"))
        require(not near(1 / want), tr("Hint: kernel_gain is upside down: channels_last's time over NCHW's"))
        require(not near(want - 1), tr("Hint: that is the relative gain (the ratio minus 1): give the ratio itself"))
        require(not (near(100 * want) or near(100 * (want - 1))),
                tr("Hint: that looks like a percentage: kernel_gain is a plain ratio, not in %"))
        means = measured[measured["section"] == "resnet50"].groupby("variant")["gpu_kernel_ms"].mean()
        require(not near(float(means[_NCHW] / means[_CL])) or near(want),
                tr("Hint: that is the ratio of the means over the rounds: take the median of each row"))
    require(near(want),
            tr("Hint: kernel_gain is off: it does not match the two rows' median kernel times (check the rows and "
               "the column you used)"))


def _choice(choose_layout: Callable[..., Any], measured: pd.DataFrame) -> tuple[Any, Any]:
    """choose_layout(measured) as (layout, kernel_gain), or a WrongAnswer that says what came back."""
    try:
        got = choose_layout(measured.copy())
    except Exception as err:  # noqa: BLE001 - the learner's code: any error becomes a hint
        require(False, tr("Hint: choose_layout(measured) raised {err}", err=f"{type(err).__name__}: {err}"[:160]))
    require(isinstance(got, tuple) and len(got) == 2,
            tr("Hint: choose_layout must return a pair (layout, kernel_gain); got {got!r:.80}", got=got))
    return got[0], got[1]


def check_layout_choice(measured: pd.DataFrame | None, choose_layout: Any) -> None:
    """Exercise 3: ``choose_layout(measured)`` gives the faster memory format and its median kernel-time ratio.

    Checked on ``measured`` (section 10's table, live or the reference), then on a check-only table with the
    NCHW and channels_last rows exchanged, so that a typed answer fails.
    """
    if measured is None:
        cannot_check(tr("section 10 left measured as None (no GPU here and no committed reference found): "
                        "the check needs its ResNet-50 kernel times"))
    if not isinstance(measured, pd.DataFrame) or "gpu_kernel_ms" not in measured or "section" not in measured:
        cannot_check(tr("measured is not section 10's table (it needs the columns section, variant and gpu_kernel_ms)"))
    rows = summarize(measured[measured["section"] == "resnet50"]).set_index("variant")
    if not {_NCHW, _CL} <= set(rows.index) or not rows.loc[[_NCHW, _CL], "gpu_kernel_ms"].notna().all():
        cannot_check(tr("section 10's table has no kernel times for the NCHW and channels_last ResNet-50 rows"))
    require(callable(choose_layout) and not isinstance(choose_layout, type),
            tr("Hint: choose_layout must be a function of measured returning (layout, kernel_gain); got {kind}",
               kind=type(choose_layout).__name__))
    _judge(measured, *_choice(choose_layout, measured))
    swapped = measured.assign(variant=measured["variant"].replace({_NCHW: _CL, _CL: _NCHW}))
    try:
        _judge(swapped, *_choice(choose_layout, swapped))
    except WrongAnswer:
        require(False, tr("Hint: choose_layout is right for this table but not for another one (the check swaps the "
                          "two rows): compute layout and kernel_gain from the table passed in; do not type them"))
    verdict(True, "", done=tr("correct: the layout and the kernel-time evidence for it"))
