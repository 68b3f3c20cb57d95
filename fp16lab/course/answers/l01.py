"""Checks of lesson 01's exercises: each computes its own answer and shows only the verdict or a hint.

A wrong answer raises :class:`fp16lab.course.answers.WrongAnswer` (through :func:`require`): Jupyter shows
the hint alone, never this module's code. Each hint names the mistake it detected (the wrong
denominator, a percentage for a fraction, a scale that was never applied, ...), never the answer.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import cast

import torch

from fp16lab.course.answers import cannot_check, require, verdict
from fp16lab.labs.runtime.i18n import tr
from fp16lab.numerics import cast_stats, format_info

__all__ = ["FLUSH_LIMIT", "RANGES", "check_storage", "check_static_scale", "check_decisions"]

FLUSH_LIMIT = 0.001  # exercises 2 and 3: fp16 is fine when at most 0.1 % of the non-zero values flush
_ORDER = ("fp16", "bf16", "fp32")
_SCALES = tuple(2.0**k for k in range(41))  # the power-of-two scales exercise 3 tries


RANGES = {"pixel values": 256, "ImageNet labels": 1000, "positions in a 4096-token context": 4096,
          "GPT-2 token ids": 50257}  # exercise 1's ranges, held here so an edited copy in the notebook changes nothing
_UNSEEN = (257, 300, 2048, 2049, 2050, 4097, 4098)  # unseen counts: 2048 needs the implicit bit, 4097 every value;
# 2049 and 2050 tell [0, count) from [0, count] and [0, count - 1)


def _smallest_exact(n: int) -> str:
    """The first of fp16, bf16, fp32 that stores every integer in [0, n) exactly."""
    ints = torch.arange(n, dtype=torch.float64)
    return next(f for f in _ORDER if torch.equal(ints.to(format_info(f).dtype).double(), ints))


def _plain(value: object) -> object:
    """A numpy scalar or a one-element tensor as the Python number or bool it holds; anything else unchanged."""
    if isinstance(value, torch.Tensor) and value.numel() == 1:
        return value.item()
    item = getattr(value, "item", None)
    if callable(item) and type(value).__module__ == "numpy" and getattr(value, "shape", None) == ():
        return item()
    return value


def check_storage(storage: object, smallest_exact: object) -> None:
    """Exercise 1: smallest_exact(count) on counts the learner never saw, and storage built from it."""
    require(callable(smallest_exact), tr("Hint: define a function smallest_exact(count) that returns 'fp16', "
                                         "'bf16' or 'fp32'"))
    rule = cast(Callable[[int], object], smallest_exact)
    got: dict[int, object] = {}
    for n in _UNSEEN:
        try:
            got[n] = _plain(rule(n))
        except Exception as exc:  # the learner's code: say what broke, not where in the checker
            require(False, tr("Hint: smallest_exact({n}) raised {kind} ({message}): it takes one integer count",
                              n=n, kind=type(exc).__name__, message=str(exc)[:120]))
        require(isinstance(got[n], str) and got[n] in _ORDER,
                tr("Hint: smallest_exact must return the string 'fp16', 'bf16' or 'fp32', got {got!r}", got=got[n]))
    answers = cast(dict[int, str], got)
    want = {n: _smallest_exact(n) for n in _UNSEEN}
    lossy = [n for n in _UNSEEN if _ORDER.index(answers[n]) < _ORDER.index(want[n])]
    if lossy:
        require(answers != {n: _smallest_exact(n - 1) for n in _UNSEEN},
                tr("Hint: smallest_exact({n}) leaves out count - 1: the range runs from 0 up to count - 1, count "
                   "integers in all", n=lossy[0]))
        require(not (lossy == [4097] and answers[4098] == want[4098]),
                tr("Hint: smallest_exact(4097) says fp16, but some integer below 4097 does not survive the round "
                   "trip: compare every integer of torch.arange(count), not only the largest"))
        require(False, tr("Hint: smallest_exact({n}) would change values: range is not precision. A format reaches "
                          "far beyond the integers it stores exactly; cast torch.arange to it and back", n=lossy[0]))
    require(answers != {n: _smallest_exact(n + 1) for n in _UNSEEN},
            tr("Hint: smallest_exact({n}) also tests count itself: the range stops before count (0 up to count - 1)",
               n=next((n for n in _UNSEEN if answers[n] != want[n]), 0)))
    small_right = all(answers[n] == want[n] for n in (257, 300))
    require(answers[2048] == want[2048] or not small_right,
            tr("Hint: smallest_exact(2048) picks a larger format than needed: a normal number's mantissa has an "
               "implicit leading 1, one bit more than it stores"))
    wasteful = [n for n in _UNSEEN if answers[n] != want[n]]
    require(not wasteful, tr("Hint: smallest_exact({n}) is larger than needed: take fp16 over bf16 when both "
                             "store every value, and a 16-bit format over fp32", n=wasteful[0] if wasteful else 0))
    require(storage is not None, tr("Hint: assign a dict {name: 'fp16' | 'bf16' | 'fp32'} to storage"))
    require(isinstance(storage, Mapping) and set(storage) == set(RANGES),
            tr("Hint: storage needs one entry per name in ranges, keyed by those names"))
    assert isinstance(storage, Mapping)
    require(all(isinstance(v, str) and v in _ORDER for v in storage.values()),
            tr("Hint: the values are the strings 'fp16', 'bf16' or 'fp32'"))
    wanted = {name: _smallest_exact(n) for name, n in RANGES.items()}
    named_lossy = sorted(k for k in RANGES if _ORDER.index(storage[k]) < _ORDER.index(wanted[k]))
    require(not named_lossy, tr("Hint: {lossy} would change values: range is not precision. A format reaches far "
                                "beyond the integers it stores exactly; cast torch.arange to it and back",
                                lossy=named_lossy))
    named_wasteful = sorted(k for k in RANGES if storage[k] != wanted[k])
    verdict(not named_wasteful, tr("Hint: {wasteful} fit a smaller (or, between the 16-bit two, the finer) format",
                                   wasteful=named_wasteful),
            done=tr("correct: smallest_exact holds on counts you never saw, and storage follows from it"))


# ------------------------------------------------------------------ exercise 2


def _grad_list(name: str, grads: object) -> list[torch.Tensor]:
    """The lesson's gradients, or a failed check that says they are missing (never a pass on nothing)."""
    items = list(grads) if isinstance(grads, (list, tuple)) else []
    if not items or not all(isinstance(g, torch.Tensor) and g.is_floating_point() and g.numel() for g in items):
        cannot_check(tr("{name} is missing or empty: run section 6 first, it records the gradients", name=name))
    return items


def _overflows(grads: Sequence[torch.Tensor], scale: float) -> bool:
    return cast_stats(list(grads), "fp16", scale=scale).overflow > 0


def _power_of_two(value: object) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
            and math.log2(value).is_integer())


def _same(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-12)


_SHARES = (0.0, 0.0004, 0.0007, 0.001, 0.0012, 0.005, 0.0099, 0.02, 0.5)  # flushed shares within_rule is tried on


def _check_rule(within_rule: object) -> Callable[[float], bool]:
    """within_rule(share) against the 0.1 % rule on shares the learner never saw; a hint names the mistake."""
    require(callable(within_rule), tr("Hint: define a function within_rule(share) that returns True or False"))
    rule = cast(Callable[[float], object], within_rule)
    got: dict[float, object] = {}
    for share in _SHARES:
        try:
            got[share] = _plain(rule(share))
        except Exception as exc:  # the learner's code: say what broke, not where in the checker
            require(False, tr("Hint: within_rule({share}) raised {kind} ({message}): it takes one share, a fraction",
                              share=share, kind=type(exc).__name__, message=str(exc)[:120]))
        require(isinstance(got[share], bool), tr("Hint: within_rule must return True or False, got {got!r}",
                                                 got=got[share]))
    want = {share: share <= FLUSH_LIMIT for share in _SHARES}
    require(len(set(got.values())) > 1, tr("Hint: within_rule gives the same answer for every share: compare the "
                                           "share with the rule's limit, do not return a fixed value"))
    require(got != {share: not ok for share, ok in want.items()},
            tr("Hint: within_rule answers the other way round: True means the share is within the rule"))
    require(not (got[0.001] is False and all(got[s] == want[s] for s in _SHARES if s != 0.001)),
            tr("Hint: within_rule rejects a share of exactly 0.001: the rule says at most 0.1 %, the limit included"))
    too_loose = [s for s in _SHARES if got[s] and not want[s]]
    require(not (too_loose and all(got[s] == (s <= 0.1) for s in _SHARES)),
            tr("Hint: within_rule allows a share of {share}: 0.1 % is 0.001 as a fraction, not 0.1",
               share=too_loose[0] if too_loose else 0))
    require(not too_loose, tr("Hint: within_rule allows a share of {share}: more than the rule's 0.1 % flushed",
                              share=too_loose[0] if too_loose else 0))
    too_strict = [s for s in _SHARES if want[s] and not got[s]]
    require(not too_strict, tr("Hint: within_rule rejects a share of {share}, which the 0.1 % rule allows",
                               share=too_strict[0] if too_strict else 0))
    return cast(Callable[[float], bool], rule)


def check_static_scale(max_scale: object, lost_at_max: object, static_enough: object,
                       param_grads: object, activation_grads: object, within_rule: object = None) -> None:
    """Exercise 2: the largest safe power-of-two scale, the share still flushed there, and the verdict.

    ``within_rule`` (the 0.1 % rule as a function of the flushed share; required, so that the rule itself is judged,
    not one verdict that could be typed) is tried on shares the learner never saw, and ``static_enough`` must be
    its answer for ``lost_at_max``.
    """
    params, acts = _grad_list("param_grads", param_grads), _grad_list("activation_grads", activation_grads)
    every = params + acts
    max_scale, lost_at_max, static_enough = _plain(max_scale), _plain(lost_at_max), _plain(static_enough)
    require(max_scale is not None and lost_at_max is not None and static_enough is not None,
            tr("Hint: assign max_scale, lost_at_max and static_enough"))
    require(_power_of_two(max_scale), tr("Hint: max_scale must be a power of two (1, 2, 4, ...): GradScaler "
                                         "multiplies by powers of two, which shift the exponent and round nothing"))
    assert isinstance(max_scale, (int, float))
    scale = float(max_scale)
    if _overflows(every, scale):
        fits_acts = not _overflows(acts, scale) and _overflows(acts, 2.0 * scale)  # the activations' own maximum
        one_too_many = not _overflows(every, scale / 2)
        require(not (fits_acts and one_too_many),
                tr("Hint: at max_scale a gradient overflows fp16: either you doubled once too often (stop at the last "
                   "scale that overflows nothing) or you left out param_grads"))
        require(not fits_acts, tr("Hint: at max_scale a parameter gradient overflows fp16: count overflow on all the "
                                  "gradients, param_grads as well as activation_grads"))
        fits_params = not _overflows(params, scale) and _overflows(params, 2.0 * scale)  # the parameters' own maximum
        require(not fits_params or one_too_many,
                tr("Hint: at max_scale an activation gradient overflows fp16: count overflow on all the gradients, "
                   "activation_grads as well as param_grads"))
        require(not one_too_many, tr("Hint: at max_scale some gradient overflows fp16: you doubled once too often; "
                                     "stop at the last scale that overflows nothing"))
        require(False, tr("Hint: at max_scale gradients overflow fp16: double from 1 while cast_stats(...).overflow "
                          "stays 0 on all the gradients"))
    require(_overflows(every, 2.0 * scale), tr("Hint: twice max_scale overflows nothing yet: keep doubling"))

    require(isinstance(lost_at_max, (int, float)) and not isinstance(lost_at_max, bool) and math.isfinite(lost_at_max),
            tr("Hint: lost_at_max is one number, a fraction between 0 and 1"))
    assert isinstance(lost_at_max, (int, float))
    at_max = cast_stats(every, "fp16", scale=scale)
    want = at_max.underflow_share_of_nonzero
    lost = float(lost_at_max)
    if not _same(lost, want):
        require(not (want > 0 and _same(lost, 100 * want)),
                tr("Hint: lost_at_max is a fraction (0.01 means 1 %), not a percentage"))
        require(not (want > 0 and _same(lost, at_max.underflow_fraction)),
                tr("Hint: divide by the non-zero gradients, not by all of them: the zeros (mostly ReLU's) were zero "
                   "before the cast and cannot be lost"))
        params_only = cast_stats(params, "fp16", scale=scale).underflow_share_of_nonzero
        require(not (want > 0 and lost == 0 == params_only),
                tr("Hint: lost_at_max is 0, yet some non-zero gradients flush at max_scale: count all the gradients "
                   "(activation_grads as well as param_grads), scaled before the fp16 cast (scale=max_scale in "
                   "cast_stats)"))
        require(not _same(lost, params_only),
                tr("Hint: count all the gradients, activation_grads as well as param_grads"))
        require(not (want > 0 and lost == 0),
                tr("Hint: lost_at_max is 0, yet some non-zero gradients flush at max_scale: scale before the fp16 cast "
                   "(scale=max_scale in cast_stats); values cast first are already zero and no longer counted"))
        require(not _same(lost, (at_max.underflow + at_max.subnormal) / at_max.nonzero),
                tr("Hint: a subnormal is stored, with fewer bits, not lost; only values that round to zero count as "
                   "flushed"))
        require(not _same(lost, cast_stats(acts, "fp16", scale=scale).underflow_share_of_nonzero),
                tr("Hint: count all the gradients, param_grads as well as activation_grads"))
        require(not _same(lost, cast_stats(every, "fp16").underflow_share_of_nonzero),
                tr("Hint: that is the share flushed with no scale before the cast: pass scale=max_scale to "
                   "cast_stats, which multiplies in fp32 first (multiplying after casting to fp16 scales values "
                   "already rounded to zero)"))
        require(False, tr("Hint: lost_at_max should be the share of the non-zero gradients that flush to zero at "
                          "max_scale: cast_stats(...) has underflow and nonzero"))
    require(isinstance(static_enough, bool), tr("Hint: static_enough is True or False"))
    rule = _check_rule(within_rule)
    require(static_enough == _plain(rule(lost)),
            tr("Hint: static_enough is not what your within_rule says for lost_at_max: store "
               "within_rule(lost_at_max), do not type it"))
    verdict(static_enough == (want <= FLUSH_LIMIT),
            tr("Hint: static_enough follows from lost_at_max and the 0.1 % rule: a larger scale would overflow, so "
               "what flushes at max_scale is lost at every scale"))


# ------------------------------------------------------------------ exercise 3


def _fits_fp16(grads: torch.Tensor) -> bool:
    """Some scale 2^0..2^40 with no overflow and at most FLUSH_LIMIT of the non-zeros flushed."""
    stats = (cast_stats(grads, "fp16", scale=s) for s in _SCALES)
    return any(s.overflow == 0 and s.underflow <= FLUSH_LIMIT * s.nonzero for s in stats)


def _spread(lo: float, hi: float, n: int, *, tiny: int = 0, zeros: int = 0, seed: int = 0) -> torch.Tensor:
    """``n`` log-uniform magnitudes in [2^lo, 2^hi] with random signs, ``tiny`` values at 2^-70, ``zeros`` zeros."""
    gen = torch.Generator().manual_seed(seed)
    exps = torch.empty(n, dtype=torch.float64).uniform_(lo, hi, generator=gen)
    signs = torch.randint(0, 2, (n,), generator=gen).double() * 2 - 1
    parts = [signs * torch.exp2(exps), torch.full((tiny,), 2.0**-70, dtype=torch.float64),
             torch.zeros(zeros, dtype=torch.float64)]
    return torch.cat(parts).float()


def _cases() -> dict[str, torch.Tensor]:
    """Gradient sets the learner never saw, each built so that one typical mistake flips the decision."""
    return {
        "needs a scale": _spread(-34, -10, 4000, seed=1),           # flushes at S = 1; fits at a larger S
        "too wide": _spread(-50, 0, 4000, seed=2),                  # spans more octaves than fp16 has
        "subnormals kept": _spread(-40, -5, 4000, seed=7),          # fits only if subnormals count as kept
        "needs S > 2^20": _spread(-50, -25, 4000, seed=7),          # fits only at a scale above 2^20
        "needs S = 2^40": _spread(-64.9, -24.1, 4000, seed=8),      # fits only at 2^40, the last scale tried
        "overflows": _spread(-8, 17, 4000, seed=3),                 # beyond 65504 already at S = 1
        "a few lost": _spread(-20, -4, 4000, tiny=2, seed=4),       # 0.05 % always flush: within the rule
        "exactly 0.1 %": _spread(-20, -4, 3996, tiny=4, seed=9),    # 4 of 4000 always flush: at the limit, allowed
        "too many lost": _spread(-20, -4, 4000, tiny=20, seed=5),   # 0.5 % always flush
        "ReLU zeros": _spread(-20, -4, 4000, tiny=8, zeros=6000, seed=6),  # 0.2 % of the non-zeros flush
    }


def _case_hint(case: str) -> str:
    """The hint for the first unseen case (in _cases' order) that decide gets wrong: it names the mistake."""
    hints = {
        "needs a scale": lambda: tr("Hint: your decide says bf16 for gradients that one scale fits: try every "
                                    "S = 2.0**k for k = 0 .. 40 (k is the exponent, not the scale), applied "
                                    "through cast_stats' scale= (multiplying after an fp16 cast scales zeros)"),
        "subnormals kept": lambda: tr("Hint: your decide says bf16 for gradients that one scale fits: a subnormal "
                                      "is stored, with fewer bits, not lost; only values that round to zero count "
                                      "as flushed"),
        "needs S > 2^20": lambda: tr("Hint: your decide says bf16 for gradients that a large scale fits: try the "
                                     "scales all the way up to 2^40"),
        "needs S = 2^40": lambda: tr("Hint: your decide says bf16 for gradients that a large scale fits: try the "
                                     "scales all the way up to 2^40"),
        "exactly 0.1 %": lambda: tr("Hint: your decide says bf16 where exactly 0.1 % of the non-zero values flush: "
                                    "the rule says at most 0.1 %, so that share is allowed"),
        "too wide": lambda: tr("Hint: your decide says fp16 for gradients that no single scale fits: one scale must "
                               "satisfy both conditions at once (no overflow and few flushed)"),
        "overflows": lambda: tr("Hint: your decide says fp16 for gradients that overflow fp16 at every scale: a scale "
                                "must leave no value overflowing"),
        "a few lost": lambda: tr("Hint: your decide says bf16 where at most 0.1 % of the non-zero values flush: the "
                                 "rule allows that many, it does not ask for none"),
        "too many lost": lambda: tr("Hint: your decide allows too many flushed values: 0.1 % is 0.001 as a fraction"),
        "ReLU zeros": lambda: tr("Hint: your decide counts the flushed values against all values: divide by the "
                                 "non-zero ones (the zeros were zero before the cast and cannot be lost)"),
    }
    return hints[case]()


def check_decisions(decide: object, choice_a: object, choice_b: object, best_scale_a: object,
                    grads_a: object, grads_b: object) -> None:
    """Exercise 3: ``decide`` follows the rule on unseen gradients; its choices and the largest safe scale for a."""
    ga, gb = _grad_list("grads_a", [grads_a])[0], _grad_list("grads_b", [grads_b])[0]
    choice_a, choice_b, best_scale_a = _plain(choice_a), _plain(choice_b), _plain(best_scale_a)
    require(callable(decide), tr("Hint: define a function decide(grads) that returns 'fp16' or 'bf16'"))
    rule = cast(Callable[[torch.Tensor], object], decide)  # callable, as required just above
    require(choice_a is not None and choice_b is not None and best_scale_a is not None,
            tr("Hint: assign choice_a, choice_b (each 'fp16' or 'bf16') and best_scale_a (a power of two)"))
    cases, answers = _cases(), {}
    for case, grads in cases.items():
        try:
            got = _plain(rule(grads.clone()))
        except Exception as exc:  # the learner's code: say what broke, not where in the checker
            require(False, tr("Hint: decide raised {kind} ({message}) on a tensor of gradients: it takes one "
                              "tensor and returns 'fp16' or 'bf16'", kind=type(exc).__name__, message=str(exc)[:120]))
        require(got in ("fp16", "bf16"), tr("Hint: decide must return the string 'fp16' or 'bf16', got {got!r}",
                                            got=got))
        answers[case] = got
    require(set(answers.values()) != {"fp16"},
            tr("Hint: your decide says fp16 for every set of gradients, even ones no scale fits: apply S through "
               "cast_stats' scale= before the fp16 cast (values cast first are already zero and no longer counted), "
               "and compute the choice, do not return a fixed one"))
    require(len(set(answers.values())) > 1,
            tr("Hint: your decide gives the same answer for every set of gradients: it must compute the choice "
               "from cast_stats at each scale, not return a fixed one"))
    for case, grads in cases.items():
        require(answers[case] == ("fp16" if _fits_fp16(grads) else "bf16"), _case_hint(case))
    for name, grads, choice in (("choice_a", ga, choice_a), ("choice_b", gb, choice_b)):
        require(choice == ("fp16" if _fits_fp16(grads) else "bf16"),
                tr("Hint: {name} is not what your decide returns for its gradients: store decide(...)'s result, "
                   "do not type it", name=name))
    require(_power_of_two(best_scale_a), tr("Hint: best_scale_a is a power of two"))
    assert isinstance(best_scale_a, (int, float))
    require(not _overflows([ga], float(best_scale_a)),
            tr("Hint: at best_scale_a something overflows: you doubled once too often"))
    verdict(_overflows([ga], 2.0 * best_scale_a), tr("Hint: twice best_scale_a still overflows nothing"),
            done=tr("correct: decide follows the rule on gradients it never saw, and the scale is the largest "
                    "that fits"))
