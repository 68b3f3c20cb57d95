"""fp16lab.labs.inference.infer, .graphs, .islands and .decode: the sweep, accuracy, graphs/compile, FP32 islands, decode."""

from __future__ import annotations

import copy
import sys

import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from fp16lab.debug import first_nonfinite
from fp16lab.gpt import GPT, GPTConfig
from fp16lab.labs.inference.decode import _plan as decode_plan
from fp16lab.labs.inference.decode import _step_fn, copy_bandwidth, decode_benchmark, decode_bytes
from fp16lab.labs.inference.graphs import capture_cuda_graph, compile_for_inference
from fp16lab.labs.inference.infer import (
    Variant,
    gpu_kernel_time,
    latency_sweep,
    precision_agreement,
    prepare_model,
    supports,
    variants,
    weight_bytes,
)
from fp16lab.labs.inference.islands import FP32Island, keep_in_fp32
from fp16lab.precision import Precision

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.fixture(autouse=True)
def _one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


def tiny_cnn() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                         nn.Flatten(), nn.Linear(8, 5))


def images(b: int) -> torch.Tensor:
    return torch.randn(b, 3, 8, 8)


# ----------------------------------------------------------------------------- variants


def test_variants_cross_product_and_fp32_once():
    vs = variants(["fp32", "fp16", "bf16"], ["cast", "autocast"], [False, True])
    labels = [v.label for v in vs]
    assert len(vs) == 2 + 2 * 2 * 2
    assert labels.count("fp32") == 1 and "fp32 + channels_last" in labels
    assert "bf16 autocast + channels_last" in labels
    cast16 = next(v for v in vs if v.label == "fp16 cast")
    assert cast16.weights_dtype == torch.float16 and cast16.autocast_dtype is None
    auto = next(v for v in vs if v.label == "bf16 autocast")
    assert auto.weights_dtype == torch.float32 and auto.autocast_dtype == torch.bfloat16


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(precisions=["float16"]), "a dtype"),
        (dict(precisions="fp16"), r"precisions must be a list, got 'fp16' \(str\): pass a list"),
        (dict(precisions=[]), "precisions is empty"),
        (dict(modes=["half"]), "'cast', 'autocast'"),
        (dict(channels_last=[1]), "True or False"),
        (dict(channels_last=True), r"channels_last must be a list, got True \(bool\): pass a list"),
    ],
)
def test_variants_refuse_bad_input(kwargs, words):
    with pytest.raises(ValueError, match=words):
        variants(**kwargs)


def test_supports_on_cpu():
    assert supports("fp32", "cpu") and supports("bf16", "cpu") and supports("fp16", "cpu")
    assert not supports("tf32", "cpu")


# ----------------------------------------------------------------------------- preparing


def test_prepare_model_copies_and_casts_without_touching_the_original():
    model = tiny_cnn().train()
    m = prepare_model(model, "bf16", "cast", channels_last=True, device="cpu")
    assert m is not model and not m.training and all(p.dtype == torch.bfloat16 for p in m.parameters())
    assert not any(p.requires_grad for p in m.parameters())
    assert m[0].weight.is_contiguous(memory_format=torch.channels_last)
    assert model.training and all(p.dtype == torch.float32 and p.requires_grad for p in model.parameters())
    ints = sum(b.nbytes for b in model.buffers() if not b.is_floating_point())  # BatchNorm's step counter
    assert (weight_bytes(m) - ints) * 2 == weight_bytes(model) - ints
    auto = prepare_model(model, "fp16", "autocast", device="cpu")
    assert all(p.dtype == torch.float32 for p in auto.parameters())


def test_weight_bytes_counts_tied_weights_once():
    m = GPT(GPTConfig())  # tied head
    expected = sum(p.numel() * p.element_size() for p in m.parameters())  # parameters() yields tied ones once
    assert weight_bytes(m) == expected
    with pytest.raises(ValueError, match="torch.nn.Module"):
        weight_bytes("model")


# ----------------------------------------------------------------------------- the sweep


def test_latency_sweep_rows_and_consistency():
    model = tiny_cnn()
    before = copy.deepcopy(model.state_dict())
    df = latency_sweep(model, images, [1, 4], precisions=["fp32", "bf16"], modes=["cast", "autocast"],
                       channels_last=[False, True], device="cpu", min_run_time=0.01, warmup=1)
    assert len(df) == (2 + 4) * 2
    assert (df["status"] == "ok").all()
    assert ((df["ms_per_batch"] > 0) & (df["iqr_ms"].isna() | (df["iqr_ms"] >= 0))).all()  # NaN: one timed run, no spread
    pd.testing.assert_series_equal(df["items_per_s"], df["batch"] / df["ms_per_batch"] * 1e3, check_names=False)
    pd.testing.assert_series_equal(df["ms_per_item"], df["ms_per_batch"] / df["batch"], check_names=False)
    assert df["gpu_busy"].isna().all()
    assert (df["input_shape"] == "3x8x8").all()  # one item's shape, channels_last or not (lesson 08's check reads it)
    assert set(df["variant"]) >= {"fp32", "bf16 cast + channels_last", "bf16 autocast"}
    for k, v in model.state_dict().items():  # the sweep works on copies
        assert torch.equal(v, before[k])


def test_latency_sweep_unsupported_precision_is_a_row():
    df = latency_sweep(tiny_cnn(), images, [2], precisions=["tf32", "fp32"], device="cpu", min_run_time=0.01)
    tf = df[df["precision"] == "tf32"].iloc[0]
    assert tf["status"].startswith("unsupported") and pd.isna(tf["ms_per_batch"])
    assert df[df["precision"] == "fp32"]["status"].eq("ok").all()


class OOMAtBatch(nn.Module):
    """Raises the CUDA out-of-memory error for batches of ``limit`` or more (no GPU needed)."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 2)
        self.limit = limit

    def forward(self, x):
        if x.shape[0] >= self.limit:
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 1 GiB (simulated)")
        return self.lin(x)


def test_latency_sweep_out_of_memory_becomes_rows():
    df = latency_sweep(OOMAtBatch(4), lambda b: torch.randn(b, 4), [1, 4, 8], precisions=["fp32"], device="cpu",
                       min_run_time=0.01)
    assert df["status"].tolist() == ["ok", "out of memory", "skipped: out of memory at batch 4"]
    assert df["input_shape"].iloc[0] == "4" and df["input_shape"].iloc[1:].isna().all()  # measured rows only


def test_latency_sweep_other_errors_propagate():
    class Broken(nn.Module):
        def forward(self, x):
            raise RuntimeError("shape mismatch in my model")

    with pytest.raises(RuntimeError, match="shape mismatch"):
        latency_sweep(Broken(), lambda b: torch.randn(b, 4), [1], precisions=["fp32"], device="cpu")


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(batch_sizes=[0]), r"batch_sizes\[0\] must be an int >= 1"),
        (dict(batch_sizes=[True]), r"batch_sizes\[0\] must be an int"),
        (dict(batch_sizes=4), r"batch_sizes must be a list, got 4 \(int\): pass a list"),
        (dict(batch_sizes=[2, 2]), r"batch_sizes lists 2 twice \(entries 0 and 1\)"),
        (dict(make_input=lambda b: torch.randn(b + 1, 3, 8, 8)), "first dimension is 1"),
        (dict(make_input="images"), "make_input must be a function"),
        (dict(make_input=lambda b: torch.randn(b, 12), channels_last=[True]), "4-D"),
        (dict(gpu_busy=True), "need a CUDA device"),
        (dict(timer="cuda_events"), "need a CUDA device"),
        (dict(timer="wall"), "timer must be one of"),
        (dict(min_run_time=0), "min_run_time must be"),
        (dict(warmup=-1), "warmup must be"),
        (dict(device="tpu"), "not a device"),
        (dict(model="resnet"), "torch.nn.Module"),
    ],
)
def test_latency_sweep_refuses_bad_input_before_work(kwargs, words):
    args = dict(model=tiny_cnn(), make_input=images, batch_sizes=[1], device="cpu")
    args.update(kwargs)
    with pytest.raises(ValueError, match=words):
        latency_sweep(args.pop("model"), args.pop("make_input"), args.pop("batch_sizes"), **args)


# ----------------------------------------------------------------------------- accuracy


def test_precision_agreement_against_direct_computation():
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 6))
    x, y = torch.randn(40, 16), torch.randint(0, 6, (40,))
    df = precision_agreement(model, x, y, device="cpu", loss_fn=F.cross_entropy, batch_size=16).set_index("variant")
    ref = model(x).detach()
    half = copy.deepcopy(model).half()(x.half()).float().detach()
    assert df.loc["fp32", "max_abs_err"] == 0 and df.loc["fp32", "agreement"] == 1
    assert df.loc["fp16 cast", "max_abs_err"] == pytest.approx(float((half - ref).abs().max()), rel=1e-6)
    assert df.loc["fp16 cast", "agreement"] == pytest.approx(float((half.argmax(1) == ref.argmax(1)).float().mean()))
    assert df.loc["fp32", "accuracy"] == pytest.approx(float((ref.argmax(1) == y).float().mean()))
    assert df.loc["fp32", "loss"] == pytest.approx(float(F.cross_entropy(ref, y)), rel=1e-6)
    assert df.loc["fp16 cast", "weight_mib"] * 2 == pytest.approx(df.loc["fp32", "weight_mib"])
    assert df.loc["fp16 cast", "max_abs_err"] < df.loc["bf16 cast", "max_abs_err"]  # 3 more mantissa bits


def test_precision_agreement_refuses_bad_input():
    model = nn.Linear(4, 2)
    with pytest.raises(ValueError, match="at least one sample"):
        precision_agreement(model, torch.randn(0, 4))
    with pytest.raises(ValueError, match="one entry per input sample"):
        precision_agreement(model, torch.randn(3, 4), torch.zeros(2, dtype=torch.long))
    with pytest.raises(ValueError, match="fp16 or bf16"):
        precision_agreement(model, torch.randn(3, 4), precisions=["fp32"], device="cpu")
    with pytest.raises(ValueError, match="batch_size"):
        precision_agreement(model, torch.randn(3, 4), device="cpu", batch_size=0)


# ----------------------------------------------------------------------------- graphs and compile


def test_capture_cuda_graph_refuses_cpu():
    with pytest.raises(ValueError, match="CUDA"):
        capture_cuda_graph(lambda: None, device="cpu")
    with pytest.raises(ValueError, match="function"):
        capture_cuda_graph("f", device="cpu")


@CUDA
def test_capture_cuda_graph_replays_the_same_kernels():
    model = tiny_cnn().cuda().eval()
    static_x = torch.randn(2, 3, 8, 8, device="cuda")
    g = capture_cuda_graph(lambda: model(static_x))
    new = torch.randn(2, 3, 8, 8, device="cuda")
    static_x.copy_(new)
    with torch.inference_mode():
        expected = model(new)
    torch.testing.assert_close(g.replay(), expected)
    assert g.capture_s > 0


def test_compile_for_inference_on_the_cpu_with_the_eager_backend():
    model = tiny_cnn().eval()
    x = images(2)
    c = compile_for_inference(model, x, mode=None, backend="eager", calls=2)
    torch.testing.assert_close(c(x), model(x).detach())
    assert c.compile_s > 0 and c.backend == "eager"
    with pytest.raises(ValueError, match="needs backend='inductor'"):
        compile_for_inference(model, x, mode="reduce-overhead", backend="eager")
    with pytest.raises(ValueError, match="mode must be one of"):
        compile_for_inference(model, x, mode="fast")
    with pytest.raises(ValueError, match="calls"):
        compile_for_inference(model, x, mode=None, backend="eager", calls=0)


# ----------------------------------------------------------------------------- FP32 islands


def overflowing_net(c: float = 3e4) -> nn.Sequential:
    """LayerNorm gain × c, next Linear ÷ c: the same function in FP32, activations beyond FP16's range."""
    torch.manual_seed(0)
    net = nn.Sequential(nn.Linear(16, 64), nn.Sequential(nn.LayerNorm(64), nn.Linear(64, 64)), nn.GELU(),
                        nn.Linear(64, 4))
    with torch.no_grad():
        net[1][0].weight.mul_(c)
        net[1][0].bias.mul_(c)
        net[1][1].weight.div_(c)
    return net


def test_keep_in_fp32_fixes_an_fp16_overflow():
    net, x = overflowing_net(), torch.randn(32, 16)
    ref = net(x).detach()
    broken = copy.deepcopy(net).half()
    assert not torch.isfinite(broken(x.half())).all()
    assert first_nonfinite(broken, x.half(), precision="fp16").first == "1.0"
    fixed = keep_in_fp32(copy.deepcopy(net), ["1"]).half()  # island first, then cast: weights never rounded
    assert isinstance(fixed[1], FP32Island) and fixed[0].weight.dtype == torch.float16
    assert all(p.dtype == torch.float32 for p in fixed[1].parameters())
    torch.testing.assert_close(fixed[1].module[1].weight, net[1][1].weight)  # exact: not rounded through FP16
    out = fixed(x.half())
    assert out.dtype == torch.float16 and torch.isfinite(out).all()
    assert (out.float() - ref).abs().max() < 0.01 * ref.abs().max()


def test_keep_in_fp32_refuses_bad_names_and_changes_nothing():
    net = overflowing_net()
    with pytest.raises(ValueError, match="not a submodule"):
        keep_in_fp32(net, ["1", "ln_9"])
    assert not isinstance(net[1], FP32Island)  # the valid name was not applied either
    with pytest.raises(ValueError, match="lies inside"):
        keep_in_fp32(net, ["1", "1.0"])
    with pytest.raises(ValueError, match=r"names must be a list, got '1' \(str\): pass a list"):
        keep_in_fp32(net, "1")
    keep_in_fp32(net, ["1"])
    with pytest.raises(ValueError, match="already an FP32Island"):
        keep_in_fp32(net, ["1"])


# ----------------------------------------------------------------------------- decode bytes


class ReadCounter(TorchDispatchMode):
    """Independent count of what one forward reads: every parameter/buffer storage an op takes as
    input (views and the in-place cache writes excluded), plus the output bytes of row lookups."""

    def __init__(self, storages: dict[int, int]) -> None:
        super().__init__()
        self.storages, self.touched, self.lookups = storages, set(), 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        name = func.overloadpacket.__name__
        if name in ("embedding", "index"):
            self.lookups += out.nbytes
        elif not func.is_view and not name.startswith("index_put"):
            for t in tree_leaves((args, kwargs)):
                if isinstance(t, torch.Tensor) and t.untyped_storage().data_ptr() in self.storages:
                    self.touched.add(t.untyped_storage().data_ptr())
        return out


def counted_bytes(model: GPT, batch: int) -> int:
    tensors = list(model.parameters()) + list(model.buffers())
    storages = {t.untyped_storage().data_ptr(): t.untyped_storage().nbytes() for t in tensors}
    tok, pos = torch.zeros(batch, 1, dtype=torch.long), torch.tensor([3])
    with torch.inference_mode(), ReadCounter(storages) as c:
        model.decode_step(tok, pos)
    return sum(storages[p] for p in c.touched) + c.lookups


@pytest.mark.parametrize(
    "cfg, dtype, cache, batch",
    [
        (GPTConfig(vocab_size=50, vocab_multiple=16, d_model=32, n_layers=2, n_heads=4, seq_len=24), torch.float32,
         None, 3),
        (GPTConfig(vocab_size=64, d_model=32, n_layers=3, n_heads=2, seq_len=16, tie_weights=False, bias=True),
         torch.bfloat16, None, 2),
        (GPTConfig(vocab_size=40, d_model=16, n_layers=1, n_heads=2, seq_len=32, mlp_ratio=2), torch.float16,
         torch.float16, 1),
    ],
)
def test_decode_bytes_matches_an_independent_count(cfg, dtype, cache, batch):
    torch.manual_seed(0)
    model = GPT(cfg).to(dtype).eval()
    model.setup_cache(batch, 12, dtype=cache)
    b = decode_bytes(cfg, batch, max_len=12, weight_dtype=dtype, cache_dtype=cache)
    assert b.per_step == counted_bytes(model, batch)
    assert b.per_token == b.per_step / batch
    c = torch.empty((), dtype=cache or dtype).element_size()
    assert b.kv_cache == sum(t.nbytes for blk in model.h for t in (blk.attn.k_cache, blk.attn.v_cache))
    assert b.kv_cache == 2 * cfg.n_layers * batch * 12 * cfg.d_model * c


def test_decode_bytes_autocast_and_halving():
    cfg = GPTConfig(vocab_size=64, d_model=32, n_layers=2, n_heads=4, seq_len=16, tie_weights=False)
    b32 = decode_bytes(cfg, 1, weight_dtype=torch.float32)
    b16 = decode_bytes(cfg, 1, weight_dtype=torch.bfloat16)
    assert b16.weights * 2 == b32.weights and b16.kv_cache * 2 == b32.kv_cache
    auto = decode_bytes(cfg, 1, weight_dtype=torch.float32, autocast_dtype=torch.bfloat16)
    matmul = cfg.n_layers * 12 * cfg.d_model**2 + cfg.vocab_size * cfg.d_model
    norms = (4 * cfg.n_layers + 2) * cfg.d_model
    assert auto.weights == matmul * (4 + 2 + 2) + norms * 4  # read FP32, write BF16 copy, read it
    assert auto.kv_cache == b16.kv_cache  # the cache holds the autocast dtype


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(batch=0), "batch must be"),
        (dict(max_len=17), "max_len must be <= seq_len"),
        (dict(weight_dtype=torch.int8), "floating torch.dtype"),
        (dict(weight_dtype="bf16"), "floating torch.dtype"),
        (dict(cache_dtype=torch.long), "floating torch.dtype"),
    ],
)
def test_decode_bytes_refuses_bad_input(kwargs, words):
    with pytest.raises(ValueError, match=words):
        decode_bytes(GPTConfig(seq_len=16), **kwargs)
    with pytest.raises(ValueError, match="GPTConfig"):
        decode_bytes("1b")


# ----------------------------------------------------------------------------- bandwidth, benchmark


def test_copy_bandwidth_counts_read_plus_written():
    bw = copy_bandwidth("cpu", nbytes=2**20, min_run_time=0.01)
    assert bw.gb_s == pytest.approx(2 * 2**20 / bw.seconds / 1e9)
    assert bw.as_dict()["counted"] == "bytes read + bytes written"
    with pytest.raises(ValueError, match="nbytes"):
        copy_bandwidth("cpu", nbytes=0)


def tiny_gpt() -> GPT:
    torch.manual_seed(0)
    return GPT(GPTConfig(vocab_size=32, d_model=32, n_layers=2, n_heads=2, seq_len=32)).eval()


def test_decode_benchmark_rows_on_the_cpu():
    model = tiny_gpt()
    df = decode_benchmark(model, [1, 3], steps=4, max_len=16, bandwidth_gb_s=10.0, min_run_time=0.01)
    assert df["status"].eq("ok").all() and df["batch"].tolist() == [1, 3]
    pd.testing.assert_series_equal(df["tokens_per_s"], df["batch"] / df["ms_per_step"] * 1e3, check_names=False)
    expected = [decode_bytes(model.cfg, b, max_len=16, weight_dtype=torch.float32).per_token for b in (1, 3)]
    assert df["bytes_per_token"].tolist() == expected
    pd.testing.assert_series_equal(df["fraction_of_copy"], df["achieved_gb_s"] / 10.0, check_names=False)
    assert model.h[0].attn.k_cache is None  # the cache is dropped afterwards
    auto = decode_benchmark(model, [1], steps=2, max_len=8, autocast="bf16", min_run_time=0.01)
    assert auto["label"].iloc[0] == "float32 weights, bf16 autocast"


def test_the_decode_step_feeds_itself_like_generate():
    model = tiny_gpt()
    plan = decode_plan(model, [2], 6, 16, "eager", None, None, 0.01, 0, None)
    model.setup_cache(2, 16)
    tok, pos = torch.zeros(2, 1, dtype=torch.long), torch.zeros(1, dtype=torch.long)
    step, seen = _step_fn(model, tok, pos, plan), []
    with torch.inference_mode():
        for _ in range(6):
            step()
            seen.append(tok.clone())
    assert pos.item() == 6
    expected = model.generate(torch.zeros(2, 1, dtype=torch.long), 6)  # greedy, its own cache
    assert torch.equal(torch.cat(seen, 1), expected[:, 1:])


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(graph="cuda_graph"), "needs the model on a CUDA GPU"),
        (dict(graph="compiled"), "graph must be one of"),
        (dict(steps=20, max_len=16), "steps must be <= max_len"),
        (dict(max_len=64), "max_len must be <="),
        (dict(batch_sizes=[]), "batch_sizes is empty"),
        (dict(batch_sizes=[1, 0]), r"batch_sizes\[1\]"),
        (dict(autocast="fp8"), "autocast must be one of"),
        (dict(bandwidth_gb_s=-1.0), "bandwidth_gb_s"),
        (dict(label=3), "label"),
    ],
)
def test_decode_benchmark_refuses_bad_input(kwargs, words):
    with pytest.raises(ValueError, match=words):
        decode_benchmark(tiny_gpt(), **{"batch_sizes": [1], **kwargs})


def test_decode_benchmark_refuses_autocast_on_a_cast_model_and_non_gpt():
    with pytest.raises(ValueError, match="FP32 weights"):
        decode_benchmark(tiny_gpt().to(torch.bfloat16), autocast="bf16")
    with pytest.raises(ValueError, match="GPT"):
        decode_benchmark(nn.Linear(2, 2))


@CUDA
def test_decode_benchmark_cuda_graph_matches_eager_tokens():
    model = tiny_gpt().cuda()
    df = decode_benchmark(model, [1, 2], steps=4, max_len=16, graph="cuda_graph", min_run_time=0.01)
    assert df["status"].eq("ok").all() and (df["capture_s"] > 0).all()


@CUDA
def test_a_graphed_decode_step_reproduces_generate():
    model = tiny_gpt().cuda()
    plan = decode_plan(model, [2], 6, 16, "cuda_graph", None, None, 0.01, 0, None)
    model.setup_cache(2, 16)
    tok = torch.zeros(2, 1, dtype=torch.long, device="cuda")
    pos = torch.zeros(1, dtype=torch.long, device="cuda")
    graph = capture_cuda_graph(_step_fn(model, tok, pos, plan), warmup=2)
    tok.zero_()
    pos.zero_()
    seen = []
    for _ in range(6):
        graph.replay()
        seen.append(tok.clone())
    expected = model.generate(torch.zeros(2, 1, dtype=torch.long, device="cuda"), 6)
    assert torch.equal(torch.cat(seen, 1), expected[:, 1:])


# ----------------------------------------------------------------------------- bad-input audit (issue 14)


def test_variant_parses_its_precision_and_refuses_a_non_bool_layout():
    v = Variant("fp16", "cast")  # a name, as everywhere else: parsed, so .label works
    assert v.precision is Precision.FP16 and v.label == "fp16 cast"
    with pytest.raises(ValueError, match="channels_last"):
        Variant(Precision.FP16, "cast", 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="unknown precision 'float16'"):
        Variant("float16", "cast")  # type: ignore[arg-type]


def test_prepare_model_checks_mode_even_where_it_is_ignored():
    with pytest.raises(ValueError, match="mode must be one of"):
        prepare_model(nn.Linear(2, 2), "fp32", "bogus", device="cpu")


def test_weight_bytes_counts_meta_and_empty_tensors_each():
    meta = nn.Linear(2, 2, device="meta")  # every meta storage has data_ptr 0: not one shared storage
    assert weight_bytes(meta) == (2 * 2 + 2) * 4


@pytest.mark.parametrize(
    "make_input, words",
    [
        (lambda: torch.randn(1, 3, 8, 8), r"make_input must be a function batch_size -> input tensor, called with 1 argument"),  # no batch size
        (lambda b: torch.randn(1, 3, 8, 8), r"make_input\(2\) must return a tensor whose first dimension is 2"),
    ],
)
def test_latency_sweep_checks_make_input_at_every_batch_size_before_work(make_input, words):
    calls = []

    class Counting(nn.Module):
        def forward(self, x):
            calls.append(x.shape[0])
            return x

    with pytest.raises(ValueError, match=words):
        latency_sweep(Counting(), make_input, [1, 2], precisions=["fp32"], device="cpu", min_run_time=0.01)
    assert calls == []  # refused before the model ran


def test_a_model_error_in_the_sweep_says_where_it_happened():
    with pytest.raises(RuntimeError, match="mat1 and mat2") as info:
        latency_sweep(nn.Linear(4, 3), lambda b: torch.randn(b, 5), [1], precisions=["fp32"], device="cpu",
                      min_run_time=0.01)
    if sys.version_info >= (3, 11):  # exception notes exist from Python 3.11 on
        assert "make_input(1)" in " ".join(getattr(info.value, "__notes__", []))


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(loss_fn=F.cross_entropy), "loss_fn needs targets"),
        (dict(targets=torch.zeros(6, dtype=torch.long), loss_fn=nn.CrossEntropyLoss(reduction="none")),
         r"loss_fn must return one number.*\(6,\)"),
    ],
)
def test_precision_agreement_refuses_a_loss_it_cannot_report(kwargs, words):
    targets = kwargs.pop("targets", None)
    with pytest.raises(ValueError, match=words):
        precision_agreement(nn.Linear(4, 3), torch.randn(6, 4), targets, device="cpu", precisions=["bf16"],
                            modes=["autocast"], **kwargs)


@pytest.mark.parametrize("fn", [nn.Linear(2, 2), lambda x: x, "model"])
def test_graph_helpers_want_a_function_of_no_arguments(fn):
    with pytest.raises(ValueError, match="fn must be a function of no arguments"):
        capture_cuda_graph(fn, device="cpu")
    with pytest.raises(ValueError, match="fn must be a function of no arguments"):
        gpu_kernel_time(fn)


def test_compile_for_inference_refuses_an_unknown_backend_before_compiling():
    with pytest.raises(ValueError, match="backend 'nope' is not a torch.compile backend"):
        compile_for_inference(nn.Linear(2, 2), torch.ones(1, 2), mode=None, backend="nope")


@pytest.mark.parametrize("module", ["linear", None, lambda x: x])
def test_fp32_island_wants_a_module(module):
    with pytest.raises(ValueError, match="module must be a torch.nn.Module"):
        FP32Island(module)  # type: ignore[arg-type]


def test_fp32_island_is_not_nested():
    with pytest.raises(ValueError, match="already an FP32Island"):
        FP32Island(FP32Island(nn.Linear(2, 2)))
    model = nn.Sequential(nn.Sequential(nn.Linear(2, 2)), nn.ReLU())
    keep_in_fp32(model, ["0"])
    before = copy.deepcopy(model)
    with pytest.raises(ValueError, match="lies inside the FP32Island '0'"):
        keep_in_fp32(model, ["0.module.0"])
    assert str(model) == str(before)


@pytest.mark.parametrize("names, words", [(["0", "0"], "duplicates"), (["9"], r"some that exist: \['0', '1'\]")])
def test_keep_in_fp32_refuses_duplicates_and_lists_names(names, words):
    model = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    with pytest.raises(ValueError, match=words):
        keep_in_fp32(model, names)
    assert isinstance(model[0], nn.Linear)  # unchanged


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(weight_dtype=torch.float32, autocast_dtype=torch.float32), "autocast_dtype must be None"),
        (dict(weight_dtype=torch.float32, autocast_dtype=torch.int8), "autocast_dtype must be None"),
        (dict(weight_dtype=torch.bfloat16, autocast_dtype=torch.bfloat16), "is for FP32 weights"),
        (dict(weight_dtype=torch.float16, autocast_dtype=torch.bfloat16), "is for FP32 weights"),
    ],
)
def test_decode_bytes_autocast_is_a_16_bit_dtype_over_fp32_weights(kwargs, words):
    with pytest.raises(ValueError, match=words):
        decode_bytes(GPTConfig(vocab_size=16, seq_len=8, d_model=16, n_layers=1, n_heads=2), **kwargs)


def test_copy_bandwidth_says_when_nbytes_does_not_fit():
    with pytest.raises(ValueError, match="nbytes=.*do not fit"):
        copy_bandwidth("cpu", nbytes=2**62)


@pytest.mark.parametrize("kwargs, words", [(dict(batch_sizes=[1, 1]), "batch_sizes lists 1 twice"), (dict(label=""), "label"),
                                           (dict(label="  "), "label")])
def test_decode_benchmark_refuses_duplicates_and_empty_labels(kwargs, words):
    model = GPT(GPTConfig(vocab_size=16, seq_len=8, d_model=16, n_layers=1, n_heads=2))
    with pytest.raises(ValueError, match=words):
        decode_benchmark(model, steps=2, **kwargs)


def test_compile_for_inference_shows_the_models_own_error_for_a_wrong_input():
    model = nn.Sequential(nn.Linear(8, 4))
    with pytest.raises(RuntimeError, match=r"mat1 and mat2 shapes cannot be multiplied") as info:
        compile_for_inference(model, torch.ones(2, 5), mode=None, backend="eager")
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "before compiling" in notes and "Dynamo" not in str(info.value)


def test_compile_for_inference_runs_the_model_eagerly_once_before_compiling():
    calls: list[bool] = []

    def f(x: torch.Tensor) -> torch.Tensor:
        calls.append(torch.compiler.is_compiling())
        return x * 2

    compile_for_inference(f, torch.ones(3), mode=None, backend="eager", calls=1)
    assert calls[0] is False  # the first call ran outside the compiler


def test_datasheet_bandwidth_by_name_and_memory():
    from fp16lab.hardware import PEAK_TFLOPS
    from fp16lab.labs.inference.decode import DATASHEET_GB_S, datasheet_bandwidth

    assert set(DATASHEET_GB_S) == set(PEAK_TFLOPS)  # every card with a peak has a bandwidth
    assert datasheet_bandwidth("NVIDIA H200") == 4800.0
    assert datasheet_bandwidth("NVIDIA A100-SXM4-40GB", 39.6) == 1555.0
    assert datasheet_bandwidth("NVIDIA A100-SXM4-80GB", 79.2) == 2039.0
    assert datasheet_bandwidth("NVIDIA A100 80GB PCIe", 79.2) == 1935.0  # the PCIe card's HBM2e is slower
    assert datasheet_bandwidth("NVIDIA GeForce RTX 3060", 11.8) == 360.0
    assert datasheet_bandwidth("NVIDIA GeForce RTX 3060", 7.8) == 240.0  # the 8 GB card has a 128-bit bus
    assert datasheet_bandwidth("NVIDIA GeForce RTX 4060 Laptop GPU") == 256.0
    assert datasheet_bandwidth("Some Future GPU") is None
    with pytest.raises(ValueError, match="gpu_name must be a GPU name"):
        datasheet_bandwidth(4800)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="memory_gib must be a finite number > 0"):
        datasheet_bandwidth("NVIDIA H200", "80")  # type: ignore[arg-type]


def test_latency_sweep_rounds_interleave_and_keep_every_round():
    df = latency_sweep(tiny_cnn(), images, [1, 4], precisions=["fp32", "bf16"], device="cpu", min_run_time=0.01,
                       warmup=1, rounds=3)
    assert (df["status"] == "ok").all() and len(df) == 4
    for _, row in df.iterrows():
        assert len(row["ms_rounds"]) == 3
        assert row["ms_min"] <= row["ms_per_batch"] <= row["ms_max"]
        assert row["ms_per_batch"] == pytest.approx(float(pd.Series(row["ms_rounds"]).median()))
    pd.testing.assert_series_equal(df["items_per_s"], df["batch"] / df["ms_per_batch"] * 1e3, check_names=False)
    with pytest.raises(ValueError, match="rounds must be"):
        latency_sweep(tiny_cnn(), images, [1], device="cpu", rounds=0)


def test_latency_sweep_profiles_only_after_every_timing(monkeypatch):
    # CUPTI can stay attached after the profiler ran (pytorch#144455): no cell may be timed after it.
    import dataclasses

    from fp16lab.labs.inference import infer

    calls: list[str] = []
    real_plan, real_time = infer._plan, infer._time
    monkeypatch.setattr(infer, "_plan", lambda *a: dataclasses.replace(real_plan(*a[:10], False, a[11]), gpu_busy=True))
    monkeypatch.setattr(infer, "_time", lambda fn, plan: (calls.append("time"), real_time(fn, plan))[1])
    monkeypatch.setattr(infer, "gpu_kernel_time", lambda fn: (calls.append("profile"), fn(), 1e-4)[2])
    df = latency_sweep(tiny_cnn(), images, [1, 4], precisions=["fp32", "bf16"], device="cpu", min_run_time=0.01,
                       warmup=1, rounds=2)
    assert calls == ["time"] * 8 + ["profile"] * 4
    assert df["gpu_kernel_ms"].tolist() == pytest.approx([0.1] * 4)
    pd.testing.assert_series_equal(df["gpu_busy"], df["gpu_kernel_ms"] / df["ms_per_batch"], check_names=False)


def test_latency_sweep_a_round_out_of_memory_is_the_rows_status():
    df = latency_sweep(OOMAtBatch(4), lambda b: torch.randn(b, 4), [1, 4], precisions=["fp32"], device="cpu",
                       min_run_time=0.01, rounds=2)
    assert df["status"].tolist() == ["ok", "out of memory"]
    assert len(df["ms_rounds"].iloc[0]) == 2
