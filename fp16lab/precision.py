"""Precision as a validated choice: fp32 (true FP32), tf32, fp16 and bf16 mixed precision.

``fp32`` means *true* FP32: TF32 is switched off for matmuls and cuDNN convolutions inside
:func:`precision_context` (PyTorch's default already runs convolutions in TF32).
``tf32`` switches TF32 on for both. ``fp16`` and ``bf16`` run the forward pass under
``torch.autocast`` with that dtype and leave the TF32 flags as they are.
"""

from __future__ import annotations

import contextlib
import sys
import warnings
from collections.abc import Iterator
from enum import Enum
from typing import Any

import torch

from fp16lab.checks import say
from fp16lab.device import parse_device, resolve_device
from fp16lab.hardware import cuda_capability

__all__ = [
    "Precision",
    "parse_precision",
    "autocast",
    "tf32_state",
    "tf32_flags",
    "fp16_accumulation",
    "precision_context",
    "check_precision_supported",
    "HalfOnCPUWarning",
    "HalfMatmulOnCPUWarning",
]


class HalfOnCPUWarning(UserWarning):
    """fp16/bf16 ran on the CPU: it works, but slowly, so its timings are no FP16 speed-ups.

    A category of its own so that a filter can name it in any language: the Chinese lab shows the text in
    Chinese (``fp16lab.labs.runtime.i18n``), while a ``filterwarnings(message=...)`` matches the English text.
    """

    precision: str = "fp16"  # the one that ran on the CPU: "fp16" or "bf16"


class HalfMatmulOnCPUWarning(UserWarning):
    """A matmul sweep timed fp16/bf16 on the CPU: no Tensor Cores there, so the figures are no FP16 speeds."""


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


def parse_precision(value: "Precision | str", *, name: str = "precision") -> Precision:
    """The :class:`Precision` for ``value`` (a name such as ``'fp16'``); ``ValueError`` lists the allowed.

    One rule everywhere: precisions are these names, not dtypes (``torch.float16``) or dtype
    names (``'float16'``): ``'fp32'`` and ``'tf32'`` share a dtype, so a dtype cannot say which.
    """
    if not isinstance(name, str):
        raise ValueError(f"name must be the argument's name (a str), got {name!r}")
    if isinstance(value, Precision):
        return value
    if isinstance(value, str) and value.strip().lower() in ALLOWED:
        return Precision(value.strip().lower())
    hint = ""
    if isinstance(value, torch.dtype) or value in ("float16", "half", "bfloat16", "float32", "float"):
        hint = say(" (a precision name, not a dtype: e.g. torch.float16 is 'fp16')")
    raise ValueError(say("{name}: unknown precision {value!r}; allowed: {allowed}{hint}", name=name, value=value,
                         allowed=say(", ").join(map(repr, ALLOWED)), hint=hint))


def autocast(
    precision: "Precision | str", device: "torch.device | str", *, cache_enabled: bool | None = None
) -> torch.autocast:
    """``torch.autocast`` for ``precision`` on ``device``, disabled for fp32/tf32: fp16lab builds it only here.

    ``cache_enabled`` is torch's (default None: torch's own default, the weight-cast cache on);
    pass False inside a CUDA-graph capture or ``torch.compile`` region where the cache would
    keep stale casts. ``autocast("fp32", device)`` is an FP32 island inside an autocast region.
    A device this machine lacks is refused (torch would only warn and run without autocast); inside
    ``torch.compile`` only the name is checked (asking torch for its GPUs there breaks the graph).
    """
    p = parse_precision(precision)
    dev = parse_device(device)
    if not torch.compiler.is_compiling():
        dev = resolve_device(dev)
    if cache_enabled is not None and not isinstance(cache_enabled, bool):
        raise TypeError(f"cache_enabled must be True, False or None; got {cache_enabled!r}")
    return parsed_autocast(p, dev, cache_enabled)


def parsed_autocast(p: Precision, dev: torch.device, cache_enabled: bool | None = None) -> torch.autocast:
    """:func:`autocast` on parsed values, unchecked: for the step that runs every iteration (its entry checked once)."""
    dtype = p.autocast_dtype
    return torch.autocast(
        device_type=dev.type, dtype=dtype or torch.float32, enabled=dtype is not None, cache_enabled=cache_enabled
    )


# ----------------------------------------------------------------------- TF32 switches
# torch >= 2.9 (the floor) sets TF32 per backend with ``fp32_precision`` ("tf32" or "ieee";
# "none" inherits from the level above). Once it is used, reading the legacy ``allow_tf32``
# flags raises, so fp16lab only ever sets and reads the new settings; a legacy setting made
# by the user is still read correctly (all levels "none": the legacy flag decides).


def _first_set(values: list[str]) -> str | None:
    return next((v for v in values if v in ("tf32", "ieee")), None)


def tf32_state() -> dict[str, str]:
    """The effective FP32 math of matmuls and cuDNN convolutions: ``'tf32'`` or ``'ieee'``."""
    b: Any = torch.backends  # fp32_precision is set at run time: not in torch's stubs
    matmul = _first_set([b.cuda.matmul.fp32_precision, b.fp32_precision])
    conv = _first_set([b.cudnn.conv.fp32_precision, b.cudnn.fp32_precision, b.fp32_precision])
    if matmul is None:
        matmul = "tf32" if b.cuda.matmul.allow_tf32 else "ieee"
    if conv is None:
        conv = "tf32" if b.cudnn.allow_tf32 else "ieee"
    return {"matmul": matmul, "cudnn_conv": conv}


@contextlib.contextmanager
def tf32_flags(enabled: bool, cudnn: bool | None = None) -> Iterator[None]:
    """TF32 on (``True``) or off for matmuls and cuDNN convolutions in the block, then restored.

    ``cudnn`` (default: same as ``enabled``) sets the convolutions apart. Uses
    ``torch.backends.cuda.matmul.fp32_precision`` and ``torch.backends.cudnn.conv.fp32_precision``.
    """
    if not isinstance(enabled, bool) or not isinstance(cudnn, (bool, type(None))):
        raise ValueError(f"enabled and cudnn must be True or False, got {enabled!r} and {cudnn!r}")
    conv_on = enabled if cudnn is None else cudnn
    mm: Any = torch.backends.cuda.matmul
    cv: Any = torch.backends.cudnn.conv  # type: ignore[attr-defined]
    old = (mm.fp32_precision, cv.fp32_precision)
    mm.fp32_precision = "tf32" if enabled else "ieee"
    cv.fp32_precision = "tf32" if conv_on else "ieee"
    try:
        yield
    finally:
        mm.fp32_precision, cv.fp32_precision = old


@contextlib.contextmanager
def fp16_accumulation(enabled: bool) -> Iterator[None]:
    """FP16 matmuls accumulate in FP16 (``allow_fp16_accumulation``) in the block, then restored.

    GeForce parts run FP16-accumulate matmuls at twice the FP32-accumulate rate, at an
    accuracy cost; data-center parts run both at the same rate. cuDNN convolutions ignore it.
    """
    if not isinstance(enabled, bool):
        raise ValueError(f"enabled must be True or False, got {enabled!r}")
    mm: Any = torch.backends.cuda.matmul
    old = mm.allow_fp16_accumulation
    mm.allow_fp16_accumulation = enabled
    try:
        yield
    finally:
        mm.allow_fp16_accumulation = old


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
    p = parse_precision(precision)
    dev = parse_device(device)
    if dev.type == "cuda":
        cap = cuda_capability(dev)
        if p in (Precision.BF16, Precision.TF32) and cap < (8, 0):
            raise ValueError(
                f"{p.value} needs native support (compute capability >= 8.0, Ampere or newer); "
                f"this GPU is sm_{cap[0]}{cap[1]}. Use 'fp16' (with GradScaler) or 'fp32'."
            )
    elif dev.type == "cpu" and p in (Precision.FP16, Precision.BF16) and p not in _WARNED_CPU:
        _WARNED_CPU.add(p)
        slow = HalfOnCPUWarning(
            f"{p.value} on the CPU runs, but is slow on CPUs without native half-precision "
            "math; CPU timings are not FP16 speed-ups. (Shown once per session.)"
        )
        slow.precision = p.value
        warnings.warn(slow, stacklevel=_caller_stacklevel())
    return p


_WARNED_CPU: set[Precision] = set()


def _caller_stacklevel() -> int:
    """The ``stacklevel`` that points a warning at the first frame outside fp16lab (the user's cell)."""
    frame, level = sys._getframe(1), 1
    while frame is not None and frame.f_globals.get("__name__", "").startswith("fp16lab"):
        frame, level = frame.f_back, level + 1  # type: ignore[assignment]
    return level
