"""Lesson 03's lab: interleaved rounds, medians with spread, tie verdicts, chip floors and 4090D figures."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch
from torch import nn

from fp16lab.labs.alignment import (
    TIE_FLOOR,
    Case,
    bandwidth_ratio,
    compare,
    expected_tflops,
    floors_for,
    fp16_step,
    peak_ratio,
    summarize,
    time_interleaved,
)


def _rounds(ms_by_variant):
    return pd.DataFrame([{"section": "s", "variant": v, "round": r, "ms": ms, "per_s": 1e3 / ms, "gpu_kernel_ms": ms}
                         for v, series in ms_by_variant.items() for r, ms in enumerate(series)])


def test_time_interleaved_runs_the_cases_in_turn_each_round():
    order = []
    cases = [Case("s", name, 1, "x/s", 1.0, lambda name=name: order.append(name)) for name in ("a", "b")]
    frame = time_interleaved(cases, rounds=2, warmup=0, min_run_time=0.001, device="cpu")
    assert list(frame["variant"]) == ["a", "b", "a", "b"] and list(frame["round"]) == [0, 0, 1, 1]
    assert order.index("b") > order.index("a") and order[-1] == "b"
    assert (frame.status == "ok").all() and frame.gpu_kernel_ms.isna().all()


def test_time_interleaved_restores_the_cudnn_flag():
    old = torch.backends.cudnn.benchmark
    seen = []
    case = Case("s", "a", 1, "x/s", 1.0, lambda: seen.append(torch.backends.cudnn.benchmark), cudnn_benchmark=not old)
    time_interleaved([case], rounds=1, warmup=0, min_run_time=0.001, device="cpu")
    assert set(seen) == {not old} and torch.backends.cudnn.benchmark == old


def test_fp16_step_runs_forward_and_backward():
    model = nn.Linear(4, 4)
    fp16_step(model, torch.randn(2, 4), loss_fn=lambda o: o.float().sum(), device="cpu")()
    assert model.weight.grad is not None


@pytest.mark.parametrize(("kwargs", "named"), [({"rounds": 0}, "rounds"), ({"min_run_time": -1.0}, "min_run_time")])
def test_time_interleaved_names_a_bad_argument(kwargs, named):
    with pytest.raises(ValueError, match=named):
        time_interleaved([Case("s", "a", 1, "x/s", 1.0, lambda: None)], device="cpu", **kwargs)


def test_bad_cases_are_refused_before_any_timing():
    with pytest.raises(ValueError, match="cases"):
        time_interleaved([], device="cpu")
    with pytest.raises(ValueError, match="unique"):
        time_interleaved([Case("s", "a", 1, "x/s", 1.0, lambda: None)] * 2, device="cpu")
    with pytest.raises(ValueError, match="batch"):
        Case("s", "a", 0, "x/s", 1.0, lambda: None)


def test_summarize_takes_medians_and_the_relative_spread():
    s = summarize(_rounds({"a": [10.0, 11.0, 12.0], "b": [5.0, 5.0, 5.0]})).set_index("variant")
    assert s.loc["a", "ms"] == 11.0 and s.loc["a", "rounds"] == 3
    assert s.loc["a", "ms_spread"] == pytest.approx(2 / 11) and s.loc["b", "kernel_spread"] == 0


def test_compare_calls_a_difference_inside_the_spread_a_tie():
    s = summarize(_rounds({"a": [10.0, 10.5, 11.0], "b": [10.2, 10.4, 10.6], "c": [5.0, 5.1, 5.2]}))
    assert compare(s, "a", "b")["verdict"] == "tie"
    fast = compare(s, "a", "c")
    assert fast["verdict"] == "faster" and fast["speedup"] == pytest.approx(10.5 / 5.1)
    assert compare(s, "c", "a")["verdict"] == "slower"
    assert compare(s, "a", "c", "per_s")["speedup"] == pytest.approx(10.5 / 5.1)


def test_a_single_round_falls_back_on_the_tie_floor():
    s = summarize(_rounds({"a": [10.0], "b": [10.0 * (1 - TIE_FLOOR / 2)]}).drop(columns="round"))
    assert compare(s, "a", "b")["verdict"] == "tie" and compare(s, "a", "b")["margin"] == TIE_FLOOR


def test_compare_names_an_unknown_variant():
    with pytest.raises(ValueError, match="'z'"):
        compare(summarize(_rounds({"a": [1.0]})), "a", "z")


def test_floors_follow_the_chip():
    h200, ada = floors_for("NVIDIA H200"), floors_for("NVIDIA GeForce RTX 4090 D")
    assert h200.cliff > ada.cliff and ada.fp16_acc_speedup and h200.fp16_acc_speedup is None
    assert floors_for(None).peak is None and not floors_for(None).fp16_acc_adds_error


def test_the_4090d_figures_come_from_the_cited_peaks():
    assert peak_ratio("NVIDIA H200") == pytest.approx(989.5 / 147.0)
    assert bandwidth_ratio("NVIDIA H200") == pytest.approx(4800 / 1008)
    exp = expected_tflops(pd.DataFrame({"precision": ["fp32", "fp16"], "pct_of_peak": [50.0, 50.0]}))
    assert exp.loc["fp16", "RTX 4090D expected TFLOP/s"] == pytest.approx(73.5)
    assert exp.loc["fp16", "cited ratio over fp32"] == pytest.approx(2.0)
    with pytest.raises(ValueError, match="from_gpu must be a GPU with cited peaks"):
        peak_ratio("NVIDIA Quadro Imaginary")
    assert math.isfinite(peak_ratio("NVIDIA H200", precision="tf32"))


def test_single_verdict_calls_a_difference_inside_the_noise_a_tie():
    from fp16lab.labs.alignment import single_verdict

    assert single_verdict(1.06, 0.03) == "ahead" and single_verdict(0.94, 0.03) == "behind"
    assert single_verdict(1.06, 0.08) == "tie"                    # inside the measured spread
    assert single_verdict(1.015, 0.0) == "tie"                    # inside TIE_FLOOR even with no spread
    assert single_verdict(1.5, 0.1) == "ahead"
    with pytest.raises(ValueError, match="ratio"):
        single_verdict(0.0, 0.1)


def test_hopper_whole_step_floors_leave_room_for_an_h100_and_catch_no_gain():
    for name in ("NVIDIA H200", "NVIDIA H100 80GB HBM3"):
        f = floors_for(name)
        assert 1.1 < f.gpt_step <= 1.5 and 1.1 < f.channels_last <= 1.5, f   # a regression gives about 1
        assert f.cliff < f.head and f.m_ratio_max is not None
