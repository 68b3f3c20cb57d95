"""Tests of fp16lab.gpt and fp16lab.data: PyTorch (a hand-written attention, FlopCounterMode) and numpy are the oracles."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from fp16lab.align import pad_layers
from fp16lab.data import SyntheticLanguage
from fp16lab.gpt import (
    GPT,
    PRESETS,
    GPTConfig,
    attention_flops,
    flops_per_token,
    kv_cache_bytes,
    lm_loss,
    matmul_params,
    param_count,
    preset,
)

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
    for tiny in (1e-6, 1e-30, 1e-40, 5e-45):  # a near-zero temperature samples the argmax, never NaN probabilities
        g = torch.Generator().manual_seed(0)
        assert torch.equal(model.generate(prompt, 9, temperature=tiny, generator=g), out)
    g1, g2 = torch.Generator().manual_seed(3), torch.Generator().manual_seed(3)
    assert torch.equal(model.generate(prompt, 6, temperature=0.7, generator=g1), _sample_by_hand(model, prompt, 6, 0.7, g2))


def _sample_by_hand(model, prompt, new, temperature, generator):
    """Temperature sampling without the cache, PyTorch's softmax as the oracle."""
    seq = prompt
    with torch.no_grad():
        for _ in range(new):
            probs = torch.softmax(model(seq)[:, -1].float() / temperature, -1)
            seq = torch.cat([seq, torch.multinomial(probs, 1, generator=generator)], 1)
    return seq


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


@pytest.mark.parametrize("training", [True, False])
def test_causal_flops_count_only_the_pairs_the_mask_keeps(training: bool) -> None:
    cfg = GPTConfig(vocab_size=64, d_model=32, n_layers=3, n_heads=2, seq_len=10)
    T, d, L = cfg.seq_len, cfg.d_model, cfg.n_layers
    pairs = int(torch.ones(T, T).tril().sum())  # query i sees keys 0..i: counted by hand from the mask
    per_pair = 2 * 2 * d * (3 if training else 1)  # QK^T and PV, 2 FLOPs per multiply-add, backward twice
    by_hand = (3 if training else 1) * 2 * matmul_params(cfg) + L * pairs * per_pair / T
    assert flops_per_token(cfg, training=training, causal=True) == by_hand
    full = flops_per_token(cfg, training=training)
    assert flops_per_token(cfg, training=training, causal=False) == full
    assert full - flops_per_token(cfg, training=training, causal=True) == L * (T * T - pairs) * per_pair / T
    assert attention_flops(2, 3, T, 8) == 2 * 3 * pairs * 4 * 8 * 3
    assert attention_flops(2, 3, T, 8, causal=False, training=False) == 2 * 3 * T * T * 4 * 8
    with pytest.raises(ValueError, match="causal must be True or False"):
        flops_per_token(cfg, causal="yes")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="head_dim must be an int >= 1, got 0"):
        attention_flops(1, 1, 4, 0)


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


def test_lm_loss_leaves_out_the_ignore_index_as_pytorch_does() -> None:
    logits = torch.randn(2, 5, 7)
    targets = torch.randint(0, 7, (2, 5))
    targets[0, 3:] = -100                                   # padding, as Hugging Face labels mark it
    want = F.cross_entropy(logits.reshape(-1, 7), targets.reshape(-1), ignore_index=-100)
    torch.testing.assert_close(lm_loss(logits, targets, ignore_index=-100), want)
    kept = targets != -100
    torch.testing.assert_close(want, F.cross_entropy(logits[kept], targets[kept]))  # the mean of the others
    targets[targets == -100] = 9                            # any id outside the vocabulary will do
    torch.testing.assert_close(lm_loss(logits, targets, ignore_index=9), want)


@pytest.mark.parametrize(
    ("ignore_index", "targets", "match"),
    [(3, torch.zeros(2, 4, dtype=torch.long), "ignore_index must be None or an int outside the vocabulary 0 .. 60"),
     (True, torch.zeros(2, 4, dtype=torch.long), "ignore_index must be None or an int.*got True"),
     (-100.0, torch.zeros(2, 4, dtype=torch.long), "got -100.0"),
     (-100, torch.full((2, 4), -100), "every target equals ignore_index=-100"),
     (-100, torch.tensor([[0, -100, 61, 1], [2, 2, 2, 2]]), "targets holds 61"),
     (-1, torch.tensor([[0, -100, 1, 1], [2, 2, 2, 2]]), "targets holds -100")],
)
def test_lm_loss_refuses_a_bad_ignore_index_or_targets_it_does_not_cover(ignore_index, targets, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        lm_loss(torch.randn(2, 4, 61), targets, ignore_index=ignore_index)


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


# ------------------------------------------------------------------ bad input (issue 14): named, before any work


def test_config_stores_numpy_ints_as_ints_and_presets_refuse_unknown_fields() -> None:
    cfg = GPTConfig(vocab_size=np.int64(16), d_model=np.int32(16), n_heads=np.int64(2), dropout=0)
    assert type(cfg.vocab_size) is int and type(cfg.d_model) is int and type(cfg.dropout) is float
    assert cfg == GPTConfig(vocab_size=16, d_model=16, n_heads=2)
    with pytest.raises(ValueError, match="unknown field.*n_embd.*allowed: vocab_size"):
        preset("tiny", n_embd=32)
    with pytest.raises(ValueError, match="unknown preset"):
        preset(["tiny"])  # type: ignore[arg-type]


@pytest.mark.parametrize("fn", [matmul_params, param_count, flops_per_token, lambda c: kv_cache_bytes(c, 1)])
@pytest.mark.parametrize("bad", [None, {"d_model": 32}, "tiny"])
def test_config_helpers_refuse_what_is_not_a_config(fn, bad) -> None:
    with pytest.raises(ValueError, match="cfg must be a GPTConfig"):
        fn(bad)


@pytest.mark.parametrize(
    ("call", "match"),
    [(lambda: flops_per_token(SMALL, seq_len=25), "seq_len must be <= seq_len=24"),
     (lambda: kv_cache_bytes(SMALL, 1, 25), "max_len must be <= seq_len=24"),
     (lambda: kv_cache_bytes(SMALL, 1, None, "bf16"), "dtype must be a floating-point torch.dtype"),
     (lambda: kv_cache_bytes(SMALL, 1, None, torch.int64), "dtype must be a floating-point"),
     (lambda: kv_cache_bytes(SMALL, True), "batch must be an int")],
)
def test_flops_and_cache_bytes_refuse_what_the_model_cannot_run(call, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call()


@pytest.mark.parametrize(
    ("idx", "match"),
    [(torch.zeros(2, 4), "idx must hold integer ids"), (torch.zeros(2, 4, dtype=torch.bool), "idx must hold integer"),
     (torch.full((2, 4), 61), r"idx holds 61, outside the allowed 0 \.\. 60"),  # padded rows (64) are not ids
     (torch.full((2, 4), -1), "idx holds -1"), (torch.zeros(8, dtype=torch.long), "idx must have 2 dimension"),
     (torch.zeros(1, 2, 4, dtype=torch.long), "idx must have 2 dimension"), ([[1, 2]], "idx must be a tensor"),
     (torch.zeros(1, 25, dtype=torch.long), "idx has 25 positions")],
)
def test_forward_refuses_bad_token_ids_by_name(idx, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        _model()(idx)


@pytest.mark.parametrize(
    ("targets", "match"),
    [(torch.zeros(2, 4), "targets must hold integer ids"), (torch.full((2, 4), 61), "targets holds 61"),
     (torch.full((2, 4), -100), "targets holds -100"), (torch.zeros(2, 3, dtype=torch.long), "targets must have the shape"),
     (torch.zeros(8, dtype=torch.long), "targets must have the shape"), ([1, 2], "targets must be a tensor")],
)
def test_loss_refuses_bad_targets_by_name(targets, match: str) -> None:
    idx = torch.zeros(2, 4, dtype=torch.long)
    with pytest.raises(ValueError, match=match):
        _model()(idx, targets)
    with pytest.raises(ValueError, match=match):
        lm_loss(torch.randn(2, 4, 61), targets)


@pytest.mark.parametrize(
    ("logits", "targets", "match"),
    [([[0.0]], torch.zeros(1, dtype=torch.long), "logits must be a floating-point tensor"),
     (torch.zeros(2, 3, dtype=torch.long), torch.zeros(2, dtype=torch.long), "logits must be a floating-point"),
     (torch.zeros(0, 3, 7), torch.zeros(0, 3, dtype=torch.long), "targets is empty")],
)
def test_lm_loss_refuses_bad_logits_and_empty_batches(logits, targets, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        lm_loss(logits, targets)


@pytest.mark.parametrize(
    ("token", "pos", "match"),
    [(torch.zeros(2, 1, dtype=torch.long), torch.tensor([8]), "input_pos holds 8, outside the allowed 0 .. 7"),
     (torch.zeros(2, 1, dtype=torch.long), torch.tensor([-1]), "input_pos holds -1"),
     (torch.zeros(2, 1, dtype=torch.long), torch.tensor([1.0]), "input_pos must hold integer"),
     (torch.zeros(2, 1, dtype=torch.long), 1, "input_pos must be a tensor"),
     (torch.zeros(3, 1, dtype=torch.long), torch.tensor([0]), r"must match the KV cache: idx \(batch=2"),
     (torch.zeros(2, 2, dtype=torch.long), torch.tensor([0]), "must match the KV cache"),
     (torch.full((2, 1), 99), torch.tensor([0]), "idx holds 99")],
)
def test_decode_step_refuses_bad_tokens_and_positions(token, pos, match: str) -> None:
    model = _model()
    model.setup_cache(2, 8)
    before = model.h[0].attn.k_cache.clone()
    with pytest.raises(ValueError, match=match):
        model.decode_step(token, pos)
    assert torch.equal(model.h[0].attn.k_cache, before)  # nothing written into the cache


@pytest.mark.parametrize(("dtype", "match"), [("bf16", "dtype must be a floating-point"), (torch.int64, "dtype must be"),
                                              (torch.bool, "dtype must be")])
def test_setup_cache_refuses_non_float_dtypes(dtype, match: str) -> None:
    model = _model()
    with pytest.raises(ValueError, match=match):
        model.setup_cache(1, dtype=dtype)
    assert model.causal_mask is None


@pytest.mark.parametrize(
    ("prompt", "new", "kwargs", "match"),
    [(torch.zeros(1, 3, dtype=torch.long), -1, {}, "max_new_tokens must be an int >= 1, got -1"),
     (torch.zeros(1, 3, dtype=torch.long), 0, {}, "max_new_tokens must be an int >= 1"),
     (torch.zeros(1, 3, dtype=torch.long), 2.0, {}, "max_new_tokens must be an int"),
     (torch.zeros(1, 3, dtype=torch.long), 22, {}, r"max_new_tokens must be <= seq_len - prompt length = 24 - 3 = 21"),
     (torch.zeros(1, 24, dtype=torch.long), 1, {}, "idx has 24 prompt tokens"),
     (torch.zeros(1, 3, dtype=torch.long), 2, {"temperature": float("nan")}, "temperature must be a finite number"),
     (torch.zeros(1, 3, dtype=torch.long), 2, {"temperature": -1.0}, "temperature must be"),
     (torch.zeros(1, 3, dtype=torch.long), 2, {"temperature": True}, "temperature must be"),
     (torch.zeros(1, 3, dtype=torch.long), 2, {"temperature": 1.0, "generator": 0}, "generator must be None or a torch"),
     (torch.zeros(1, 3, dtype=torch.long), 2, {"step": "fast"}, "step must be None or a function"),
     (torch.zeros(1, 0, dtype=torch.long), 2, {}, "at least one prompt token"),
     (torch.zeros(1, 3), 2, {}, "idx must hold integer ids"), (torch.full((1, 3), 61), 2, {}, "idx holds 61"),
     (torch.zeros(3, dtype=torch.long), 2, {}, "idx must have 2 dimension"), ([[0, 1]], 2, {}, "idx must be a tensor")],
)
def test_generate_refuses_bad_arguments_and_keeps_the_cache(prompt, new, kwargs, match: str) -> None:
    model = _model()
    model.setup_cache(1, 4)
    cache = model.h[0].attn.k_cache
    with pytest.raises(ValueError, match=match):
        model.generate(prompt, new, **kwargs)
    assert model.h[0].attn.k_cache is cache  # a refused call replaced nothing


def test_generate_accepts_numpy_ints_and_fills_the_context_exactly() -> None:
    model = _model()
    assert model.generate(torch.zeros(1, 3, dtype=torch.long), np.int64(21)).shape == (1, 24)


@pytest.mark.parametrize(
    ("call", "match"),
    [(lambda lang: lang.batch(0, 4), "batch must be an int >= 1, got 0"),
     (lambda lang: lang.batch(True, 4), "batch must be an int"),
     (lambda lang: lang.sample(2, 5, device="gpu"), "device 'gpu' is not a device"),
     (lambda lang: lang.sample(2, 5, device=None), "device must be a str or torch.device"),
     (lambda lang: lang.sample(2, 5, generator="g"), "generator must be None or a torch.Generator"),
     (lambda lang: lang.successors([[1, 2]]), "context must be a tensor"),
     (lambda lang: lang.successors(torch.tensor([[1, 64]])), "context holds 64, outside the allowed 0 .. 63"),
     (lambda lang: lang.successors(torch.tensor([[1.0, 2.0]])), "context must hold integer ids"),
     (lambda lang: lang.nll(torch.zeros(2, 4), torch.zeros(2, 4, dtype=torch.long)), "inputs must hold integer ids"),
     (lambda lang: lang.nll(torch.zeros(2, 4, dtype=torch.long), torch.zeros(2, 4)), "targets must hold integer ids"),
     (lambda lang: lang.nll(torch.full((2, 4), 64), torch.zeros(2, 4, dtype=torch.long)), "inputs holds 64"),
     (lambda lang: lang.nll([[0]], [[0]]), "inputs must be a tensor")],
)
def test_language_methods_refuse_bad_arguments_by_name(call, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        call(SyntheticLanguage())


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
def test_language_refuses_a_device_this_machine_lacks() -> None:
    with pytest.raises(ValueError, match="device 'cuda' requested but no CUDA GPU"):
        SyntheticLanguage().batch(2, 4, device="cuda")


def test_language_stores_numpy_ints_as_ints() -> None:
    lang = SyntheticLanguage(vocab=np.int64(16), order=np.int32(1))
    assert type(lang.vocab) is int and type(lang.order) is int and lang == SyntheticLanguage(vocab=16, order=1)
