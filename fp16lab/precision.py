"""Precision as a validated choice: fp32 (true FP32), tf32, fp16 and bf16 mixed precision.

``fp32`` means *true* FP32: TF32 is switched off for matmuls and cuDNN convolutions inside
:func:`precision_context` (PyTorch's default already runs convolutions in TF32).
``tf32`` switches TF32 on for both. ``fp16`` and ``bf16`` run the forward pass under
``torch.autocast`` with that dtype and leave the TF32 flags as they are.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterator
from enum import Enum

import torch

__all__ = [
    "Precision",
    "parse_precision",
    "parse_device",
    "autocast",
    "tf32_flags",
    "precision_context",
    "check_precision_supported",
]


class Precision(str, Enum):
    """The four precisions the series compares."""

    FP32 = "fp32"
    TF32 = "tf32"
    FP16 = "fp16"
    BF16 = "bf16"

    @property
    def autocast_dtype(self) -> torch.dtype | None:
        """The dtype autocast runs eligible ops in, or None when autocast is off."""
        return {"fp16": torch.float16, "bf16": torch.bfloat16}.get(self.value)

    @property
    def uses_scaler(self) -> bool:
        """Only fp16 needs a GradScaler: bf16 has fp32's range."""
        return self is Precision.FP16

    def __str__(self) -> str:
        return self.value


ALLOWED = tuple(p.value for p in Precision)


def parse_precision(value: "Precision | str") -> Precision:
    """Return the :class:`Precision` for ``value``; ``ValueError`` names the allowed ones."""
    if isinstance(value, Precision):
        return value
    if isinstance(value, str) and value.strip().lower() in ALLOWED:
        return Precision(value.strip().lower())
    raise ValueError(f"unknown precision {value!r}; allowed: {', '.join(map(repr, ALLOWED))}")


_DEVICE_TYPES = ("cpu", "cuda", "mps")


def parse_device(device: "torch.device | str") -> torch.device:
    """Return a ``torch.device`` of a type the series supports (cpu, cuda, mps)."""
    if isinstance(device, torch.device):
        dev = device
    elif isinstance(device, str):
        try:
            dev = torch.device(device)
        except (RuntimeError, ValueError):
            raise ValueError(
                f"unknown device {device!r}; allowed: {', '.join(_DEVICE_TYPES)} "
                "(optionally with an index, e.g. 'cuda:0')"
            ) from None
    else:
        raise ValueError(f"device must be a str or torch.device, got {device!r}")
    if dev.type not in _DEVICE_TYPES:
        raise ValueError(f"unsupported device {str(dev)!r}; allowed: {', '.join(_DEVICE_TYPES)}")
    return dev


def autocast(precision: "Precision | str", device: "torch.device | str") -> torch.autocast:
    """``torch.autocast`` for ``precision`` on ``device``, disabled for fp32/tf32."""
    p = parse_precision(precision)
    dev = parse_device(device)
    dtype = p.autocast_dtype
    return torch.autocast(
        device_type=dev.type, dtype=dtype or torch.float32, enabled=dtype is not None
    )


@contextlib.contextmanager
def tf32_flags(enabled: bool) -> Iterator[None]:
    """Set both TF32 switches (matmul and cuDNN) for the block, then restore them."""
    old = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = enabled
    torch.backends.cudnn.allow_tf32 = enabled
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = old


@contextlib.contextmanager
def precision_context(precision: "Precision | str") -> Iterator[None]:
    """TF32 flags for the whole run: off for fp32, on for tf32, untouched for fp16/bf16."""
    p = parse_precision(precision)
    if p is Precision.FP32:
        with tf32_flags(False):
            yield
    elif p is Precision.TF32:
        with tf32_flags(True):
            yield
    else:
        yield


def check_precision_supported(
    precision: "Precision | str", device: "torch.device | str"
) -> Precision:
    """Raise ``ValueError`` when ``device`` cannot run ``precision`` natively; warn when slow.

    bf16 and tf32 on CUDA need compute capability 8.0 (Ampere) or newer; note that
    ``torch.cuda.is_bf16_supported()`` can answer True on older parts where bf16 is
    only emulated, so the capability is what is checked. fp16/bf16 on the CPU run,
    but are slow on CPUs without native half-precision math: a warning says so.
    """
    from fp16lab.env import cuda_capability

    p = parse_precision(precision)
    dev = parse_device(device)
    if dev.type == "cuda":
        cap = cuda_capability(dev)
        if p in (Precision.BF16, Precision.TF32) and cap < (8, 0):
            raise ValueError(
                f"{p.value} needs native support (compute capability >= 8.0, Ampere or newer); "
                f"this GPU is sm_{cap[0]}{cap[1]}. Use 'fp16' (with GradScaler) or 'fp32'."
            )
    elif dev.type == "cpu" and p in (Precision.FP16, Precision.BF16):
        warnings.warn(
            f"{p.value} on the CPU runs, but is slow on CPUs without native half-precision "
            "math; CPU timings are not FP16 speed-ups.",
            stacklevel=2,
        )
    return p
