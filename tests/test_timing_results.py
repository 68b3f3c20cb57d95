"""Timing helpers and the results file format."""

from __future__ import annotations

import json
import math
import time

import pandas as pd
import pytest
import torch

import fp16lab.labs.runtime.results as results
from fp16lab.labs.runtime.results import (
    load_reference,
    load_results,
    output_path,
    reference_path,
    save_results,
)
from fp16lab.timing import Timing, matmul_tflops, time_cuda_events, time_fn


def test_time_fn_measures_a_known_sleep():
    t = time_fn(lambda: time.sleep(0.01), warmup=1, min_run_time=0.1)
    assert 0.009 < t.median_s < 0.05 and t.runs >= 1


def test_time_fn_rejects_bad_args():
    with pytest.raises(ValueError, match="-1"):
        time_fn(lambda: None, warmup=-1)
    with pytest.raises(ValueError, match="min_run_time"):
        time_fn(lambda: None, min_run_time=0)


def test_time_fn_single_run_reports_no_spread():
    """Regression: one timed run printed "IQR 0.0%"."""
    t = time_fn(lambda: time.sleep(0.3), warmup=0, warmup_s=0, min_run_time=0.01)
    assert t.runs == 1
    assert math.isnan(t.spread) and math.isnan(t.iqr_s)
    assert "IQR" not in str(t) and "single run" in str(t) and "1 run," in str(t)
    many = Timing(0.01, 0.001, 5, "torch.utils.benchmark")
    assert "IQR 10.0%" in str(many) and many.spread == pytest.approx(0.1)
    assert "IQR" not in str(Timing(0.01, 0.0, 1, "CUDA events"))


@pytest.mark.parametrize("kwargs, match", [
    (dict(fn=None), "fn must be"), (dict(fn="f()"), "fn must be"), (dict(warmup=True), "warmup"),
    (dict(warmup=1.5), "warmup"), (dict(warmup_s=-1), "warmup_s"), (dict(min_run_time="1"), "min_run_time"),
    (dict(min_run_time=math.nan), "min_run_time"),
])
def test_timing_helpers_name_bad_arguments(kwargs, match):
    args = dict(fn=lambda: None) | kwargs
    fn = args.pop("fn")
    with pytest.raises(ValueError, match=match):
        time_fn(fn, **args)
    if "min_run_time" not in kwargs:
        with pytest.raises(ValueError, match=match):
            time_cuda_events(fn, **args)
    with pytest.raises(ValueError, match="repeats"):
        time_cuda_events(lambda: None, repeats=0)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA")
def test_matmul_tflops_default_device_is_the_best_available_not_cuda():
    """Regression: the default device was "cuda", which failed deep inside torch without a GPU."""
    r = matmul_tflops(16, 16, 16, "fp32", min_run_time=0.01)
    assert r["tflops"] > 0
    with pytest.raises(ValueError, match="no CUDA GPU is visible"):
        matmul_tflops(16, 16, 16, "fp32", "cuda", min_run_time=0.01)


def test_matmul_tflops_names_bad_arguments():
    for kwargs, match in ((dict(device="gpu"), "device"), (dict(device=0), "device"), (dict(seed=-1), "seed"),
                          (dict(min_run_time=0), "min_run_time"), (dict(precision=torch.float16), "not a dtype")):
        with pytest.raises(ValueError, match=match):
            matmul_tflops(8, 8, 8, **({"precision": "fp32", "device": "cpu"} | kwargs))
    with pytest.raises(ValueError, match="k must be an int"):
        matmul_tflops(8, 8, True, "fp32", "cpu")


def test_matmul_tflops_on_cpu_counts_flops():
    r = matmul_tflops(64, 32, 16, "fp32", "cpu", min_run_time=0.05)
    assert (r["m"], r["n"], r["k"], r["precision"]) == (64, 32, 16, "fp32")
    assert r["tflops"] == pytest.approx(2 * 64 * 32 * 16 / r["seconds"] / 1e12)
    with pytest.raises(ValueError, match="got 0"):
        matmul_tflops(0, 8, 8, "fp32", "cpu")
    with pytest.raises(ValueError, match="'int8'"):
        matmul_tflops(8, 8, 8, "int8", "cpu")


def test_results_round_trip(tmp_path):
    df = pd.DataFrame({"config": ["a", "b"], "img_s": [1.5, float("nan")]})
    path = save_results(df, tmp_path / "r.json", {"device": "CPU"}, csv=True)
    back, meta = load_results(path)
    assert meta == {"device": "CPU"}
    assert back["config"].tolist() == ["a", "b"] and back["img_s"][0] == 1.5
    assert (tmp_path / "r.csv").exists()
    assert not list(tmp_path.glob("*.tmp"))


def test_results_keep_an_informative_index(tmp_path):
    """Regression: save_results dropped the index, so a pivot table lost its row labels."""
    long = pd.DataFrame({"n": [1, 1, 2, 2], "p": ["fp16", "fp32"] * 2, "ms": [1.0, 2.0, 3.0, 4.0]})
    cases = {
        "named": long.set_index("n"),
        "labels": long.set_index("p").rename_axis(None),
        "levels": long.set_index(["n", "p"]),
        "pivot": long.pivot(index="n", columns="p", values="ms"),
    }
    for name, frame in cases.items():
        back, _ = load_results(save_results(frame, tmp_path / f"{name}.json", {}))
        want = frame.reset_index()
        assert back.columns.tolist() == [str(c) for c in want.columns], name
        assert back.to_numpy().tolist() == want.to_numpy().tolist(), name
    filtered = long[long.p == "fp16"]  # unnamed integer labels: row numbers, not stored
    back, _ = load_results(save_results(filtered, tmp_path / "rows.json", {}))
    assert back.columns.tolist() == ["n", "p", "ms"] and len(back) == 2
    clash = long.set_index("n", drop=False)
    with pytest.raises(ValueError, match=r"frame: its index would be stored as column\(s\) \['n'\]"):
        save_results(clash, tmp_path / "clash.json", {})
    assert not (tmp_path / "clash.json").exists()


def test_results_errors(tmp_path):
    df = pd.DataFrame({"a": [1]})
    with pytest.raises(ValueError, match="must end in .json"):
        save_results(df, tmp_path / "r.txt", {})
    with pytest.raises(ValueError, match="does not exist"):
        save_results(df, tmp_path / "nope" / "r.json", {})
    with pytest.raises(FileNotFoundError, match="no results file"):
        load_results(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text(json.dumps([1, 2]))
    with pytest.raises(ValueError, match="not an fp16lab results file"):
        load_results(tmp_path / "bad.json")
    with pytest.raises(FileNotFoundError, match="available"):
        reference_path("definitely_missing.json")


def test_results_wrong_types_name_the_argument_and_write_nothing(tmp_path):
    """Regression: wrong types failed inside pandas/json (AttributeError, TypeError), half-way through."""
    df = pd.DataFrame({"a": [1]})
    cases = [
        (lambda: save_results({"a": [1]}, tmp_path / "r.json", {}), "frame must be a pandas DataFrame"),
        (lambda: save_results(df, None, {}), "path must be a file path"),
        (lambda: save_results(df, 3, {}), "path must be a file path"),
        (lambda: save_results(df, tmp_path / "r.json", None), "metadata must be a dict"),
        (lambda: save_results(df, tmp_path / "r.json", [("a", 1)]), "metadata must be a dict"),
        (lambda: save_results(df, tmp_path / "r.json", {"f": object()}), "metadata cannot be stored as JSON"),
        (lambda: save_results(df, tmp_path / "r.json", {}, csv="yes"), "csv must be True or False"),
        (lambda: load_results(None), "path must be a file path"),
        (lambda: load_results(["r.json"]), "path must be a file path"),
    ]
    for call, match in cases:
        with pytest.raises(ValueError, match=match):
            call()
    assert list(tmp_path.iterdir()) == []  # nothing was written
    (tmp_path / "broken.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_results(tmp_path / "broken.json")
    (tmp_path / "rows.json").write_text(json.dumps({"metadata": [], "rows": {}}))
    with pytest.raises(ValueError, match="not an fp16lab results file"):
        load_results(tmp_path / "rows.json")
    with pytest.raises(FileNotFoundError, match="is a folder, not a results file"):
        load_results(tmp_path)  # a folder is not a results file
    import numpy as np

    save_results(df, tmp_path / "np.json", {"batch": np.int64(8), "ratio": np.float32(0.5)})
    assert load_results(tmp_path / "np.json")[1] == {"batch": 8, "ratio": 0.5}


@pytest.mark.parametrize("bad", ["..", "../x", "a/b", "a\\b", ".hidden", "", "x.json", None, 3, "a..b", "/abs", "c:d"])
def test_output_path_refuses_anything_but_a_bare_name(bad, monkeypatch, tmp_path):
    """Regression: output_path("..") was accepted and pointed outside results/local."""
    monkeypatch.setattr(results, "RESULTS_DIR", tmp_path)
    with pytest.raises(ValueError, match="bare name"):
        output_path(bad)
    with pytest.raises(ValueError, match="bare name"):
        load_reference(bad)
    with pytest.raises(ValueError, match="bare name"):
        results.measure_or_reference(bad, lambda: pd.DataFrame())
    assert not (tmp_path / "local").exists() or list((tmp_path / "local").iterdir()) == []


def test_output_path_never_overwrites_reference(monkeypatch):
    monkeypatch.delenv("FP16LAB_REFERENCE_RUN", raising=False)
    assert output_path("x").parent.name == "local"
    monkeypatch.setenv("FP16LAB_REFERENCE_RUN", "1")
    assert output_path("x").parent.name == "results"
    with pytest.raises(ValueError, match="'a/b'"):
        output_path("a/b")


def _reference(tmp_path, monkeypatch, name, **meta):
    monkeypatch.setattr(results, "RESULTS_DIR", tmp_path)
    base = {"device": "NVIDIA H200", "capability": "sm_90", "sm_count": 132, "torch": "2.11.0",
            "cuda": "13.0", "cudnn": 91900, "date": "2026-12-02", "mode": "full", "device_type": "cuda"}
    save_results(pd.DataFrame({"x": [1, 2]}), tmp_path / f"{name}.json", {**base, **meta})


def test_load_reference_says_where_it_was_measured(tmp_path, monkeypatch, capsys):
    _reference(tmp_path, monkeypatch, "r")
    frame, meta = load_reference("r")
    out = capsys.readouterr().out
    assert frame["x"].tolist() == [1, 2] and meta["sm_count"] == 132
    for fact in ("NVIDIA H200", "sm_90, 132 SMs", "torch 2.11.0", "CUDA 13.0", "cuDNN 91900", "2026-12-02", "full mode"):
        assert fact in out, fact
    assert "WARNING" not in out


def test_load_reference_flags_a_stand_in_measured_off_gpu(tmp_path, monkeypatch, capsys):
    _reference(tmp_path, monkeypatch, "cpu_made", device="CPU", device_type="cpu", sm_count=None)
    load_reference("cpu_made")
    out = capsys.readouterr().out
    assert "WARNING" in out and "'cpu'" in out and "stand-in" in out


def test_load_reference_missing_says_so_and_returns_none(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(results, "RESULTS_DIR", tmp_path)
    assert load_reference("never_recorded") == (None, None)
    assert "NO GPU REFERENCE YET: results/never_recorded.json" in capsys.readouterr().out
    (tmp_path / "broken.json").write_text("[]")
    with pytest.raises(ValueError, match="not an fp16lab results file"):
        load_reference("broken")  # a file that exists but is wrong is an error, not a notice


def test_measure_or_reference_live_measures_and_saves(tmp_path, monkeypatch, fake_gpu):
    from fp16lab.labs.runtime.results import measure_or_reference

    fake_gpu("hopper")
    monkeypatch.setattr(results, "RESULTS_DIR", tmp_path)
    monkeypatch.delenv("FP16LAB_QUICK", raising=False)
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("FP16LAB_REFERENCE_RUN", raising=False)
    calls = []
    m = measure_or_reference("thing", lambda: calls.append(1) or pd.DataFrame({"x": [1, 2]}))
    assert m.live and calls == [1] and list(m.frame["x"]) == [1, 2]
    assert m.meta["device"] == "NVIDIA H200" and m.meta["profile"] is None
    frame, meta = load_results(tmp_path / "local" / "thing.json")
    assert list(frame["x"]) == [1, 2] and meta["device_type"] == "cuda"


def test_measure_or_reference_without_gpu_reads_the_reference(tmp_path, monkeypatch, capsys, fake_gpu):
    from fp16lab.labs.runtime.results import measure_or_reference

    fake_gpu("none")
    monkeypatch.setattr(results, "RESULTS_DIR", tmp_path)
    save_results(pd.DataFrame({"x": [3]}), tmp_path / "thing.json", {"device": "NVIDIA H200", "device_type": "cuda"})
    m = measure_or_reference("thing", lambda: pytest.fail("must not measure without a GPU"))
    frame, meta, live = m
    assert not live and list(frame["x"]) == [3] and m.available
    assert "COMMITTED GPU REFERENCE" in capsys.readouterr().out
    m = measure_or_reference("missing", lambda: pytest.fail("must not measure"))
    assert not m.available and m.meta is None
    for bad in ("", "a/b", "x.json", None):
        with pytest.raises(ValueError, match="name"):
            measure_or_reference(bad, lambda: pd.DataFrame())


# ------------------------------------------------------------ bad input: unlisted neighbours (audit)


@pytest.mark.parametrize("fn", [lambda x: x, lambda x, y=1: x, int.__add__])
def test_time_fn_refuses_a_function_that_needs_arguments_before_calling_it(fn):
    with pytest.raises(ValueError, match="fn must be callable with no arguments"):
        time_fn(fn, min_run_time=0.01)


def test_time_windows_checks_run_and_device_before_running():
    from fp16lab.timing import time_windows

    with pytest.raises(ValueError, match="run must be a function"):
        time_windows(3, "cpu", 2)
    with pytest.raises(ValueError, match="run must be callable with no arguments"):
        time_windows(lambda n: n, "cpu", 2)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="device 'cuda'"):
            time_windows(lambda: None, "cuda", 1)


@pytest.mark.parametrize(
    ("metadata", "match"),
    [
        ({1: "a"}, "metadata keys must be strings"),
        ({"nested": {(1, 2): 3}}, "metadata keys must be strings"),
        ({"t": torch.ones(3)}, "metadata cannot be stored as JSON.*not a single number"),
        ({"a": {1, 2}}, "metadata cannot be stored as JSON"),
    ],
)
def test_save_results_refuses_metadata_json_would_change_or_cannot_hold(tmp_path, metadata, match):
    with pytest.raises(ValueError, match=match):
        save_results(pd.DataFrame({"a": [1]}), tmp_path / "r.json", metadata)
    assert list(tmp_path.iterdir()) == []


def test_save_results_refuses_cells_json_cannot_hold_and_a_folder_path(tmp_path):
    with pytest.raises(ValueError, match="frame cannot be stored"):
        save_results(pd.DataFrame({"a": [object()]}), tmp_path / "r.json", {})
    with pytest.raises(ValueError, match="frame cannot be stored"):
        save_results(pd.DataFrame([[1, 2]], columns=["a", "a"]), tmp_path / "r.json", {})
    (tmp_path / "d.json").mkdir()
    with pytest.raises(ValueError, match="is a folder"):
        save_results(pd.DataFrame({"a": [1]}), tmp_path / "d.json", {})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.json"]
    # numpy/torch scalars in cells and metadata are stored as plain numbers (round trip)
    save_results(pd.DataFrame({"a": [torch.tensor(2.5)]}), tmp_path / "ok.json", {"n": torch.tensor(3)})
    frame, meta = load_results(tmp_path / "ok.json")
    assert frame["a"].tolist() == [2.5] and meta == {"n": 3}


def test_load_results_refuses_rows_that_are_not_records(tmp_path):
    (tmp_path / "r.json").write_text(json.dumps({"metadata": {}, "rows": [1, 2]}))
    with pytest.raises(ValueError, match="not an fp16lab results file"):
        load_results(tmp_path / "r.json")
    with pytest.raises(FileNotFoundError, match="is a folder"):
        load_results(tmp_path)


def test_load_reference_of_a_misspelt_name_names_the_close_ones(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(results, "RESULTS_DIR", tmp_path)
    save_results(pd.DataFrame({"a": [1]}), tmp_path / "align_sweep.json", {"device_type": "cuda"})
    assert load_reference("align_swep") == (None, None)
    assert "'align_sweep'" in capsys.readouterr().out
    assert load_reference("unrelated") == (None, None)
    assert "similar" not in capsys.readouterr().out


def test_the_default_results_dir_is_the_repositorys_results_folder():
    import os
    from pathlib import Path

    if os.environ.get("FP16LAB_RESULTS_DIR"):
        pytest.skip("FP16LAB_RESULTS_DIR points elsewhere in this run")
    assert results.RESULTS_DIR == Path(__file__).resolve().parent.parent / "results"
    assert (results.RESULTS_DIR / "infer_resnet50.json").is_file()  # a committed reference is found
