"""Tests of fp16lab.labs.benchmark: real tiny measurements on the CPU, and the run's logic (interleaved
rounds, spreads, targets, error/skip/OOM/time-out rows, budget) with fake sessions."""

from __future__ import annotations

import functools
import json
import math
import statistics
import time

import pandas as pd
import pytest
import torch
from torch import nn

from fp16lab.labs.benchmark import (
    COMPILE_MODES,
    COMPILED,
    CONFIGS,
    IDLE,
    RECOMMENDED,
    TARGETS,
    TRAIN_STEP,
    BenchConfig,
    BenchOptions,
    BenchResult,
    BenchSettings,
    add_mfu,
    bench_one,
    busy_fraction,
    comparison_table,
    compile_modes_table,
    kernel_ms,
    model_flops,
    plot_results,
    profile_table,
    readme_section,
    run_benchmark,
    side_by_side,
    targets_table,
    unsupported_reason,
)
from fp16lab.labs.benchmark.analysis import _verdict as verdict
from fp16lab.labs.benchmark.analysis import summarise
from fp16lab.labs.benchmark.configs import parse_configs, parse_model, validate_batch_sizes, validate_output
from fp16lab.labs.benchmark.measure import Session, finish_row
from fp16lab.labs.benchmark.measure import _settings_row as settings_row

TINY = BenchSettings(image_size=32, warmup=1, steps=1, windows=2, cpu_threads=1, num_classes=10)
CPU = torch.device("cpu")


class TinyNet(nn.Module):
    """A user's own model: 3-channel images in, 10 logits out."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.head = nn.Linear(8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.bn(self.conv(x))).mean((2, 3)))


# ------------------------------------------------------------------ fake sessions


class FakeSession:
    """Stands in for Session: no model; each timed window takes batch * steps / rate seconds.

    ``rates[config]`` is a list (one rate per round, cycled) or a number; ``mem[config]`` the peak
    GB; ``fail[(config, batch, when)]`` an exception raised at 'open' or at round ``when``;
    ``open_s[config]`` seconds that opening takes.
    """

    def __init__(self, spec, cfg, batch, s, task, dev, *, log, rates, mem=None, fail=None, open_s=None):
        self.spec, self.cfg, self.batch, self.s, self.task, self.dev = spec, cfg, batch, s, task, dev
        self.row = settings_row(spec, cfg, batch, s, task, dev)
        self.log, self.rates, self.mem, self.fail = log, rates, mem or {}, fail or {}
        self.open_s = (open_s or {}).get(cfg.name, 0.0)
        self.rounds = 0
        self.steps = 0

    def _raise(self, when):
        exc = self.fail.get((self.cfg.name, self.batch, when))
        if exc is not None:
            raise exc

    def open(self):
        self.log.append(("open", self.cfg.name, self.batch))
        if self.open_s:
            time.sleep(self.open_s)
        self._raise("open")
        self.row.update(peak_mem_gb=self.mem.get(self.cfg.name, 1.0), first_step_s=0.5, warmup_s=1.0)

    def warm(self, n):
        self.steps += n

    def skip_reason(self):  # a fake GPU: runs everything, CUDA-only configurations included
        return None

    def time(self, windows):
        self._raise(self.rounds)
        self.log.append(("time", self.cfg.name, self.batch))
        rate = self.rates.get(self.cfg.name, 100.0)
        if isinstance(rate, list):
            rate = rate[self.rounds % len(rate)]
        self.rounds += 1
        return [self.batch * self.s.steps / rate] * windows

    def close(self):
        self.row["steps_run"] = self.steps
        return self.row


def fake(log=None, **kw):
    """An opener for run_benchmark: FakeSession with the given rates, memory and failures."""
    log = [] if log is None else log
    return functools.partial(FakeSession, log=log, rates=kw.pop("rates", {}), **kw), log


def fake_run(configs, repeat, rates, *, rounds=3, batch=256, **kw):
    opener, log = fake(rates=rates, mem=kw.pop("mem", None), fail=kw.pop("fail", None))
    res = run_benchmark(TinyNet, configs, [batch], repeat=repeat, rounds=rounds, settings=TINY, device="cpu",
                        progress=False, opener=opener, **kw)
    return res, log


TARGET_RATES = {
    "article": [100.0, 100.0, 100.0],
    "fp32_default": [70.0, 75.0, 80.0],
    RECOMMENDED: [210.0, 190.0, 205.0],
    COMPILED: [235.0, 245.0, 238.0],
    TRAIN_STEP: [180.0, 185.0, 200.0],
}
TARGET_CONFIGS = ["article", "fp32_true", "fp32_default", RECOMMENDED, COMPILED, TRAIN_STEP]
TARGET_REPEAT = ["article", "fp32_default", RECOMMENDED, COMPILED, TRAIN_STEP]


# ------------------------------------------------------------------ real (tiny) measurement


def test_bench_one_records_settings_as_used_and_restores_flags():
    from fp16lab.precision import tf32_state

    before = (tf32_state(), torch.backends.cudnn.benchmark, torch.get_num_threads())
    row = bench_one("resnet18", "fp32_true", 2, settings=TINY, device="cpu")
    assert row["status"] == "ok", row["error"]
    assert (row["model"], row["config"], row["batch_size"], row["image_size"]) == ("resnet18", "fp32_true", 2, 32)
    assert row["tf32_matmul"] is False and row["tf32_cudnn"] is False and row["cudnn_benchmark"] is True
    assert row["memory_format"] == "NCHW" and row["compile"] is False and row["optimizer"] == "Adam(lr=0.001)"
    assert row["grad_scaler"] is False and row["amp_api"] == "none" and row["device"] == "cpu"
    assert row["steps_run"] == TINY.warmup + TINY.steps * TINY.windows and len(row["window_s"]) == TINY.windows
    oracle = statistics.median(2 * TINY.steps / t for t in row["window_s"])  # window_s is rounded to 1 us
    assert row["img_per_s"] == pytest.approx(oracle, rel=1e-3)
    assert row["img_per_s_min"] <= row["img_per_s"] <= row["img_per_s_max"]
    assert 0 < row["first_step_s"] <= row["warmup_s"]
    assert math.isnan(row["peak_mem_gb"]) and row["cpu_threads"] == 1  # no CUDA: no peak memory
    assert (tf32_state(), torch.backends.cudnn.benchmark, torch.get_num_threads()) == before


def test_bench_one_takes_a_model_factory_and_a_config_object():
    mine = BenchConfig("mine", "my FP32 channels_last", "fp32", channels_last=True, fused_adam=True)
    row = bench_one(lambda: TinyNet(), mine, 4, settings=TINY, device="cpu")
    assert row["status"] == "ok", row["error"]
    assert (row["config"], row["model"], row["model_class"]) == ("mine", "custom", "TinyNet")
    assert row["memory_format"] == "channels_last" and row["optimizer"] == "Adam(lr=0.001, fused=True)"
    assert bench_one(TinyNet, "fp32_default", 4, settings=TINY, device="cpu")["model"] == "TinyNet"


def test_fp16lab_train_step_config_runs_and_inference_runs_forward_only():
    row = bench_one(TinyNet, BenchConfig("ts", "train_step", "fp32", loop="train_step"), 4, settings=TINY, device="cpu")
    assert row["status"] == "ok" and row["loop"] == "train_step", row["error"]
    row = bench_one(TinyNet, "fp32_default", 4, settings=TINY, device="cpu", task="infer")
    assert row["status"] == "ok" and row["task"] == "infer" and row["optimizer"] == "none"


def test_unknown_compile_mode_is_an_error_row_not_an_exception(capsys):
    row = bench_one(TinyNet, BenchConfig("odd", "odd mode", "fp32", compile_mode="fastest"), 4, settings=TINY,
                    device="cpu")
    assert row["status"] == "error" and "fastest" in row["error"] and math.isnan(row["img_per_s"])
    assert "odd at batch 4: error" in capsys.readouterr().err


def test_a_factory_that_returns_no_module_is_an_error_row_and_a_module_instance_is_refused():
    row = bench_one(lambda: 3, "fp32_default", 4, settings=TINY, device="cpu")
    assert row["status"] == "error" and "must return an nn.Module, it returned int" in row["error"]
    with pytest.raises(ValueError, match=r"got an nn.Module instance \(TinyNet\); pass e.g. lambda: TinyNet\(\)"):
        bench_one(TinyNet(), "fp32_default", 4, settings=TINY, device="cpu")


def test_what_the_device_cannot_run_is_a_skipped_row_with_the_reason(monkeypatch):
    row = bench_one(TinyNet, "article", 4, settings=TINY, device="cpu")
    assert row["status"] == "skipped" and "needs a CUDA GPU" in row["error"]
    from fp16lab import hardware

    t4 = hardware.GPUFacts(0, "Tesla T4", "Tesla T4", (7, 5), 40, 16 * 2**30, 16 * 2**30, hardware.peak_for("Tesla T4"),
                           hardware.chip_features((7, 5), "Tesla T4"))
    monkeypatch.setattr(hardware, "gpu_facts", lambda device=None: t4)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # a T4 here (a GPU this machine lacks is refused)
    cuda = torch.device("cuda")
    assert "bf16 needs compute capability 8.0" in unsupported_reason(CONFIGS["bf16_cl"], cuda)
    assert "sm_75" in unsupported_reason(CONFIGS["tf32"], cuda)
    assert unsupported_reason(CONFIGS[RECOMMENDED], cuda) is None
    assert unsupported_reason(CONFIGS["fp32_default"], cuda) is None  # TF32 convs asked for: FP32 there


def test_model_flops_match_torchvision_multiply_adds_and_count_factories():
    from torchvision.models import ResNet18_Weights

    f = model_flops("resnet18", 224)
    macs = ResNet18_Weights.IMAGENET1K_V1.meta["_ops"] * 1e9  # torchvision's "GFLOPS" are multiply-adds
    assert f["forward"] == pytest.approx(2 * macs, rel=0.02)
    assert 2.8 < f["train"] / f["forward"] < 3.2  # backward ~ 2x forward
    mine = model_flops(TinyNet, 8, 10)
    conv, head = 2 * 8 * 3 * 9 * 8 * 8, 2 * 8 * 10  # per image, 2 FLOPs per multiply-add
    assert mine["forward"] == pytest.approx(conv + head)


def test_mfu_is_achieved_flops_over_the_fp16_peak():
    frame = pd.DataFrame({"img_per_s": [1000.0, 2000.0], "status": ["ok", "ok"]})
    out = add_mfu(frame, 24e9, 989.5)
    assert out["tflops"].tolist() == pytest.approx([24.0, 48.0])
    assert out["mfu"].tolist() == pytest.approx([24.0 / 989.5, 48.0 / 989.5])
    assert add_mfu(frame, 24e9, None)["mfu"].isna().all()
    with pytest.raises(ValueError, match="flops_per_image must be a finite number > 0, got 0"):
        add_mfu(frame, 0, 989.5)


def test_the_peak_is_the_real_chips_under_a_profile(monkeypatch):
    from fp16lab import hardware
    from fp16lab.labs.benchmark.run import _peak_and_flops, make_plan

    facts = hardware.GPUFacts(0, "NVIDIA GeForce RTX 4090 D", "NVIDIA H200", (8, 9), 114, 24 * 2**30, 141 * 2**30,
                              hardware.peak_for("RTX 4090 D"), hardware.chip_features((8, 9)), profile="rtx4090d")
    monkeypatch.setattr(hardware, "gpu_facts", lambda device=None: facts)
    plan = make_plan(BenchOptions("resnet18", ["fp32_default"], [2], repeat=[], rounds=1, sweep_configs=[],
                                  settings=TINY, device="cpu"))
    out = _peak_and_flops(plan.__class__(**{**plan.__dict__, "dev": torch.device("cuda")}))
    assert out["peak_tflops_fp16"] == hardware.PEAK_TFLOPS["H200"].fp16 and out["peak_gpu"] == "H200"
    assert out["flops_per_image"] == pytest.approx(model_flops("resnet18", 32, 10)["train"])


# ------------------------------------------------------------------ interleaved rounds, spreads, targets


def test_rounds_open_everything_first_then_interleave():
    res, log = fake_run(["article", "fp32_true", RECOMMENDED, COMPILED], ["article", RECOMMENDED, COMPILED],
                        {"article": 100.0, RECOMMENDED: 200.0, COMPILED: 240.0})
    calls = [(a, c) for a, c, _ in log]
    assert calls[:3] == [("open", "article"), ("open", RECOMMENDED), ("open", COMPILED)]
    assert calls[3:12] == [("time", c) for c in ("article", RECOMMENDED, COMPILED) * 3]
    assert calls[12:] == [("open", "fp32_true"), ("time", "fp32_true")]  # single runs after the rounds
    f = res.frame
    rep = f[f["part"] == "repeat"]
    assert len(rep) == 9 and sorted(rep["round"].unique()) == [0, 1, 2]
    comp = f[f["part"] == "comparison"].set_index("config")
    assert comp.loc[COMPILED, "rounds"] == 3 and comp.loc[COMPILED, "img_per_s"] == pytest.approx(240.0)
    assert math.isnan(comp.loc["fp32_true", "round"])
    assert res.metadata["benchmark"]["repeat"] == ["article", RECOMMENDED, COMPILED]
    assert res.metadata["benchmark"]["rounds"] == 3


def test_a_ratio_is_the_median_of_per_round_ratios_with_its_spread():
    res, _ = fake_run(TARGET_CONFIGS, TARGET_REPEAT, TARGET_RATES, mem={RECOMMENDED: 4.0, "fp32_true": 10.0})
    t = targets_table(res.frame).set_index("target")
    first = t.loc["recommended / article's loop"]
    assert first["values"] == [2.1, 1.9, 2.05] and first["source"] == "interleaved rounds"
    assert first["median"] == pytest.approx(2.05) and first["spread"] == pytest.approx(0.15) and first["n"] == 3
    assert first["verdict"] == "met"
    default = t.loc["recommended / PyTorch default FP32"]  # 3.0, 2.53, 2.5625: missed by less than the spread
    assert default["median"] == pytest.approx(205 / 80) and default["verdict"] == "within noise"
    compiled = t.loc["compiled / article's loop"]  # 2.38 against 2.4 (spread 0.07), stretch 2.6
    assert compiled["verdict"] == "within noise" and compiled["stretch verdict"] == "missed"
    memory = t.loc["FP16 peak memory / true FP32"]
    assert memory["median"] == pytest.approx(0.4) and memory["n"] == 1 and memory["source"] == "single runs"
    assert memory["verdict"] == "met"
    assert t.loc["fp16lab train_step / hand-written step", "median"] == pytest.approx(185 / 190)
    stored = {r["target"]: r for r in res.metadata["targets"]}  # the results file records them
    assert stored["compiled / article's loop"]["verdict"] == "within noise"
    assert stored["recommended / article's loop"]["values"] == [2.1, 1.9, 2.05]


def test_verdicts_and_spread_rules():
    assert summarise([2.1, 1.9, 2.05]) == (pytest.approx(2.05), pytest.approx(0.15), 3)
    assert summarise([]) == (pytest.approx(math.nan, nan_ok=True), pytest.approx(math.nan, nan_ok=True), 0)
    assert verdict(2.0, 0.0, ">=", 2.0) == "met"
    assert verdict(1.9, 0.1, ">=", 2.0) == "within noise"
    assert verdict(1.89, 0.1, ">=", 2.0) == "missed"
    assert verdict(0.5, 0.06, "<=", 0.45) == "within noise" and verdict(0.5, 0.0, "<=", 0.45) == "missed"
    assert verdict(math.nan, 0.0, ">=", 2.0) == "not measured"
    assert [t.name for t in TARGETS][:2] == ["recommended / article's loop", "recommended / PyTorch default FP32"]


def test_missed_targets_say_so_and_missing_configs_are_not_measured():
    rates = dict(TARGET_RATES, fp32_default=[100.0, 100.0, 100.0])
    res, _ = fake_run(["article", "fp32_default", RECOMMENDED], ["article", "fp32_default", RECOMMENDED], rates)
    t = targets_table(res.frame).set_index("target")
    assert t.loc["recommended / PyTorch default FP32", "verdict"] == "missed"
    assert t.loc["compiled / article's loop", "verdict"] == "not measured"
    assert t.loc["compiled / article's loop", "n"] == 0


def test_oom_at_build_and_failure_mid_rounds_are_rows_and_the_rest_goes_on(capsys):
    fail = {(COMPILED, 256, "open"): torch.OutOfMemoryError("CUDA out of memory (fake)"),
            ("article", 256, 1): RuntimeError("capture broke\nmore")}
    res, log = fake_run(["article", RECOMMENDED, COMPILED], ["article", RECOMMENDED, COMPILED],
                        {"article": 100.0, RECOMMENDED: 200.0}, fail=fail)
    comp = res.frame[res.frame["part"] == "comparison"].set_index("config")
    assert comp.loc[COMPILED, "status"] == "OOM"
    assert comp.loc["article", "status"] == "error" and comp.loc["article", "error"] == "RuntimeError: capture broke"
    assert comp.loc[RECOMMENDED, "status"] == "ok" and comp.loc[RECOMMENDED, "rounds"] == 3
    rep = res.frame[res.frame["part"] == "repeat"]
    assert rep.groupby("config").size().to_dict() == {"article": 1, RECOMMENDED: 3}  # round 0 of the article kept
    assert comparison_table(res.frame).set_index("config").loc[COMPILED, "img/s"] == "OOM"
    assert "article at batch 256: error: RuntimeError: capture broke" in capsys.readouterr().err


def test_time_budget_stops_rounds_and_skips_what_has_not_started(monkeypatch):
    from fp16lab.labs.benchmark import run as run_module

    now = [0.0]
    monkeypatch.setattr(run_module, "_clock", lambda: now[0])

    class Slow(FakeSession):
        def time(self, windows):
            now[0] += 10.0  # every timed window takes 10 s of the budget
            return super().time(windows)

    opener = functools.partial(Slow, log=[], rates={})
    res = run_benchmark(TinyNet, ["article", "fp32_true", RECOMMENDED], [8], repeat=["article", RECOMMENDED],
                        rounds=5, settings=TINY, device="cpu", progress=False, opener=opener, time_budget_s=15,
                        explore=["fp16_cl_graph"])
    rep = res.frame[res.frame["part"] == "repeat"]
    assert rep["round"].max() == 0  # round 1 would start at 20 s > 15 s: stopped after one round
    assert res.metadata["benchmark"]["rounds_done"] == 1
    rows = res.frame.set_index("config")
    assert rows.loc["fp32_true", "status"] == "skipped" and "time budget of 15 s" in rows.loc["fp32_true", "error"]
    assert rows.loc["fp16_cl_graph", "part"] == "explore" and rows.loc["fp16_cl_graph", "status"] == "skipped"


def test_compile_time_box_makes_a_timeout_row():
    opener, _ = fake(rates={}, open_s={COMPILED: 5.0})
    res = run_benchmark(TinyNet, ["fp32_default"], [8], repeat=[], settings=TINY, device="cpu", progress=False,
                        opener=opener, explore=[CONFIGS[COMPILED]], compile_timeout_s=0.3)
    assert res.frame.set_index("config").loc["fp32_default", "status"] == "ok"  # not compiled: no time box
    row = res.frame.set_index("config").loc[COMPILED]
    assert row["status"] == "timeout" and "within its time box of 0.3 s" in row["error"]


def test_kernel_kinds_and_the_step_breakdown():
    from fp16lab.labs.benchmark.profile import breakdown, kernel_kind

    names = {
        "void cudnn::ops::nchwToNhwcKernel<__half, __half, float, false, true>": "layout transposes",
        "sm90_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc": "convolution / matmul",
        "triton_per_fused__native_batch_norm_legit_functional_relu_12": "batch norm",
        "void at::native::vectorized_elementwise_kernel<4, at::native::threshold_kernel_impl>": "elementwise",
        "void at::native::multi_tensor_apply_kernel<FusedAdamMathFunctor<c10::Half>>": "optimizer and scaler",
        "void at::native::amp_update_scale_cuda_kernel(float*, int*, float const*)": "optimizer and scaler",
        "void (anonymous namespace)::cunn_SoftMaxForward<4, float>": "loss",
        "Memset (Device)": "other",
    }
    assert {n: kernel_kind(n) for n in names} == names
    t = breakdown([(n, 1000.0) for n in names], steps=2, step_ms=10.0).set_index("kind")
    assert t.loc["optimizer and scaler", "ms_per_step"] == pytest.approx(1.0)  # two kernels, 1 ms each over 2 steps
    assert t.loc[IDLE, "ms_per_step"] == pytest.approx(10.0 - 4.0) and IDLE == "GPU idle (launch gaps, host)"
    assert t["share_of_step"].sum() == pytest.approx(1.0)


def test_profile_steps_counts_only_the_gpus_own_events(fake_profiler):
    # A host event (cudaLaunchKernel) can carry its kernel's time, and a user annotation spans
    # kernels on the GPU timeline: neither may count again. The oracle is the kernels' own times.
    import types

    from torch.autograd import DeviceType

    from fp16lab.labs.benchmark.profile import profile_steps

    def event(name, device_type, us, annotation=False):
        return types.SimpleNamespace(name=name, device_type=device_type, is_user_annotation=annotation,
                                     time_range=types.SimpleNamespace(elapsed_us=lambda: us))

    events = [event("cudaLaunchKernel", DeviceType.CPU, 700.0), event("aten::conv2d", DeviceType.CPU, 0.0),
              event("sm90_xmma_fprop", DeviceType.CUDA, 500.0), event("elementwise_kernel", DeviceType.CUDA, 200.0),
              event("ProfilerStep#1", DeviceType.CUDA, 900.0, annotation=True)]
    fake_profiler(events)
    warmed = []
    session = types.SimpleNamespace(dev=torch.device("cuda"), warm=warmed.append)
    assert profile_steps(session, steps=3) == [("sm90_xmma_fprop", 500.0), ("elementwise_kernel", 200.0)]
    assert warmed == [1, 3]


def test_profile_is_recorded_in_the_metadata_and_a_failed_one_says_why():
    from fp16lab.labs.benchmark import profile_table

    res, _ = fake_run(["article", RECOMMENDED], ["article", RECOMMENDED], {}, profile=[RECOMMENDED])
    assert list(res.metadata["step_profile"]) == [RECOMMENDED]  # a CPU cannot profile kernels: recorded
    assert "need a CUDA GPU" in profile_table(res.metadata).loc["error", RECOMMENDED]
    with pytest.raises(ValueError, match="must be among the repeated configurations"):
        fake_run(["article", RECOMMENDED], ["article"], {}, profile=[RECOMMENDED])


def test_sweep_and_exploration_follow_the_comparison():
    res, log = fake_run(["fp32_default", "bf16"], [], {}, batch=4, sweep_batch_sizes=[2, 4],
                        sweep_configs=["fp32_default"], explore=["fp16_cl_graph"])
    assert [(c, b) for a, c, b in log if a == "open"] == [("fp32_default", 4), ("bf16", 4), ("fp32_default", 2),
                                                            ("fp16_cl_graph", 4)]
    explored = res.frame.set_index("config").loc["fp16_cl_graph"]
    assert explored["part"] == "explore" and explored["status"] == "ok"
    assert comparison_table(res.frame, "explore")["x_article"].isna().all()  # no article row: no ratio
    assert sorted(comparison_table(res.frame, "sweep")["batch"]) == [2, 4]


def test_run_benchmark_metadata_and_json_round_trip(tmp_path):
    out = tmp_path / "b.json"
    opener, _ = fake(rates={"fp32_true": 50.0})
    res = run_benchmark(TinyNet, ["fp32_true", "fp32_default"], [2], repeat=["fp32_default"], settings=TINY,
                        device="cpu", output=out, progress=False, metadata={"note": "test"}, opener=opener)
    assert res.path == out and out.exists() and out.with_suffix(".csv").exists()
    for k in ("device", "torch", "cuda", "cudnn", "tf32_matmul", "tf32_cudnn", "date", "mode", "targets"):
        assert k in res.metadata
    b = res.metadata["benchmark"]
    assert b["configs"] == ["fp32_true", "fp32_default"] and b["batch_sizes"] == [2] and b["repeat"] == ["fp32_default"]
    assert b["flops_per_image"] == pytest.approx(model_flops(TinyNet, 32, 10)["train"]) and b["model"] == "TinyNet"
    assert "FlopCounterMode" in b["flop_method"] and b["peak_tflops_fp16"] is None  # a CPU has no FP16 peak
    assert res.metadata["note"] == "test" and res.metadata["device"] == "CPU"
    back = BenchResult.load(out)
    assert back.metadata == json.loads(json.dumps(dict(res.metadata, interrupted=False)))
    assert list(back.frame.columns) == list(res.frame.columns) and back.frame["mfu"].isna().all()
    assert back.frame["config"].tolist() == res.frame["config"].tolist()
    assert "<table" in back._repr_html_() and "CPU" in back._repr_html_()


def test_ctrl_c_keeps_and_saves_the_rows_so_far(tmp_path, capsys):
    out = tmp_path / "partial.json"
    opener, log = fake(rates={}, fail={("bf16", 8, "open"): KeyboardInterrupt()})
    res = run_benchmark(TinyNet, ["fp32_true", "fp32_default", "bf16", "bf16_cl"], [8], repeat=[], device="cpu",
                        settings=TINY, output=out, progress=False, opener=opener)
    assert res.interrupted and res.frame["config"].tolist() == ["fp32_true", "fp32_default"]
    assert [c for a, c, _ in log if a == "open"] == ["fp32_true", "fp32_default", "bf16"]  # bf16_cl never started
    saved = BenchResult.load(out)
    assert saved.interrupted and saved.frame["config"].tolist() == ["fp32_true", "fp32_default"]
    assert "interrupted (Ctrl-C) after 2 rows" in capsys.readouterr().err and "INTERRUPTED" in repr(res)


# ------------------------------------------------------------------ bad input, before any work


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"model": "resnet5O"}, r"unknown model 'resnet5O'.*resnet50"),
        ({"model": 5}, r"model must be a torchvision model name or a function returning an nn.Module, got 5"),
        ({"configs": ["fp16_nhwc"]}, r"configs\[0\] must be one of 'article', 'fp32_true'.*; got 'fp16_nhwc'"),
        ({"configs": ["fp32_true", "fp32_true"]}, r"configs lists 'fp32_true' twice \(entries 0 and 1\); give each once"),
        ({"repeat": ["bf16"]}, r"repeat: \['bf16'\] are not among the configurations"),
        ({"rounds": 0}, "rounds must be an int >= 1, got 0"),
        ({"rounds": True}, "rounds must be an int >= 1, got True"),
        ({"explore": ["fp32_true"]}, r"explore: \['fp32_true'\] are already in the comparison"),
        ({"precisions": ["fp8"]}, r"unknown precision 'fp8'; allowed: 'fp32'"),
        ({"precisions": ["fp16"]}, r"no configuration in \['fp32_true'\]"),
        ({"batch_sizes": [8, 0]}, r"batch_sizes\[1\] must be an int >= 1, got 0"),
        ({"batch_sizes": [True]}, "got True"),
        ({"batch_sizes": []}, r"batch_sizes is empty: pass a list with at least one entry, e.g. \[256\]"),
        ({"sweep_batch_sizes": [0]}, r"sweep_batch_sizes\[0\] must be an int >= 1, got 0"),
        ({"task": "eval"}, r"task must be one of 'train', 'infer'; got 'eval'"),
        ({"output": "results.csv"}, r"must end in \.json, got 'results.csv'"),
        ({"time_budget_s": -1}, r"time_budget_s must be a finite number > 0, got -1"),
        ({"settings": {"steps": 1}}, "settings must be a BenchSettings"),
    ],
)
def test_bad_input_fails_before_any_work(kwargs, match):
    opener, log = fake(rates={})
    args = {"model": "resnet18", "configs": ["fp32_true"], "batch_sizes": [2], "device": "cpu",
            "settings": TINY, "progress": False, "opener": opener, **kwargs}
    with pytest.raises(ValueError, match=match):
        run_benchmark(**args)
    assert log == []


def test_unwritable_output_fails_before_any_work(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    opener, log = fake(rates={})
    with pytest.raises(ValueError, match="cannot be written"):
        run_benchmark("resnet18", ["fp32_true"], [2], device="cpu", output=blocker / "out.json", settings=TINY,
                      progress=False, opener=opener)
    assert log == []
    folder = tmp_path / "looks_like.json"
    folder.mkdir()
    with pytest.raises(ValueError, match="is a folder"):
        validate_output(folder)


def test_config_and_settings_validation():
    assert validate_batch_sizes([1, 256]) == [1, 256]
    assert [c.name for c in parse_configs(["fp32_true", CONFIGS["bf16"]])] == ["fp32_true", "bf16"]
    assert parse_model("resnet50").factory is None and parse_model(TinyNet).name == "TinyNet"
    assert BenchConfig("x", "x", "bf16").precision.value == "bf16"
    with pytest.raises(ValueError, match="compile_mode must be None"):
        BenchConfig("x", "x", "fp16", compile_mode=True)
    with pytest.raises(ValueError, match="channels_last must be True or False, got 1"):
        BenchConfig("x", "x", "fp16", channels_last=1)
    with pytest.raises(ValueError, match="loop must be one of 'article', 'hand', 'train_step'"):
        BenchConfig("x", "x", "fp16", loop="mine")
    with pytest.raises(ValueError, match="unknown precision 'half'"):
        BenchConfig("x", "x", "half")
    with pytest.raises(ValueError, match="warmup must be an int >= 1, got 0"):
        BenchSettings(warmup=0)
    with pytest.raises(ValueError, match="cpu_threads must be an int >= 1, got 0"):
        BenchSettings(cpu_threads=0)
    assert CONFIGS[RECOMMENDED].fused_adam and CONFIGS[RECOMMENDED].channels_last
    assert CONFIGS[COMPILED].compile_mode == "default" and CONFIGS["fp16_cl_fused_graph"].cuda_only
    assert CONFIGS["fp16_cl_fused_graph"].optimizer == "Adam(lr=0.001, fused=True, capturable=True)"


# ------------------------------------------------------------------ tables, README


@functools.lru_cache(maxsize=1)
def _fake_result():
    res, _ = fake_run(TARGET_CONFIGS, TARGET_REPEAT, TARGET_RATES, mem={RECOMMENDED: 4.0, "fp32_true": 10.0},
                      explore=["fp16_cl_fused_compile_reduce_overhead"])
    return res.frame


def _fake_frame():
    f = _fake_result().copy()
    f.loc[f["config"] == "fp32_true", "status"] = "OOM"
    return f


def test_comparison_table_ratios_come_from_comparison_rows():
    t = comparison_table(_fake_frame()).set_index("config")
    assert t.loc[RECOMMENDED, "x_article"] == pytest.approx(2.05)
    assert t.loc["article", "x_article"] == 1.0 and t.loc["fp32_true", "img/s"] == "OOM"
    assert t.loc[RECOMMENDED, "first step s"] == 0.5 and list(t.index).count(RECOMMENDED) == 1
    e = comparison_table(_fake_frame(), "explore").set_index("config")
    assert e.loc["fp16_cl_fused_compile_reduce_overhead", "x_article"] == 1.0
    with pytest.raises(ValueError, match="'bogus'"):
        comparison_table(_fake_frame(), "bogus")


def test_side_by_side_puts_the_article_claim_next_to_a_run():
    t = side_by_side({"run": BenchResult(_fake_frame(), {"device": "G", "date": "d"})}, fp32="fp32_default")
    art, run = t.iloc[0], t.iloc[1]
    assert art["fp32 img/s"] == 1200 and art["half img/s"] == 2200 and art["memory ratio"] == pytest.approx(4.2 / 8.5)
    assert run["speed-up"] == pytest.approx(100 / 75) and run["recipe / fp32"] == pytest.approx(205 / 75)
    assert math.isnan(side_by_side({"r": BenchResult(_fake_frame(), {})}, half="bf16").iloc[1]["half img/s"])
    with pytest.raises(ValueError, match="'fp8'"):
        side_by_side({}, half="fp8")


def test_readme_section_tables_plot_and_article_claim(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    path = tmp_path / "r.json"
    meta = {"device": "FAKE GPU", "date": "2026-01-01", "torch": "x",
            "benchmark": {"model": "resnet50", "windows": 3, "steps": 10, "rounds": 3},
            "step_profile": {RECOMMENDED: [{"kind": "batch norm", "ms_per_step": 10.0, "share_of_step": 0.25},
                                           {"kind": "GPU idle (launch gaps, host)", "ms_per_step": 30.0,
                                            "share_of_step": 0.75}]}}
    BenchResult(_fake_frame(), meta).save(path)
    md = readme_section(path)
    assert (tmp_path / "r.png").stat().st_size > 1000
    assert "1200" in md and "2200" in md and "8.5" in md and "4.2" in md and "RTX 4090D" in md
    assert "FAKE GPU" in md and "2026-01-01" in md and "3 interleaved rounds" in md
    assert "| FP32, true (TF32 off) | 256 | OOM |" in md
    assert f"| **{CONFIGS[RECOMMENDED].label}** | 256 | 205 |" in md
    assert "| compiled / article's loop | >= 2.4 | 2.380 | 0.070 | 3 rounds | within noise; stretch >= 2.6: missed |" in md
    assert f"| share of a step (profiled) | {CONFIGS[RECOMMENDED].label} |" in md and "| batch norm | 25% |" in md
    assert "| also tried (single runs) |" in md and CONFIGS["fp16_cl_fused_compile_reduce_overhead"].label in md


# ------------------------------------------------------------------ command line


def test_cli_quick_cpu_run(tmp_path, monkeypatch, capsys):
    from fp16lab.__main__ import main

    monkeypatch.setenv("FP16LAB_QUICK", "1")
    out = tmp_path / "cli.json"
    rc = main(["bench", "--configs", "fp32_true", "article", "--repeat", "--batch-sizes", "2", "--steps", "1",
               "--windows", "1", "--warmup", "1", "--output", str(out), "--no-progress", "--device", "cpu"])
    text = capsys.readouterr().out
    assert rc == 0
    assert "QUICK MODE" in text and "QUICK CPU MODE" in text and "CPU numbers, not FP16" in text
    assert "fp32_true" in text and "skipped" in text and "article (RTX 4090D, cited)" in text and "targets" in text
    res = BenchResult.load(out)
    assert res.frame["model"].unique().tolist() == ["resnet18"] and res.frame["image_size"].unique().tolist() == [32]
    assert res.frame.set_index("config").loc["fp32_true", "cpu_threads"] == 1  # quick default on the CPU
    assert res.metadata["benchmark"]["quick"] is True and res.metadata["mode"] == "quick"


def test_cli_bad_input_exits_2_with_the_allowed_values(tmp_path, capsys, monkeypatch):
    from fp16lab.__main__ import main

    monkeypatch.setenv("FP16LAB_QUICK", "1")
    rc = main(["bench", "--configs", "fp64", "--output", str(tmp_path / "x.json")])
    err = capsys.readouterr().err
    assert rc == 2 and "configs[0] must be one of 'article'" in err and "got 'fp64'" in err and RECOMMENDED in err
    assert not (tmp_path / "x.json").exists()
    assert main(["bench", "--batch-sizes", "0", "--output", str(tmp_path / "x.json")]) == 2
    assert "got 0" in capsys.readouterr().err
    assert main(["bench", "--readme-from", str(tmp_path / "missing.json")]) == 2
    assert "missing.json' does not exist" in capsys.readouterr().err
    assert main(["bench", "--reference", "--device", "cpu"]) == 2
    assert "--reference needs a CUDA GPU" in capsys.readouterr().err


def test_cli_reference_plan_is_the_documented_one():
    import argparse

    from fp16lab.labs.benchmark.cli import REFERENCE, _options, add_bench_parser

    parser = argparse.ArgumentParser()
    add_bench_parser(parser.add_subparsers(dest="command"))
    o = _options(parser.parse_args(["bench", "--reference"]), CPU)
    assert o.configs == REFERENCE.configs and o.repeat == REFERENCE.repeat and o.rounds == 5
    assert o.explore == list(REFERENCE.explore) and list(o.sweep_batch_sizes) == [64, 128, 512]
    assert o.time_budget_s == 480 and o.compile_timeout_s == 150 and list(o.batch_sizes) == [256]
    assert o.settings == BenchSettings(image_size=224, warmup=5, steps=10, windows=3) and o.device == CPU
    o = _options(parser.parse_args(["bench", "--reference", "--rounds", "3", "--time-budget", "60"]), CPU)
    assert o.rounds == 3 and o.time_budget_s == 60


def test_every_flag_of_the_cli_is_an_option_or_says_how_the_run_reports():
    """The options are spelled once: each bench flag lands on the BenchOptions field of its name."""
    import argparse

    from fp16lab.labs.benchmark.cli import add_bench_parser
    from fp16lab.labs.benchmark.configs import BenchSettings
    from fp16lab.labs.benchmark.options import OPTION_NAMES

    parser = argparse.ArgumentParser()
    add_bench_parser(parser.add_subparsers(dest="command"))
    dests = set(vars(parser.parse_args(["bench"]))) - {"command", "func"}
    settings = {f for f in BenchSettings.__dataclass_fields__ if f not in ("num_classes", "seed")}
    reporting = {"reference", "output", "no_progress", "readme_from", "png", "explore_default", "no_cudnn_benchmark"}
    assert dests - set(OPTION_NAMES) - settings - reporting == set()
    assert set(OPTION_NAMES) - {"settings"} <= dests


def test_options_are_refused_by_name_and_read_back_from_a_run(tmp_path):
    with pytest.raises(ValueError, match=r"unknown benchmark option\(s\) \['round'\]; allowed: model, configs"):
        run_benchmark(TinyNet, ["fp32_default"], [2], round=1, settings=TINY, device="cpu", progress=False)
    res = run_benchmark(TinyNet, ["fp32_default", "fp32_true"], [2], repeat=["fp32_default"], rounds=2, settings=TINY,
                        device="cpu", progress=False, output=tmp_path / "r.json")
    back = BenchResult.load(tmp_path / "r.json").options()
    assert back.configs == ("fp32_default", "fp32_true") and back.repeat == ("fp32_default",) and back.rounds == 2
    assert back.settings == TINY and back.task == "train" and tuple(back.batch_sizes) == (2,)
    assert back == res.options()


def test_cli_entry_is_registered():
    from fp16lab.__main__ import build_parser

    args = build_parser().parse_args(["bench", "--configs", RECOMMENDED, "--sweep", "--repeat"])
    assert args.configs == [RECOMMENDED] and args.sweep_batch_sizes == [] and args.repeat == []


def test_window_timer_is_public_and_times_each_window():
    from fp16lab.timing import time_windows

    secs = time_windows(lambda: time.sleep(0.01), "cpu", 3)
    assert len(secs) == 3 and all(0.009 < t < 0.5 for t in secs)
    with pytest.raises(ValueError, match="windows must be an int >= 1, got 0"):
        time_windows(lambda: None, "cpu", 0)


def test_finish_row_is_the_median_of_window_rates():
    row = finish_row(settings_row(parse_model("resnet18"), CONFIGS["fp32_true"], 4, TINY, "train", CPU),
                     [0.1, 0.2, 0.4], 4, 1)
    assert row["img_per_s"] == pytest.approx(20.0) and row["spread"] == pytest.approx((40 - 10) / 20)
    assert row["step_ms"] == pytest.approx(200.0) and isinstance(Session, type)


# ------------------------------------------------------------------ GPU only

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@cuda
def test_article_loop_on_gpu_records_its_deprecation_warnings_without_leaking_them():
    import warnings

    s = BenchSettings(image_size=64, warmup=1, steps=2, windows=2)
    with warnings.catch_warnings(record=True) as leaked:
        warnings.simplefilter("always")
        row = bench_one("resnet18", "article", 8, settings=s, device="cuda")
    assert row["status"] == "ok" and row["amp_api"] == "torch.cuda.amp (deprecated)" and row["grad_scaler"]
    assert "FutureWarning" in row["warnings"] and "torch.cuda.amp" in row["warnings"]
    assert not [w for w in leaked if "torch.cuda.amp" in str(w.message)]
    assert row["peak_mem_gb"] > 0 and row["peak_reserved_gb"] >= 0


@cuda
def test_fp16_uses_less_memory_than_true_fp32_and_the_graph_capture_runs_on_gpu():
    s = BenchSettings(image_size=64, warmup=2, steps=2, windows=2)
    fp32 = bench_one("resnet50", "fp32_true", 32, settings=s, device="cuda")
    fp16 = bench_one("resnet50", RECOMMENDED, 32, settings=s, device="cuda")
    assert fp16["peak_mem_gb"] < fp32["peak_mem_gb"]
    graph = bench_one("resnet18", "fp16_cl_fused_graph", 16, settings=s, device="cuda")
    assert graph["status"] == "ok", graph["error"]


# ------------------------------------------------------------ bad input: unlisted neighbours (audit)


@pytest.mark.parametrize(
    ("kw", "match"),
    [
        ({"configs": []}, "configs is empty"),
        ({"configs": "fp32_true"}, "configs must be a list"),
        ({"repeat": "fp32_true"}, "repeat must be a list"),
        ({"explore": "bf16_cl"}, "explore must be a list"),
        ({"precisions": "fp32"}, "precisions must be a list"),
        ({"batch_sizes": [4, 4]}, "batch_sizes lists 4 twice"),
        ({"sweep_batch_sizes": 3}, "sweep_batch_sizes must be a list"),
        ({"sweep_batch_sizes": [8, 8]}, "sweep_batch_sizes lists 8 twice"),
        ({"metadata": {"x": object()}}, "metadata cannot be stored as JSON"),
        ({"metadata": {1: "a"}}, "metadata keys must be strings"),
        ({"progress": 1}, "progress must be True or False"),
    ],
)
def test_run_benchmark_refuses_before_measuring_or_creating_the_folder(tmp_path, kw, match):
    opener, log = fake(rates={"fp32_true": 50.0})
    args = {"configs": ["fp32_true"], "batch_sizes": [4], "progress": False, **kw}
    with pytest.raises(ValueError, match=match):
        run_benchmark(TinyNet, settings=TINY, device="cpu", opener=opener, output=tmp_path / "sub" / "r.json", **args)
    assert log == [] and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("factory", [lambda x: TinyNet(), functools.partial(lambda a, b: TinyNet(), 1)])
def test_a_model_factory_that_needs_arguments_is_refused_up_front(factory):
    with pytest.raises(ValueError, match="model: a model factory must be callable with no arguments"):
        bench_one(factory, "fp32_true", 2, settings=TINY, device="cpu")


@pytest.mark.parametrize("call", [lambda f: add_mfu(f, 1e9, 100.0), lambda f: targets_table(f),
                                  lambda f: comparison_table(f), lambda f: plot_results(f)])
@pytest.mark.parametrize(("frame", "match"), [([1], "frame must be a pandas DataFrame"), (None, "frame must be"),
                                              (pd.DataFrame({"a": [1]}), "frame lacks the column")])
def test_tables_refuse_what_is_not_a_frame_of_benchmark_rows(call, frame, match):
    with pytest.raises(ValueError, match=match):
        call(frame)


@pytest.mark.parametrize(("kw", "match"), [({"batch": 0}, "batch must be an int"), ({"batch": "256"}, "batch must be"),
                                           ({"targets": []}, "targets is empty"),
                                           ({"targets": [1]}, r"targets\[0\] must be a Target \(see TARGETS\), got 1"),
                                           ({"targets": "x"}, "targets must be")])
def test_targets_table_checks_batch_and_targets(kw, match):
    with pytest.raises(ValueError, match=match):
        targets_table(pd.DataFrame(), **kw)


def test_targets_table_of_an_empty_frame_says_not_measured():
    assert set(targets_table(pd.DataFrame())["verdict"]) == {"not measured"}


def test_report_helpers_check_their_arguments(tmp_path):
    with pytest.raises(ValueError, match="metadata must be"):
        profile_table(None)
    with pytest.raises(ValueError, match="step_profile"):
        profile_table({"step_profile": [1]})
    with pytest.raises(ValueError, match=r"results\['run'\] must be a BenchResult"):
        side_by_side({"run": 3})
    with pytest.raises(ValueError, match="results must be a dict of source name -> BenchResult, got"):
        side_by_side([3])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="results key must be a str, got 1"):
        side_by_side({1: BenchResult(pd.DataFrame())})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="half must be one of 'article'"):
        side_by_side({}, half="fp16_typo")
    with pytest.raises(FileNotFoundError, match="results: .*missing.json' does not exist"):
        readme_section(tmp_path / "missing.json")
    BenchResult(pd.DataFrame()).save(tmp_path / "r.json")
    with pytest.raises(ValueError, match=r"png must be a path \(str or os.PathLike\), got 3"):
        readme_section(tmp_path / "r.json", png=3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"path must be a path \(str or os.PathLike\), got 3"):
        plot_results(pd.DataFrame(), 3)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="batch must be an int"):
        side_by_side({}, batch=0)
    with pytest.raises(ValueError, match="nothing to plot"):
        plot_results(pd.DataFrame())


# ------------------------------------------------------------------ compile modes, profile helpers, labels


def test_compile_modes_join_the_rounds_beside_the_recipe_each_in_its_own_time_box():
    ro, ma = COMPILE_MODES["reduce-overhead"], COMPILE_MODES["max-autotune-no-cudagraphs"]
    opener, log = fake(rates={"article": [100.0, 100.0, 100.0], COMPILED: [240.0, 250.0, 245.0],
                              ro: [250.0, 245.0, 260.0]}, open_s={ma: 5.0, COMPILED: 0.5})
    res = run_benchmark(TinyNet, ["fp32_default"], [8], repeat=[], rounds=3, settings=TINY, device="cpu",
                        progress=False, opener=opener, compile_modes=list(COMPILE_MODES),
                        compile_timeout_s=3.0, compile_mode_timeout_s=0.3)
    assert res.metadata["benchmark"]["repeat"] == ["article", COMPILED, ro, ma]  # added: what they are compared with
    assert res.metadata["benchmark"]["compile_modes"] == list(COMPILE_MODES)
    t = res.compile_modes().set_index("mode")
    assert list(t.index) == ["default", "reduce-overhead", "max-autotune-no-cudagraphs"]
    # oracle: the per-round ratios over the article's loop, their median and largest distance from it
    assert t.loc["reduce-overhead", "x_article"] == pytest.approx(2.5)
    assert t.loc["reduce-overhead", "spread"] == pytest.approx(0.1) and t.loc["reduce-overhead", "n"] == 3
    assert t.loc["reduce-overhead", "x_default_mode"] == pytest.approx(statistics.median([250 / 240, 245 / 250, 260 / 245]))
    assert t.loc["default", "status"] == "ok"  # 0.5 s to open: inside the common 3 s box
    assert t.loc["max-autotune-no-cudagraphs", "status"] == "timeout"  # its own 0.3 s box
    assert "time box of 0.3 s" in t.loc["max-autotune-no-cudagraphs", "note"]
    assert math.isnan(t.loc["max-autotune-no-cudagraphs", "x_article"])
    assert compile_modes_table(fake_run(["article", COMPILED], ["article", COMPILED], {})[0].frame).empty  # off


@pytest.mark.parametrize("modes, match", [("reduce-overhead", r"compile_modes must be a list, got 'reduce-overhead'"),
                                          (["max-autotune"], r"compile_modes\[0\] must be one of 'reduce-overhead'"),
                                          (["reduce-overhead", "reduce-overhead"], "compile_modes lists 'reduce-overhead' twice")])
def test_compile_modes_are_checked_before_any_work(modes, match):
    opener, log = fake(rates={})
    with pytest.raises(ValueError, match=match):
        run_benchmark(TinyNet, ["fp32_default"], [8], settings=TINY, device="cpu", progress=False, opener=opener,
                      compile_modes=modes)
    with pytest.raises(ValueError, match="task='train'"):
        run_benchmark(TinyNet, ["fp32_default"], [8], settings=TINY, device="cpu", progress=False, opener=opener,
                      compile_modes=["reduce-overhead"], task="infer")
    assert log == []


def test_cli_compile_modes_are_off_by_default_and_leave_the_exploration():
    import argparse

    from fp16lab.labs.benchmark.cli import COMPILE_MODE_TIMEOUT_S, _options, add_bench_parser

    parser = argparse.ArgumentParser()
    add_bench_parser(parser.add_subparsers(dest="command"))
    o = _options(parser.parse_args(["bench"]), CPU)
    assert list(o.compile_modes) == [] and o.compile_mode_timeout_s is None
    o = _options(parser.parse_args(["bench", "--reference", "--compile-modes"]), CPU)
    assert list(o.compile_modes) == list(COMPILE_MODES) and o.compile_mode_timeout_s == COMPILE_MODE_TIMEOUT_S
    assert not set(COMPILE_MODES.values()) & set(o.explore) and o.explore
    o = _options(parser.parse_args(["bench", "--compile-modes", "reduce-overhead", "--compile-mode-timeout", "900"]), CPU)
    assert list(o.compile_modes) == ["reduce-overhead"] and o.compile_mode_timeout_s == 900
    with pytest.raises(SystemExit, match="^2$"):  # argparse's refusal
        parser.parse_args(["bench", "--compile-modes", "max-autotune"])


def test_cli_prints_the_compile_modes_beside_the_recipe(tmp_path, monkeypatch, capsys):
    import fp16lab.labs.benchmark.cli as cli

    opener, _ = fake(rates={})
    real = cli.run_benchmark
    monkeypatch.setattr(cli, "run_benchmark", lambda *a, **k: real(**{**k, "model": TinyNet, "opener": opener, "settings": TINY}))
    from fp16lab.__main__ import main

    assert main(["bench", "--device", "cpu", "--compile-modes", "reduce-overhead", "--no-progress",
                 "--configs", "fp32_default", "--sweep", "--output", str(tmp_path / "r.json")]) == 0
    out = capsys.readouterr().out
    assert "torch.compile modes of the compiled recipe" in out and "time-boxed to 300 s" in out
    assert "reduce-overhead" in out


def test_kernel_ms_and_busy_fraction_read_a_configs_profile():
    from fp16lab.labs.benchmark.profile import breakdown

    rows = breakdown([("sm90_xmma_fprop", 3000.0), ("elementwise_kernel", 1000.0)], steps=2, step_ms=4.0)
    meta = {"step_profile": {"a": rows.to_dict("records"), "b": [{"kind": "error", "error": "RuntimeError: x"}]}}
    assert kernel_ms(meta, "a") == pytest.approx(2.0)  # (3 + 1) ms over 2 steps, the idle row left out
    assert busy_fraction(meta, "a") == pytest.approx(0.5)
    assert profile_table(meta, "ms_per_step").loc[IDLE, "a"] == pytest.approx(2.0)
    with pytest.raises(ValueError, match="was not profiled in this run; profiled: \\['a', 'b'\\]"):
        kernel_ms(meta, "c")
    with pytest.raises(ValueError, match="the profile of 'b' failed: RuntimeError: x"):
        busy_fraction(meta, "b")
    with pytest.raises(ValueError, match="value must be one of"):
        profile_table(meta, "ms")


def test_a_reference_shows_todays_labels_for_configurations_that_did_not_change(tmp_path, monkeypatch):
    import fp16lab.labs.runtime.results as results

    res, _ = fake_run(["article", "fp16_cl", "bf16_cl"], [], {})
    res.frame.loc[res.frame["config"] == "fp16_cl", "label"] = "FP16 AMP + channels_last (recommended)"
    res.frame.loc[res.frame["config"] == "bf16_cl", "optimizer"] = "SGD"  # ran differently: keeps its label
    res.frame.loc[res.frame["config"] == "bf16_cl", "label"] = "old bf16"
    monkeypatch.setattr(results, "RESULTS_DIR", tmp_path)
    res.save(tmp_path / "bench_old.json")
    labels = BenchResult.reference("bench_old").frame.set_index("config")["label"]
    assert labels["fp16_cl"] == CONFIGS["fp16_cl"].label and "recommended" not in labels["fp16_cl"]
    assert labels["bf16_cl"] == "old bf16"


def test_a_captured_step_builds_autocast_without_its_weight_cache(monkeypatch):
    # the benchmark's step is the library's amp_step; a captured one turns the weight-cast cache off
    import dataclasses

    import fp16lab.labs.benchmark.steps as steps

    seen = []
    monkeypatch.setattr(steps, "amp_step", lambda *a, cache_enabled=None, **k: seen.append(cache_enabled))
    net = nn.Linear(4, 2)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    x, y = torch.randn(2, 4), torch.tensor([0, 1])
    for graph in (True, False):
        cfg = dataclasses.replace(CONFIGS["fp16"], cuda_graph=graph)
        steps.hand_step(net, opt, cfg, x, y, CPU)()
    assert seen == [False, None]


def test_a_run_says_what_it_holds():
    res, _ = fake_run(["article", COMPILED], ["article", COMPILED], {}, profile=[COMPILED],
                      compile_modes=["reduce-overhead"], explore=["fp16_cl_graph"])
    text = res.contents()
    assert text.startswith(f"3 interleaved rounds of article, {COMPILED}, {COMPILE_MODES['reduce-overhead']}")
    assert "exploration rows: 1" in text and "compile modes beside the recipe: reduce-overhead" in text
    assert text.endswith(f"step profile: {COMPILED}")
    single, _ = fake_run(["article", "fp16_cl"], [], {})
    assert single.contents() == ("single runs only (no interleaved rounds); exploration rows: none; "
                                 "compile modes beside the recipe: none; step profile: none")


def test_a_time_box_that_torch_compile_wraps_is_still_a_timeout():
    from fp16lab.labs.benchmark.measure import CompileTimeout, _timed_out

    class InductorError(RuntimeError):
        pass

    try:
        try:
            raise CompileTimeout("box")
        except CompileTimeout as inner:
            raise InductorError("CompileTimeout: box") from inner
    except InductorError as wrapped:
        assert _timed_out(wrapped)
    assert not _timed_out(RuntimeError("other"))


@pytest.mark.parametrize(("args", "match"), [
    (("sm90_gemm", 2, 1.0), r"kernels must be a list, got 'sm90_gemm' \(str\): pass a list"),
    (([("a",)], 2, 1.0), r"kernels\[0\] must be a \(kernel name, microseconds\) pair, got 1 entries"),
    (([(1, 2.0)], 2, 1.0), r"kernels\[0\]\[0\] must be a str, got 1"),
    (([("a", -1.0)], 2, 1.0), r"kernels\[0\]\[1\] must be a finite number >= 0, got -1.0"),
    (([("a", 1.0)], 0, 1.0), "steps must be an int >= 1, got 0"),
    (([("a", 1.0)], 2, 0.0), "step_ms must be a finite number > 0, got 0.0"),
])
def test_breakdown_refuses_what_is_not_a_kernel_list(args, match):
    from fp16lab.labs.benchmark.profile import breakdown

    with pytest.raises(ValueError, match=match):
        breakdown(*args)


@pytest.mark.parametrize(("kw", "match"), [
    ({"cfg": "fp32_true"}, r"cfg must be a BenchConfig \(e.g. CONFIGS\['fp16_cl_fused'\]\), got 'fp32_true'"),
    ({"batch": 0}, "batch must be an int >= 1, got 0"),
    ({"task": "eval"}, "task must be one of 'train', 'infer'; got 'eval'"),
    ({"dev": "gpu"}, "dev 'gpu' is not a device"),
    ({"s": {}}, r"s must be a BenchSettings \(default_settings\(\) builds one\), got \{\}"),
    ({"spec": "resnet18"}, r"spec must be a ModelSpec \(parse_model\('resnet50'\) builds one\)"),
])
def test_a_session_checks_its_arguments_before_building_anything(kw, match):
    args = {"spec": parse_model("resnet18"), "cfg": CONFIGS["fp32_true"], "batch": 2, "s": TINY, "task": "train",
            "dev": "cpu", **kw}
    with pytest.raises(ValueError, match=match):
        Session(**args)
    assert Session(**{**args, **{"cfg": CONFIGS["fp32_true"], "batch": 2, "task": "train", "dev": "cpu",
                                 "s": TINY, "spec": parse_model("resnet18")}}).dev == CPU


def test_ratio_values_refuses_a_quantity_the_rows_lack_and_wrong_names():
    from fp16lab.labs.benchmark.analysis import ratio_values

    rows = pd.DataFrame([{"config": "a", "status": "ok", "batch_size": 2, "img_per_s": 4.0},
                         {"config": "b", "status": "ok", "batch_size": 2, "img_per_s": 2.0}])
    assert ratio_values(rows, "a", "b") == ([2.0], "single runs")
    with pytest.raises(ValueError, match=r"frame lacks the column\(s\) \['peak_mem_gb'\]"):
        ratio_values(rows, "a", "b", "peak_mem_gb")
    with pytest.raises(ValueError, match="numerator must be a str, got 1"):
        ratio_values(rows, 1, "b")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="frame lacks the column"):
        ratio_values(pd.DataFrame({"a": [1.0]}), "a", "b")  # no longer an empty answer


def test_the_results_pages_compile_modes_block_is_the_runs_table(tmp_path):
    from fp16lab.course import readme

    ro = COMPILE_MODES["reduce-overhead"]
    opener, _ = fake(rates={"article": [100.0, 100.0, 100.0], COMPILED: [240.0, 250.0, 245.0], ro: [250.0, 245.0, 260.0]})
    res = run_benchmark(TinyNet, ["article"], [8], rounds=3, settings=TINY, device="cpu", progress=False,
                        opener=opener, compile_modes=["reduce-overhead"], compile_mode_timeout_s=300.0)
    path = res.save(tmp_path / "modes.json")
    block = readme.compile_modes_block(path).splitlines()
    assert block[0].startswith(f"Measured on {res.metadata['device']}, {res.metadata['date']}, torch ")
    assert "3 interleaved rounds" in block[0] and "time-boxed to 300 s" in block[0], block[0]
    rows = {line.split(" | ")[0].lstrip("| "): line.split(" | ") for line in block[4:]}
    assert list(rows) == ["default", "reduce-overhead"], block
    assert rows["reduce-overhead"][1] == "ok" and rows["reduce-overhead"][3] == "2.5"  # median of 250/100, 245/100, 260/100
    with pytest.raises(FileNotFoundError, match=r"path: '.*none\.json' does not exist"):
        readme.compile_modes_block(tmp_path / "none.json")  # a file you name must exist: never "no run yet"
    default, readme.COMPILE_MODES_RESULTS = readme.COMPILE_MODES_RESULTS, "results/none-yet.json"
    try:  # only the default file may be missing: no run is committed yet
        assert readme.compile_modes_block().startswith("No compile-modes run is committed yet")
    finally:
        readme.COMPILE_MODES_RESULTS = default
    plain = fake_run(["article", COMPILED], ["article", COMPILED], {"article": [1.0] * 3, COMPILED: [2.0] * 3})[0]
    with pytest.raises(ValueError, match="has no compile-mode rows"):
        readme.compile_modes_block(plain.save(tmp_path / "plain.json"))
