"""The device layer: parsing, choosing, resolving, a model's device, OOM recognition."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import fp16lab.device as device
from fp16lab.checks import boolean, non_negative_int, one_of, positive_float, positive_int
from fp16lab.device import choose_device, is_oom, model_device, parse_device, resolve_device


def test_parse_device():
    assert parse_device("cuda:1") == torch.device("cuda", 1)
    assert parse_device(torch.device("cpu")) == torch.device("cpu")
    for bad in ("tpu", "gpu", "", 0, None, "xla"):
        with pytest.raises(ValueError, match="device"):
            parse_device(bad)
    with pytest.raises(ValueError, match="^where "):
        parse_device("nope", name="where")


def test_choose_device_order(fake_gpu, monkeypatch):
    fake_gpu("none")
    assert choose_device().type == "cpu"
    monkeypatch.setattr(device, "mps_available", lambda: True)
    assert choose_device().type == "mps"
    fake_gpu("hopper")
    monkeypatch.setattr(device, "mps_available", lambda: True)
    assert choose_device().type == "cuda"


def test_resolve_device_says_what_is_missing(fake_gpu):
    fake_gpu("none")
    with pytest.raises(ValueError, match="'tpu'"):
        choose_device("tpu")
    for dev in ("cuda", "cuda:0", torch.device("cuda")):
        with pytest.raises(ValueError, match="no CUDA GPU is visible"):
            resolve_device(dev)
    with pytest.raises(ValueError, match="MPS is not available"):
        resolve_device("mps")
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("cpu:0") == torch.device("cpu:0")
    assert resolve_device(None) == torch.device("cpu")
    for dev in ("cpu:1", torch.device("cpu", 3)):
        with pytest.raises(ValueError, match=r"device 'cpu:\d': there is one cpu device, index 0"):
            resolve_device(dev)
    fake_gpu("hopper")
    with pytest.raises(ValueError, match="1 CUDA GPU"):
        resolve_device("cuda:2")


def test_model_device_one_rule():
    assert model_device(nn.Linear(2, 2)) == torch.device("cpu")
    assert model_device(nn.BatchNorm1d(2, affine=False)) == torch.device("cpu")  # buffers only
    with pytest.raises(ValueError, match="no parameters or buffers"):
        model_device(nn.ReLU())
    assert model_device(nn.ReLU(), default=torch.device("cpu")) == torch.device("cpu")


def test_is_oom():
    assert is_oom(torch.cuda.OutOfMemoryError("CUDA out of memory"))
    assert is_oom(MemoryError())
    assert is_oom(RuntimeError("MPS backend out of memory"))
    assert not is_oom(RuntimeError("shape mismatch"))
    assert not is_oom(ValueError("out of memory"))


def test_validators_name_the_argument_and_refuse_bools():
    import numpy as np

    assert positive_int("steps", np.int64(3)) == 3
    for bad in (True, 0, -1, 1.0, "2", None):
        with pytest.raises(ValueError, match="^steps must be an int >= 1, got"):
            positive_int("steps", bad)
    assert non_negative_int("n", 0) == 0
    with pytest.raises(ValueError, match="n must be an int >= 0"):
        non_negative_int("n", False)
    assert positive_float("lr", 1) == 1.0
    for bad in (0, -1.0, float("nan"), float("inf"), True, "1"):
        with pytest.raises(ValueError, match="^lr must be a finite number > 0"):
            positive_float("lr", bad)
    assert positive_float("t", 0, allow_zero=True) == 0.0
    assert one_of("task", "train", ("train", "infer")) == "train"
    with pytest.raises(ValueError, match="task must be one of 'train', 'infer'; got 'Train'"):
        one_of("task", "Train", ("train", "infer"))
    with pytest.raises(ValueError, match="flag must be True or False, got 1"):
        boolean("flag", 1)


def test_sync_and_free_memory_say_when_the_device_is_not_here(monkeypatch):
    """A GPU this machine lacks is named as such, not a driver error from inside torch."""
    from fp16lab.device import free_memory, synchronize

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    for fn in (synchronize, free_memory):
        with pytest.raises(ValueError, match="device 'cuda' requested but no CUDA GPU is visible here"):
            fn("cuda")
        with pytest.raises(ValueError, match="device must be a str or torch.device, got None"):
            fn(None)  # type: ignore[arg-type]  # never "the best available" in silence
        fn("cpu")
