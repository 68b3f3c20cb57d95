"""Lesson 00's lab: interleaved rounds time every config once a round; the tie verdict and bad input."""

import pandas as pd
import pytest
import torch

from fp16lab.labs.setup import doctor_summary, interleaved_matmul_rounds, tie_verdict


def test_rounds_interleave_every_config():
    runs = interleaved_matmul_rounds([("fp32", "fp32"), ("bf16", "fp32")], 32, torch.device("cpu"), rounds=2,
                                     min_run_time=0.01)
    assert list(zip(runs["round"], runs.precision, strict=True)) == [(0, "fp32"), (0, "bf16"), (1, "fp32"), (1, "bf16")]
    assert (runs.tflops > 0).all()


@pytest.mark.parametrize("kwargs, message", [
    (dict(configs=[("fp64", "fp32")]), "configs must"), (dict(configs=["fp32"]), "configs must"), (dict(configs=[("bf16", "fp16")]), "fp16 only"),
    (dict(size=0), "size must"), (dict(rounds=0), "rounds must"), (dict(min_run_time=-1), "min_run_time must"),
])
def test_rounds_reject_bad_input(kwargs, message):
    args = dict(configs=[("fp32", "fp32")], size=8, device=torch.device("cpu"), rounds=1, min_run_time=0.01) | kwargs
    with pytest.raises(ValueError, match=message):
        interleaved_matmul_rounds(args.pop("configs"), args.pop("size"), args.pop("device"), **args)


def test_tie_verdict():
    assert tie_verdict(pd.Series([1.9, 2.1]), 1.15) == "faster"
    assert tie_verdict(pd.Series([0.5, 0.8]), 1.15) == "slower"
    assert tie_verdict(pd.Series([1.3, 1.05]), 1.15) == "a tie"      # one round inside the band: a tie
    with pytest.raises(ValueError, match="tie must"):
        tie_verdict(pd.Series([1.0]), 0.9)
    with pytest.raises(ValueError, match="ratios must"):
        tie_verdict(pd.Series([], dtype=float), 1.15)


def test_doctor_summary():
    out = doctor_summary("[OK  ] Python 3.12\n[WARN] jupyterlab not installed\n", 0)
    assert "exit status 0, 2 lines" in out and "jupyterlab" in out and "Python 3.12" not in out
    assert not out.endswith("every row OK") and doctor_summary("[OK  ] a\n", 0).endswith("every row OK")
    with pytest.raises(ValueError, match="returncode must"):
        doctor_summary("", "0")
