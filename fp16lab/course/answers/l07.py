"""Lesson 07's exercise checks: each computes what it expects itself; a check cell shows only the verdict or a hint.

- :func:`check_attention` (exercise 1): an attention that is finite and right in FP16;
- :func:`check_budget` (exercise 2): the training setup for a 1.1B-parameter model on a 24 GB RTX 4090D;
- :func:`check_t4_choice` (exercise 3): the inference precision for an outlier model on a T4.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from fp16lab.course.answers import WrongAnswer, require, verdict
from fp16lab.hardware import PROFILES
from fp16lab.labs.runtime.i18n import tr
from fp16lab.precision import autocast

__all__ = ["check_attention", "check_budget", "check_t4_choice", "BUDGET", "HEAD_DIMS", "T4_OPTIONS"]

# ---------------------------------------------------------------------------- exercise 1


def _attention_fp32(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, keep: torch.Tensor, scale: float) -> torch.Tensor:
    """FP32 attention (rows with no key are NaN: only rows with a key are compared)."""
    scores = (q.float() @ k.float().T * scale).masked_fill(~keep, float("-inf"))
    return torch.softmax(scores, dim=-1) @ v.float()


Case = tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]


def _case(device: torch.device, magnitude: float, self_keys: bool, seed: int, d: int = 64) -> Case:
    """FP16 q, k, v of shape (8, d) and a causal ``keep`` whose last query has no key at all."""
    g = torch.Generator().manual_seed(seed)
    q, k, v = (magnitude * torch.randn(8, d, generator=g) for _ in range(3))
    if self_keys:
        k = q.clone()  # each query's score with itself is |q|^2: 64 * magnitude^2
    keep = torch.ones(8, 8, dtype=torch.bool).tril()
    keep[-1] = False
    return q.half().to(device), k.half().to(device), v.half().to(device), keep.to(device)


def _padded_keys(device: torch.device) -> Case:
    """Order-1 scores under a mask that is not causal: keys 5-7 are padding for every query, and the last query has
    no key. A function that builds its own causal mask (``is_causal=True``, ``tril``) instead of using ``keep`` fails."""
    q, k, v, _ = _case(torch.device("cpu"), 1.0, False, seed=7)
    keep = torch.ones(8, 8, dtype=torch.bool)
    keep[:, 5:] = False
    keep[-1] = False
    return q.to(device), k.to(device), v.to(device), keep.to(device)


def _negative_padded_row(device: torch.device) -> Case:
    """Section 5b's trap: the padded last query scores about -32 (after the 1/sqrt(d) scale) with every key.

    Every key shares a component ``b`` the last query points against: its scores are -(|b|^2 + b . noise) / 8,
    all far below -16, where FP16's ``score + finfo(float16).min`` rounds to -inf (an additive mask's NaN row).
    """
    g = torch.Generator().manual_seed(5)
    q, v = torch.randn(8, 64, generator=g), torch.randn(8, 64, generator=g)
    b = torch.full((64,), 2.0)
    k = b + torch.randn(8, 64, generator=g)
    q[-1] = -b
    keep = torch.ones(8, 8, dtype=torch.bool).tril()
    keep[-1] = False
    return q.half().to(device), k.half().to(device), v.half().to(device), keep.to(device)


def _negative_only_key(device: torch.device) -> Case:
    """The first query's one key scores about -12 800 after the scale (k[0] = -q[0], magnitude 40), while the keys
    it may not see score around 0: only a mask that leaves those keys no weight at all, whatever their scores,
    returns v[0] there. The other queries attend to themselves (k = q), as in the magnitude-40 case."""
    q, k, v, keep = _case(torch.device("cpu"), 40.0, True, seed=6)
    k[0] = -q[0]
    return q.to(device), k.to(device), v.to(device), keep.to(device)


def _run(fn: Any, case: Case) -> torch.Tensor:
    try:
        out = fn(*case)
    except Exception as err:  # the learner's function failed: its error as a hint, not the checker's traceback
        message = str(err).splitlines()[0] if str(err) else ""
        error = f"{type(err).__name__}: {message}"
        require("without overflow" not in message,
                tr("fixed_attention raised {error}: the mask value does not fit the scores' dtype (FP16's largest "
                   "magnitude is 65 504)", error=error))
        raise WrongAnswer(tr("fixed_attention raised {error}", error=error)) from None
    require(isinstance(out, torch.Tensor) and tuple(out.shape) == tuple(case[2].shape),
            tr("return a tensor shaped like v: (tokens, d)"))
    require(out.dtype == case[2].dtype, tr("return the inputs' dtype ({want}), not {got}: cast back at the end",
                                         want=case[2].dtype, got=out.dtype))
    return out.float()


def _err(out: torch.Tensor, want: torch.Tensor) -> float:
    """Largest difference on the rows that have a key (all but the last)."""
    return (out[:-1] - want[:-1]).abs().max().item()


# the head dims of the order-1 case: 64 (GPT-2's), and two others, so that a scale typed in for d = 64 (q / 8) fails
HEAD_DIMS: tuple[int, ...] = (64, 16, 80)


def _check_order_one(fn: Any, case: Case) -> None:
    """Scores of order 1: the softmax is spread, so the scale, the mask's direction and the softmax's dim all show."""
    out = _run(fn, case)
    require(bool(torch.isfinite(out).all()),
            tr("inf/NaN on the last row, a query with no key to attend to: what does the softmax make of a row "
               "whose scores are all -inf?"))
    d = case[0].shape[-1]
    err = _err(out, _attention_fp32(*case, d**-0.5))
    unscaled = _err(out, _attention_fp32(*case, 1.0))
    require(err < 0.02 or unscaled >= 0.02, tr("finite, but this is attention without the 1/sqrt(d) scale: is it there?"))
    # a wrong scale: 1/d (1/sqrt(d) applied twice, to q and to the scores, or d instead of sqrt(d)), the token count's
    # 1/sqrt(len(q)) instead of the head dim's, or 1/8 typed in
    wrong = {"1/d": 1.0 / d, "1/sqrt(tokens)": case[0].shape[0] ** -0.5} | ({"1/8": 1 / 8} if d != 64 else {})
    for name, scale in wrong.items():
        require(err < 0.02 or _err(out, _attention_fp32(*case, scale)) >= 0.02,
                tr("finite, but the scores are scaled by {scale} instead of 1/sqrt(d) (d = {d} here): take d from "
                   "q.shape[-1], and scale once (q or the scores, not both)", scale=name, d=d))
    q, k, v, keep = (t.float() for t in case)
    after = (torch.softmax(q @ k.T * d**-0.5, dim=-1) * keep) @ v  # the mask applied to the probabilities
    require(err < 0.02 or _err(out, after) >= 0.02,
            tr("finite, but {err:.3g} away from FP32 attention: the mask is applied after the softmax, so the "
               "weights of each row's allowed keys no longer sum to 1", err=err))
    require(err < 0.02, tr("finite, but {err:.3g} away from FP32 attention on the rows that have keys: is the mask "
                         "the right way round (keep is True where a query may attend), and the softmax over the keys "
                         "(dim=-1)?", err=err))


def check_attention(fn: Any, device: "torch.device | str" = "cpu") -> None:
    """Exercise 1: ``fn(q, k, v, keep)`` is finite in FP16 and matches FP32 attention on every row with a key.

    Five cases: scores of order 1, at each head dim of :data:`HEAD_DIMS` (the 1/sqrt(d) scale, also one typed in
    for d = 64, applied twice or taken from the token count; the mask's direction, the softmax's dim, a mask applied
    after the softmax); the same under a padding mask that is not causal (a causal mask of the function's own);
    magnitude 40 (q @ k^T past 65 504); a padded row whose scores are all below -16 (an additive FP16 mask of
    finfo(float16).min rounds to -inf); a row whose one key scores -12 800 (a mask value that is not below every
    score, such as -1e4, or a mask after the softmax, gives the masked keys weight).
    """
    require(callable(fn), tr("write a function (q, k, v, keep) -> tensor and assign it to fixed_attention"))
    dev = torch.device(device)
    for d in HEAD_DIMS:
        _check_order_one(fn, _case(dev, 1.0, False, seed=3, d=d))
    # a mask that is not causal: the function must use keep, not a causal mask of its own
    case = _padded_keys(dev)
    out = _run(fn, case)
    tril = torch.ones(8, 8, dtype=torch.bool, device=case[3].device).tril()
    causal = case[3].clone()
    causal[:-1] = tril[:-1]
    d = case[0].shape[-1]
    if bool(torch.isfinite(out).all()):   # a causal mask of its own, instead of keep or on top of it
        own_mask = any(_err(out, _attention_fp32(*case[:3], m, d**-0.5)) < 0.02 for m in (causal, case[3] & tril))
        require(_err(out, _attention_fp32(*case, d**-0.5)) < 0.02 or not own_mask,
                tr("right for a causal mask, wrong for another one: the function adds a causal mask of its own to "
                   "keep, or uses one instead of keep"))
    _check_order_one(fn, case)
    d = 64
    # magnitude 40, k = q: q @ k^T reaches 64 * 40^2 = 102 400, past FP16's 65 504, unless q is scaled first
    case = _case(dev, 40.0, True, seed=4)
    out = _run(fn, case)
    require(bool(torch.isfinite(out).all()),
            tr("inf/NaN for inputs of magnitude 40: q @ k^T overflows FP16 (65 504) before a scale applied to the "
               "scores can act: where must the scale go?"))
    ref = _attention_fp32(*case, d**-0.5)
    err = _err(out, ref)
    require(err < 0.02 * ref[:-1].abs().max().item(),
            tr("finite, but {err:.3g} away from FP32 attention for inputs of magnitude 40", err=err))
    # section 5b: a padded row whose scores are all below -16
    case = _negative_padded_row(dev)
    out = _run(fn, case)
    require(bool(torch.isfinite(out).all()),
            tr("inf/NaN on a padded row (a query with no key) whose scores are all below -16: in FP16, "
               "score + finfo(float16).min rounds to -inf there (section 5b): what must the mask do to the masked "
               "scores, if not add to them?"))
    err = _err(out, _attention_fp32(*case, d**-0.5))
    require(err < 0.02, tr("finite, but {err:.3g} away from FP32 attention on the rows that have keys", err=err))
    # a row whose only key scores far below the keys it may not see
    case = _negative_only_key(dev)
    out = _run(fn, case)
    ref = _attention_fp32(*case, d**-0.5)
    err = (out[:-1] - ref[:-1]).abs().max().item() if bool(torch.isfinite(out[:-1]).all()) else math.inf
    require(err < 0.02 * ref[:-1].abs().max().item(),
            tr("wrong on a row whose one allowed key scores about -12 800 (after the scale), far below the keys it "
               "may not see: its output must be that key's row of v. A mask applied after the softmax fails there "
               "(the allowed key's probability has already underflowed to 0), and so does a mask value such as -1e4 "
               "that is not below every score"))
    verdict(True, "")


# ---------------------------------------------------------------------------- exercise 2

# the task: a model of `params` parameters, Adam, `activations_gib` reserved for activations (with checkpointing),
# on an RTX 4090D of `card_bytes` (what the card reports: fp16lab.hardware's profile), of which `reserve_gib` stays
# with the CUDA context, cuBLAS workspace and allocator fragmentation (a planning figure, not a measurement)
BUDGET: dict[str, float] = {"params": 1.1e9, "card_bytes": float(PROFILES["rtx4090d"].memory_bytes),
                            "activations_gib": 6.0, "reserve_gib": 2.0}
_LOSES_UPDATES = ("16-bit weights, torch AdamW", "16-bit weights, AdamW16 nearest")


def check_budget(choice: Any, state_gib: Any, memory_table: Any) -> None:
    """Exercise 2: a setup of ``memory_table`` that fits ``BUDGET`` and keeps every update; its state in GiB."""
    require(choice is not None and state_gib is not None, tr("assign both choice and state_gib"))
    rows = list(getattr(memory_table, "index", []))
    require(choice in rows, tr("choice must be one of memory_table's row names: {rows}", rows=rows))
    per_param = float(memory_table.loc[choice, "total bytes/param"])
    need = BUDGET["params"] * per_param / 2**30
    require(isinstance(state_gib, (int, float)) and not isinstance(state_gib, bool) and math.isfinite(state_gib),
            tr("state_gib must be a number: GiB of weights, gradients and optimizer state of your choice"))
    require(abs(state_gib / need - 2**30 / 1e9) > 0.01, tr("state_gib looks like GB: 1 GiB is 2**30 bytes, not 1e9"))
    require(abs(state_gib / need - 1) < 0.01,
            tr("state_gib: parameters times that setup's total bytes/param (memory_table), in GiB (2**30 bytes)"))
    card_gib = BUDGET["card_bytes"] / 2**30
    require(need + BUDGET["activations_gib"] + BUDGET["reserve_gib"] <= card_gib,
            tr("{choice!r} does not fit: its state plus the {act:g} GiB of activations and the {res:g} GiB reserve "
               "(CUDA context, cuBLAS workspace, fragmentation) is more than the card's {card:.2f} GiB",
               choice=choice, act=BUDGET["activations_gib"], res=BUDGET["reserve_gib"], card=card_gib))
    require(choice not in _LOSES_UPDATES,
            tr("{choice!r} fits, but rounds each update to the nearest 16-bit weight: section 4 showed those "
               "updates lost. Pick a setup that keeps them", choice=choice))
    verdict(True, "")


# ---------------------------------------------------------------------------- exercise 3

T4_OPTIONS = ("fp32", "fp16 weights (.half())", "fp16 autocast, FP32 weights", "bf16 weights")


def check_t4_choice(t4_choice: Any, t4_logits: Any, model: nn.Module, tokens: torch.Tensor) -> None:
    """Exercise 3: the T4 option with 16-bit matmuls, native there, finite on ``model``; and its logits."""
    require(t4_choice is not None and t4_logits is not None, tr("assign both t4_choice and t4_logits"))
    require(t4_choice in T4_OPTIONS, tr("t4_choice must be one of {options}", options=T4_OPTIONS))
    require(t4_choice != "fp32", tr("fp32 is finite, but runs no 16-bit matmul: the T4's Tensor Cores stay idle"))
    require(t4_choice != "bf16 weights",
            tr("bf16 is finite, but a T4 (sm_75) has no native BF16: chip_features(t4.capability) says so"))
    require(isinstance(t4_logits, torch.Tensor), tr("t4_logits must be the logits tensor of your choice, run on tokens"))
    require(bool(torch.isfinite(t4_logits.float()).all()),
            tr("t4_logits hold inf/NaN: run first_nonfinite on that option; a residual stream past 65 504 needs FP32"))
    require(t4_choice == "fp16 autocast, FP32 weights",
            tr("{choice!r} overflows on this model: first_nonfinite(copy.deepcopy(ex_deep).half(), tokens, "
               "'fp32') names the block", choice=t4_choice))
    require(t4_logits.dtype == torch.float16,
            tr("t4_logits are {dtype}: compute them with your choice (under fp16 autocast the head returns FP16)",
               dtype=t4_logits.dtype))
    with torch.no_grad():
        want = model(tokens).float()
        with autocast("fp16", tokens.device):
            amp = model(tokens)
    require(not (torch.equal(t4_logits, want.half()) and not torch.equal(t4_logits, amp)),
            tr("t4_logits are FP32 logits cast with .half() afterwards: no FP16 matmul ran; run the model under "
               "your choice instead"))
    err = (t4_logits.float() - want).abs().max().item()
    require(err < 0.05 * want.abs().max().item() + 0.05, tr("t4_logits are {err:.3g} away from the FP32 model's", err=err))
    verdict(True, "")
