"""Precision parsing, autocast contexts, TF32 flags and capability checks."""

from __future__ import annotations

import pytest
import torch

from fp16lab.precision import (
    Precision,
    autocast,
    check_precision_supported,
    fp16_accumulation,
    parse_precision,
    precision_context,
    tf32_flags,
    tf32_state,
)


@pytest.mark.parametrize("value", ["fp32", "tf32", "fp16", "bf16", "FP16", " bf16 ", Precision.FP16])
def test_parse_accepts(value):
    assert isinstance(parse_precision(value), Precision)


@pytest.mark.parametrize("value", ["fp8", "half", "float16", 16, None, ""])
def test_parse_rejects_with_allowed_list(value):
    with pytest.raises(ValueError, match="'fp32', 'tf32', 'fp16', 'bf16'") as e:
        parse_precision(value)
    assert repr(value) in str(e.value) and "'fp32', 'tf32', 'fp16', 'bf16'" in str(e.value)


def test_autocast_dtype_on_cpu():
    x = torch.randn(4, 8)
    lin = torch.nn.Linear(8, 4)
    with autocast("bf16", "cpu"):
        assert lin(x).dtype == torch.bfloat16
    with autocast("fp32", "cpu"):
        assert lin(x).dtype == torch.float32
    assert Precision.FP16.uses_scaler and not Precision.BF16.uses_scaler
    assert Precision.TF32.autocast_dtype is None


def _raw():
    return (torch.backends.cuda.matmul.fp32_precision, torch.backends.cudnn.conv.fp32_precision)


def test_precision_context_sets_and_restores_tf32():
    before = _raw()
    with precision_context("fp32"):
        assert tf32_state() == {"matmul": "ieee", "cudnn_conv": "ieee"}
        with precision_context("tf32"):
            assert tf32_state() == {"matmul": "tf32", "cudnn_conv": "tf32"}
        assert tf32_state()["cudnn_conv"] == "ieee"
    assert _raw() == before
    # legacy flags stay readable after the round trip (mixing the APIs would make them raise)
    assert isinstance(torch.backends.cudnn.allow_tf32, bool)


def test_tf32_flags_restore_on_error():
    before = _raw()
    with pytest.raises(RuntimeError, match="^boom$"), tf32_flags(True, cudnn=False):
        assert tf32_state() == {"matmul": "tf32", "cudnn_conv": "ieee"}
        raise RuntimeError("boom")
    assert _raw() == before
    with pytest.raises(ValueError, match="True or False"):
        with tf32_flags("no"):  # type: ignore[arg-type]
            pass
    assert _raw() == before


def test_tf32_state_reads_a_legacy_setting(monkeypatch):
    old = torch.backends.cuda.matmul.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = True
        assert tf32_state()["matmul"] == "tf32"
    finally:
        torch.backends.cuda.matmul.allow_tf32 = old
    assert tf32_state()["matmul"] == ("tf32" if old else "ieee")


def test_fp16_accumulation_context():
    before = torch.backends.cuda.matmul.allow_fp16_accumulation
    with fp16_accumulation(True):
        assert torch.backends.cuda.matmul.allow_fp16_accumulation
    assert torch.backends.cuda.matmul.allow_fp16_accumulation == before
    with pytest.raises(ValueError, match="enabled"):
        with fp16_accumulation(1):  # type: ignore[arg-type]
            pass


@pytest.mark.parametrize("value", [torch.float16, "float16", torch.bfloat16])
def test_parse_precision_explains_dtypes(value):
    with pytest.raises(ValueError, match="not a dtype"):
        parse_precision(value)


def test_bf16_on_pre_ampere_is_refused(fake_gpu):
    fake_gpu("turing")
    with pytest.raises(ValueError, match="sm_75"):
        check_precision_supported("bf16", "cuda")
    with pytest.raises(ValueError, match="tf32"):
        check_precision_supported("tf32", "cuda")
    assert check_precision_supported("fp16", "cuda") is Precision.FP16


def test_bf16_on_ampere_ok(fake_gpu):
    fake_gpu("hopper")
    assert check_precision_supported("bf16", "cuda") is Precision.BF16


def test_half_on_cpu_warns_once_at_the_callers_line(monkeypatch):
    import warnings

    import fp16lab.precision as precision

    monkeypatch.setattr(precision, "_WARNED_CPU", set())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_precision_supported("fp16", "cpu")
        check_precision_supported("fp16", "cpu")
    assert len(caught) == 1 and "slow" in str(caught[0].message)
    assert caught[0].filename == __file__  # points at the user's code, not inside fp16lab
    assert caught[0].category is precision.HalfOnCPUWarning and issubclass(caught[0].category, UserWarning)
    assert str(caught[0].message).startswith("fp16 on the CPU runs, but is slow"), "the text lessons filter by"


def test_half_on_cpu_can_be_filtered_by_its_category(monkeypatch):
    import warnings

    import fp16lab.precision as precision

    monkeypatch.setattr(precision, "_WARNED_CPU", set())
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warnings.filterwarnings("ignore", category=precision.HalfOnCPUWarning)
        check_precision_supported("bf16", "cpu")
    assert caught == []
