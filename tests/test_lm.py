"""Tests of fp16lab.labs.transformers.lm and fp16lab.labs.transformers.optim: torch.optim.AdamW, exact arithmetic and PyTorch's own kernels are the oracles."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from fp16lab.data import SyntheticLanguage
from fp16lab.gpt import GPT, GPTConfig, flops_per_token
from fp16lab.labs.transformers.lm import (
    lm_batches,
    lm_throughput,
    saved_activation_bytes,
    sdpa_default_kernel,
    sdpa_kernel_ran,
    state_bytes,
    train_lm,
    warmup_cosine,
)
from fp16lab.labs.transformers.optim import AdamW16

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
CFG = GPTConfig(vocab_size=16, d_model=16, n_layers=1, n_heads=2, seq_len=16)
LANG = SyntheticLanguage(vocab=16, order=1, branching=3)


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny models run faster on one thread (and do not thrash a shared CPU)."""
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


# -------------------------------------------------------------------------------- AdamW16


@pytest.mark.parametrize("update", ["nearest", "kahan", "master"])
def test_adamw16_on_fp32_weights_is_torch_adamw(update: str) -> None:
    torch.manual_seed(0)
    a = nn.Parameter(torch.randn(50))
    b = nn.Parameter(a.detach().clone())
    ours = AdamW16([a], lr=1e-2, weight_decay=0.1, update=update)
    ref = torch.optim.AdamW([b], lr=1e-2, weight_decay=0.1)
    for _ in range(20):
        g = torch.randn(50)
        a.grad, b.grad = g.clone(), g.clone()
        ours.step()
        ref.step()
    torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)


def _constant_gradient(update: str, steps: int = 100) -> tuple[float, float]:
    w = nn.Parameter(torch.ones(64, dtype=torch.bfloat16))
    opt = AdamW16([w], lr=1e-3, update=update)
    for _ in range(steps):
        w.grad = torch.ones_like(w)
        opt.step()
    return w.float().mean().item(), float(opt.rounded_away)


def test_bf16_updates_below_half_a_spacing_are_lost_and_kahan_or_master_keep_them() -> None:
    # bf16 spacing just below 1.0 is 2**-8; each update is 1e-3 (Adam on a constant gradient)
    w, lost = _constant_gradient("nearest")
    assert w == 1.0 and lost == 1.0
    w, _ = _constant_gradient("kahan")
    assert abs(w - 0.9) <= 2**-8
    w, _ = _constant_gradient("master")
    assert w == torch.tensor(0.9).to(torch.bfloat16).item()  # the exact value, rounded once


def test_kahan_tracks_an_fp32_trajectory_better_than_rounding() -> None:
    torch.manual_seed(0)
    init = torch.randn(2000) * 0.5
    grads = [torch.randn(2000) for _ in range(200)]
    exact = nn.Parameter(init.clone())
    ref = AdamW16([exact], lr=3e-4, update="nearest")  # FP32 weights: no rounding issue
    results = {}
    for update in ("nearest", "kahan", "master"):
        w = nn.Parameter(init.to(torch.bfloat16))
        opt = AdamW16([w], lr=3e-4, update=update)
        for g in grads:
            w.grad = g.to(torch.bfloat16)
            opt.step()
        results[update] = w
    for g in grads:
        exact.grad = g.to(torch.bfloat16).float()
        ref.step()
    err = {u: (w.float() - exact).abs().mean().item() for u, w in results.items()}
    assert err["kahan"] < 0.3 * err["nearest"] and err["master"] < 0.3 * err["nearest"]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"update": "stochastic"}, "update must be one of 'nearest', 'kahan', 'master'; got 'stochastic'"),
     ({"lr": -1.0}, "lr must be a finite number >= 0, got -1.0"), ({"lr": True}, "lr must be"),
     ({"betas": (0.9, 1.0)}, "betas must be a pair")],
)
def test_adamw16_rejects_bad_arguments(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        AdamW16([nn.Parameter(torch.zeros(2))], **kwargs)


# ------------------------------------------------------------------------------ memory


@pytest.mark.parametrize(
    ("bf16", "make", "total"),
    [(False, lambda ps: torch.optim.AdamW(ps), 16.0), (True, lambda ps: torch.optim.AdamW(ps), 8.0),
     (True, lambda ps: AdamW16(ps, update="nearest"), 12.0), (True, lambda ps: AdamW16(ps, update="kahan"), 14.0),
     (True, lambda ps: AdamW16(ps, update="master"), 16.0)],
)
def test_state_bytes_per_parameter(bf16: bool, make, total: float) -> None:
    model = GPT(CFG)
    if bf16:
        model = model.to(torch.bfloat16)
    opt = make(model.parameters())
    x, y = LANG.batch(2, 16)
    model(x, y)[1].backward()
    opt.step()
    table = state_bytes(model, opt)
    assert table["bytes_per_param"].sum() == total
    n = sum(p.numel() for p in model.parameters())
    assert table["bytes"].sum() == total * n  # tied weights counted once, like parameters()


def test_saved_activation_bytes_scale_with_tokens_and_shrink() -> None:
    model = GPT(CFG)
    x, y = LANG.batch(4, 16)
    one = saved_activation_bytes(model, x[:2], y[:2])
    two = saved_activation_bytes(model, x, y)
    assert one > 0 and abs(two / one - 2) < 0.05  # activations grow with batch x tokens
    assert saved_activation_bytes(model, x, y, "bf16") < 0.9 * two
    model.checkpointing = True
    assert saved_activation_bytes(model, x, y) < 0.6 * two
    assert all(p.grad is None for p in model.parameters())  # it cleans up after itself
    big = nn.Sequential(nn.Embedding(16, 16), nn.Linear(16, 16))
    big[1].weight.data = torch.randn(16, 16)  # parameters are never counted as activations
    act = saved_activation_bytes(big, x, y)
    assert act < 16 * 16 * 4 * 100 and act >= x.numel() * 16 * 4  # at least the Linear's input


# ------------------------------------------------------------------------------ kernels


def test_sdpa_kernel_ran_names_the_kernel() -> None:
    q = torch.randn(1, 2, 8, 4)
    default = sdpa_kernel_ran(lambda: F.scaled_dot_product_attention(q, q, q, is_causal=True))
    assert default in ("flash (CPU)", "math")
    with sdpa_kernel(SDPBackend.MATH):
        assert sdpa_kernel_ran(lambda: F.scaled_dot_product_attention(q, q, q)) == "math"
    assert sdpa_kernel_ran(lambda: q + 1) == "none"


@CUDA
def test_sdpa_kernel_ran_on_cuda_fp32_never_flash() -> None:
    q = torch.randn(1, 2, 128, 64, device="cuda")
    assert sdpa_kernel_ran(lambda: F.scaled_dot_product_attention(q, q, q, is_causal=True)) not in ("flash", "cuDNN")
    if torch.cuda.get_device_capability() >= (8, 0):
        h = q.half()
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            assert sdpa_kernel_ran(lambda: F.scaled_dot_product_attention(h, h, h, is_causal=True)) == "flash"


@pytest.mark.parametrize(("capability", "dtype", "cudnn", "kernel"), [
    ((9, 0), torch.bfloat16, 92400, "cuDNN"),          # H100/H200: cuDNN attention first
    ((10, 0), torch.float16, 92400, "cuDNN"),          # B200
    ((9, 0), torch.float16, 91500, "flash"),           # cuDNN too old to be preferred
    ((9, 0), torch.float16, None, "flash"),            # no cuDNN
    ((8, 9), torch.float16, 92400, "flash"),           # RTX 4090D: flash
    ((8, 0), torch.bfloat16, 92400, "flash"),          # A100
    ((12, 0), torch.bfloat16, 92400, "flash"),         # RTX 50xx
    ((8, 9), torch.float32, 92400, "memory-efficient"),  # FP32: no flash, no cuDNN
    ((9, 0), torch.float32, 92400, "memory-efficient"),
    ((7, 5), torch.float16, 92400, "memory-efficient"),  # T4: no flash before sm_80
    ((7, 5), torch.bfloat16, 92400, "math"),           # T4: no BF16 kernel at all
    (None, torch.float16, 92400, "flash (CPU)"),
])
def test_sdpa_default_kernel_by_chip(capability, dtype, cudnn, kernel, monkeypatch) -> None:
    monkeypatch.delenv("TORCH_CUDNN_SDPA_DEPRIORITIZED", raising=False)
    assert sdpa_default_kernel(capability, dtype, cudnn_version=cudnn) == kernel


def test_sdpa_default_kernel_honours_the_deprioritize_switch(monkeypatch) -> None:
    monkeypatch.setenv("TORCH_CUDNN_SDPA_DEPRIORITIZED", "1")
    assert sdpa_default_kernel((9, 0), torch.float16, cudnn_version=92400) == "flash"


def test_sdpa_default_kernel_is_what_torch_runs_here() -> None:
    cap = torch.cuda.get_device_capability() if torch.cuda.is_available() else None
    dev = "cuda" if cap else "cpu"
    for dtype in (torch.float32, torch.float16) + ((torch.bfloat16,) if cap is None or cap >= (8, 0) else ()):
        q = torch.randn(1, 2, 128, 64, device=dev, dtype=dtype, requires_grad=True)
        ran = sdpa_kernel_ran(lambda q=q: F.scaled_dot_product_attention(q, q, q, is_causal=True))
        assert ran == sdpa_default_kernel(cap, dtype), dtype


@pytest.mark.parametrize(("args", "match"), [
    (((8,), torch.float16), r"capability must be None \(the CPU\) or a \(major, minor\) tuple"),
    (("sm_89", torch.float16), "capability must be None"),
    (((8, 9), torch.float64), "dtype must be torch.float16, torch.bfloat16 or torch.float32, got torch.float64"),
])
def test_sdpa_default_kernel_refuses_bad_arguments(args, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        sdpa_default_kernel(*args)


# ------------------------------------------------------------------------------ training


def test_lm_batches_are_deterministic() -> None:
    a = lm_batches(LANG, 3, 4, 16, seed=5)
    b = lm_batches(LANG, 3, 4, 16, seed=5)
    assert len(a) == 3 and a[0][0].shape == (4, 16)
    assert all(torch.equal(p[0], q[0]) and torch.equal(p[1], q[1]) for p, q in zip(a, b, strict=True))
    assert not torch.equal(a[0][0], lm_batches(LANG, 3, 4, 16, seed=6)[0][0])


def test_warmup_cosine() -> None:
    f = warmup_cosine(100, 10)
    assert f(0) == pytest.approx(0.1) and f(9) == pytest.approx(1.0) and f(10) == pytest.approx(1.0)
    assert f(100) == pytest.approx(0.1) and f(55) == pytest.approx(0.55)


def test_train_lm_history_and_learning() -> None:
    torch.manual_seed(0)
    hist = train_lm(GPT(CFG), LANG, steps=30, batch=8, precision="fp32", lr=1e-2, progress=False, eval_every=10)
    assert len(hist) == 30 and {"excess", "eval_loss", "eval_excess"} <= set(hist.columns)
    assert (hist["excess"] - (hist["loss"] - LANG.entropy_floor)).abs().max() < 1e-12
    ev = hist["eval_excess"].dropna()
    assert list(ev.index + 1) == [10, 20, 30]
    assert ev.iloc[-1] < 0.5 * (math.log(16) - LANG.entropy_floor)
    assert hist.attrs["entropy_floor"] == LANG.entropy_floor


def test_train_lm_bf16_true_and_errors() -> None:
    torch.manual_seed(0)
    model = GPT(CFG).to(torch.bfloat16)
    opt = AdamW16(model.parameters(), lr=1e-2)
    hist = train_lm(model, LANG, steps=5, batch=4, precision="fp32", optimizer=opt, progress=False)
    assert hist["loss"].notna().all() and model.wte.weight.dtype == torch.bfloat16
    with pytest.raises(ValueError, match="model must be a fp16lab.gpt.GPT"):
        train_lm(nn.Linear(2, 2), LANG, steps=1, batch=1)
    with pytest.raises(ValueError, match="steps must be an int >= 1, got 0"):
        train_lm(GPT(CFG), LANG, steps=0, batch=1)


def test_lm_throughput_on_cpu() -> None:
    model = GPT(CFG)
    r = lm_throughput(model, 2, precision="fp32", steps=2, warmup=1, peak_tflops=1.0)
    assert r["tokens_per_s"] > 0 and r["batch"] == 2 and r["seq_len"] == 16 and not r["compiled"]
    assert r["model_tflops"] == pytest.approx(flops_per_token(CFG) * r["tokens_per_s"] / 1e12)
    assert r["mfu"] == pytest.approx(r["model_tflops"]) and math.isnan(r["peak_mem_gib"])
    assert math.isnan(lm_throughput(model, 1, precision="fp32", steps=1, warmup=1)["mfu"])
    with pytest.raises(ValueError, match="compile must be True or False"):
        lm_throughput(model, 1, compile=1)  # type: ignore[arg-type]


@CUDA
def test_lm_throughput_compiled_on_cuda() -> None:
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=256, d_model=128, n_layers=2, n_heads=4, seq_len=128)).cuda()
    precision = "bf16" if torch.cuda.get_device_capability() >= (8, 0) else "fp16"
    r = lm_throughput(model, 4, precision=precision, compile=True, steps=3, warmup=2)
    assert r["compiled"] and r["compile_s"] > 0 and r["peak_mem_gib"] > 0 and r["tokens_per_s"] > 0


@CUDA
def test_compiled_decode_step_matches_eager() -> None:
    torch.manual_seed(0)
    model = GPT(GPTConfig(vocab_size=64, d_model=64, n_layers=2, n_heads=4, seq_len=32)).cuda().eval()
    prompt = torch.randint(0, 64, (2, 5), device="cuda")
    eager = model.generate(prompt, 12)
    step = torch.compile(model.decode_step, mode="reduce-overhead", fullgraph=True)
    model.setup_cache(2, 17)
    compiled = model.generate(prompt, 12, step=step)
    assert torch.equal(eager, compiled)


# ------------------------------------------------------------------ bad input (issue 14): named, before any work


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"betas": (False, 0.9)}, "betas must be a pair"), ({"betas": ("a", 0.9)}, "betas must be a pair"),
     ({"betas": (0.9, float("nan"))}, "betas must be a pair"), ({"betas": [0.9, 0.99]}, "betas must be a pair"),
     ({"eps": float("inf")}, "eps must be a finite number"), ({"weight_decay": -0.1}, "weight_decay must be")],
)
def test_adamw16_refuses_bad_numbers_of_every_kind(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        AdamW16([nn.Parameter(torch.zeros(2))], **kwargs)


@pytest.mark.parametrize("params", [None, nn.Linear(2, 2), torch.zeros(2, requires_grad=True), "weights"])
def test_adamw16_refuses_what_is_not_an_iterable_of_parameters(params) -> None:
    with pytest.raises(ValueError, match="params must be an iterable of tensors"):
        AdamW16(params)


@pytest.mark.parametrize(
    ("group", "match"),
    [({"lr": "x"}, "param group's lr must be a finite number"), ({"lr": -1.0}, "param group's lr must be"),
     ({"betas": (2, 2)}, "param group's betas must be a pair"), ({"eps": float("nan")}, "param group's eps")],
)
def test_adamw16_checks_each_param_group(group: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        AdamW16([{"params": [nn.Parameter(torch.zeros(2))], **group}])
    opt = AdamW16([nn.Parameter(torch.zeros(2))])
    with pytest.raises(ValueError, match=match):
        opt.add_param_group({"params": [nn.Parameter(torch.zeros(3))], **group})
    assert len(opt.param_groups) == 1


def test_adamw16_step_refuses_a_closure_that_is_not_callable() -> None:
    p = nn.Parameter(torch.ones(2))
    p.grad = torch.ones(2)
    opt = AdamW16([p])
    with pytest.raises(ValueError, match="closure must be None or a function"):
        opt.step(3)
    assert torch.equal(p, torch.ones(2)) and not opt.state


def test_lm_batches_refuses_a_device_it_cannot_use() -> None:
    with pytest.raises(ValueError, match="device must be a str or torch.device"):
        lm_batches(LANG, 1, 1, 4, None)  # type: ignore[arg-type]
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="device 'cuda' requested but no CUDA GPU"):
            lm_batches(LANG, 1, 1, 4, "cuda")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [({"warmup": 11}, "warmup must be <= steps=10"), ({"optimizer": "adam"}, "optimizer must be None or a torch.optim"),
     ({"progress": 1}, "progress must be True or False"), ({"desc": 3}, "desc must be a str or None"),
     ({"lang": SyntheticLanguage(vocab=17, order=1)}, "lang has vocab=17 tokens but the model's vocab_size is 16")],
)
def test_train_lm_refuses_before_building_batches(kwargs: dict, match: str, monkeypatch) -> None:
    torch.manual_seed(0)
    model = GPT(CFG)
    before = [p.clone() for p in model.parameters()]
    monkeypatch.setattr("fp16lab.labs.transformers.lm.lm_batches", lambda *a, **k: pytest.fail("batches built before the refusal"))
    args = {"lang": LANG, "steps": 10, "batch": 2, "progress": False, **kwargs}
    with pytest.raises(ValueError, match=match):
        train_lm(model, args.pop("lang"), **args)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


@pytest.mark.parametrize(
    ("call", "match"),
    [(lambda m: lm_throughput(m, 1, optimizer="sgd"), "optimizer must be None or a torch.optim"),
     (lambda m: state_bytes(None), "model must be a torch.nn.Module"),
     (lambda m: state_bytes(m, "adam"), "optimizer must be None or a torch.optim"),
     (lambda m: saved_activation_bytes("m", torch.zeros(1, 4, dtype=torch.long), torch.zeros(1, 4, dtype=torch.long)),
      "model must be a torch.nn.Module"),
     (lambda m: saved_activation_bytes(m, torch.zeros(1, 4), torch.zeros(1, 4, dtype=torch.long)),
      "idx must hold integer ids"),
     (lambda m: saved_activation_bytes(m, torch.zeros(1, 4, dtype=torch.long), torch.zeros(1, 2, dtype=torch.long)),
      "targets must have the shape"),
     (lambda m: sdpa_kernel_ran(None), "fn must be a function"),
     (lambda m: sdpa_kernel_ran(torch.zeros(1)), "fn must be a function")],
)
def test_lm_helpers_refuse_bad_arguments_by_name(call, match: str) -> None:
    model = GPT(CFG)
    before = [p.clone() for p in model.parameters()]
    with pytest.raises(ValueError, match=match):
        call(model)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    assert all(p.grad is None for p in model.parameters())
