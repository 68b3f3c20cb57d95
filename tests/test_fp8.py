"""fp16lab.labs.fp8: FP8 formats against torch.finfo, scaling math, the layer filter, the raw FP8 matmul,
torchao training helpers on tiny models (CPU), and the no-FP8 path of a lesson."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch
from torch import nn

import fp16lab.labs.fp8.layers as layers_mod
import fp16lab.labs.fp8.matmul as matmul_mod
import fp16lab.labs.fp8.training as training_mod
from fp16lab.data import SyntheticLanguage
from fp16lab.gpt import GPT, GPTConfig
from fp16lab.hardware import GPUFacts, chip_features
from fp16lab.labs.fp8 import (
    Fp8Filter,
    Fp8Support,
    amax_scale,
    break_even_width,
    float8_layers,
    fp8_capable,
    fp8_curves,
    fp8_matmul_sweep,
    fp8_matmul_tflops,
    fp8_measure,
    fp8_plan,
    fp8_throughput,
    linear_speed,
    quantization_error,
    quantize,
    recipe_table,
    scaled_matmul,
    scaled_mm_api,
    scaled_mm_path,
    scaling_table,
    summarize_import_noise,
    to_fp8_training,
    torchao_status,
)
from fp16lab.numerics import format_info

HAS_TORCHAO = torchao_status().available
needs_torchao = pytest.mark.skipif(not HAS_TORCHAO, reason="torchao is not installed (pip install -e '.[fp8]')")
CPU_FP8 = fp8_capable("cpu").ok
needs_cpu_fp8 = pytest.mark.skipif(not CPU_FP8, reason="this torch has no CPU kernel for torch._scaled_mm")
TINY = GPTConfig(vocab_size=32, d_model=32, n_layers=1, n_heads=2, seq_len=16)
FP8_DTYPES = {"fp8_e4m3": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e5m2}


# ------------------------------------------------------------------ formats (torch is the oracle)

@pytest.mark.parametrize("name", sorted(FP8_DTYPES))
def test_fp8_format_facts_match_torch_finfo(name):
    info, fi = format_info(name), torch.finfo(FP8_DTYPES[name])
    assert info.dtype is FP8_DTYPES[name]
    assert (info.max, info.smallest_normal, info.eps, info.bits) == (fi.max, fi.smallest_normal, fi.eps, fi.bits)
    sub = torch.tensor([info.smallest_subnormal, info.smallest_subnormal / 2], dtype=torch.float64)
    assert sub.to(info.dtype).double().tolist() == [info.smallest_subnormal, 0.0]
    assert torch.tensor([info.max]).to(info.dtype).item() == info.max


# ------------------------------------------------------------------ scaling

def test_amax_scale_maps_amax_to_the_format_max():
    assert amax_scale(2.0).item() == 224.0
    assert amax_scale(torch.tensor([1.0, 4.0]), "fp8_e5m2").tolist() == [57344.0, 14336.0]
    assert amax_scale(3.0, power_of_2=True).item() == 128.0  # 448/3 = 149.3 -> 2**7
    assert math.isfinite(amax_scale(0.0).item())  # all-zero tensor: clamped amax


@pytest.mark.parametrize("bad", [dict(amax=-1.0), dict(amax=float("nan")), dict(amax=True), dict(amax="2"),
                                 dict(amax=1.0, fmt="fp16"), dict(amax=1.0, power_of_2=1)])
def test_amax_scale_refuses_bad_arguments(bad):
    with pytest.raises(ValueError, match=list(bad)[-1]):  # the argument that is wrong is named
        amax_scale(**bad)


@pytest.mark.parametrize("fmt", sorted(FP8_DTYPES))
def test_tensorwise_quantize_matches_a_hand_written_cast(fmt):
    x = torch.randn(8, 16, generator=torch.Generator().manual_seed(0)) * 3
    q = quantize(x, fmt)
    info = format_info(fmt)
    s = info.max / x.abs().max()
    assert q.scale.shape == () and torch.isclose(q.scale, s)
    assert torch.equal(q.data.float(), (x * s).clamp(-info.max, info.max).to(info.dtype).float())
    assert q.data.float().abs().max().item() == info.max  # the amax element lands on the max, exactly
    assert torch.allclose(q.dequantize(), x, rtol=info.eps, atol=0)
    assert torch.allclose(q.inverse_scale, 1 / q.scale)


def test_rowwise_quantize_scales_each_row_and_keeps_leading_dims():
    x = torch.randn(2, 3, 16, generator=torch.Generator().manual_seed(1)) * torch.tensor([1e-3, 1.0, 1e3]).reshape(1, 3, 1)
    q = quantize(x, "fp8_e4m3", "row")
    assert q.data.shape == x.shape and q.scale.shape == (6, 1)
    rows = q.data.reshape(6, 16).float().abs().amax(dim=1)
    assert torch.all(rows == 448.0)  # every row's amax maps to the max
    assert torch.allclose(q.dequantize(), x, rtol=0.0625, atol=0)  # E4M3's half-ULP, relative


def test_rowwise_beats_tensorwise_when_one_row_is_huge():
    x = torch.randn(64, 32, generator=torch.Generator().manual_seed(2))
    x[0] *= 1e5
    tensor_err = quantization_error(x, "fp8_e4m3", "tensor")
    row_err = quantization_error(x, "fp8_e4m3", "row")
    assert row_err["underflow"] == 0.0 < tensor_err["underflow"]
    back = quantize(x, "fp8_e4m3", "tensor").dequantize()
    lost = ((back == 0) & (x != 0)).sum().item() / (x != 0).sum().item()
    assert tensor_err["underflow"] == pytest.approx(lost)


def test_quantize_refuses_bad_input_before_work():
    with pytest.raises(ValueError, match="granularity"):
        quantize(torch.ones(4), granularity="column")
    with pytest.raises(ValueError, match="already FP8"):
        quantize(torch.ones(4).to(torch.float8_e4m3fn))
    with pytest.raises(ValueError, match="floating-point"):
        quantize(torch.ones(4, dtype=torch.int32))
    with pytest.raises(ValueError, match="FP8 format"):
        quantize(torch.ones(4), "bf16")
    with pytest.raises(ValueError, match="1 or more dimensions"):
        quantize(torch.tensor(1.0))


def test_scaling_table_rows_and_spread():
    x = torch.ones(4, 8)
    x[0] = 10
    table = scaling_table({"a": x, "b": torch.randn(3, 8)}, fmts=("fp8_e4m3", "fp8_e5m2"))
    assert len(table) == 2 * 2 * 2 and set(table.granularity) == {"tensor", "row"}
    assert table[table.tensor == "a"].row_amax_spread.iloc[0] == pytest.approx(10.0)
    with pytest.raises(ValueError, match="tensors must be a non-empty mapping"):
        scaling_table({})
    with pytest.raises(ValueError, match=r"granularities\[0\] must be one of 'tensor', 'row'; got 'block'"):
        scaling_table({"a": x}, granularities=("block",))


# ------------------------------------------------------------------ the layer filter

def test_filter_keeps_head_odd_and_small_layers_in_high_precision():
    f = Fp8Filter(min_features=64)
    assert f(nn.Linear(64, 256), "h.0.mlp.fc")
    assert not f(nn.Linear(64, 256), "lm_head") and "head" in f.reason(nn.Linear(64, 256), "lm_head")
    assert not f(nn.Linear(64, 100), "x") and "multiples of 16" in f.reason(nn.Linear(64, 100), "x")
    assert not f(nn.Linear(32, 256), "x") and "small" in f.reason(nn.Linear(32, 256), "x")
    assert not f(nn.LayerNorm(64), "ln") and "not an nn.Linear" in f.reason(nn.LayerNorm(64), "ln")
    assert Fp8Filter(skip=(), min_features=0)(nn.Linear(16, 16), "lm_head")


@pytest.mark.parametrize("bad", [dict(skip="lm_head"), dict(skip=(1,)), dict(multiple=0), dict(min_features=True),
                                 dict(min_features=-1)])
def test_filter_refuses_bad_settings(bad):
    with pytest.raises(ValueError, match=next(iter(bad))):
        Fp8Filter(**bad)


def test_fp8_plan_lists_every_linear_and_converts_nothing():
    model = GPT(TINY)
    plan = fp8_plan(model, Fp8Filter(min_features=16))
    linears = [n for n, m in model.named_modules() if isinstance(m, nn.Linear)]
    assert plan.layer.tolist() == linears
    assert plan.set_index("layer").fp8.to_dict() == {n: n != "lm_head" for n in linears}
    assert plan.flop_share.sum() == pytest.approx(1.0)
    assert not float8_layers(model)
    with pytest.raises(ValueError, match="no nn.Linear"):
        fp8_plan(nn.Sequential(nn.ReLU()))
    with pytest.raises(ValueError, match="module_filter"):
        fp8_plan(model, "lm_head")


def test_to_fp8_training_refuses_before_changing_anything(monkeypatch):
    model = GPT(TINY)
    before = [type(m) for m in model.modules()]
    with pytest.raises(ValueError, match="recipe"):
        to_fp8_training(model, "delayed")
    with pytest.raises(ValueError, match="selects no nn.Linear"):
        to_fp8_training(model, "tensorwise", Fp8Filter(min_features=4096))
    monkeypatch.setattr(layers_mod, "torchao_status",
                        lambda: layers_mod.TorchaoStatus(False, None, "ImportError: no torchao"))
    with pytest.raises(ValueError, match=r"pip install -e '\.\[fp8\]'"):
        to_fp8_training(model, "tensorwise", Fp8Filter(min_features=16))
    assert [type(m) for m in model.modules()] == before


def test_torchao_status_never_raises(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "torchao", None)  # makes `import torchao` raise ImportError
    status = torchao_status()
    assert not status.available and "Error" in status.reason and "pip install" in str(status)


@needs_torchao
def test_to_fp8_training_converts_exactly_what_the_filter_selects():
    torch.manual_seed(0)
    model = GPT(TINY)
    f = Fp8Filter(min_features=16)
    plan = fp8_plan(model, f)
    to_fp8_training(model, "tensorwise", f)
    assert sorted(float8_layers(model)) == sorted(plan[plan.fp8].layer)
    assert model.lm_head.weight is model.wte.weight  # the tied head stays tied (and high precision)


@needs_torchao
def test_recipe_table_reads_torchao_configs():
    table = recipe_table()
    assert len(table) == 9 and set(table.recipe) == {"tensorwise", "rowwise", "rowwise_with_gw_hp"}
    tw = table[table.recipe == "tensorwise"].set_index("gemm")
    assert tw.iloc[0].use_fast_accum and not tw.iloc[1:].use_fast_accum.any()  # fast accum: forward only
    assert tw.iloc[1]["left operand"].startswith("e5m2")  # gradients in E5M2
    gw_hp = table[table.recipe == "rowwise_with_gw_hp"].iloc[2]
    assert gw_hp["left operand"].startswith("high precision")


# ------------------------------------------------------------------ the raw FP8 matmul

@needs_cpu_fp8
@pytest.mark.parametrize("scaling", ["tensorwise", "rowwise"])
def test_scaled_matmul_matches_the_product_of_its_fp8_operands(scaling):
    g = torch.Generator().manual_seed(3)
    a, b = torch.randn(32, 64, generator=g), torch.randn(64, 48, generator=g)
    out = scaled_matmul(a, b, scaling=scaling, out_dtype=torch.float32)
    gran = "tensor" if scaling == "tensorwise" else "row"
    qa, qb = quantize(a, "fp8_e4m3", gran), quantize(b.t().contiguous(), "fp8_e4m3", gran)
    want = qa.dequantize().double() @ qb.dequantize().double().t()
    assert torch.allclose(out.double(), want, rtol=1e-5, atol=1e-4)
    rel = ((out - a @ b).norm() / (a @ b).norm()).item()
    assert 0.001 < rel < 0.1  # E4M3's precision, not BF16's


@needs_cpu_fp8
def test_scaled_matmul_rowwise_wins_with_an_outlier_row():
    g = torch.Generator().manual_seed(4)
    a, b = torch.randn(32, 64, generator=g), torch.randn(64, 48, generator=g)
    a[0] *= 1e5
    ref = (a @ b)[1:]
    errs = {s: ((scaled_matmul(a, b, scaling=s, out_dtype=torch.float32)[1:] - ref).norm() / ref.norm()).item()
            for s in ("tensorwise", "rowwise")}
    assert errs["rowwise"] < 0.5 * errs["tensorwise"]


@pytest.mark.parametrize("bad", [dict(a=torch.ones(4), b=torch.ones(4, 4)), dict(a=torch.ones(4, 3), b=torch.ones(4, 4)),
                                 dict(scaling="blockwise"), dict(use_fast_accum=1), dict(out_dtype=torch.int8)])
def test_scaled_matmul_refuses_bad_arguments(bad):
    kwargs = {"a": torch.ones(4, 4), "b": torch.ones(4, 4), **bad}
    with pytest.raises(ValueError, match=next(iter(bad))):
        scaled_matmul(**kwargs)


def _facts(cap: tuple[int, int], name: str) -> GPUFacts:
    return GPUFacts(index=0, name=name, real_name="NVIDIA H200", capability=cap, sm_count=28, memory_bytes=2**34,
                    total_memory_bytes=2**37, peak=None, features=chip_features(cap, name), profile="x")


@pytest.mark.parametrize(("cap", "ok"), [((7, 5), False), ((8, 0), False), ((8, 6), False), ((8, 9), True), ((9, 0), True)])
def test_fp8_capable_follows_the_capability(monkeypatch, cap, ok):
    monkeypatch.setattr(matmul_mod, "gpu_facts", lambda dev: _facts(cap, "Some GPU"))
    support = fp8_capable("cuda")
    assert support.ok is ok
    assert f"sm_{cap[0]}{cap[1]}" in support.reason
    if not ok:
        assert "sm_89" in support.reason and str(support).startswith("FP8: no")


def test_fp8_capable_on_cpu_and_mps():
    assert fp8_capable("cpu").ok == matmul_mod._cpu_probe()
    assert not fp8_capable("mps").ok


@needs_cpu_fp8
def test_fp8_matmul_sweep_on_the_cpu_gives_one_row_per_config():
    table = fp8_matmul_sweep([32], "cpu", min_run_time=0.01, progress=False)
    assert table.config.tolist() == ["bf16", "fp8 tensorwise", "fp8 tensorwise, fast accum", "fp8 rowwise",
                                     "fp8 rowwise, fast accum"]
    assert table.loc[0, "vs_bf16"] == 1.0 and table.pct_of_peak.isna().all()  # no cited peak for a CPU
    fp8 = table[table.kind != "bf16"]
    assert (fp8.error == "").all() and (fp8.rel_error < 0.01).all() and (fp8.tflops > 0).all()


def test_fp8_matmul_sweep_refuses_bad_arguments(monkeypatch):
    with pytest.raises(ValueError, match="shapes is empty"):
        fp8_matmul_sweep([], "cpu")
    with pytest.raises(ValueError, match="scaling"):
        fp8_matmul_sweep([32], "cpu", configs=[("blockwise", False)])
    monkeypatch.setattr(matmul_mod, "fp8_capable", lambda dev: Fp8Support(False, "sm_86 has no FP8"))
    with pytest.raises(ValueError, match="sm_86"):
        fp8_matmul_sweep([32], "cpu")


# ------------------------------------------------------------------ measure here or show the reference

@pytest.fixture
def reference_dir(tmp_path, monkeypatch):
    import fp16lab.labs.runtime.results as results

    monkeypatch.setattr(results, "RESULTS_DIR", tmp_path)
    results.save_results(pd.DataFrame({"x": [1.0]}), tmp_path / "fp8_demo.json",
                         {"device": "NVIDIA H200", "device_type": "cuda"})
    return tmp_path


def _never() -> pd.DataFrame:
    raise AssertionError("measure() must not run here")


def test_a_gpu_without_fp8_gets_a_statement_and_the_reference(reference_dir, monkeypatch, capsys):
    import fp16lab.labs.runtime.quick as config

    monkeypatch.setattr(config, "live_gpu", lambda: True)
    monkeypatch.setattr(training_mod, "fp8_capable",
                        lambda dev: Fp8Support(False, "RTX 3060 profile is sm_86; FP8 Tensor Cores need sm_89"))
    got = fp8_measure("fp8_demo", _never, device="cpu")
    out = capsys.readouterr().out
    assert "NOT MEASURED HERE" in out and "sm_86" in out and "COMMITTED GPU REFERENCE" in out
    assert not got.live and got.frame.x.tolist() == [1.0]


def test_missing_torchao_gets_a_statement_and_the_reference(reference_dir, monkeypatch, capsys):
    import fp16lab.labs.runtime.quick as config

    monkeypatch.setattr(config, "live_gpu", lambda: True)
    monkeypatch.setattr(training_mod, "fp8_capable", lambda dev: Fp8Support(True, "fine"))
    monkeypatch.setattr(training_mod, "torchao_status",
                        lambda: layers_mod.TorchaoStatus(False, None, "ImportError: no torchao"))
    got = fp8_measure("fp8_demo", _never, device="cpu")
    assert "pip install" in capsys.readouterr().out and not got.live
    monkeypatch.setattr(config, "live_gpu", lambda: False)
    assert fp8_measure("fp8_missing", _never, device="cpu").frame is None  # nothing recorded: no crash


def test_numerics_run_live_on_the_cpu_without_saving(reference_dir, monkeypatch):
    import fp16lab.labs.runtime.quick as config

    monkeypatch.setattr(config, "live_gpu", lambda: False)
    monkeypatch.setattr(training_mod, "fp8_capable", lambda dev: Fp8Support(True, "cpu"))
    got = fp8_measure("fp8_cpu", lambda: pd.DataFrame({"y": [2]}), device="cpu", needs_torchao=False, gpu_only=False)
    assert got.live and got.frame.y.tolist() == [2] and got.meta["device_type"] == "cpu"
    assert not (reference_dir / "fp8_cpu.json").exists() and not (reference_dir / "local" / "fp8_cpu.json").exists()
    with pytest.raises(ValueError, match="gpu_only"):
        fp8_measure("fp8_cpu", _never, device="cpu", gpu_only=1)


# ------------------------------------------------------------------ training helpers on tiny CPU models

@needs_torchao
@needs_cpu_fp8
def test_fp8_curves_train_the_same_batches_in_each_run():
    lang = SyntheticLanguage(vocab=32, order=1, branching=4)
    table = fp8_curves(lambda: GPT(TINY), lang, steps=3, batch=2, recipes=("tensorwise",), precision="fp32",
                       module_filter=Fp8Filter(min_features=16), eval_batches=1, eval_every=3, progress=False)
    assert table.run.unique().tolist() == ["fp32", "fp8 tensorwise"]
    assert (table.error == "").all() and table.loss.notna().all()
    first = table.groupby("run").loss.first()
    assert first["fp8 tensorwise"] == pytest.approx(first["fp32"], rel=0.05)  # same start, FP8 rounding only
    assert (table.excess == table.loss - table.entropy_floor).all()


@needs_torchao
@needs_cpu_fp8
def test_fp8_throughput_and_linear_speed_make_rows_on_the_cpu():
    table = fp8_throughput(lambda: GPT(TINY), 2, recipes=("tensorwise",), precision="fp32", compile=False,
                           module_filter=Fp8Filter(min_features=16), steps=1, warmup=1, progress=False)
    assert table.config.tolist() == ["fp32", "fp8 tensorwise"] and (table.error == "").all()
    assert table.speedup.iloc[0] == 1.0 and (table.tokens_per_s > 0).all()
    layers = linear_speed((16, 32), 8, precision="fp32", compile=False, device="cpu", min_run_time=0.01,
                          progress=False)
    assert layers.features.tolist() == [16, 32] and (layers.error == "").all()
    assert (layers.speedup == layers.hp_ms / layers.fp8_ms).all()


def test_training_helpers_refuse_bad_arguments():
    lang = SyntheticLanguage(vocab=32, order=1, branching=4)
    with pytest.raises(ValueError, match="recipes"):
        fp8_curves(lambda: GPT(TINY), lang, steps=1, batch=1, recipes=("delayed",))
    with pytest.raises(ValueError, match="make_model"):
        fp8_throughput(GPT(TINY), 2)
    with pytest.raises(ValueError, match="sizes"):
        linear_speed([], 8, device="cpu")
    with pytest.raises(ValueError, match="precision"):
        linear_speed([16], 8, precision="float16", device="cpu")


# ------------------------------------------------------------------ a real FP8 GPU

@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_scaled_matmul_on_an_fp8_gpu():
    if not fp8_capable("cuda").ok:
        pytest.skip("this GPU has no FP8 (sm_89+ needed)")
    g = torch.Generator(device="cuda").manual_seed(0)
    a, b = torch.randn(256, 512, device="cuda", generator=g), torch.randn(512, 128, device="cuda", generator=g)
    for scaling in ("tensorwise", "rowwise"):
        assert scaled_mm_path("cuda", scaling) in ("torch.nn.functional.scaled_mm", "torch._scaled_mm")
        for fast in (False, True):
            out = scaled_matmul(a, b, scaling=scaling, use_fast_accum=fast).float()
            assert ((out - a @ b).norm() / (a @ b).norm()).item() < 0.1


# ------------------------------------------------------------------ bad-input audit (issue 14)

def _must_not_run(*args, **kwargs):
    raise AssertionError("refused arguments must stop before any measurement")


def test_amax_scale_takes_numpy_numbers_like_python_ones():
    import numpy as np

    assert amax_scale(np.float32(2.0)).item() == amax_scale(2.0).item() == 224.0
    assert amax_scale(np.int64(2)).item() == 224.0


@pytest.mark.parametrize("bad", [math.inf, -math.inf, math.nan])
def test_quantize_refuses_non_finite_values_instead_of_zeroing_the_tensor(bad):
    x = torch.tensor([[1.0, 2.0], [3.0, bad]])
    for fn in (quantize, quantization_error):
        with pytest.raises(ValueError, match="x holds 1 inf/NaN"):
            fn(x)
    with pytest.raises(ValueError, match="tensors\\['a'\\] holds 1 inf/NaN"):
        scaling_table({"a": x})


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(fmts="fp8_e4m3"), r"fmts must be a list, got 'fp8_e4m3' \(str\): pass a list"),
        (dict(fmts=None), "fmts must be a list, got None"),
        (dict(fmts=[]), "fmts is empty"),
        (dict(granularities="row"), r"granularities must be a list, got 'row' \(str\): pass a list"),
        (dict(granularities=None), "granularities must be a list, got None"),
        (dict(tensors={1: torch.ones(2, 2), "1": torch.ones(2, 2)}), "names \\(non-empty strings\\)"),
        (dict(tensors={"": torch.ones(2, 2)}), "names \\(non-empty strings\\)"),
    ],
)
def test_scaling_table_refuses_strings_for_lists_and_non_string_names(kwargs, words):
    args = {"tensors": {"a": torch.randn(4, 8)}, **kwargs}
    with pytest.raises(ValueError, match=words):
        scaling_table(**args)


@pytest.mark.parametrize("multiple", [7, 8, 24, 1])
def test_filter_multiple_is_a_multiple_of_16(multiple):
    with pytest.raises(ValueError, match="multiple must be a multiple of 16"):
        Fp8Filter(multiple=multiple)


def test_filter_stores_plain_ints():
    import numpy as np

    f = Fp8Filter(multiple=np.int64(32), min_features=np.int64(0))
    assert type(f.multiple) is int and type(f.min_features) is int and f.multiple == 32


@pytest.mark.parametrize("bad", [lambda m: True, lambda: True, lambda m, n, k: True])
def test_module_filter_must_take_module_and_name(bad):
    model = nn.Sequential(nn.Linear(32, 32))
    with pytest.raises(ValueError, match="module_filter must take two arguments"):
        fp8_plan(model, bad)
    with pytest.raises(ValueError, match="module_filter must take two arguments"):
        to_fp8_training(model, module_filter=bad)
    assert type(model[0]) is nn.Linear


@needs_torchao
def test_to_fp8_training_refuses_a_converted_model():
    model = to_fp8_training(nn.Sequential(nn.Linear(32, 32)), module_filter=Fp8Filter(min_features=0))
    with pytest.raises(ValueError, match="already has torchao Float8Linear layers \\(0\\)"):
        to_fp8_training(model, "rowwise", module_filter=Fp8Filter(min_features=0))


@pytest.mark.parametrize("seed", ["a", 1.5, True, -1, None])
def test_fp8_matmul_tflops_checks_the_seed(seed):
    with pytest.raises(ValueError, match="seed must be an int"):
        fp8_matmul_tflops(16, 16, 16, "cpu", seed=seed, min_run_time=0.01)


@pytest.mark.parametrize(
    "kwargs, words",
    [
        (dict(shapes=16), "shapes must be a list"),
        (dict(shapes="16"), "shapes must be a list"),
        (dict(configs=[]), "configs is empty"),
        (dict(configs="tensorwise"), r"configs must be a list, got 'tensorwise' \(str\): pass a list"),
        (dict(configs=[("tensorwise",)]), r"configs\[0\] must be a \(scaling, use_fast_accum\) pair"),
        (dict(configs=[("rowwise", 1)]), r"configs\[0\] use_fast_accum must be True or False, got 1"),
        (dict(configs=[("rowwise", 1)]), "use_fast_accum"),
        (dict(progress=1), "progress"),
    ],
)
def test_fp8_matmul_sweep_refuses_before_measuring(kwargs, words, monkeypatch):
    monkeypatch.setattr(matmul_mod, "matmul_tflops", _must_not_run)
    args = {"shapes": [16], "device": "cpu", **kwargs}
    with pytest.raises(ValueError, match=words):
        fp8_matmul_sweep(args.pop("shapes"), **args)


@needs_cpu_fp8
def test_fp8_matmul_sweep_takes_numpy_sizes():
    import numpy as np

    table = fp8_matmul_sweep([np.int64(16)], "cpu", configs=[("tensorwise", False)], min_run_time=0.01,
                             progress=False)
    assert table.n.tolist() == [16, 16]


@pytest.mark.parametrize("live", [False, True])
def test_fp8_measure_wants_a_dataframe(reference_dir, monkeypatch, live):
    import fp16lab.labs.runtime.quick as quick

    monkeypatch.setattr(quick, "live_gpu", lambda: live)  # the same answer in quick mode and on a GPU in full mode
    with pytest.raises(ValueError, match="measure must be a function"):
        fp8_measure("fp8_x", "table", device="cpu")
    if CPU_FP8:
        with pytest.raises(ValueError, match="measure must return a pandas DataFrame, it returned NoneType"):
            fp8_measure("fp8_x", lambda: None, device="cpu", gpu_only=False, needs_torchao=False)
    assert not (reference_dir / "fp8_x.json").exists()


def test_fp8_runs_check_the_filter_before_the_baseline_runs(monkeypatch):
    ran = []
    monkeypatch.setattr(training_mod, "train_lm", lambda *a, **k: ran.append("train"))
    monkeypatch.setattr(training_mod, "lm_throughput", lambda *a, **k: ran.append("throughput"))
    lang = SyntheticLanguage(vocab=32, order=1, branching=4)
    small = Fp8Filter()  # TINY's layers are below min_features=1024: nothing would be FP8
    with pytest.raises(ValueError, match="module_filter selects no nn.Linear layer"):
        fp8_curves(lambda: GPT(TINY), lang, steps=1, batch=1, recipes=("tensorwise",), module_filter=small,
                   progress=False)
    with pytest.raises(ValueError, match="module_filter selects no nn.Linear layer"):
        fp8_throughput(lambda: GPT(TINY), 1, recipes=("tensorwise",), module_filter=small, progress=False)
    with pytest.raises(ValueError, match="make_model must return a torch.nn.Module"):
        fp8_throughput(lambda: "gpt", 1, recipes=("tensorwise",), progress=False)
    assert ran == []


@pytest.mark.parametrize(
    "fn, kwargs, words",
    [
        (fp8_curves, dict(progress=1), "progress"),
        (fp8_curves, dict(eval_every=0), "eval_every"),
        (fp8_throughput, dict(progress="yes"), "progress"),
        (fp8_throughput, dict(peak_tflops=0), "peak_tflops"),
        (linear_speed, dict(sizes=16), "sizes must be a list"),
        (linear_speed, dict(sizes=[16, 17]), "sizes must be multiples of 16"),
        (linear_speed, dict(sizes=[16], progress=1), "progress"),
    ],
)
def test_training_helpers_refuse_more_bad_arguments(fn, kwargs, words, monkeypatch):
    monkeypatch.setattr(training_mod, "train_lm", _must_not_run)
    monkeypatch.setattr(training_mod, "lm_throughput", _must_not_run)
    monkeypatch.setattr(training_mod, "_layer_row", _must_not_run)
    lang = SyntheticLanguage(vocab=32, order=1, branching=4)
    base = {fp8_curves: dict(make_model=lambda: GPT(TINY), lang=lang, steps=1, batch=1),
            fp8_throughput: dict(make_model=lambda: GPT(TINY), batch=1),
            linear_speed: dict(tokens=8, device="cpu")}[fn]
    with pytest.raises(ValueError, match=words):
        fn(**{**base, **kwargs})


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"fmts": ["fp8_e4m3", "fp8_e4m3"]}, "fmts lists 'fp8_e4m3' twice"),
    ({"granularities": ["tensor", "row", "tensor"]}, "granularities lists 'tensor' twice"),
])
def test_scaling_table_refuses_an_entry_listed_twice(kwargs, match):
    with pytest.raises(ValueError, match=match):
        scaling_table({"w": torch.randn(32, 32)}, **kwargs)


# ------------------------------------------------------------------ issue 33: every torch >= 2.9, and torchao's noise

@pytest.fixture
def no_cpu_rowwise(monkeypatch):
    """Behave as torch 2.11 does: its CPU _scaled_mm asserts on anything but per-tensor scales."""
    real = matmul_mod._call

    def per_tensor_only(api, fa, fb, sa, sb, out_dtype, fast):
        if fa.device.type == "cpu" and sa.dim() == 2:
            raise RuntimeError("INTERNAL ASSERT FAILED: _scaled_mm only supports per-tensor scaling for CPU backend")
        return real(api, fa, fb, sa, sb, out_dtype, fast)

    matmul_mod._cpu_rowwise_kernel.cache_clear()
    matmul_mod._api_for.cache_clear()
    monkeypatch.setattr(matmul_mod, "_call", per_tensor_only)
    yield
    matmul_mod._cpu_rowwise_kernel.cache_clear()
    matmul_mod._api_for.cache_clear()


@needs_cpu_fp8
def test_cpu_rowwise_is_emulated_exactly_where_the_kernel_is_per_tensor_only(no_cpu_rowwise):
    assert not matmul_mod._cpu_rowwise_kernel()
    assert scaled_mm_path("cpu", "rowwise").startswith("emulated") and "per-tensor" in scaled_mm_path("cpu", "rowwise")
    assert not scaled_mm_path("cpu", "tensorwise").startswith("emulated")
    assert "rowwise scales are emulated" in fp8_capable("cpu").reason
    g = torch.Generator().manual_seed(3)
    a, b = torch.randn(32, 64, generator=g), torch.randn(64, 48, generator=g)
    out = scaled_matmul(a, b, scaling="rowwise", out_dtype=torch.float32)
    qa, qb = quantize(a, "fp8_e4m3", "row"), quantize(b.t().contiguous(), "fp8_e4m3", "row")
    fa, fb = qa.data.double() * qa.inverse_scale.double(), qb.data.double() * qb.inverse_scale.double()
    # the float64 product of what _scaled_mm gets, rounded once to float32: within half a float32 ulp of
    # the float64 product, whatever order a CPU's float64 BLAS sums in (K * 2**-53 of the magnitudes)
    ref, mag = fa @ fb.t(), fa.abs() @ fb.abs().t()
    assert bool(((out.double() - ref).abs() <= 2.0**-24 * ref.abs() + fa.shape[1] * 2.0**-52 * mag).all())
    assert torch.allclose(out.double(), qa.dequantize().double() @ qb.dequantize().double().t(), rtol=1e-5, atol=1e-4)
    table = fp8_matmul_sweep([32], "cpu", min_run_time=0.01, progress=False)
    rowwise = table[table.kind == "fp8 rowwise"]
    assert (rowwise.error == "").all() and rowwise.path.str.startswith("emulated").all()
    assert (table[table.kind == "fp8 tensorwise"].path == scaled_mm_api("cpu")).all()


@needs_cpu_fp8
def test_the_rowwise_kernel_is_asked_about_once(no_cpu_rowwise, monkeypatch):
    calls = []
    real = matmul_mod._call
    monkeypatch.setattr(matmul_mod, "_call", lambda *args: calls.append(args[3].dim()) or real(*args))
    a, b = torch.randn(16, 32), torch.randn(32, 16)
    scaled_matmul(a, b, scaling="rowwise", out_dtype=torch.float32)
    probes = calls.count(2)
    assert probes >= 1  # asked: does this torch take rowwise scales on the CPU?
    for _ in range(3):
        scaled_matmul(a, b, scaling="rowwise", out_dtype=torch.float32)
    assert calls.count(2) == probes  # never again: the emulation runs without asking


@needs_cpu_fp8
def test_the_public_and_private_operators_give_the_same_product(monkeypatch):
    g = torch.Generator().manual_seed(5)
    a, b = torch.randn(32, 64, generator=g), torch.randn(64, 48, generator=g)
    public = hasattr(torch.nn.functional, "scaled_mm")
    if public:  # a release may ship the public function before the CPU has a kernel for it (torch 2.11)
        one = torch.ones(16, 16).to(torch.float8_e4m3fn)
        try:
            F_ = torch.nn.functional
            F_.scaled_mm(one, one.t(), torch.tensor(1.0), F_.ScalingType.TensorWise, torch.tensor(1.0),
                         F_.ScalingType.TensorWise, output_dtype=torch.bfloat16, use_fast_accum=False)
        except (RuntimeError, NotImplementedError, TypeError):
            public = False
    assert scaled_mm_api("cpu") == ("torch.nn.functional.scaled_mm" if public else "torch._scaled_mm")
    first = scaled_matmul(a, b, out_dtype=torch.float32)
    matmul_mod._api_for.cache_clear()
    monkeypatch.setattr(matmul_mod, "_has_public_api", lambda: False)
    try:
        assert scaled_mm_api("cpu") == "torch._scaled_mm"
        second = scaled_matmul(a, b, out_dtype=torch.float32)
    finally:
        matmul_mod._api_for.cache_clear()
    # Two kernels need not sum in the same order (one CPU's AVX2+FMA path differs from another's), so
    # not bit for bit: each must be the product of the same FP8 operands with FP32 accumulation, within
    # what that guarantees (FP8 x FP8 products are exact in FP32; K additions and the two scalings round).
    qa, qb = quantize(a, "fp8_e4m3"), quantize(b.t().contiguous(), "fp8_e4m3")
    fa, fb = qa.data.double() * qa.inverse_scale.double(), qb.data.double() * qb.inverse_scale.double()
    ref, mag = fa @ fb.t(), fa.abs() @ fb.abs().t()
    k = a.shape[1]
    bound = (k + 4) * 2.0**-24 / (1 - (k + 4) * 2.0**-24) * mag
    for name, out in (("public" if public else "private", first), ("private", second)):
        err = (out.double() - ref).abs()
        assert bool((err <= bound).all()), f"{name}: {float((err / bound.clamp_min(1e-300)).max()):.2f} x the FP32 bound"
    assert not torch.equal(first, torch.zeros_like(first))  # a real product, not a vacuous pass


def test_scaled_mm_path_refuses_bad_arguments():
    with pytest.raises(ValueError, match="scaling"):
        scaled_mm_path("cpu", "blockwise")


def test_torchao_import_noise_becomes_one_labelled_line(tmp_path, monkeypatch):
    """A torchao whose import logs failed extensions and warns: captured, summarised, not printed."""
    pkg = tmp_path / "torchao"
    (pkg / "float8").mkdir(parents=True)
    (pkg / "__init__.py").write_text(
        "import logging, warnings\n"
        "__version__ = '9.9.9'\n"
        "log = logging.getLogger(__name__)\n"
        "log.warning('Failed to load /x/torchao/_C_mxfp8.cpython-310-x86_64-linux-gnu.so: undefined symbol')\n"
        "log.warning('Failed to load /x/torchao/_C_cutlass_90a.abi3.so: undefined symbol')\n"
        "warnings.warn('invalid escape sequence', SyntaxWarning)\n")
    (pkg / "float8" / "__init__.py").write_text("")
    for name in [m for m in list(__import__("sys").modules) if m == "torchao" or m.startswith("torchao.")]:
        monkeypatch.delitem(__import__("sys").modules, name)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(layers_mod, "_IMPORT_NOTES", [])
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        status = torchao_status()
    assert err.getvalue() == ""
    assert status.available and status.version == "9.9.9"
    assert status.import_notes.startswith("torchao import notes (captured, not errors):")
    assert "2 optional C++ extension(s) not loaded (_C_mxfp8, _C_cutlass_90a" in status.import_notes
    assert "1 warning(s) from torchao's own source (SyntaxWarning)" in status.import_notes
    assert str(status).splitlines()[1] == status.import_notes and len(str(status).splitlines()) == 2
    assert torchao_status().import_notes == status.import_notes  # said once, kept


def test_a_quiet_import_adds_no_line():
    assert summarize_import_noise([], [], "") == ""
    assert "\n" not in str(layers_mod.TorchaoStatus(True, "1.0", ""))


def test_fp8_curves_seeds_are_checked_before_work(monkeypatch):
    monkeypatch.setattr(training_mod, "train_lm", _must_not_run)
    lang = SyntheticLanguage(vocab=32, order=1, branching=4, seed=0)
    for bad, words in (((), "seeds is empty"), ((0, 0), "seeds lists 0 twice"), ("01", "seeds must be a list, got '01'"),
                       ((0, -1), "seeds\\[1\\]")):
        with pytest.raises(ValueError, match=words):
            fp8_curves(lambda: GPT(TINY), lang, steps=2, batch=2, seeds=bad, precision="fp32",
                       module_filter=Fp8Filter(min_features=0))


@needs_torchao
@needs_cpu_fp8
def test_fp8_curves_runs_every_seed_with_its_own_batches():
    lang = SyntheticLanguage(vocab=32, order=1, branching=4, seed=0)
    frame = fp8_curves(lambda: GPT(TINY), lang, steps=2, batch=2, recipes=("tensorwise",), precision="fp32",
                       module_filter=Fp8Filter(min_features=0), eval_batches=1, progress=False, seeds=(0, 1))
    assert sorted(frame.groupby(["run", "seed"]).size().index.tolist()) == [
        ("fp32", 0), ("fp32", 1), ("fp8 tensorwise", 0), ("fp8 tensorwise", 1)]
    first = frame[frame.step == frame.step.min()].set_index(["run", "seed"]).loss
    assert first["fp32", 0] != first["fp32", 1]  # another seed: other weights and batches


@pytest.mark.parametrize(("speedups", "width"), [
    ({512: 0.65, 1024: 0.92, 2048: 0.82, 4096: 1.05}, 4096),  # the H200 reference's shape
    ({512: 1.1, 1024: 0.9, 2048: 1.2, 4096: 1.3}, 2048),     # a fast narrow layer does not count
    ({512: 1.2, 1024: 1.3}, 512),
    ({512: 0.5, 1024: 0.8}, None),                           # FP8 never pays here
])
def test_break_even_width_is_where_fp8_stops_losing(speedups, width):
    table = pd.DataFrame({"features": list(speedups), "speedup": list(speedups.values()), "error": ""})
    assert break_even_width(table) == width
    assert break_even_width(table.iloc[::-1]) == width  # order does not matter
    assert break_even_width(None) is None


def test_break_even_width_ignores_failed_rows_and_refuses_other_tables():
    table = pd.DataFrame({"features": [1024, 2048], "speedup": [1.1, float("nan")], "error": ["", "out of memory"]})
    assert break_even_width(table) == 1024
    with pytest.raises(ValueError, match="linear_speed's DataFrame"):
        break_even_width(pd.DataFrame({"n": [1]}))
