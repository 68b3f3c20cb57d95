"""Tests of fp16lab.gpt and fp16lab.lm_data: PyTorch (a hand-written attention, FlopCounterMode) and numpy are the oracles."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from fp16lab.align import pad_layers
from fp16lab.gpt import (
    GPT,
    PRESETS,
    GPTConfig,
    flops_per_token,
    kv_cache_bytes,
    lm_loss,
    matmul_params,
    param_count,
    preset,
)
from fp16lab.lm_data import SyntheticLanguage

SMALL = GPTConfig(vocab_size=61, d_model=32, n_layers=2, n_heads=4, seq_len=24, vocab_multiple=8)


def _model(cfg: GPTConfig = SMALL, seed: int = 0) -> GPT:
    torch.manual_seed(seed)
    return GPT(cfg).eval()


def _manual_forward(model: GPT, idx: torch.Tensor) -> torch.Tensor:
    """The same network written out by hand: explicit scores, -inf causal mask, softmax."""
    cfg = model.cfg
    B, T = idx.shape
    x = model.wte.weight[idx] + model.wpe.weight[:T]
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    for blk in model.h:
        h = F.layer_norm(x, (cfg.d_model,), blk.ln1.weight, blk.ln1.bias)
        q, k, v = (h @ blk.attn.qkv.weight.T).split(cfg.d_model, -1)
        q, k, v = (t.view(B, T, cfg.n_heads, cfg.head_dim).transpose(1, 2) for t in (q, k, v))
        scores = (q @ k.transpose(-1, -2)) / math.sqrt(cfg.head_dim)
        att = scores.masked_fill(~mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, cfg.d_model)
        x = x + y @ blk.attn.proj.weight.T
        h = F.layer_norm(x, (cfg.d_model,), blk.ln2.weight, blk.ln2.bias)
        x = x + F.gelu(h @ blk.mlp.fc.weight.T) @ blk.mlp.proj.weight.T
    x = F.layer_norm(x, (cfg.d_model,), model.ln_f.weight, model.ln_f.bias)
    return (x @ model.lm_head.weight.T)[..., : cfg.vocab_size]


# ------------------------------------------------------------------------------------ model


def test_shapes_loss_and_padded_vocab() -> None:
    model = _model()
    assert SMALL.padded_vocab == 64 and model.wte.weight.shape == (64, 32)
    assert model.lm_head.weight is model.wte.weight  # tied
    idx = torch.randint(0, 61, (3, 24))
    logits = model(idx)
    assert logits.shape == (3, 24, 61)
    targets = torch.randint(0, 61, (3, 24))
    logits2, loss = model(idx, targets)
    assert torch.equal(logits, logits2) and loss.shape == ()
    assert torch.allclose(loss, F.cross_entropy(logits.reshape(-1, 61), targets.reshape(-1)))
    assert abs(loss.item() - math.log(61)) < 0.2  # GPT-2 init: near-uniform predictions


@pytest.mark.parametrize(
    "cfg",
    [SMALL, GPTConfig(), GPTConfig(tie_weights=False, bias=True, vocab_size=50, vocab_multiple=16),
     GPTConfig(bias=True, mlp_ratio=2)],
)
def test_param_count_formula_matches_the_module(cfg: GPTConfig) -> None:
    model = GPT(cfg)
    assert param_count(cfg) == model.param_count() == sum(p.numel() for p in model.parameters())


def test_attention_matches_a_hand_written_causal_oracle() -> None:
    model = _model()
    idx = torch.randint(0, 61, (2, 24))
    with torch.no_grad():
        got, want = model(idx), _manual_forward(model, idx)
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-4)


def test_causal_future_tokens_do_not_change_past_logits() -> None:
    model = _model()
    idx = torch.randint(0, 61, (2, 24))
    changed = idx.clone()
    changed[:, 12:] = (changed[:, 12:] + 7) % 61
    with torch.no_grad():
        a, b = model(idx), model(changed)
    torch.testing.assert_close(a[:, :12], b[:, :12])
    assert (a[:, 12:] - b[:, 12:]).abs().max() > 1e-3  # and the later ones do change


def test_kv_cache_decode_equals_full_forward() -> None:
    model = _model()
    idx = torch.randint(0, 61, (3, 20))
    with torch.no_grad():
        full = model(idx)
        model.setup_cache(3, 24)
        assert model.h[0].attn.k_cache.shape == (3, 4, 24, 8)
        parts = [model(idx[:, :7], input_pos=torch.arange(7))]  # prefill
        parts += [model.decode_step(idx[:, t : t + 1], torch.tensor([t])) for t in range(7, 20)]
    torch.testing.assert_close(torch.cat(parts, 1), full, atol=1e-5, rtol=1e-4)
    assert "h.0.attn.k_cache" not in model.state_dict()  # the cache is not a weight
    model.drop_cache()
    assert model.h[0].attn.k_cache is None and model.causal_mask is None


def test_generate_greedy_equals_recomputing_the_full_forward() -> None:
    model = _model()
    prompt = torch.randint(0, 61, (2, 5))
    out = model.generate(prompt, 9)
    assert out.shape == (2, 14) and torch.equal(out[:, :5], prompt)
    seq = prompt
    with torch.no_grad():
        for _ in range(9):
            seq = torch.cat([seq, model(seq)[:, -1].argmax(-1, keepdim=True)], 1)
    assert torch.equal(out, seq)
    calls = []
    model.generate(prompt, 4, step=lambda tok, pos: calls.append(int(pos)) or model.decode_step(tok, pos))
    assert calls == [5, 6, 7]  # a compiled/graphed step can be passed in; positions are tensors
    g = torch.Generator().manual_seed(0)
    sampled = model.generate(prompt, 6, temperature=1.0, generator=g)
    assert sampled.shape == (2, 11) and int(sampled.max()) < 61


def test_cache_errors() -> None:
    model = _model()
    with pytest.raises(ValueError, match="setup_cache"):
        model(torch.zeros(1, 1, dtype=torch.long), input_pos=torch.tensor([0]))
    with pytest.raises(ValueError, match="max_len must be <= seq_len=24"):
        model.setup_cache(1, 25)
    with pytest.raises(ValueError, match="idx has 25 positions"):
        model(torch.zeros(1, 25, dtype=torch.long))


def test_pad_layers_from_lesson_03_keeps_the_function() -> None:
    cfg = GPTConfig(vocab_size=61, d_model=32, n_layers=1, n_heads=4, seq_len=8)
    model = _model(cfg)
    idx = torch.randint(0, 61, (2, 8))
    with torch.no_grad():
        before = model(idx)
        pad_layers(model, ["wte", "lm_head"], 64)
        after = model(idx)
    assert model.wte.weight.shape[0] == 64 and model.lm_head.weight is model.wte.weight
    torch.testing.assert_close(after, before)


# ------------------------------------------------------------------------------------ FLOPs


@pytest.mark.parametrize("training", [True, False])
def test_flops_per_token_matches_pytorchs_flop_counter(training: bool) -> None:
    cfg = GPTConfig(vocab_size=64, d_model=32, n_layers=2, n_heads=2, seq_len=16)
    model = GPT(cfg)
    idx = torch.randint(0, 64, (3, 16))
    counter = FlopCounterMode(display=False)
    with sdpa_kernel(SDPBackend.MATH), counter:  # the math kernel is plain bmm: counted in full
        logits = model(idx)
        if training:
            logits.sum().backward()
    assert counter.get_total_flops() == flops_per_token(cfg, training=training) * 3 * 16
    n = matmul_params(cfg)
    assert flops_per_token(cfg) == 6 * n + 12 * 2 * 16 * 32  # 6·N + 12·L·T·d
    assert flops_per_token(cfg, seq_len=8) < flops_per_token(cfg)


def test_presets_and_helpers() -> None:
    assert PRESETS["large"].d_model >= 1024 and PRESETS["base"].d_model >= 1024
    assert round(param_count(PRESETS["large"]) / 1e6) == 541  # the H200 probe's model
    assert param_count(PRESETS["1b"]) > 1e9
    assert preset("tiny", n_layers=3).n_layers == 3
    assert kv_cache_bytes(SMALL, 3, 24, torch.float16) == 2 * 2 * 3 * 24 * 32 * 2
    with pytest.raises(ValueError, match="unknown preset 'huge'"):
        preset("huge")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"d_model": 30}, "multiple of n_heads=4, got 30"), ({"n_layers": 0}, "n_layers must be an int >= 1, got 0"),
     ({"vocab_size": True}, "vocab_size must be an int"), ({"dropout": 1.0}, "dropout must be"),
     ({"tie_weights": 1}, "tie_weights must be True or False")],
)
def test_config_rejects_bad_values(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        GPTConfig(**kwargs)
    with pytest.raises(ValueError, match="training must be True or False"):
        flops_per_token(SMALL, training=1)  # type: ignore[arg-type]


def test_lm_loss_is_fp32_cross_entropy() -> None:
    logits = torch.randn(2, 5, 7).to(torch.bfloat16)
    targets = torch.randint(0, 7, (2, 5))
    loss = lm_loss(logits, targets)
    assert loss.dtype == torch.float32
    torch.testing.assert_close(loss, F.cross_entropy(logits.float().reshape(-1, 7), targets.reshape(-1)))


# ------------------------------------------------------------------------------- language


def test_entropy_floor_closed_form() -> None:
    lang = SyntheticLanguage(vocab=50, order=2, branching=5, temperature=0.7)
    p = np.exp(-np.arange(5) / 0.7)
    p /= p.sum()
    assert lang.entropy_floor == pytest.approx(float(-(p * np.log(p)).sum()), rel=1e-12)
    assert SyntheticLanguage(branching=4, temperature=1e6).entropy_floor == pytest.approx(math.log(4), rel=1e-5)


def test_entropy_floor_against_an_empirical_estimate() -> None:
    # Count (context, next) pairs in samples and compute the plug-in conditional entropy with numpy.
    lang = SyntheticLanguage(vocab=8, order=1, branching=3, temperature=1.0, seed=3)
    x, y = lang.batch(4000, 32, generator=torch.Generator().manual_seed(0))
    counts = np.zeros((8, 8))
    np.add.at(counts, (x.numpy().ravel(), y.numpy().ravel()), 1)
    joint = counts / counts.sum()
    cond = counts / counts.sum(1, keepdims=True).clip(min=1)
    with np.errstate(divide="ignore", invalid="ignore"):
        h = -np.nansum(joint * np.where(cond > 0, np.log(cond), 0.0))
    assert h == pytest.approx(lang.entropy_floor, abs=0.01)
    assert ((counts > 0).sum(1) <= 3).all()  # sparse: at most `branching` successors per context
    nll = lang.nll(x, y)  # the true model's loss on the same data
    assert torch.isfinite(nll).all() and nll.mean().item() == pytest.approx(lang.entropy_floor, abs=0.01)


def test_batch_layout_and_determinism() -> None:
    lang = SyntheticLanguage(vocab=64, order=2)
    x, y = lang.batch(5, 12, generator=torch.Generator().manual_seed(1))
    assert x.shape == y.shape == (5, 12) and x.dtype == torch.int64
    assert (x[:, 0] == 0).all() and torch.equal(x[:, 1:], y[:, :-1])  # start token, shifted targets
    x2, _ = lang.batch(5, 12, generator=torch.Generator().manual_seed(1))
    assert torch.equal(x, x2)
    assert torch.isfinite(lang.nll(x, y)).all()  # every target is a legal successor of its context


def test_successors_distinct_and_table_equals_hash() -> None:
    lang = SyntheticLanguage(vocab=50257, order=2, branching=4)  # too many contexts for a table: hashed
    succ = lang.successors(torch.randint(0, 50257, (20000, 2)))
    assert (succ.sort(-1).values.diff(dim=-1) != 0).all()
    small = SyntheticLanguage(vocab=16, order=3, branching=4)
    table = small._table(torch.device("cpu"))
    ctx = torch.randint(0, 16, (100, 3))
    index = (ctx[:, 0] * 16 + ctx[:, 1]) * 16 + ctx[:, 2]
    assert torch.equal(table[index], small.successors(ctx))
    x, y = lang.batch(2, 6)  # the hashed path samples too
    assert torch.isfinite(lang.nll(x, y)).all()


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"vocab": 2}, "vocab must be an int >= 3, got 2"), ({"branching": 64}, "branching must be <= vocab - 1 = 63"),
     ({"temperature": 0}, "temperature must be a finite number > 0, got 0"), ({"order": True}, "order must be an int")],
)
def test_language_rejects_bad_values(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        SyntheticLanguage(**kwargs)


@pytest.fixture
def one_thread():
    """Tiny models run faster on one thread (and do not thrash a shared CPU)."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def test_a_tiny_gpt_learns_the_language(one_thread: None) -> None:
    lang = SyntheticLanguage(vocab=16, order=1, branching=3)
    cfg = GPTConfig(vocab_size=16, d_model=32, n_layers=1, n_heads=2, seq_len=32)
    torch.manual_seed(0)
    model = GPT(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(0)
    x, y = lang.batch(16 * 40, 32, generator=g)
    for step in range(40):
        _, loss = model(x[16 * step : 16 * (step + 1)], y[16 * step : 16 * (step + 1)])
        opt.zero_grad()
        loss.backward()
        opt.step()
    ex, ey = lang.batch(64, 32, generator=g)
    with torch.no_grad():
        excess = model(ex, ey)[1].item() - lang.entropy_floor
    assert 0 < excess < 0.2 * (math.log(16) - lang.entropy_floor)  # most of the learnable gap closed
