"""Tests of fp16lab.bench: recorded settings, results I/O, bad input, OOM and Ctrl-C, the CLI."""

from __future__ import annotations

import json
import math
import statistics
import warnings

import pandas as pd
import pytest
import torch

from fp16lab import bench
from fp16lab.bench import (
    CONFIGS,
    RECOMMENDED,
    BenchResult,
    BenchSettings,
    add_flop_utilisation,
    bench_one,
    comparison_table,
    model_flops,
    readme_section,
    run_benchmark,
    validate_batch_sizes,
    validate_configs,
    validate_model,
    validate_output,
)

TINY = BenchSettings(image_size=32, warmup=1, steps=1, windows=2, cpu_threads=1)


def fake_row(model, cfg, batch, *, settings, device, task="train", rate=100.0, mem=1.0):
    """A result row as bench_one makes it, with given numbers (no model is run)."""
    row = bench._row_settings(model, cfg, batch, settings, task, torch.device(device))
    row.update(status="ok", img_per_s=rate * batch, img_per_s_min=rate * batch, img_per_s_max=rate * batch,
               spread=0.0, step_ms=1.0, peak_mem_gb=mem * batch)
    return row


class Recorder:
    """A fake measure: records calls; raises what ``raise_at`` maps a (config, batch) to."""

    def __init__(self, raise_at=None, rates=None):
        self.calls = []
        self.raise_at = raise_at or {}
        self.rates = rates or {}

    def __call__(self, model, cfg, batch, *, settings, device, task):
        self.calls.append((cfg.name, batch))
        exc = self.raise_at.get((cfg.name, batch))
        if exc is not None:
            raise exc
        return fake_row(model, cfg, batch, settings=settings, device=device, task=task,
                        rate=self.rates.get(cfg.name, 100.0))


# ------------------------------------------------------------------ real (tiny) measurement


def test_bench_one_records_settings_as_used_and_restores_flags():
    before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32, torch.backends.cudnn.benchmark,
              torch.get_num_threads())
    row = bench_one("resnet18", "fp32_true", 2, settings=TINY, device="cpu")
    assert row["status"] == "ok"
    assert (row["model"], row["config"], row["batch_size"], row["image_size"]) == ("resnet18", "fp32_true", 2, 32)
    assert row["tf32_matmul"] is False and row["tf32_cudnn"] is False and row["cudnn_benchmark"] is True
    assert row["memory_format"] == "NCHW" and row["compile"] is False and row["optimizer"] == "Adam(lr=0.001)"
    assert row["grad_scaler"] is False and row["amp_api"] == "none" and row["device"] == "cpu"
    assert row["steps_run"] == TINY.warmup + TINY.steps * TINY.windows
    assert len(row["window_s"]) == TINY.windows
    # images/s is the median over windows of batch * steps / seconds (window_s is rounded to 1 us)
    oracle = statistics.median(2 * TINY.steps / t for t in row["window_s"])
    assert row["img_per_s"] == pytest.approx(oracle, rel=1e-3)
    assert row["img_per_s_min"] <= row["img_per_s"] <= row["img_per_s_max"]
    assert math.isnan(row["peak_mem_gb"])  # no CUDA: no peak memory
    assert row["cpu_threads"] == 1
    after = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32, torch.backends.cudnn.benchmark,
             torch.get_num_threads())
    assert after == before


def test_tf32_and_channels_last_configs_record_their_flags():
    row = bench_one("resnet18", "bf16_cl", 2, settings=TINY, device="cpu")
    assert row["memory_format"] == "channels_last" and row["precision"] == "bf16"
    assert row["amp_api"] == "torch.amp" and row["tf32_cudnn"] is True and row["tf32_matmul"] is False
    t = bench._row_settings("resnet18", CONFIGS["tf32"], 2, TINY, "train", torch.device("cpu"))
    assert t["tf32_matmul"] is True and t["tf32_cudnn"] is True


def test_inference_task_runs_forward_only():
    row = bench_one("resnet18", "fp32_default", 2, settings=TINY, device="cpu", task="infer")
    assert row["status"] == "ok" and row["task"] == "infer" and row["optimizer"] == "none"


def test_model_flops_match_torchvision_multiply_adds():
    from torchvision.models import ResNet18_Weights

    f = model_flops("resnet18", 224)
    macs = ResNet18_Weights.IMAGENET1K_V1.meta["_ops"] * 1e9  # torchvision's "GFLOPS" are multiply-adds
    assert f["forward"] == pytest.approx(2 * macs, rel=0.02)
    assert 2.8 < f["train"] / f["forward"] < 3.2  # backward ~ 2x forward


# ------------------------------------------------------------------ run, save, load


def test_fused_adam_config_records_its_optimizer():
    cfg = CONFIGS["fp16_cl_fused"]
    assert cfg.fused_adam and cfg.channels_last and cfg.precision == CONFIGS[RECOMMENDED].precision
    res = run_benchmark("resnet18", ["fp32_default", "fp16_cl_fused"], [2], settings=TINY, device="cpu",
                        progress=False)
    assert (res.frame["status"] == "ok").all()
    assert res.frame.set_index("config")["optimizer"].to_dict() == {
        "fp32_default": "Adam(lr=0.001)", "fp16_cl_fused": "Adam(lr=0.001, fused=True)"}
    assert res.metadata["benchmark"]["optimizer"] == "Adam(lr=0.001), Adam(lr=0.001, fused=True)"


def test_run_benchmark_metadata_and_json_round_trip(tmp_path):
    out = tmp_path / "b.json"
    res = run_benchmark("resnet18", ["fp32_true", "fp32_default"], [2], settings=TINY, device="cpu",
                        output=out, progress=False, metadata={"note": "test"})
    assert res.path == out and out.exists() and out.with_suffix(".csv").exists()
    for k in ("device", "torch", "cuda", "cudnn", "tf32_matmul", "tf32_cudnn", "date", "mode"):
        assert k in res.metadata
    b = res.metadata["benchmark"]
    assert b["configs"] == ["fp32_true", "fp32_default"] and b["batch_sizes"] == [2]
    assert b["steps"] == TINY.steps and b["windows"] == TINY.windows and b["optimizer"] == "Adam(lr=0.001)"
    assert res.metadata["note"] == "test" and res.metadata["device"] == "CPU"
    back = BenchResult.load(out)
    assert back.metadata == json.loads(json.dumps(dict(res.metadata, interrupted=False)))
    assert list(back.frame.columns) == list(res.frame.columns)
    pd.testing.assert_frame_equal(
        back.frame.drop(columns=["window_s"]), res.frame.drop(columns=["window_s"]), check_dtype=False
    )
    assert back.frame["window_s"].tolist() == res.frame["window_s"].tolist()
    assert "<table" in back._repr_html_() and "CPU" in back._repr_html_()
    csv = pd.read_csv(out.with_suffix(".csv"))
    assert csv["config"].tolist() == ["fp32_true", "fp32_default"]


def test_comparison_table_ratios_and_sweep():
    rates = {"article": 10.0, "fp32_default": 5.0, "fp16_cl": 20.0}
    rows = []
    for name in ("article", "fp32_default", "fp16_cl"):
        r = fake_row("resnet50", CONFIGS[name], 4, settings=TINY, device="cpu", rate=rates[name])
        rows.append(dict(r, part="comparison"))
    for name in ("fp32_default", "fp16_cl"):
        for b in (2, 8):
            r = fake_row("resnet50", CONFIGS[name], b, settings=TINY, device="cpu", rate=rates[name])
            rows.append(dict(r, part="sweep"))
    frame = pd.DataFrame(rows)
    t = comparison_table(frame).set_index("config")
    assert t.loc["fp16_cl", "x_article"] == pytest.approx(2.0)
    assert t.loc["fp16_cl", "x_fp32_default"] == pytest.approx(4.0)
    assert t.loc["article", "x_article"] == pytest.approx(1.0)
    s = comparison_table(frame, "sweep")
    assert sorted(s[s["config"] == "fp16_cl"]["batch"]) == [2, 4, 8]  # comparison row included
    with pytest.raises(ValueError, match="'bogus'"):
        comparison_table(frame, "bogus")


def test_side_by_side_puts_the_article_claim_next_to_a_run():
    from fp16lab.bench import side_by_side

    rows = [dict(fake_row("resnet50", CONFIGS[n], 256, settings=TINY, device="cpu", rate=r, mem=m), part="comparison")
            for n, r, m in (("fp32_default", 8.0, 0.1), ("article", 12.0, 0.04), ("fp16_cl", 24.0, 0.04))]
    t = side_by_side({"run": BenchResult(pd.DataFrame(rows), {"device": "G", "date": "d"})})
    art, run = t.iloc[0], t.iloc[1]
    assert art["fp32 img/s"] == 1200 and art["half img/s"] == 2200 and art["speed-up"] == pytest.approx(2200 / 1200)
    assert art["memory ratio"] == pytest.approx(4.2 / 8.5)
    assert run["speed-up"] == pytest.approx(1.5) and run["recipe / fp32"] == pytest.approx(3.0)
    assert run["memory ratio"] == pytest.approx(0.4) and run["gpu"] == "G"
    t2 = side_by_side({"run": BenchResult(pd.DataFrame(rows), {})}, half="bf16")
    assert math.isnan(t2.iloc[1]["half img/s"])  # missing configuration: NaN, not a fallback
    with pytest.raises(ValueError, match="'fp8'"):
        side_by_side({}, half="fp8")


def test_sweep_skips_pairs_already_measured():
    rec = Recorder()
    run_benchmark("resnet18", ["fp32_default", "bf16"], [4], sweep_batch_sizes=[2, 4],
                  sweep_configs=["fp32_default"], settings=TINY, device="cpu", progress=False, measure=rec)
    assert rec.calls == [("fp32_default", 4), ("bf16", 4), ("fp32_default", 2)]


def test_readme_section_table_plot_and_article_claim(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    rows = []
    for name, rate in (("fp32_true", 3.0), ("fp32_default", 5.0), ("bf16_cl", 20.0)):
        r = fake_row("resnet50", CONFIGS[name], 256, settings=TINY, device="cpu", rate=rate)
        r["part"] = "comparison"
        rows.append(r)
    rows[0]["status"] = "OOM"
    path = tmp_path / "r.json"
    BenchResult(pd.DataFrame(rows), {"device": "FAKE GPU", "date": "2026-01-01", "torch": "x",
                                     "benchmark": {"model": "resnet50", "windows": 3, "steps": 10}}).save(path)
    md = readme_section(path)
    assert (tmp_path / "r.png").stat().st_size > 1000
    assert "1200" in md and "2200" in md and "8.5" in md and "4.2" in md and "RTX 4090D" in md
    assert "FAKE GPU" in md and "2026-01-01" in md
    assert "| FP32, true (TF32 off) | 256 | OOM |" in md
    assert f"| {CONFIGS['bf16_cl'].label} | 256 | {20 * 256:.0f} | {256.0:.1f} |  | 4.00 |" in md


def test_flop_utilisation_uses_the_peak_the_math_runs_at():
    from fp16lab.hardware import PEAK_TFLOPS

    rows = [fake_row("resnet50", CONFIGS[n], 1, settings=TINY, device="cpu", rate=1000.0)
            for n in ("fp32_true", "fp32_default", "fp16_cl")]
    f = add_flop_utilisation(pd.DataFrame(rows), "NVIDIA H200", 24e9).set_index("config")
    h = PEAK_TFLOPS["H200"]
    assert f.loc["fp32_true", "peak_tflops"] == h.fp32
    assert f.loc["fp32_default", "peak_tflops"] == h.tf32
    assert f.loc["fp16_cl", "mfu"] == pytest.approx(1000 * 24e9 / 1e12 / h.fp16)
    with pytest.raises(ValueError, match="'Unknown GPU'"):
        add_flop_utilisation(pd.DataFrame(rows), "Unknown GPU", 1.0)


# ------------------------------------------------------------------ bad input, before any work


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"model": "resnet5O"}, r"unknown model 'resnet5O'.*resnet50"),
        ({"configs": ["fp16_nhwc"]}, r"unknown configuration 'fp16_nhwc'; allowed: article, fp32_true"),
        ({"configs": ["fp32_true", "fp32_true"]}, "repeat"),
        ({"configs": []}, "no configurations"),
        ({"precisions": ["fp8"]}, r"unknown precision 'fp8'; allowed: 'fp32'"),
        ({"configs": ["fp32_true"], "precisions": ["fp16"]}, r"no configuration in \['fp32_true'\]"),
        ({"batch_sizes": [8, 0]}, r"positive int \(> 0\), got 0"),
        ({"batch_sizes": [-4]}, "got -4"),
        ({"batch_sizes": ["8"]}, "got '8'"),
        ({"batch_sizes": []}, "no batch sizes"),
        ({"sweep_batch_sizes": [0]}, "got 0"),
        ({"task": "eval"}, r"unknown task 'eval'; allowed: 'train', 'infer'"),
        ({"output": "results.csv"}, r"must end in \.json, got 'results.csv'"),
    ],
)
def test_bad_input_fails_before_any_work(kwargs, match):
    rec = Recorder()
    args = {"model": "resnet18", "configs": ["fp32_true"], "batch_sizes": [2], "device": "cpu",
            "settings": TINY, "progress": False, "measure": rec, **kwargs}
    with pytest.raises(ValueError, match=match):
        run_benchmark(**args)
    assert rec.calls == []


def test_unwritable_output_fails_before_any_work(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    rec = Recorder()
    with pytest.raises(ValueError, match="cannot be written"):
        run_benchmark("resnet18", ["fp32_true"], [2], device="cpu", output=blocker / "out.json",
                      settings=TINY, progress=False, measure=rec)
    assert rec.calls == []
    folder = tmp_path / "looks_like.json"
    folder.mkdir()
    with pytest.raises(ValueError, match="is a folder"):
        validate_output(folder)


def test_cuda_only_config_refused_on_cpu():
    with pytest.raises(ValueError, match=r"'article' needs a CUDA GPU.*Allowed here: fp32_true"):
        validate_configs(["article"], "cpu")


def test_validators_pass_good_values():
    assert validate_model("resnet50") == "resnet50"
    assert validate_batch_sizes([1, 256]) == [1, 256]
    assert [c.name for c in validate_configs(["fp32_true", "bf16"], "cpu")] == ["fp32_true", "bf16"]
    with pytest.raises(ValueError, match="warmup must be"):
        BenchSettings(warmup=0)
    with pytest.raises(ValueError, match="steps must be a positive int, got 0"):
        BenchSettings(steps=0)
    with pytest.raises(ValueError, match="cpu_threads must be None or a positive int, got 0"):
        BenchSettings(cpu_threads=0)


# ------------------------------------------------------------------ OOM and Ctrl-C


def test_oom_is_a_row_and_the_run_continues(tmp_path):
    out = tmp_path / "oom.json"
    rec = Recorder(raise_at={("fp32_true", 64): torch.OutOfMemoryError("CUDA out of memory (fake)")})
    res = run_benchmark("resnet18", ["fp32_true", "bf16"], [8, 64, 16], device="cpu", settings=TINY,
                        output=out, progress=False, measure=rec)
    assert len(rec.calls) == 6  # every pair was attempted
    f = res.frame.set_index(["config", "batch_size"])
    assert f.loc[("fp32_true", 64), "status"] == "OOM" and math.isnan(f.loc[("fp32_true", 64), "img_per_s"])
    assert (f.drop(index=("fp32_true", 64))["status"] == "ok").all()
    t = comparison_table(res.frame)
    assert t[(t["config"] == "fp32_true") & (t["batch"] == 64)]["img/s"].item() == "OOM"
    saved = BenchResult.load(out)
    assert (saved.frame["status"] == "OOM").sum() == 1 and not saved.interrupted


def test_other_errors_become_error_rows_and_the_run_continues(capsys):
    rec = Recorder(raise_at={("fp32_true", 2): RuntimeError("compiler not found\nmore detail")})
    res = run_benchmark("resnet18", ["fp32_true", "bf16"], [2], device="cpu", settings=TINY, progress=False,
                        measure=rec)
    f = res.frame.set_index("config")
    assert f.loc["fp32_true", "status"] == "error" and f.loc["fp32_true", "error"] == "RuntimeError: compiler not found"
    assert f.loc["bf16", "status"] == "ok" and f.loc["bf16", "error"] == ""
    assert comparison_table(res.frame).set_index("config").loc["fp32_true", "img/s"] == "error"
    assert "fp32_true at batch 2 failed: RuntimeError: compiler not found" in capsys.readouterr().err


def test_ctrl_c_keeps_and_saves_the_rows_so_far(tmp_path, capsys):
    out = tmp_path / "partial.json"
    rec = Recorder(raise_at={("bf16", 8): KeyboardInterrupt()})
    res = run_benchmark("resnet18", ["fp32_true", "fp32_default", "bf16", "bf16_cl"], [8], device="cpu",
                        settings=TINY, output=out, progress=False, measure=rec)
    assert res.interrupted
    assert res.frame["config"].tolist() == ["fp32_true", "fp32_default"]
    assert len(rec.calls) == 3  # stopped at the interrupted one, bf16_cl never started
    saved = BenchResult.load(out)
    assert saved.interrupted and saved.metadata["interrupted"] is True
    assert saved.frame["config"].tolist() == ["fp32_true", "fp32_default"]
    assert "interrupted (Ctrl-C) after 2 of 4 runs" in capsys.readouterr().err
    assert "INTERRUPTED" in repr(res)


# ------------------------------------------------------------------ command line


def test_cli_quick_cpu_run(tmp_path, monkeypatch, capsys):
    from fp16lab.__main__ import main

    monkeypatch.setenv("FP16LAB_QUICK", "1")
    out = tmp_path / "cli.json"
    rc = main(["bench", "--configs", "fp32_true", "bf16", "--batch-sizes", "2", "--steps", "1", "--repeats", "2",
               "--warmup", "1", "--output", str(out), "--no-progress", "--device", "cpu"])
    text = capsys.readouterr().out
    assert rc == 0
    assert "QUICK MODE" in text and "QUICK CPU MODE" in text and "CPU numbers, not FP16" in text
    assert "fp32_true" in text and "bf16" in text and "article (RTX 4090D, claimed)" in text
    res = BenchResult.load(out)
    assert res.frame["model"].unique().tolist() == ["resnet18"]  # quick default model
    assert res.frame["image_size"].unique().tolist() == [32]  # quick default size
    assert res.frame["cpu_threads"].unique().tolist() == [1]  # quick default on the CPU
    assert res.metadata["benchmark"]["quick"] is True and res.metadata["mode"] == "quick"


def test_cli_bad_input_exits_2_with_the_allowed_values(tmp_path, capsys):
    from fp16lab.__main__ import main

    rc = main(["bench", "--configs", "fp64", "--output", str(tmp_path / "x.json")])
    err = capsys.readouterr().err
    assert rc == 2 and "unknown configuration 'fp64'" in err and "fp16_cl" in err
    assert not (tmp_path / "x.json").exists()
    rc = main(["bench", "--batch-sizes", "0", "--output", str(tmp_path / "x.json")])
    assert rc == 2 and "got 0" in capsys.readouterr().err
    rc = main(["bench", "--readme-from", str(tmp_path / "missing.json")])
    assert rc == 2 and "no results file" in capsys.readouterr().err


# ------------------------------------------------------------------ GPU only

cuda = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@cuda
def test_article_loop_on_gpu_records_its_deprecation_warnings_without_leaking_them():
    s = BenchSettings(image_size=64, warmup=1, steps=2, windows=2)
    with warnings.catch_warnings(record=True) as leaked:
        warnings.simplefilter("always")
        row = bench_one("resnet18", "article", 8, settings=s, device="cuda")
    assert row["status"] == "ok" and row["amp_api"] == "torch.cuda.amp (deprecated)" and row["grad_scaler"]
    assert "FutureWarning" in row["warnings"] and "torch.cuda.amp" in row["warnings"]
    assert not [w for w in leaked if "torch.cuda.amp" in str(w.message)]
    assert row["peak_mem_gb"] > 0 and row["peak_reserved_gb"] >= row["peak_mem_gb"]
    assert row["baseline_gb"] < 0.5 * row["peak_mem_gb"]


@cuda
def test_fp16_uses_less_memory_than_true_fp32_on_gpu():
    s = BenchSettings(image_size=128, warmup=1, steps=2, windows=2)
    fp32 = bench_one("resnet50", "fp32_true", 32, settings=s, device="cuda")
    fp16 = bench_one("resnet50", "fp16_cl", 32, settings=s, device="cuda")
    assert fp16["peak_mem_gb"] < fp32["peak_mem_gb"]


def test_cli_entry_is_registered():
    import argparse

    from fp16lab.__main__ import SUBCOMMANDS

    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="command")
    for add in SUBCOMMANDS:
        add(sub)
    args = parser.parse_args(["bench", "--configs", "fp16_cl", "--sweep"])
    assert args.configs == ["fp16_cl"] and args.sweep == []  # --sweep with no sizes: no sweep
