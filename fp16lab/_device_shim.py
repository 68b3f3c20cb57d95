"""Temporary stand-in for fp16lab.device (the lead's "device and hardware seam"); removed at merge."""

from __future__ import annotations

import torch
from torch import nn

from fp16lab.precision import parse_device


def resolve_device(value: "torch.device | str | None" = None, *, name: str = "device") -> torch.device:
    if value is None:
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = parse_device(value)
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"{name}={str(value)!r}, but this machine has no CUDA GPU; use 'cpu'")
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise ValueError(f"{name}={str(value)!r}, but MPS is not available here; use 'cpu'")
    return dev


def model_device(model: nn.Module, default: torch.device | None = None) -> torch.device:
    for t in model.parameters():
        return t.device
    for t in model.buffers():
        return t.device
    if default is not None:
        return default
    raise ValueError("the model has no parameters or buffers, so it has no device")
