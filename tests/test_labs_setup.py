"""Lesson 00's lab: interleaved rounds time every config once a round; the tie verdict and bad input."""

import pandas as pd
import pytest
import torch

from fp16lab.hardware import PEAK_TFLOPS
from fp16lab.labs.setup import (
    FORECAST_EFFICIENCY,
    acc16_cited,
    card_forecast,
    compare_with_forecast,
    cudnn_version,
    doctor_summary,
    forecast_memory_line,
    fp16_accumulation_error,
    interleaved_matmul_rounds,
)


def test_rounds_interleave_every_config():
    runs = interleaved_matmul_rounds([("fp32", "fp32"), ("bf16", "fp32")], 32, torch.device("cpu"), rounds=2,
                                     min_run_time=0.01)
    # the order alternates, so that no config always follows the same one
    assert list(zip(runs["round"], runs.precision, strict=True)) == [(0, "fp32"), (0, "bf16"), (1, "bf16"), (1, "fp32")]
    assert (runs.tflops > 0).all()


@pytest.mark.parametrize("kwargs, message", [
    (dict(configs=[("fp64", "fp32")]), "configs must"), (dict(configs=["fp32"]), "configs must"), (dict(configs=[("bf16", "fp16")]), "fp16 only"),
    (dict(size=0), "size must"), (dict(rounds=0), "rounds must"), (dict(min_run_time=-1), "min_run_time must"),
])
def test_rounds_reject_bad_input(kwargs, message):
    args = dict(configs=[("fp32", "fp32")], size=8, device=torch.device("cpu"), rounds=1, min_run_time=0.01) | kwargs
    with pytest.raises(ValueError, match=message):
        interleaved_matmul_rounds(args.pop("configs"), args.pop("size"), args.pop("device"), **args)


def test_doctor_summary():
    out = doctor_summary("[OK  ] Python 3.12\n[WARN] jupyterlab not installed\n", 0)
    assert "exit status 0, 2 lines" in out and "jupyterlab" in out and "Python 3.12" not in out
    assert not out.endswith("every row OK") and doctor_summary("[OK  ] a\n", 0).endswith("every row OK")
    with pytest.raises(ValueError, match="returncode must"):
        doctor_summary("", "0")


def test_card_forecast_has_every_row_on_any_machine_with_per_unit_bands():
    f = card_forecast("RTX 4090D")
    assert list(zip(f.precision, f.accumulate, strict=True)) == [("fp32", "fp32"), ("tf32", "fp32"), ("fp16", "fp32"),
                                                     ("bf16", "fp32"), ("fp16", "fp16")]
    assert list(f.units) == ["CUDA cores"] + ["Tensor Cores"] * 4
    assert FORECAST_EFFICIENCY["CUDA cores"][1] < FORECAST_EFFICIENCY["Tensor Cores"][0]
    peak = PEAK_TFLOPS["RTX 4090D"]
    assert f["cited peak TFLOP/s"].tolist() == [peak.fp32, peak.tf32, peak.fp16, peak.bf16, peak.fp16_acc16]
    low, high = (float(x) for x in f.set_index("precision").loc["tf32", "expected x true FP32"].split("-"))
    assert low < 1.6 < high    # the cited RTX 4090 reports (TF32 about 1.6x true FP32) lie inside the forecast
    assert len(card_forecast("T4")) == 3   # no TF32, no BF16: rows without a cited peak are left out
    with pytest.raises(ValueError, match="card must"):
        card_forecast("RTX 9999")
    assert "8192x8192" in forecast_memory_line() and "24,564 MiB" in forecast_memory_line()


def test_fp16_accumulation_error_and_cudnn_version():
    err = fp16_accumulation_error(torch.device("cpu"), k=64)
    assert set(err) == {False, True} and all(0 < v < 1e-2 for v in err.values())
    v = cudnn_version()
    assert v is None or (isinstance(v, tuple) and v[0] >= 8)


def test_acc16_cited_follows_the_cited_peaks():
    """GeForce Ada's FP16-accumulate path is twice as wide; data-center chips run both at one rate (cited peaks)."""
    assert acc16_cited(PEAK_TFLOPS["RTX 4090D"]) == "faster"
    assert acc16_cited(PEAK_TFLOPS["H200"]) == acc16_cited(PEAK_TFLOPS["A100"]) == "same"
    with pytest.raises(ValueError, match="peak must be"):
        acc16_cited("H200")


def test_compare_with_forecast_sets_each_measured_row_beside_its_range():
    forecast = card_forecast("RTX 4090D")
    lo, hi = (float(v) for v in forecast.set_index("precision").loc["fp32", "expected TFLOP/s"].split("-"))
    measured = pd.DataFrame({"precision": ["fp32", "fp16", "fp16"], "accumulate": ["fp32", "fp32", "fp16"],
                             "tflops": [(lo + hi) / 2, 1.0, 10_000.0]})
    got = compare_with_forecast(measured, forecast).set_index(["precision", "accumulate"]).inside
    assert got.to_dict() == {("fp32", "fp32"): "yes", ("fp16", "fp32"): "below", ("fp16", "fp16"): "above"}
    with pytest.raises(ValueError, match="measured must be a DataFrame"):
        compare_with_forecast(measured.drop(columns="tflops"), forecast)
