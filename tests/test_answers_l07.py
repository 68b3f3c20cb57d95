"""Lesson 07's exercise checks accept the right answer and reject typical wrong ones, each with its hint."""

from __future__ import annotations

import copy

import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from fp16lab.course.answers.l07 import BUDGET, T4_OPTIONS, check_attention, check_budget, check_t4_choice
from fp16lab.gpt import GPT, GPTConfig
from fp16lab.precision import autocast

# ---- exercise 1: attention that survives FP16 -------------------------------------------------


def right(q, k, v, keep):
    scores = (q * q.shape[-1] ** -0.5) @ k.transpose(-1, -2)
    scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
    return (torch.softmax(scores.float(), dim=-1) @ v.float()).to(v.dtype)


def no_scale(q, k, v, keep):  # the mistake the hint names; computed in FP32, so it stays finite
    scores = (q.float() @ k.float().T).masked_fill(~keep, torch.finfo(torch.float32).min)
    return (torch.softmax(scores, dim=-1) @ v.float()).to(v.dtype)


def no_scale_fp16(q, k, v, keep):
    scores = (q @ k.T).masked_fill(~keep, torch.finfo(q.dtype).min)
    return (torch.softmax(scores.float(), dim=-1) @ v.float()).to(v.dtype)


def inf_mask(q, k, v, keep):
    scores = ((q * q.shape[-1] ** -0.5) @ k.T).masked_fill(~keep, float("-inf"))
    return (torch.softmax(scores.float(), dim=-1) @ v.float()).to(v.dtype)


def scale_after(q, k, v, keep):
    scores = (q @ k.T) * q.shape[-1] ** -0.5
    scores = scores.masked_fill(~keep, torch.finfo(scores.dtype).min)
    return (torch.softmax(scores.float(), dim=-1) @ v.float()).to(v.dtype)


def wrong_dim(q, k, v, keep):
    scores = ((q * q.shape[-1] ** -0.5) @ k.T).masked_fill(~keep, torch.finfo(q.dtype).min)
    return (torch.softmax(scores.float(), dim=0) @ v.float()).to(v.dtype)


def inverted_mask(q, k, v, keep):
    scores = ((q * q.shape[-1] ** -0.5) @ k.T).masked_fill(keep, torch.finfo(q.dtype).min)
    return (torch.softmax(scores.float(), dim=-1) @ v.float()).to(v.dtype)


def fp32_out(q, k, v, keep):
    return right(q, k, v, keep).float()


def test_attention_check_accepts_the_fix_and_sdpa(capsys):
    check_attention(right)
    assert capsys.readouterr().out == "✓ correct\n"  # the verdict once, nothing else

    def sdpa(q, k, v, keep):
        return F.scaled_dot_product_attention(q[None].float(), k[None].float(), v[None].float(),
                                              attn_mask=keep[None])[0].nan_to_num().to(v.dtype)
    check_attention(sdpa)


@pytest.mark.parametrize(("answer", "match"), [
    (None, "write a function"),
    (no_scale, r"without the 1/sqrt\(d\) scale"),
    (no_scale_fp16, r"without the 1/sqrt\(d\) scale"),
    (inf_mask, "not -inf"),
    (scale_after, "overflows FP16"),
    (wrong_dim, "the softmax over the keys"),
    (inverted_mask, "the mask the right way round"),
    (fp32_out, "return the inputs' dtype"),
])
def test_attention_check_rejects_typical_bugs(answer, match):
    with pytest.raises(AssertionError, match=match):
        check_attention(answer)


# ---- exercise 2: a memory budget, as a choice -------------------------------------------------

TABLE = pd.DataFrame({"total bytes/param": [16.0, 8.0, 12.0, 14.0, 16.0]},
                     index=["AMP: FP32 weights, torch AdamW", "16-bit weights, torch AdamW",
                            "16-bit weights, AdamW16 nearest", "16-bit weights, AdamW16 kahan",
                            "16-bit weights, AdamW16 master"])


def gib(choice):
    return BUDGET["params"] * TABLE.loc[choice, "total bytes/param"] / 2**30


def test_budget_check_accepts_kahan(capsys):
    check_budget("16-bit weights, AdamW16 kahan", gib("16-bit weights, AdamW16 kahan"), TABLE)
    assert capsys.readouterr().out == "✓ correct\n"  # the verdict once, nothing else


@pytest.mark.parametrize(("choice", "state", "match"), [
    (None, None, "assign both"),
    ("AMP: FP32 weights, torch AdamW", None, "assign both"),
    ("AMP: FP32 weights, torch AdamW", gib("AMP: FP32 weights, torch AdamW"), "does not fit"),  # forgot the reserve
    ("16-bit weights, AdamW16 master", gib("16-bit weights, AdamW16 master"), "does not fit"),
    ("16-bit weights, AdamW16 nearest", gib("16-bit weights, AdamW16 nearest"), "lost"),
    ("16-bit weights, torch AdamW", gib("16-bit weights, torch AdamW"), "lost"),
    ("16-bit weights, AdamW16 kahan", gib("16-bit weights, AdamW16 kahan") * 2**30 / 1e9, "looks like GB"),
    ("16-bit weights, AdamW16 kahan", 14.0, "times that setup's total bytes/param"),
    ("16-bit weights, AdamW16 kahan", BUDGET["params"] * 16 / 2**30, "times that setup's total bytes/param"),  # AMP's bytes
    ("kahan", 17.0, "one of memory_table's row names"),
])
def test_budget_check_rejects_wrong_choices(choice, state, match):
    with pytest.raises(AssertionError, match=match):
        check_budget(choice, state, TABLE)


# ---- exercise 3: the inference precision for a T4 ----------------------------------------------


def outlier_gpt(n_layers: int = 6, step: float = 12_000.0, channel: int = 3) -> GPT:
    """The lesson's model whose residual stream grows by ``step`` per block (past 65 504 in FP16)."""
    torch.manual_seed(0)
    m = GPT(GPTConfig(vocab_size=64, d_model=64, n_layers=n_layers, n_heads=4, seq_len=16))
    with torch.no_grad():
        for blk in m.h:
            blk.ln2.weight[channel], blk.ln2.bias[channel] = 0.0, 1.0
            blk.mlp.fc.weight[0].zero_()
            blk.mlp.fc.weight[0, channel] = 1.0
            blk.mlp.proj.weight[:, 0] = 0.0
            blk.mlp.proj.weight[channel, 0] = step / F.gelu(torch.tensor(1.0)).item()
    return m.eval()


MODEL = outlier_gpt()
TOKENS = torch.randint(0, 64, (2, 16), generator=torch.Generator().manual_seed(0))


def logits(option: str) -> torch.Tensor:
    with torch.no_grad():
        if option == "fp16 autocast, FP32 weights":
            with autocast("fp16", "cpu"):
                return MODEL(TOKENS)
        if option == "fp16 weights (.half())":
            return copy.deepcopy(MODEL).half()(TOKENS)
        if option == "bf16 weights":
            return copy.deepcopy(MODEL).to(torch.bfloat16)(TOKENS)
        if option == "fp32 .half()":
            return MODEL(TOKENS).half()
        return MODEL(TOKENS)


def test_budget_fits_only_with_the_reserve():
    """Kahan fits the card with the reserve; AMP fits only when the reserve is forgotten (the mistake)."""
    card, act, res = BUDGET["card_bytes"] / 2**30, BUDGET["activations_gib"], BUDGET["reserve_gib"]
    assert gib("16-bit weights, AdamW16 kahan") + act + res <= card - 0.5  # margin for the learner's rounding
    amp = gib("AMP: FP32 weights, torch AdamW") + act + res
    assert card + 0.2 < amp and amp - res <= card - 0.5  # fits only if the reserve is forgotten


def test_t4_check_accepts_fp16_autocast(capsys):
    check_t4_choice("fp16 autocast, FP32 weights", logits("fp16 autocast, FP32 weights"), MODEL, TOKENS)
    assert capsys.readouterr().out == "✓ correct\n"  # the verdict once, nothing else


@pytest.mark.parametrize(("choice", "got", "match"), [
    (None, None, "assign both"),
    ("fp16 weights (.half())", "fp16 weights (.half())", "inf/NaN"),     # the hint's mistake, run
    ("fp16 weights (.half())", "fp16 autocast, FP32 weights", "overflows on this model"),
    ("bf16 weights", "bf16 weights", "no native BF16"),
    ("fp32", "fp32", "runs no 16-bit matmul"),
    ("fp16 autocast, FP32 weights", "fp32", "compute them with your choice"),
    ("FP16", "fp32", "must be one of"),
    ("fp16 autocast, FP32 weights", "fp32 .half()", "cast with .half"),  # FP32 logits cast afterwards
])
def test_t4_check_rejects_wrong_choices(choice, got, match):
    assert set(T4_OPTIONS) >= {"fp32", "bf16 weights"}
    with pytest.raises(AssertionError, match=match):
        check_t4_choice(choice, None if got is None else logits(got), MODEL, TOKENS)
