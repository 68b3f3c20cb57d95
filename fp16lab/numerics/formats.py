"""Format facts and exact rounding: the layouts of fp32, fp16, bf16 and the two FP8 formats.

See :mod:`fp16lab.numerics` for what a *format* is (not a precision) and the rounding rules.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from fp16lab.checks import distinct, sequence_of

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "FormatLike",
    "FORMATS",
    "FORMAT_NAMES",
    "parse_format",
    "FormatInfo",
    "format_info",
    "formats_table",
    "round_to_format",
    "ulp",
]

FormatLike = torch.dtype | str

# name -> (dtype, exponent bits, stored mantissa bits, has inf). Formats without inf
# ("fn": finite) use the all-ones exponent for numbers too; only S.1111.111 is NaN.
_LAYOUT: dict[str, tuple[torch.dtype, int, int, bool]] = {
    "fp32": (torch.float32, 8, 23, True),
    "fp16": (torch.float16, 5, 10, True),
    "bf16": (torch.bfloat16, 8, 7, True),
    "fp8_e4m3": (torch.float8_e4m3fn, 4, 3, False),
    "fp8_e5m2": (torch.float8_e5m2, 5, 2, True),
}
#: The supported formats, widest first (the order the lessons show them).
FORMATS: tuple[str, ...] = tuple(_LAYOUT)
#: Every accepted format name (the same as :data:`FORMATS`: one name per format).
FORMAT_NAMES: tuple[str, ...] = FORMATS
_BY_DTYPE = {layout[0]: name for name, layout in _LAYOUT.items()}
# Unsigned/signed integer dtype of the same width, for reinterpreting the bits.
INT_VIEW = {torch.float32: torch.int32, torch.float16: torch.int16, torch.bfloat16: torch.int16,
             torch.float8_e4m3fn: torch.uint8, torch.float8_e5m2: torch.uint8}
# Names learners type that are not format names, and what to use instead.
_HINTS = {
    "float32": "'fp32'", "float": "'fp32'", "float16": "'fp16'", "half": "'fp16'", "bfloat16": "'bf16'",
    "float8_e4m3fn": "'fp8_e4m3'", "fp8_e4m3fn": "'fp8_e4m3'", "e4m3": "'fp8_e4m3'",
    "float8_e5m2": "'fp8_e5m2'", "e5m2": "'fp8_e5m2'", "fp8": "'fp8_e4m3' or 'fp8_e5m2' (two FP8 formats)",
    "tf32": "'fp32' (TF32 is a way of computing matmuls, not a storage format: values stay fp32)",
}


def _allowed_text() -> str:
    return f"one of {', '.join(map(repr, FORMATS))} or the dtype ({', '.join(map(str, _BY_DTYPE))})"


def parse_format(fmt: FormatLike, *, name: str = "fmt") -> str:
    """The format name ('fp32', 'fp16', 'bf16', 'fp8_e4m3', 'fp8_e5m2') of ``fmt``: a name or a dtype.

    ``ValueError`` (naming ``name``, default ``'fmt'``) for anything else, with a hint for
    dtype names such as ``'float16'`` (use ``'fp16'`` or ``torch.float16``).
    """
    if not isinstance(name, str):
        raise ValueError(f"name must be the argument's name (a str), got {name!r}")
    if isinstance(fmt, torch.dtype) and fmt in _BY_DTYPE:
        return _BY_DTYPE[fmt]
    if isinstance(fmt, str) and fmt.strip().lower() in _LAYOUT:
        return fmt.strip().lower()
    hint = ""
    if isinstance(fmt, str) and fmt.strip().lower() in _HINTS:
        hint = f" (did you mean {_HINTS[fmt.strip().lower()]}?)"
    raise ValueError(f"{name}: unsupported format {fmt!r}; allowed: {_allowed_text()}{hint}")


@dataclass(frozen=True)
class FormatInfo:
    """The facts of one binary floating-point format, derived from its bit layout.

    ``max``, ``smallest_normal``, ``smallest_subnormal`` and ``eps`` are computed from the
    layout (bias ``2**(exponent_bits-1) - 1``; formats without inf also use the all-ones
    exponent for numbers); the tests check them against ``torch.finfo`` and numpy.
    """

    name: str
    dtype: torch.dtype
    bits: int
    exponent_bits: int
    mantissa_bits: int
    bias: int
    has_inf: bool
    max: float
    smallest_normal: float
    smallest_subnormal: float
    eps: float

    @property
    def min_exponent(self) -> int:
        """Unbiased exponent of the smallest normal number (1 - bias)."""
        return 1 - self.bias

    @property
    def max_exponent(self) -> int:
        """Unbiased exponent of the largest finite number (bias, or bias + 1 without inf)."""
        return self.bias if self.has_inf else self.bias + 1

    @property
    def decimal_digits(self) -> float:
        """About how many significant decimal digits the format keeps: log10(2**(m+1))."""
        return (self.mantissa_bits + 1) * math.log10(2)

    def as_dict(self) -> dict[str, Any]:
        """The facts as a plain dict (one row of :func:`formats_table`)."""
        return {
            "format": self.name,
            "dtype": str(self.dtype),
            "bits": self.bits,
            "exponent_bits": self.exponent_bits,
            "mantissa_bits": self.mantissa_bits,
            "max": self.max,
            "smallest_normal": self.smallest_normal,
            "smallest_subnormal": self.smallest_subnormal,
            "eps": self.eps,
            "decimal_digits": round(self.decimal_digits, 2),
            "has_inf": self.has_inf,
        }


def _build_info(name: str) -> FormatInfo:
    dtype, e, m, has_inf = _LAYOUT[name]
    bias = 2 ** (e - 1) - 1
    # Largest finite: all-ones mantissa below the all-ones exponent (IEEE); without inf the
    # all-ones exponent holds numbers too, all but the all-ones mantissa (NaN).
    top = math.ldexp(2.0 - 2.0**-m, bias) if has_inf else math.ldexp(2.0 - 2.0 ** (1 - m), bias + 1)
    return FormatInfo(
        name=name,
        dtype=dtype,
        bits=1 + e + m,
        exponent_bits=e,
        mantissa_bits=m,
        bias=bias,
        has_inf=has_inf,
        max=top,
        smallest_normal=math.ldexp(1.0, 1 - bias),
        smallest_subnormal=math.ldexp(1.0, 1 - bias - m),
        eps=math.ldexp(1.0, -m),
    )


FORMAT_INFO: dict[str, FormatInfo] = {n: _build_info(n) for n in _LAYOUT}


def format_info(fmt: FormatLike) -> FormatInfo:
    """Facts (bits, range, epsilon) of ``fmt``, computed from its layout; see :class:`FormatInfo`."""
    return FORMAT_INFO[parse_format(fmt)]


def formats_table(formats: Iterable[FormatLike] = FORMATS) -> "pd.DataFrame":
    """One row per format (default all of :data:`FORMATS`) with the facts of :class:`FormatInfo`."""
    import pandas as pd

    if isinstance(formats, torch.dtype):
        formats = [formats]
    items = sequence_of("formats", formats, example="['fp16', 'bf16']", single=True)  # a name: a list of one
    infos = distinct("formats", [format_info(parse_format(f, name=f"formats[{i}]")) for i, f in enumerate(items)],
                     key=lambda info: info.name)
    rows = [info.as_dict() for info in infos]
    return pd.DataFrame(rows).set_index("format")


# --------------------------------------------------------------------------- rounding


def round_exact(x: torch.Tensor, info: FormatInfo) -> tuple[torch.Tensor, torch.Tensor]:
    """Round float64 ``x`` to ``info``'s format once (nearest, ties to even), in float64.

    Returns (stored value as float64, overflow mask: finite input beyond the finite range).
    Exact: dividing by the power-of-two quantum and rounding to an integer are exact in
    float64 for every format here (at most 24 significant bits).
    """
    a = x.abs()
    _, e = torch.frexp(a)  # a = f * 2**e, f in [0.5, 1): unbiased exponent e - 1
    exp = torch.clamp(e - 1, min=info.min_exponent)
    quantum = _power_of_two(exp - info.mantissa_bits)
    r = torch.round(a / quantum) * quantum  # torch.round: half to even
    finite = torch.isfinite(a)
    over = finite & (r > info.max)
    big = math.inf if info.has_inf else info.max
    r = torch.where(over | torch.isinf(a), torch.full_like(r, big), r)
    r = torch.where(torch.isnan(a), a, r)
    return torch.copysign(r, x), over


def _power_of_two(k: torch.Tensor) -> torch.Tensor:
    """2**k in float64, built from its bits: exact on every device (CUDA's pow(2.0, k) can be 1 ulp off)."""
    return ((k.to(torch.int64) + 1023) << 52).view(torch.float64)


def as_float64(t: torch.Tensor) -> torch.Tensor:
    """``t`` as float64 on a device that has float64 (Apple's MPS has none: the CPU then)."""
    if t.device.type == "mps":
        t = t.to("cpu")
    return t.detach().to(torch.float64)


def round_to_format(x: "torch.Tensor", fmt: FormatLike = "fp16") -> torch.Tensor:
    """``x`` rounded once to ``fmt`` (default 'fp16'), returned as float64 values (same shape).

    What storing ``x`` in the format keeps, without double rounding: use it to compare
    with ``x.to(dtype)`` or to compute errors in float64. Overflow as the module says
    (inf; ±448 for fp8_e4m3).
    """
    info = format_info(fmt)
    if not isinstance(x, torch.Tensor) or not x.is_floating_point():
        raise ValueError(f"x must be a floating-point tensor, got {_describe(x)}")
    return round_exact(as_float64(x), info)[0]


def _describe(value: object) -> str:
    if isinstance(value, torch.Tensor):
        return f"a {value.dtype} tensor"
    text = repr(value)
    return f"{text[:60]}{'...' if len(text) > 60 else ''} ({type(value).__name__})"


def scalar_tensor(value: object, name: str = "value") -> torch.Tensor:
    """A 0-d float64 tensor holding ``value`` exactly (a real number or a 1-element tensor)."""
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise ValueError(f"{name} must be a single number, got a tensor of shape {tuple(value.shape)}")
        if value.dtype == torch.bool or value.is_complex():
            raise ValueError(f"{name} must be a real number, got a {value.dtype} tensor")
        return as_float64(value.reshape(()))
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise ValueError(f"{name} must be a real number or a 1-element tensor, got {_describe(value)}")
    return torch.tensor(float(value), dtype=torch.float64)



# --------------------------------------------------------------------------- spacing


def ulp(x: "float | int | torch.Tensor | np.ndarray", fmt: FormatLike = "fp16") -> Any:
    """Spacing of ``fmt`` (default 'fp16') at the magnitude of ``x``: the gap from |x| (rounded
    into the format) to the next representable number away from zero, like ``numpy.spacing``.

    Below the smallest normal the spacing is the smallest subnormal; at the format's
    maximum it is inf (no larger finite number: numpy.spacing(float16(65504)) is inf too);
    NaN where ``x`` is inf/NaN or overflows the format. Returns a float for a number, a
    float64 tensor for a tensor and a numpy array for an array.
    """
    info = format_info(fmt)
    if isinstance(x, torch.Tensor):
        if x.dtype == torch.bool or x.is_complex():
            raise ValueError(f"x must be a real tensor, got dtype {x.dtype}")
        t, kind = as_float64(x), "tensor"
    elif isinstance(x, np.ndarray):
        if not (np.issubdtype(x.dtype, np.floating) or np.issubdtype(x.dtype, np.integer)):
            raise ValueError(f"x must be a real array, got dtype {x.dtype}")
        t, kind = torch.from_numpy(np.asarray(x, dtype=np.float64)), "array"
    else:
        t, kind = scalar_tensor(x, "x"), "scalar"
    stored, over = round_exact(t, info)
    a = stored.abs()
    _, e = torch.frexp(a)
    exp = torch.clamp(e - 1, min=info.min_exponent).to(torch.float64)
    exp = torch.where(a == 0, torch.full_like(exp, info.min_exponent), exp)  # frexp(0) has exponent 0
    out = _power_of_two(exp - info.mantissa_bits)
    out = torch.where(a == info.max, torch.full_like(out, math.inf), out)
    out = torch.where(torch.isfinite(t) & ~over, out, torch.full_like(out, math.nan))
    if kind == "scalar":
        return float(out.item())
    if kind == "array":
        return out.numpy()
    return out
