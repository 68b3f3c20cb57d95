"""fp16lab.align: rounding, the matmul sweep, the model audit, padding and kernel names."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch
from torch import nn

from fp16lab.align import (
    AuditReport,
    PaddedLinear,
    alignment_for,
    audit,
    check_multiple,
    cuda_kernels,
    is_aligned,
    matmul_sweep,
    pad_embedding,
    pad_layers,
    pad_linear,
    pad_to_multiple,
    tensor_core_kind,
    wave_quantization,
)

# ------------------------------------------------------------------------ rounding


@pytest.mark.parametrize(
    "n, multiple, want",
    [(50257, 8, 50264), (50257, 64, 50304), (4096, 8, 4096), (4095, 8, 4096), (1, 8, 8), (7, 1, 7), (9, 4, 12)],
)
def test_pad_to_multiple(n, multiple, want):
    got = pad_to_multiple(n, multiple)
    assert got == want == math.ceil(n / multiple) * multiple
    assert is_aligned(got, multiple)


def test_pad_to_multiple_default_is_8():
    assert pad_to_multiple(1001) == 1008


@pytest.mark.parametrize("n", [0, -8, 3.0, True, "8"])
def test_pad_to_multiple_rejects_bad_sizes(n):
    with pytest.raises(ValueError, match="n must be an int >= 1"):
        pad_to_multiple(n)


@pytest.mark.parametrize("multiple", [0, -1, 2.5, True, "8", None])
def test_pad_to_multiple_rejects_bad_multiple(multiple):
    with pytest.raises(ValueError, match="multiple must be an int >= 1"):
        pad_to_multiple(10, multiple)


@pytest.mark.parametrize("good", [1, 2, 4, 8, 16, 24, 64, 96, 128])
def test_check_multiple_accepts_powers_of_two_and_multiples_of_8(good):
    assert check_multiple(good) == good


@pytest.mark.parametrize("bad", [7, 12, 100, 0, -8, 8.0, True, "8"])
def test_padding_multiple_rule_refuses_the_rest(bad):
    """Regression: pad_layers(multiple=7) was accepted."""
    with pytest.raises(ValueError, match="multiple"):
        check_multiple(bad)
    for fn in (lambda: pad_layers(TinyLM(tie=False), ["head"], multiple=bad),
               lambda: pad_linear(nn.Linear(4, 5), bad), lambda: pad_embedding(nn.Embedding(5, 4), bad)):
        with pytest.raises(ValueError, match="multiple"):
            fn()


def test_alignment_for_each_precision():
    assert alignment_for("fp16") == alignment_for("bf16") == 8
    assert alignment_for("tf32") == 4
    with pytest.raises(ValueError, match="does not use Tensor Cores.*'fp16'"):
        alignment_for("fp32")
    with pytest.raises(ValueError, match="unknown precision 'fp8'.*'fp16'"):
        alignment_for("fp8")


def test_wave_quantization_refuses_bad_tiles():
    for tile in ((128,), 128, (128, 0), (True, 8)):
        with pytest.raises(ValueError, match="tile"):
            wave_quantization(128, 128, 4, tile=tile)


def test_wave_quantization():
    one = wave_quantization(128 * 11, 128 * 12, sm_count=132)  # 132 tiles: one full wave
    assert one["tiles"] == 132 and one["full_waves"] == 1 and one["efficiency"] == pytest.approx(1.0)
    two = wave_quantization(128 * 12, 128 * 12, sm_count=132)  # 144 tiles: a 12-tile second wave
    assert two["full_waves"] == 2 and two["wave_efficiency"] == pytest.approx(144 / 264)
    ragged = wave_quantization(129, 128, sm_count=4)  # 2 tiles, the second holds one row
    assert ragged["tile_efficiency"] == pytest.approx(129 * 128 / (2 * 128 * 128))
    with pytest.raises(ValueError, match="sm_count"):
        wave_quantization(128, 128, sm_count=0)


# --------------------------------------------------------------------------- sweep


def test_sweep_shape_and_columns_on_cpu():
    from fp16lab.precision import HalfMatmulOnCPUWarning

    with pytest.warns(HalfMatmulOnCPUWarning, match="not FP16 speed"):  # its own category: a filter can name it
        df = matmul_sweep([16, (8, 24, 15)], ["fp32", "fp16"], "cpu", min_run_time=0.01, progress=False)
    assert isinstance(df, pd.DataFrame) and len(df) == 4
    for col in ("m", "n", "k", "precision", "seconds", "iqr_s", "tflops", "aligned", "peak_tflops", "pct_of_peak", "device"):
        assert col in df.columns, col
    assert list(df["precision"]) == ["fp32", "fp32", "fp16", "fp16"]
    assert list(zip(df.m, df.n, df.k, strict=True))[:2] == [(16, 16, 16), (8, 24, 15)]
    assert (df["tflops"] > 0).all() and (df["seconds"] > 0).all()
    flops = 2.0 * df.m * df.n * df.k
    assert ((flops / df.seconds / 1e12 - df.tflops).abs() < 1e-9).all()
    fp16 = df[df.precision == "fp16"]
    assert list(fp16["aligned"]) == [True, False]  # 15 is not a multiple of 8
    assert df["pct_of_peak"].isna().all() and set(df["device"]) == {"CPU"}  # no peak for a CPU


@pytest.mark.parametrize(
    "shapes, match",
    [([0], r"shapes\[0\] m must be an int >= 1"), ([(8, 8)], "tuple"), ([16, (8, -1, 8)], r"shapes\[1\] n must be"),
     ([], "empty"), (["64"], "tuple")],
)
def test_sweep_rejects_bad_shapes(shapes, match):
    with pytest.raises(ValueError, match=match):
        matmul_sweep(shapes, "fp32", "cpu", progress=False)


def test_sweep_rejects_unknown_precision_and_time():
    with pytest.raises(ValueError, match="unknown precision 'int4'"):
        matmul_sweep([8], ["int4"], "cpu", progress=False)
    with pytest.raises(ValueError, match="min_run_time"):
        matmul_sweep([8], "fp32", "cpu", min_run_time=0, progress=False)


@pytest.mark.parametrize("kwargs, match", [
    (dict(shapes=64), "shapes must be"), (dict(shapes="64"), "shapes must be"),
    (dict(precisions=torch.float16), "precisions"), (dict(precisions=3), "precisions"),
    (dict(device="gpu"), "device"), (dict(seed=-1), "seed"), (dict(seed=1.5), "seed"),
    (dict(progress="no"), "progress"), (dict(min_run_time="0.1"), "min_run_time"),
])
def test_sweep_wrong_types_name_the_argument(kwargs, match):
    args = dict(shapes=[8], precisions="fp32", device="cpu", progress=False) | kwargs
    with pytest.raises(ValueError, match=match):
        matmul_sweep(**args)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without CUDA")
def test_sweep_on_cuda_without_cuda_is_a_clear_error():
    with pytest.raises(ValueError, match="no CUDA GPU"):
        matmul_sweep([8], "fp16", "cuda", progress=False)


# --------------------------------------------------------------------------- audit


class Aligned(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(64, 32)
        self.fc = nn.Linear(32, 16)
        self.conv = nn.Conv2d(8, 16, 3)
        self.norm = nn.LayerNorm(16)

    def forward(self, idx):
        return self.norm(self.fc(self.emb(idx)))


class Misaligned(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(30, 64)
        self.fc2 = nn.Linear(64, 10)
        self.rnn = nn.GRU(4, 4)  # not understood: skipped
        self.dw = nn.Conv2d(16, 16, 3, groups=16)  # depthwise: skipped
        self.grouped = nn.Conv2d(24, 48, 3, groups=2)  # 12 -> 24 per group

    def forward(self, x):
        return self.fc2(self.fc1(x))


def test_audit_nothing_misaligned():
    rep = audit(Aligned(), torch.zeros(2, 8, dtype=torch.long), "fp16")
    assert isinstance(rep, AuditReport) and rep.ok and rep.multiple == 8
    assert rep.to_frame().empty and rep.modules_checked == 3
    full = rep.to_frame(include_aligned=True)
    assert len(full) == 7  # 2 + 2 + 2 sizes, plus the rows (2*8=16) reaching fc
    assert ("fc", "rows", 16) in set(zip(full.module, full.dim, full["size"], strict=True))
    assert not rep.skipped and "Every checked size is aligned" in rep._repr_html_()


def test_audit_misaligned_sizes_and_skips():
    rep = audit(Misaligned(), torch.randn(3, 5, 30), "fp16")
    df = rep.to_frame()
    got = {(r.module, r.dim): (r.size, r.suggested) for r in df.itertuples()}
    assert got == {
        ("fc1", "in_features"): (30, 32),
        ("fc2", "out_features"): (10, 16),
        ("fc1", "rows"): (15, 16),  # 3 x 5 rows reach fc1 and fc2
        ("fc2", "rows"): (15, 16),
        ("grouped", "in_channels"): (12, 16),  # 24 / 2 groups; 48 / 2 = 24 out is aligned
    }
    assert all(df["reason"].str.len() > 20) and not rep.ok
    assert list(df.query("paddable").module) == ["fc2"] and rep.pad_names() == ["fc2"]
    fixes = {(r.module, r.dim): r.fix for r in df.itertuples()}
    assert "change the model" in fixes[("fc1", "in_features")]
    assert "pad_layers pads no convolutions" in fixes[("grouped", "in_channels")]
    assert "batch size" in fixes[("fc1", "rows")]
    assert fixes[("fc2", "out_features")] == "pad_layers(model, ['fc2'], multiple=8)"
    skipped = {s.module: s.reason for s in rep.skipped}
    assert set(skipped) == {"rnn", "dw"}
    assert "not understood" in skipped["rnn"] and "depthwise" in skipped["dw"]
    html = rep._repr_html_()
    assert "<table" in html and "fc2" in html and "Skipped" in html
    assert "misaligned" in str(rep)


def test_audit_tf32_uses_multiple_of_4():
    rep = audit(nn.Linear(12, 6), precision="tf32")
    assert rep.multiple == 4
    assert list(zip(rep.to_frame().dim, rep.to_frame().suggested, strict=True)) == [("out_features", 8)]


def test_audit_validation():
    with pytest.raises(ValueError, match="unknown precision 'fp12'"):
        audit(nn.Linear(8, 8), precision="fp12")
    with pytest.raises(ValueError, match="does not use Tensor Cores"):
        audit(nn.Linear(8, 8), precision="fp32")
    with pytest.raises(ValueError, match="must be a torch.nn.Module"):
        audit("not a model")


def test_audit_never_crashes_on_odd_modules():
    class Weird(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.scale = nn.Parameter(torch.ones(3))
            self.lazy = nn.LazyLinear(10)

    rep = audit(Weird())
    reasons = {s.module: s.reason for s in rep.skipped}
    assert "own parameters: scale[3]" in reasons["<root>"]
    assert "lazy" in reasons["lazy"]


def test_audit_reports_tied_weights():
    m = TinyLM(vocab=50, dim=16)
    rep = audit(m)
    head = rep.to_frame().set_index(["module", "dim"])
    assert head.loc[("head", "out_features"), "suggested"] == 56
    assert "tied with 'wte'" in head.loc[("head", "out_features"), "reason"]
    assert rep.pad_names() == ["wte", "head"]
    pad_layers(m, rep.pad_names())  # what the audit advises, pad_layers accepts
    assert audit(m).pad_names() == []


class SharedHead(nn.Module):
    """One Linear registered under two names (a shared module, not a tie of two modules)."""

    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Linear(16, 16)
        self.head = nn.Linear(16, 50)
        self.aux_head = self.head

    def forward(self, x):
        h = self.body(x)
        return self.head(h) + self.aux_head(h)


@pytest.mark.parametrize("names", [["head"], ["aux_head"], ["head", "aux_head"]])
def test_a_module_shared_under_two_names_is_padded_once_under_both(names):
    """Regression: audit advised padding 'head' and 'aux_head' together, and pad_layers refused that call."""
    torch.manual_seed(0)
    m = SharedHead()
    x = torch.randn(3, 16)
    before = m(x)
    rep = audit(m)
    finding = rep.to_frame().set_index(["module", "dim"]).loc[("head", "out_features")]
    assert finding["paddable"] and "also registered as 'aux_head'" in finding["reason"]
    assert rep.pad_names() == ["head"]
    pad_layers(m, names)
    assert m.head is m.aux_head and isinstance(m.head, PaddedLinear) and m.head.padded_features == 56
    torch.testing.assert_close(m(x), before)


def test_audit_advice_is_accepted_by_pad_layers_on_many_models():
    """Whatever audit marks paddable, pad_layers pads; afterwards nothing paddable is left."""
    class Zoo(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.emb = nn.Embedding(37, 16)
            self.bag = nn.EmbeddingBag(19, 16)  # not paddable: audit says so
            self.fc = nn.Linear(16, 13)
            self.blocks = nn.ModuleList([nn.Linear(16, 10), nn.Linear(10, 16)])
            self.seq = nn.Sequential(nn.Conv2d(3, 13, 1), nn.Linear(5, 7))
            self.tied_a = nn.Linear(16, 21)
            self.tied_b = nn.Embedding(21, 16)
            self.tied_b.weight = self.tied_a.weight
            self.alias = self.fc

    mha = nn.Sequential(nn.MultiheadAttention(20, 2), nn.Linear(20, 7))  # out_proj: a Linear subclass
    for model in (Zoo(), TinyLM(), TinyLM(tie=False), SharedHead(), nn.Linear(3, 5), mha):
        rep = audit(model)
        names = rep.pad_names()
        for f in rep.misaligned:
            assert f.fix, f
            if f.dim in ("in_features", "embedding_dim", "in_channels", "out_channels", "rows"):
                assert not f.paddable
        if names:
            pad_layers(model, names)
        assert audit(model).pad_names() == []
    out_proj = audit(nn.MultiheadAttention(20, 2)).to_frame().set_index(["module", "dim"]).loc[("out_proj", "out_features")]
    assert not out_proj["paddable"] and "NonDynamicallyQuantizableLinear" in out_proj["fix"]
    with pytest.raises(ValueError, match="pads nn.Linear and nn.Embedding only"):
        pad_layers(nn.MultiheadAttention(20, 2), ["out_proj"])
    root = audit(nn.Linear(3, 5)).to_frame().set_index(["module", "dim"]).loc[("<root>", "out_features")]
    assert not root["paddable"] and "pad_linear(model)" in root["fix"]
    bag = audit(Zoo()).to_frame().set_index(["module", "dim"]).loc[("bag", "num_embeddings")]
    assert not bag["paddable"] and "pad_layers cannot" in bag["fix"]


def test_a_weight_tied_to_an_unpaddable_module_is_refused_with_the_fix():
    class Custom(nn.Module):
        def __init__(self, w: nn.Parameter) -> None:
            super().__init__()
            self.weight = w

    m = nn.Module()
    m.head = nn.Linear(4, 10)
    m.other = Custom(m.head.weight)
    f = audit(m).to_frame().set_index(["module", "dim"]).loc[("head", "out_features")]
    assert not f["paddable"] and "Custom" in f["fix"]
    with pytest.raises(ValueError, match="tied to 'other', a Custom.*model's definition"):
        pad_layers(m, ["head"])
    assert isinstance(m.head, nn.Linear)


# ------------------------------------------------------------------------- padding


class TinyLM(nn.Module):
    def __init__(self, vocab: int = 50, dim: int = 16, tie: bool = True) -> None:
        super().__init__()
        self.wte = nn.Embedding(vocab, dim)
        self.body = nn.Linear(dim, dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        if tie:
            self.head.weight = self.wte.weight

    def forward(self, idx):
        return self.head(torch.tanh(self.body(self.wte(idx))))


def test_pad_linear_equivalence_outputs_and_gradients():
    torch.manual_seed(0)
    lin = nn.Linear(16, 10)
    padded = pad_linear(lin, 8)
    assert isinstance(padded, PaddedLinear) and padded.padded_features == 16 and padded.out_features == 10
    x = torch.randn(4, 3, 16, requires_grad=True)
    x2 = x.detach().clone().requires_grad_(True)
    y, y2 = lin(x), padded(x2)
    assert y2.shape == y.shape
    torch.testing.assert_close(y2, y)
    g = torch.randn_like(y)
    y.backward(g)
    y2.backward(g)
    torch.testing.assert_close(x2.grad, x.grad)
    torch.testing.assert_close(padded.weight.grad[:10], lin.weight.grad)
    torch.testing.assert_close(padded.bias.grad[:10], lin.bias.grad)
    assert (padded.weight.grad[10:] == 0).all() and (padded.bias.grad[10:] == 0).all()


def test_pad_embedding_equivalence():
    torch.manual_seed(0)
    emb = nn.Embedding(13, 4, padding_idx=2)
    new = pad_embedding(emb, 8)
    assert new.num_embeddings == 16 and new.padding_idx == 2
    idx = torch.tensor([[0, 2, 12, 5], [1, 1, 3, 12]])
    out, out2 = emb(idx), new(idx)
    torch.testing.assert_close(out2, out)
    out.sum().backward()
    out2.sum().backward()
    torch.testing.assert_close(new.weight.grad[:13], emb.weight.grad)
    assert (new.weight.grad[13:] == 0).all()


def test_pad_layers_tied_model_same_function_and_grads():
    torch.manual_seed(0)
    ref = TinyLM(vocab=50, dim=16)
    model = TinyLM(vocab=50, dim=16)
    model.load_state_dict(ref.state_dict())
    pad_layers(model, ["wte", "head"], multiple=64)
    assert model.wte.num_embeddings == 64 and model.head.padded_features == 64
    assert model.head.weight is model.wte.weight  # still tied
    assert audit(model).to_frame().query("module == 'head.inner'").empty
    idx = torch.randint(0, 50, (3, 7))
    target = torch.randint(0, 50, (3, 7))
    out, out2 = ref(idx), model(idx)
    torch.testing.assert_close(out2, out)
    nn.functional.cross_entropy(out.flatten(0, 1), target.flatten()).backward()
    nn.functional.cross_entropy(out2.flatten(0, 1), target.flatten()).backward()
    torch.testing.assert_close(model.wte.weight.grad[:50], ref.wte.weight.grad)
    torch.testing.assert_close(model.body.weight.grad, ref.body.weight.grad)
    assert (model.wte.weight.grad[50:] == 0).all()


def test_pad_layers_refuses_half_of_a_tie():
    m = TinyLM()
    with pytest.raises(ValueError, match=r"'head' shares its weight with 'wte'.*pad_layers\(model, \['wte', 'head'\]"):
        pad_layers(m, "head")
    assert isinstance(m.head, nn.Linear)  # nothing changed
    pad_layers(m, ["wte", "head"], multiple=8)  # the advised call works


def test_pad_layers_validation():
    m = TinyLM(tie=False)
    with pytest.raises(ValueError, match="no module named 'haed'.*similar"):
        pad_layers(m, ["haed"])
    with pytest.raises(ValueError, match="'0'.*is a Conv2d; pad_layers pads nn.Linear and nn.Embedding only"):
        pad_layers(nn.Sequential(nn.Conv2d(3, 5, 1)), ["0"])
    with pytest.raises(ValueError, match="multiple must be an int >= 1"):
        pad_layers(m, ["head"], multiple=0)
    with pytest.raises(ValueError, match=r"names is empty: pass a list with at least one entry, e.g. \['lm_head'\]"):
        pad_layers(m, [])
    for bad, match in ((None, "names must be a list, got None"), (3, "names must be a list, got 3"),
                       ([3], r"names\[0\] must be a str, got 3"), ({"head": 1}, r"names must be a list, got \{"),
                       ([""], "no module named ''")):
        with pytest.raises(ValueError, match=match):
            pad_layers(m, bad)
    with pytest.raises(ValueError, match="model must be a torch.nn.Module"):
        pad_layers("model", ["head"])
    with pytest.raises(ValueError, match="optimizer must be a torch.optim.Optimizer"):
        pad_layers(m, ["head"], optimizer=[])
    pad_layers(m, ["head"])  # untied: fine alone
    with pytest.raises(ValueError, match="already padded"):
        pad_layers(m, ["head"])
    with pytest.raises(ValueError, match="nn.Linear"):
        pad_linear(nn.Embedding(3, 3))
    with pytest.raises(ValueError, match="nn.Embedding"):
        pad_embedding(nn.Linear(3, 3))


def test_pad_layers_refuses_when_a_live_optimizer_holds_the_old_parameters():
    """Regression: the padded head silently detached from an existing optimizer and never trained again."""
    m = TinyLM(tie=False)
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="Build the optimizer after padding.*optimizer=opt"):
        pad_layers(m, ["head"])
    assert isinstance(m.head, nn.Linear)  # refused: nothing changed
    del opt
    pad_layers(m, ["head"])  # no optimizer any more: fine


@pytest.mark.parametrize("make_opt", [
    lambda ps: torch.optim.Adam(ps, lr=1e-2),
    lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9),
    lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1, amsgrad=True),
])
def test_pad_layers_repoints_an_optimizer_and_training_continues_exactly(make_opt):
    """With optimizer=, padding mid-training changes nothing the model computes or learns."""
    torch.manual_seed(0)
    ref, model = TinyLM(vocab=50), TinyLM(vocab=50)
    model.load_state_dict(ref.state_dict())
    opt_ref, opt = make_opt(ref.parameters()), make_opt(model.parameters())
    idx, target = torch.randint(0, 50, (4, 6)), torch.randint(0, 50, (4, 6))

    def step(mdl, o):
        o.zero_grad()
        loss = nn.functional.cross_entropy(mdl(idx).flatten(0, 1), target.flatten())
        loss.backward()
        o.step()
        return loss.item()

    for _ in range(2):
        step(ref, opt_ref), step(model, opt)
    pad_layers(model, ["wte", "head"], multiple=64, optimizer=opt)
    held = {id(p) for g in opt.param_groups for p in g["params"]}
    assert id(model.wte.weight) in held and all(id(p) in held for p in model.parameters())
    for _ in range(3):
        assert step(model, opt) == pytest.approx(step(ref, opt_ref), rel=1e-5)
    torch.testing.assert_close(model.wte.weight[:50], ref.wte.weight, rtol=1e-5, atol=1e-6)
    assert (model.wte.weight[50:] == 0).all()  # padded rows never move


# ------------------------------------------------------------------------- kernels


@pytest.mark.parametrize(
    "name, kind",
    [
        ("nvjet_sm90_hss_128x256_64x4_2x1_v_bz_coopA_NNT", "tensor core"),
        ("sm90_xmma_gemm_f16f16_f16f32_f32_tn_n_tilesize128x256x64_warpgroupsize2x1x1", "tensor core"),
        ("ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_32x5_nn", "tensor core"),
        ("ampere_sgemm_128x64_nn", "CUDA cores"),
        ("void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>", "not a GEMM"),
    ],
)
def test_tensor_core_kind(name, kind):
    assert tensor_core_kind(name) == kind


def test_tensor_core_kind_and_cuda_kernels_name_bad_arguments():
    with pytest.raises(TypeError, match="kernel_name must be a str"):
        tensor_core_kind(None)
    with pytest.raises(ValueError, match="fn must be"):
        cuda_kernels("a @ a")
    with pytest.raises(ValueError, match="warmup"):
        cuda_kernels(lambda: None, warmup=-1)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_kernels_fp16_matmul_on_tensor_cores():
    a = torch.randn(1024, 1024, device="cuda", dtype=torch.float16)
    df = cuda_kernels(lambda: a @ a)
    assert not df.empty and (df["kind"] == "tensor core").any(), df


def test_cuda_kernels_lists_the_gpus_own_events_only(fake_profiler):
    # The oracle: the kernel events' own durations; host events and GPU user annotations are not kernels.
    import types

    from torch.autograd import DeviceType

    def event(name, device_type, us, annotation=False):
        return types.SimpleNamespace(name=name, device_type=device_type, is_user_annotation=annotation,
                                     time_range=types.SimpleNamespace(elapsed_us=lambda: us))

    events = [event("cudaLaunchKernel", DeviceType.CPU, 5.0), event("sm90_xmma_gemm_f16f16", DeviceType.CUDA, 40.0),
              event("sm90_xmma_gemm_f16f16", DeviceType.CUDA, 60.0), event("my_region", DeviceType.CUDA, 500.0, True)]
    fake_profiler(events)
    df = cuda_kernels(lambda: None, warmup=0)
    assert df[["kernel", "calls", "total_us"]].values.tolist() == [["sm90_xmma_gemm_f16f16", 2, 100.0]]


def test_gpu_kernels_sums_each_kernel_over_the_calls_and_names_its_kind(fake_profiler):
    # the one profiler: per kernel, its events' own durations summed over the profiled calls
    import types

    from torch.autograd import DeviceType

    from fp16lab.timing import gpu_kernels

    def event(name, us):
        return types.SimpleNamespace(name=name, device_type=DeviceType.CUDA, is_user_annotation=False,
                                     time_range=types.SimpleNamespace(elapsed_us=lambda: us))

    fake_profiler([event("void cudnn::bn_fw_tr_1C11", 30.0), event("sm90_xmma_fprop_f16", 70.0),
                   event("void cudnn::bn_fw_tr_1C11", 20.0), event("sgemm_128x64", 5.0)])
    ran = []
    df = gpu_kernels(lambda: ran.append(1), calls=2, warmup=3)
    assert len(ran) == 5  # 3 unprofiled, then 2 profiled
    assert df.values.tolist() == [
        ["sm90_xmma_fprop_f16", 1, 70.0, "tensor core", "convolution / matmul"],
        ["void cudnn::bn_fw_tr_1C11", 2, 50.0, "not a GEMM", "batch norm"],
        ["sgemm_128x64", 1, 5.0, "CUDA cores", "convolution / matmul"],
    ]


def test_cuda_kernels_needs_gpu():
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(RuntimeError, match="needs a CUDA GPU"):
        cuda_kernels(lambda: None)


def test_sweep_compares_with_the_peak_of_the_chip_that_really_ran(fake_gpu, monkeypatch):
    """Under a hardware profile the speed is the real chip's: pct_of_peak must use the real chip's peak."""
    import fp16lab.align.sweep as sweep_mod
    import fp16lab.hardware as hardware

    fake_gpu("hopper")
    hardware.use_profile("rtx4090d")
    monkeypatch.setattr(sweep_mod, "parsed_matmul_tflops", lambda m, n, k, p, dev, t, seed: {
        "m": m, "n": n, "k": k, "precision": p.value, "seconds": 1.0, "iqr_s": 0.0, "tflops": 500.0})
    df = matmul_sweep([64], ["fp16"], "cuda", progress=False)
    assert df.loc[0, "peak_tflops"] == hardware.PEAK_TFLOPS["H200"].fp16  # not the 4090D's
    assert "H200" in df.loc[0, "device"] and "4090" in df.loc[0, "device"]  # the label says both


# unlisted neighbours of issue 14


def test_pad_layers_refuses_aligned_layers_and_the_inside_of_a_padded_one() -> None:
    model = nn.Sequential(nn.Linear(12, 8), nn.ReLU(), nn.Linear(8, 5), nn.Embedding(16, 4))
    before = [p.detach().clone() for p in model.parameters()]
    for name, match in (("0", "'0' has 8 outputs, already a multiple of 8"), ("3", "'3' has 16 rows")):
        with pytest.raises(ValueError, match=match):
            pad_layers(model, name)
    with pytest.raises(ValueError, match="names: '0' has 8 outputs"):
        pad_layers(model, ["2", "0"])  # refused as a whole: '2' is not padded either
    assert isinstance(model[2], nn.Linear) and all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    pad_layers(model, "2")
    with pytest.raises(ValueError, match="'2.inner' is the inside of the padded layer '2'"):
        pad_layers(model, "2.inner")
    with pytest.raises(ValueError, match="ReLU; pad_layers pads nn.Linear and nn.Embedding only"):
        pad_layers(nn.Sequential(nn.ReLU()), "0")


@pytest.mark.parametrize("example,match", [
    ([1, 2], "example_input holds no tensor"),
    ("x", "example_input holds no tensor"),
    (torch.zeros(0, 12), "example_input is empty"),
    (torch.zeros(3, 7), r"example_input: the model cannot run on it \(tensor \(3, 7\) float32\)"),
    (torch.zeros(3, 12, dtype=torch.long), "example_input: the model cannot run on it"),
])
def test_audit_example_input_is_checked_and_named(example: object, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        audit(nn.Sequential(nn.Linear(12, 30), nn.ReLU(), nn.Linear(30, 5)), example)


def test_audit_example_input_list_is_positional_like_the_debug_tools() -> None:
    report = audit(nn.Sequential(nn.Linear(12, 30)), [torch.zeros(3, 12)])
    assert ("0", "rows") in {(f.module, f.dim) for f in report.misaligned}


@pytest.mark.parametrize("kwargs,match", [
    (dict(shapes={8: 1}), "shapes must be a list"),
    (dict(shapes=torch.tensor([8, 16])), "shapes must be a list"),
    (dict(shapes=[8], precisions={"fp32": 1}), r"precisions must be a list, got \{'fp32': 1\} \(dict\): pass a list"),
])
def test_sweep_refuses_dicts_and_tensors(kwargs: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        matmul_sweep(device="cpu", progress=False, **kwargs)


def test_sweep_accepts_numpy_ints() -> None:
    np = pytest.importorskip("numpy")
    df = matmul_sweep([np.int64(8), (np.int32(8), 8, np.int64(16))], ["fp32"], device="cpu", min_run_time=0.01,
                      progress=False)
    assert df[["m", "n", "k"]].values.tolist() == [[8, 8, 8], [8, 8, 16]]
