"""Checks of lesson 00's exercises: each computes its own answer and shows only the verdict or a hint."""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd
import torch

from fp16lab.course.answers import cannot_check, require, verdict
from fp16lab.hardware import PEAK_TFLOPS, Peak, chip_features
from fp16lab.labs.runtime.i18n import tr

__all__ = ["check_tolerance", "check_fp16_accumulation", "check_classroom", "HIDDEN_ROOM", "HIDDEN_PEAKS"]

# GPUs the learner's recommend() never saw: a rule passes them, a look-up of room's names does not.
HIDDEN_ROOM = {"GTX 1650": (7, 5), "Titan V": (7, 0), "RTX 2080 Ti": (7, 5), "RTX 3090": (8, 6),
               "L4": (8, 9), "H100": (9, 0), "Tesla P100": (6, 0), "RTX 5090": (12, 0)}

# Chips the learner's pays_off() never saw, lent to PEAK_TFLOPS for the check only (dense peaks, cited):
# a workstation Ada card runs FP16 accumulation at its FP32-accumulate rate (Ada whitepaper appendix,
# RTX 6000 Ada: 364.2 either way), and a GeForce Turing card has no TF32 yet pays (Turing whitepaper,
# RTX 2080 Ti reference: 107.6 with FP16 accumulate, 53.8 with FP32 accumulate).
HIDDEN_PEAKS = {
    "RTX 6000 Ada": Peak("RTX 6000 Ada", 91.1, 182.1, 364.2, 364.2, 364.2, 728.5, "NVIDIA Ada whitepaper, appendix"),
    "RTX 2080 Ti": Peak("RTX 2080 Ti", 13.4, None, 53.8, None, 107.6, None, "NVIDIA Turing whitepaper"),
}


def _rel_err(a: torch.Tensor, b: torch.Tensor, dtype: torch.dtype) -> float:
    """||a@b in dtype - exact|| / ||exact||, the exact product in float64 (on the CPU for MPS)."""
    ref_device = a.device if a.device.type != "mps" else torch.device("cpu")
    ref = a.to(ref_device, torch.float64) @ b.to(ref_device, torch.float64)
    out = (a.to(dtype) @ b.to(dtype)).to(ref_device, torch.float64)
    return ((out - ref).norm() / ref.norm()).item()


def check_tolerance(tol: object, bf16_err: object, a: torch.Tensor, b: torch.Tensor) -> None:
    """Exercise 1: ``tol`` passes a correct FP16 product of new matrices and fails a BF16 one."""
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.dim() == 2 and a.shape == b.shape):
        cannot_check(tr("a and b must be the square matrices of section 5a: run the cells above first"))
    require(tol is not None and bf16_err is not None, tr("Hint: assign both bf16_err and tol (floats)"))
    require(isinstance(bf16_err, float) and isinstance(tol, (int, float)) and not isinstance(tol, bool),
            tr("Hint: bf16_err and tol must be Python floats: call .item() on a 0-d tensor"))
    assert isinstance(bf16_err, float) and isinstance(tol, (int, float))
    require(not (math.isfinite(bf16_err) and bf16_err != 0 and float(f"{bf16_err:.4g}") == bf16_err),
            tr("Hint: bf16_err looks typed in (a round number, like a printed output): a measured error has many "
               "digits; compute it in the cell from a and b, so it follows your matrices and your machine"))
    measured = _rel_err(a, b, torch.bfloat16)
    require(math.isfinite(bf16_err) and abs(bf16_err / measured - 1) < 0.05,
            tr("Hint: bf16_err is not the BF16 error of a @ b: cast both inputs with .bfloat16(), multiply, and "
               "compare with the FP64 product as ||out - ref|| / ||ref||"))
    g = torch.Generator(device=a.device).manual_seed(1)
    a2 = torch.randn(a.shape, device=a.device, generator=g)
    b2 = torch.randn(b.shape, device=b.device, generator=g)
    fp16_new, bf16_new = _rel_err(a2, b2, torch.float16), _rel_err(a2, b2, torch.bfloat16)
    require(tol > 1.2 * fp16_new,
            tr("Hint: your test fails a correct FP16 product (or passes it only by luck): tol must sit well above "
               "the FP16 error you measured in 5a (rel_err), which new matrices repeat only roughly"))
    verdict(tol < bf16_new / 1.2,
            tr("Hint: your test passes a BF16 product: tol must sit well below the BF16 error you measured"),
            done=tr("correct: your tolerance passes FP16 and catches BF16 on new matrices"))


def _pays(name: str) -> bool:
    peak = PEAK_TFLOPS.get(name) or HIDDEN_PEAKS[name]
    return (peak.fp16_acc16 or 0) >= 1.5 * (peak.fp16 or math.inf)


def _ratio(name: str) -> float:
    """The cited FP16-accumulate peak over the FP32-accumulate one (0 where the chip has none)."""
    peak = PEAK_TFLOPS.get(name) or HIDDEN_PEAKS[name]
    return (peak.fp16_acc16 or 0) / (peak.fp16 or math.inf)


def _gap(name: str) -> float:
    """The cited FP16-accumulate peak minus the FP32-accumulate one, in TFLOP/s (0 where the chip has none)."""
    peak = PEAK_TFLOPS.get(name) or HIDDEN_PEAKS[name]
    return (peak.fp16_acc16 or 0) - (peak.fp16 or 0) if peak.fp16_acc16 and peak.fp16 else 0.0


def _answers(pays_off: object) -> dict[str, object]:
    """pays_off on every chip of PEAK_TFLOPS and HIDDEN_PEAKS, the hidden rows lent to PEAK_TFLOPS meanwhile."""
    assert callable(pays_off)
    lent = [n for n in HIDDEN_PEAKS if n not in PEAK_TFLOPS]
    PEAK_TFLOPS.update({n: HIDDEN_PEAKS[n] for n in lent})
    answers: dict[str, object] = {}
    try:
        for name in PEAK_TFLOPS:
            try:
                answers[name] = pays_off(name)
            except Exception as exc:  # noqa: BLE001 (any failure of the learner's function is the hint)
                require(str(exc) != _BORROWED, tr("Hint: pays_off calls the lesson's acc16_cited, which repeats the "
                                                  "lesson's answer: write the comparison yourself from each chip's "
                                                  "peaks"))
                require(False, tr("Hint: pays_off({name!r}) raised {error}: it must answer for every chip name in "
                                  "PEAK_TFLOPS, from that chip's peaks", name=name, error=type(exc).__name__))
    finally:
        for n in lent:
            del PEAK_TFLOPS[n]
    return answers


_BORROWED = "fp16lab: acc16_cited is the lesson's own rule"


def _borrowed(peak: object) -> str:
    raise LookupError("fp16lab: acc16_cited is the lesson's own rule")  # the literal: it runs with setup's globals


def _without_the_lessons_rule(pays_off: object) -> dict[str, object]:
    """:func:`_answers` with the lab's ``acc16_cited`` (lesson 00 cell 28 calls it) made to refuse, by whatever name
    the learner's function reaches it: calling it repeats the lesson's answer instead of reading the peaks."""
    from fp16lab.labs import setup

    code = setup.acc16_cited.__code__
    setup.acc16_cited.__code__ = _borrowed.__code__
    try:
        return _answers(pays_off)
    finally:
        setup.acc16_cited.__code__ = code


def check_fp16_accumulation(pays_off: object, cards: list[str]) -> None:
    """Exercise 2: ``pays_off(name)`` is True where the cited FP16-accumulate peak is clearly the higher one.

    Run on every chip of PEAK_TFLOPS and on HIDDEN_PEAKS, not only on ``cards``: a set of names does not pass.
    """
    require(callable(pays_off), tr("Hint: define a function pays_off(name) that returns True or False"))
    answers = _without_the_lessons_rule(pays_off)
    require(all(isinstance(v, bool) or type(v).__name__ == "bool_" for v in answers.values()),
            tr("Hint: pays_off must return True or False"))
    wrong = sorted(n for n, v in answers.items() if bool(v) != _pays(n))
    unseen = sorted(n for n in wrong if n not in cards)
    seen = [n for n in wrong if n in cards]
    yes_wrong = [n for n in wrong if answers[n]]
    workstation = [n for n in yes_wrong if n == "RTX 6000 Ada"]
    require(not workstation or yes_wrong != workstation,
            tr("Hint: pays_off says yes for {names}, a workstation Ada card whose cited FP16-accumulate peak equals "
               "its FP32-accumulate one: 'RTX' in a name does not tell; decide from fp16_acc16 and fp16",
               names=workstation))
    require(not yes_wrong,
            tr("Hint: pays_off says yes for {names}, whose cited FP16-accumulate peak equals the FP32-accumulate one "
               "(data-center parts run both at the same rate): compare fp16_acc16 with fp16, not with fp32, and "
               "count a tie as no gain", names=yes_wrong[:4]))
    require(not wrong or not all(1.9 < _ratio(n) < 2.0 for n in wrong),
            tr("Hint: pays_off says no for {names}, whose cited FP16-accumulate peak is 2x the FP32-accumulate one "
               "but rounded (330.3 vs 2 x 165.2): compare with a margin, not with an exact 2", names=wrong[:4]))
    gap = {n: _gap(n) for n in answers}
    said_yes = [gap[n] for n in answers if answers[n] and _pays(n)]
    require(not wrong or yes_wrong or not said_yes or min(said_yes) <= max(gap[n] for n in wrong),
            tr("Hint: pays_off says no for {names}, small chips whose cited FP16-accumulate peak is 2x the "
               "FP32-accumulate one: you compare a difference in TFLOP/s, which grows with the chip; a gain is a "
               "ratio of the two peaks", names=wrong[:4]))
    require(not seen, tr("Hint: compare fp16_acc16 with fp16 in PEAK_TFLOPS for each chip: a bigger chip is not the "
                         "question"))
    verdict(not unseen,
            tr("Hint: right for the chips in cards but wrong for {names}: your rule answers from a list of names or "
               "another field; decide from each chip's fp16_acc16 and fp16 instead", names=unseen[:4]),
            done=tr("correct: your rule is right for every chip in PEAK_TFLOPS"))


def _recommend(name: str, capability: tuple[int, int]) -> str:
    f = chip_features(capability, name)
    return "bf16" if f["bf16_native"] else "fp16" if f["fp16_tensor_cores"] else "fp32"


def check_classroom(classroom: object, room: Mapping[str, tuple[int, int]], recommend: object) -> None:
    """Exercise 3: ``recommend(name, capability)`` gives each GPU its training precision; ``classroom`` shows it.

    ``recommend`` also runs on GPUs that ``room`` does not hold, so a table of room's answers does not pass.
    """
    if not isinstance(room, Mapping) or not room:
        cannot_check(tr("room must be the dict of section 'Exercise 3' (name -> capability): run its cell first"))
    require(callable(recommend), tr("Hint: define a function recommend(name, capability) that returns "
                                    "'bf16', 'fp16' or 'fp32'"))
    require(isinstance(classroom, pd.DataFrame) and "recommended" in classroom.columns,
            tr("Hint: classroom must be a DataFrame with a 'recommended' column"))
    assert isinstance(classroom, pd.DataFrame) and callable(recommend)
    require(set(classroom.index) == set(room), tr("Hint: one row per GPU, indexed by the names in room"))
    allowed = {"bf16", "fp16", "fp32"}
    require(set(classroom["recommended"]) <= allowed, tr("Hint: use the values 'bf16', 'fp16', 'fp32'"))
    wanted = {**HIDDEN_ROOM, **room}
    got: dict[str, object] = {}
    for name, cap in wanted.items():
        try:
            got[name] = recommend(name, cap)
        except Exception as exc:  # noqa: BLE001 (any failure of the learner's function is the hint)
            require(False, tr("Hint: recommend({name!r}, {cap}) raised {error}: derive the answer from "
                              "chip_features(capability, name), not from a table of room's GPUs",
                              name=name, cap=cap, error=type(exc).__name__))
    require(set(got.values()) <= allowed, tr("Hint: recommend must return 'bf16', 'fp16' or 'fp32'"))
    wrong = sorted(n for n in wanted if got[n] != _recommend(n, wanted[n]))
    require(len(set(got.values())) > 1,
            tr("Hint: recommend gives every GPU the same answer: torch.cuda.is_bf16_supported() and "
               "this machine's compute capability describe this machine's GPU, not the one in the row"))
    gtx = [n for n in wrong if chip_features(wanted[n], n) != chip_features(wanted[n])]   # the GTX 16xx rule
    require(not gtx, tr("Hint: look again at {wrong}: did you pass the name to chip_features? GTX 16xx cards are "
                        "sm_75 without Tensor Cores", wrong=gtx))
    emulated = [n for n in wrong if got[n] == "bf16"]
    require(not emulated, tr("Hint: recommend says bf16 for {wrong}, which have no native BF16 (it needs sm_80+): "
                             "torch.cuda.is_bf16_supported() describes this machine's GPU (and says True where BF16 "
                             "is only emulated), not the chip in the row", wrong=emulated))
    order = [n for n in wrong if got[n] == "fp16" and _recommend(n, wanted[n]) == "bf16"]
    every_bf16 = [n for n in wanted if _recommend(n, wanted[n]) == "bf16"]
    require(not order or sorted(order) == sorted(every_bf16),
            tr("Hint: recommend says fp16 for {wrong}, which have native BF16: it starts at sm_80 itself (>=, not >); "
               "read it from chip_features(capability, name)", wrong=order))
    require(not order, tr("Hint: look again at {wrong}: check bf16_native before fp16_tensor_cores (a chip with "
                          "native BF16 also has FP16 Tensor Cores)", wrong=order))
    require(not wrong, tr("Hint: recommend is wrong for {wrong}: derive it from chip_features(capability, name) for "
                          "every GPU, including ones not in room", wrong=wrong))
    table = sorted(n for n in room if classroom.loc[n, "recommended"] != got[n])
    verdict(not table, tr("Hint: classroom disagrees with your recommend for {wrong}: build it by calling "
                          "recommend on each GPU of room", wrong=table),
            done=tr("correct: native BF16 where the chip has it (for its range: no GradScaler), else FP16 with a "
                    "GradScaler on Tensor Cores, else FP32"))
