"""Precision parsing, autocast contexts, TF32 flags and capability checks."""

from __future__ import annotations

import pytest
import torch

from fp16lab.precision import (
    Precision,
    autocast,
    check_precision_supported,
    parse_device,
    parse_precision,
    precision_context,
    tf32_flags,
)


@pytest.mark.parametrize("value", ["fp32", "tf32", "fp16", "bf16", "FP16", " bf16 ", Precision.FP16])
def test_parse_accepts(value):
    assert isinstance(parse_precision(value), Precision)


@pytest.mark.parametrize("value", ["fp8", "half", "float16", 16, None, ""])
def test_parse_rejects_with_allowed_list(value):
    with pytest.raises(ValueError) as e:
        parse_precision(value)
    assert repr(value) in str(e.value) and "'fp32', 'tf32', 'fp16', 'bf16'" in str(e.value)


def test_parse_device():
    assert parse_device("cuda:1") == torch.device("cuda", 1)
    for bad in ("tpu", "gpu", "xla", 3):
        with pytest.raises(ValueError, match=repr(bad)):
            parse_device(bad)


def test_autocast_dtype_on_cpu():
    x = torch.randn(4, 8)
    lin = torch.nn.Linear(8, 4)
    with autocast("bf16", "cpu"):
        assert lin(x).dtype == torch.bfloat16
    with autocast("fp32", "cpu"):
        assert lin(x).dtype == torch.float32
    assert Precision.FP16.uses_scaler and not Precision.BF16.uses_scaler
    assert Precision.TF32.autocast_dtype is None


def test_precision_context_sets_and_restores_tf32():
    before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    with precision_context("fp32"):
        assert not torch.backends.cuda.matmul.allow_tf32 and not torch.backends.cudnn.allow_tf32
    with precision_context("tf32"):
        assert torch.backends.cuda.matmul.allow_tf32 and torch.backends.cudnn.allow_tf32
    with precision_context("fp16"):
        assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == before
    assert (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32) == before


def test_tf32_flags_restore_on_error():
    before = torch.backends.cudnn.allow_tf32
    with pytest.raises(RuntimeError), tf32_flags(not before):
        raise RuntimeError("boom")
    assert torch.backends.cudnn.allow_tf32 == before


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


def test_half_on_cpu_warns():
    with pytest.warns(UserWarning, match="slow"):
        check_precision_supported("fp16", "cpu")
