"""Lesson 02's lab: the overhead table it measures and the 4090D ratio it derives from cited figures."""

import pandas as pd
import pytest
import torch

from fp16lab.labs.amp_loop import RESNET50_GMACS, batch_for, expected_overhead_ratio, measure_train_overhead


def _table(hand=5000.0, packaged=4900.0, batch=256):
    return pd.DataFrame({"loop": ["hand-written", "fp16lab.train_step"] * 2, "samples_per_s": [hand, packaged] * 2,
                         "batch": batch, "image_size": 224})


def test_expected_ratio_counts_multiply_adds_as_two_flops():
    e = expected_overhead_ratio(_table(), batch=256, peak_tflops=100.0)
    assert e["cost_ms"] == pytest.approx((256 / 4900 - 256 / 5000) * 1e3)
    assert e["fastest_step_ms"] == pytest.approx(6 * RESNET50_GMACS * 1e9 * 256 / 100e12 * 1e3)
    assert e["expected_ratio_floor"] == pytest.approx(e["fastest_step_ms"] / (e["fastest_step_ms"] + e["cost_ms"]))


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="batch"):
        expected_overhead_ratio(_table(), batch=0, peak_tflops=1.0)
    with pytest.raises(ValueError, match="frame"):
        expected_overhead_ratio(pd.DataFrame({"loop": []}), batch=1, peak_tflops=1.0)
    with pytest.raises(ValueError, match="gib=4"):
        batch_for({7: 64}, 4)
    assert batch_for({0: 32, 7: 64, 11: 128, 22: 256}, 23.6) == 256


def test_measure_on_cpu_gives_both_loops():
    t = measure_train_overhead(torch.device("cpu"), 2, fused=False, label="cpu", image_size=32, rounds=1,
                               min_run_time=0.01, window=1)
    assert list(t["loop"]) == ["hand-written", "fp16lab.train_step"] and (t["samples_per_s"] > 0).all()
