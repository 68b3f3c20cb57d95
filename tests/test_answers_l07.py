"""Lesson 07's exercise checks accept the right answer and reject typical wrong ones, each with its hint."""

from __future__ import annotations

import copy

import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from fp16lab.course.answers import l07
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


def scale_typed_in(q, k, v, keep):  # 1/sqrt(64) typed in: right at d = 64 only
    scores = (q / 8) @ k.T
    return _attend(scores.masked_fill(~keep, torch.finfo(q.dtype).min), v)


def scale_twice(q, k, v, keep):  # q scaled, then the scores scaled again: 1/d in all
    scores = ((q * q.shape[-1] ** -0.5) @ k.T) * q.shape[-1] ** -0.5
    return _attend(scores.masked_fill(~keep, torch.finfo(q.dtype).min), v)


def scale_by_d(q, k, v, keep):  # d instead of sqrt(d)
    scores = (q / q.shape[-1]) @ k.T
    return _attend(scores.masked_fill(~keep, torch.finfo(q.dtype).min), v)


def fp32_out(q, k, v, keep):
    return right(q, k, v, keep).float()


def _scaled(q, k):
    return (q * q.shape[-1] ** -0.5) @ k.transpose(-1, -2)


def _attend(scores, v):
    return (torch.softmax(scores.float(), dim=-1) @ v.float()).to(v.dtype)


F16_MIN = torch.finfo(torch.float16).min


def additive_fp16_min(q, k, v, keep):  # section 5b's trap: score + finfo(float16).min rounds to -inf below -16
    return _attend(_scaled(q, k) + (~keep).to(q.dtype) * F16_MIN, v)


def additive_1e4(q, k, v, keep):  # the old hard-coded additive mask
    return _attend(_scaled(q, k) - 1e4 * (~keep).to(q.dtype), v)


def fill_1e4(q, k, v, keep):  # a fill value that is not below every score
    return _attend(_scaled(q, k).masked_fill(~keep, -1e4), v)


def fill_1e9(q, k, v, keep):  # a fill value FP16 cannot hold: masked_fill raises
    return _attend(_scaled(q, k).masked_fill(~keep, -1e9), v)


def fill_fp32_min(q, k, v, keep):  # finfo of the wrong dtype: masked_fill raises too
    return _attend(_scaled(q, k).masked_fill(~keep, torch.finfo(torch.float32).min), v)


def mask_after_softmax(q, k, v, keep):  # probabilities masked afterwards: rows no longer sum to 1
    return ((torch.softmax(_scaled(q, k).float(), dim=-1) * keep) @ v.float()).to(v.dtype)


def mask_after_softmax_renormalised(q, k, v, keep):  # renormalised: right until a masked key takes all the mass
    p = torch.softmax(_scaled(q, k).float(), dim=-1) * keep
    return ((p / p.sum(-1, keepdim=True).clamp_min(1e-30)) @ v.float()).to(v.dtype)


def sdpa_causal(q, k, v, keep):  # a causal mask of its own, keep ignored: right only where keep is causal
    return F.scaled_dot_product_attention(q[None], k[None], v[None], is_causal=True)[0]


def own_tril_mask(q, k, v, keep):  # the same mistake by hand
    causal = torch.ones(len(q), len(k), dtype=torch.bool, device=q.device).tril()
    return right(q, k, v, causal).nan_to_num()


def keep_and_tril(q, k, v, keep):  # keep, and a causal mask on top of it
    return right(q, k, v, keep & torch.ones_like(keep).tril())


def scale_by_tokens(q, k, v, keep):  # 1/sqrt of the token count instead of the head dim
    return _attend((q @ k.T * len(q) ** -0.5).masked_fill(~keep, F16_MIN), v)


# correct variants the check must accept


def sdpa_bool_mask(q, k, v, keep):
    return F.scaled_dot_product_attention(q[None], k[None], v[None], attn_mask=keep[None])[0].nan_to_num()


def fill_inf_then_zero_nan(q, k, v, keep):
    p = torch.softmax(_scaled(q, k).masked_fill(~keep, float("-inf")).float(), dim=-1).nan_to_num()
    return (p @ v.float()).to(v.dtype)


def fill_with_where(q, k, v, keep):
    return _attend(torch.where(keep, _scaled(q, k), F16_MIN), v)


def additive_in_fp32(q, k, v, keep):  # an additive mask is fine where the scores are FP32
    return _attend(_scaled(q, k).float() + (~keep).float() * torch.finfo(torch.float32).min, v)


def fill_fp32_scores_1e9(q, k, v, keep):
    return _attend(_scaled(q, k).float().masked_fill(~keep, -1e9), v)


def test_attention_check_accepts_the_fix_and_sdpa(capsys):
    check_attention(right)
    assert capsys.readouterr().out == "✓ correct\n"  # the verdict once, nothing else

    def sdpa(q, k, v, keep):
        return F.scaled_dot_product_attention(q[None].float(), k[None].float(), v[None].float(),
                                              attn_mask=keep[None])[0].nan_to_num().to(v.dtype)
    check_attention(sdpa)


@pytest.mark.parametrize("answer", [sdpa_bool_mask, fill_inf_then_zero_nan, fill_with_where,
                                    additive_in_fp32, fill_fp32_scores_1e9])
def test_attention_check_accepts_correct_mask_variants(answer, capsys):
    check_attention(answer)
    assert capsys.readouterr().out == "✓ correct\n"


@pytest.mark.parametrize(("answer", "match"), [
    (additive_fp16_min, r"whose scores are all below -16: in FP16, score \+ finfo\(float16\).min rounds to -inf"),
    (additive_1e4, "a mask value such as -1e4 that is not below every score"),
    (fill_1e4, "a mask value such as -1e4 that is not below every score"),
    (fill_1e9, r"raised RuntimeError: .*without overflow: the mask value does not fit the scores' dtype"),
    (fill_fp32_min, r"raised RuntimeError: .*without overflow: the mask value does not fit the scores' dtype"),
    (mask_after_softmax, "the mask is applied after the softmax"),
    (mask_after_softmax_renormalised, "A mask applied after the softmax fails there"),
])
def test_attention_check_rejects_mask_mistakes(answer, match):
    """Masking mistakes the check used to pass (or, for masked_fill's overflow, showed as the checker's traceback)."""
    with pytest.raises(AssertionError, match=match) as info:
        check_attention(answer)
    shown = "".join(info.value._render_traceback_())
    assert shown.startswith("✗ ") and "def " not in shown  # the hint alone, none of the checker's code


def test_mask_cases_hold_their_premise():
    """PyTorch itself says what each new case is there for: SDPA (boolean mask) is the oracle."""
    cpu = torch.device("cpu")
    q, k, v, keep = l07._negative_padded_row(cpu)
    assert (_scaled(q, k)[-1] < -16).all()  # the padded row's FP16 scores: all below -16 ...
    assert not torch.isfinite(additive_fp16_min(q, k, v, keep)[-1].float()).any()  # ... so the additive mask is NaN
    q, k, v, keep = l07._negative_only_key(cpu)
    sdpa = F.scaled_dot_product_attention(q[None].float(), k[None].float(), v[None].float(), attn_mask=keep[None])[0]
    assert torch.allclose(sdpa[0], v[0].float())  # the first query's output is its one key's value
    assert _scaled(q, k)[0, 0] < -1.1e4 < _scaled(q, k)[0, 1:].max()  # a -1e4 mask leaves masked keys above it
    assert not torch.allclose(fill_1e4(q, k, v, keep)[0].float(), v[0].float(), atol=1.0)


@pytest.mark.parametrize(("answer", "match"), [
    (None, "write a function"),
    (no_scale, r"without the 1/sqrt\(d\) scale"),
    (no_scale_fp16, r"without the 1/sqrt\(d\) scale"),
    (inf_mask, "scores are all -inf"),
    (sdpa_causal, "a causal mask of its own to keep, or uses one instead of keep"),
    (own_tril_mask, "a causal mask of its own to keep, or uses one instead of keep"),
    (keep_and_tril, "a causal mask of its own to keep, or uses one instead of keep"),
    (scale_by_tokens, r"scaled by 1/sqrt\(tokens\) instead of 1/sqrt\(d\)"),
    (scale_after, "overflows FP16"),
    (wrong_dim, "the softmax over the keys"),
    (inverted_mask, "the mask the right way round"),
    (scale_typed_in, r"scaled by 1/8 instead of 1/sqrt\(d\) \(d = 16 here\): take d from q.shape\[-1\]"),
    (scale_twice, r"scaled by 1/d instead of 1/sqrt\(d\) \(d = 64 here\).*scale once"),
    (scale_by_d, r"scaled by 1/d instead of 1/sqrt\(d\)"),
    (fp32_out, "return the inputs' dtype"),
])
def test_attention_check_rejects_typical_bugs(answer, match):
    with pytest.raises(AssertionError, match=match):
        check_attention(answer)


def test_attention_check_judges_several_head_dims():
    """All cases used d = 64, where a typed-in q / 8 is right: the order-1 case now runs at other head dims too,
    and a wrong scale is named as such, not as a mask mistake."""
    assert 64 in l07.HEAD_DIMS and len(l07.HEAD_DIMS) >= 3
    for answer in (scale_typed_in, scale_twice, scale_by_d):
        with pytest.raises(AssertionError) as info:
            check_attention(answer)
        assert "mask" not in str(info.value) and "instead of 1/sqrt(d)" in str(info.value)


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
