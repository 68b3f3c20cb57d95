"""Numerics of fp16, bf16 and fp32: format facts, bit views, spacing and cast statistics.

Why: mixed precision works or fails on a handful of facts about the number formats
(range, precision, subnormals). These helpers compute them from the bit layout and from
real casts done by PyTorch, so a lesson can show and assert them instead of quoting them.

Formats are given as a torch dtype (``torch.float16``, ``torch.bfloat16``,
``torch.float32``) or a name: ``'fp16'``, ``'bf16'``, ``'fp32'``, ``'float16'``,
``'bfloat16'``, ``'float32'`` (case-insensitive).
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

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
    "BitView",
    "bit_view",
    "ulp",
    "CastStats",
    "cast_stats",
]

FormatLike = torch.dtype | str

# name -> (dtype, exponent bits, stored mantissa bits)
_LAYOUT: dict[str, tuple[torch.dtype, int, int]] = {
    "fp16": (torch.float16, 5, 10),
    "bf16": (torch.bfloat16, 8, 7),
    "fp32": (torch.float32, 8, 23),
}
#: The supported formats, in the order the lessons show them.
FORMATS: tuple[str, ...] = tuple(_LAYOUT)
_ALIASES: dict[str, str] = {
    "fp16": "fp16",
    "float16": "fp16",
    "bf16": "bf16",
    "bfloat16": "bf16",
    "fp32": "fp32",
    "float32": "fp32",
}
#: Every accepted format name.
FORMAT_NAMES: tuple[str, ...] = tuple(_ALIASES)
_BY_DTYPE = {dtype: name for name, (dtype, _, _) in _LAYOUT.items()}
# Integer dtype of the same width, for reinterpreting the bits.
_INT_VIEW = {torch.float16: torch.int16, torch.bfloat16: torch.int16, torch.float32: torch.int32}


def _allowed_text() -> str:
    dtypes = ", ".join(str(d) for d in _BY_DTYPE)
    return f"{dtypes} or one of {', '.join(map(repr, FORMAT_NAMES))}"


def parse_format(fmt: FormatLike) -> str:
    """Return the short name ('fp16', 'bf16' or 'fp32') of ``fmt``; ``ValueError`` otherwise."""
    if isinstance(fmt, torch.dtype):
        if fmt in _BY_DTYPE:
            return _BY_DTYPE[fmt]
    elif isinstance(fmt, str):
        key = fmt.strip().lower()
        if key in _ALIASES:
            return _ALIASES[key]
    raise ValueError(f"unsupported format {fmt!r}; allowed: {_allowed_text()}")


@dataclass(frozen=True)
class FormatInfo:
    """The facts of one binary floating-point format, derived from its bit layout.

    ``max``, ``smallest_normal``, ``smallest_subnormal`` and ``eps`` are computed from
    the layout (IEEE-754 style, bias ``2**(exponent_bits-1) - 1``); the tests check
    them against ``torch.finfo`` and numpy.
    """

    name: str
    dtype: torch.dtype
    bits: int
    exponent_bits: int
    mantissa_bits: int
    bias: int
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
        """Unbiased exponent of the largest finite number (= bias)."""
        return self.bias

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
        }


def format_info(fmt: FormatLike) -> FormatInfo:
    """Facts (bits, range, epsilon) of ``fmt``, computed from its layout; see :class:`FormatInfo`."""
    name = parse_format(fmt)
    dtype, e, m = _LAYOUT[name]
    bias = 2 ** (e - 1) - 1
    return FormatInfo(
        name=name,
        dtype=dtype,
        bits=1 + e + m,
        exponent_bits=e,
        mantissa_bits=m,
        bias=bias,
        max=math.ldexp(2.0 - 2.0**-m, bias),
        smallest_normal=math.ldexp(1.0, 1 - bias),
        smallest_subnormal=math.ldexp(1.0, 1 - bias - m),
        eps=math.ldexp(1.0, -m),
    )


def formats_table(formats: Iterable[FormatLike] = FORMATS) -> "pd.DataFrame":
    """One row per format (default fp16, bf16, fp32) with the facts of :class:`FormatInfo`."""
    import pandas as pd

    rows = [format_info(f).as_dict() for f in formats]
    if not rows:
        raise ValueError(f"formats is empty; give one or more of {_allowed_text()}")
    return pd.DataFrame(rows).set_index("format")


# --------------------------------------------------------------------------- bit view


@dataclass(frozen=True)
class BitView:
    """The sign, exponent and mantissa bits of one value stored in a format.

    ``value`` is what the format actually stores (the input rounded by a PyTorch cast);
    :meth:`reconstruct` recomputes it from the three fields alone.
    """

    fmt: str
    input: float
    sign: int
    exponent: int
    mantissa: int

    @property
    def info(self) -> FormatInfo:
        """The :class:`FormatInfo` of this view's format."""
        return format_info(self.fmt)

    @property
    def exponent_bits(self) -> str:
        """The biased exponent field as 0/1 text, e.g. '10000' for 2.0 in fp16."""
        return format(self.exponent, f"0{self.info.exponent_bits}b")

    @property
    def mantissa_bits(self) -> str:
        """The stored mantissa (fraction) field as 0/1 text, without the implicit leading 1."""
        return format(self.mantissa, f"0{self.info.mantissa_bits}b")

    @property
    def bits(self) -> str:
        """All bits, sign first, as a string of 0/1."""
        return f"{self.sign}{self.exponent_bits}{self.mantissa_bits}"

    @property
    def kind(self) -> str:
        """'zero', 'subnormal', 'normal', 'inf' or 'nan'."""
        all_ones = 2**self.info.exponent_bits - 1
        if self.exponent == all_ones:
            return "inf" if self.mantissa == 0 else "nan"
        if self.exponent == 0:
            return "zero" if self.mantissa == 0 else "subnormal"
        return "normal"

    def reconstruct(self) -> float:
        """The value from the fields: (-1)^s * 2^(E-bias) * (1 + M/2^m), or 2^(1-bias) * M/2^m
        for subnormals."""
        info = self.info
        sign = -1.0 if self.sign else 1.0
        kind = self.kind
        if kind == "nan":
            return math.nan
        if kind == "inf":
            return sign * math.inf
        frac = self.mantissa / 2**info.mantissa_bits
        if kind == "normal":
            return sign * math.ldexp(1.0 + frac, self.exponent - info.bias)
        return sign * math.ldexp(frac, info.min_exponent)  # zero and subnormals

    @property
    def value(self) -> float:
        """The stored value (same as :meth:`reconstruct`)."""
        return self.reconstruct()

    def _formula(self) -> str:
        info = self.info
        s = "-" if self.sign else "+"
        m = info.mantissa_bits
        kind = self.kind
        if kind in ("inf", "nan"):
            return f"exponent all ones, mantissa {'0' if kind == 'inf' else '!= 0'} -> {s if kind == 'inf' else ''}{kind}"
        if kind == "normal":
            return (
                f"{s}2^({self.exponent}-{info.bias}) x (1 + {self.mantissa}/2^{m})"
                f" = {s}2^{self.exponent - info.bias} x {1 + self.mantissa / 2**m!r}"
            )
        return f"{s}2^{info.min_exponent} x ({self.mantissa}/2^{m})  [exponent bits 0: no implicit 1]"

    def __str__(self) -> str:
        e = self.info.exponent_bits
        m = self.info.mantissa_bits
        head = f"{self.fmt}: {self.input!r} is stored as {self.value!r} ({self.kind})"
        lines = [
            head,
            f"  {'sign':<4}  {'exponent':<{max(e, 8)}}  mantissa",
            f"  {self.sign:<4}  {self.exponent_bits:<{max(e, 8)}}  {self.mantissa_bits:<{m}}",
            f"  = {self._formula()}",
        ]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (
            f"BitView(fmt={self.fmt!r}, input={self.input!r}, bits='{self.sign} {self.exponent_bits} "
            f"{self.mantissa_bits}', value={self.value!r}, kind={self.kind!r})"
        )

    def _repr_html_(self) -> str:
        def cells(bits: str, colour: str) -> str:
            return "".join(
                f'<td style="background:{colour};font-family:monospace;padding:1px 3px">{b}</td>'
                for b in bits
            )

        e, m = self.info.exponent_bits, self.info.mantissa_bits
        title = html.escape(f"{self.fmt}: {self.input!r} is stored as {self.value!r} ({self.kind})")
        return (
            f"<div><b>{title}</b>"
            '<table style="border-collapse:collapse;margin:2px 0"><tr>'
            f"{cells(str(self.sign), '#f4cccc')}{cells(self.exponent_bits, '#cfe2f3')}"
            f"{cells(self.mantissa_bits, '#d9ead3')}</tr></table>"
            f'<span style="background:#f4cccc">sign 1</span> '
            f'<span style="background:#cfe2f3">exponent {e}</span> '
            f'<span style="background:#d9ead3">mantissa {m}</span><br>'
            f"<code>{html.escape(self._formula())}</code></div>"
        )


def _scalar(value: "float | int | torch.Tensor | np.floating[Any]") -> float:
    if isinstance(value, torch.Tensor):
        if value.numel() != 1:
            raise ValueError(f"value must be a single number, got a tensor of shape {tuple(value.shape)}")
        return float(value.detach().reshape(()).to(torch.float64).item())
    if isinstance(value, bool) or not isinstance(value, (int, float, np.floating, np.integer)):
        raise ValueError(f"value must be a real number or a 1-element tensor, got {value!r}")
    return float(value)


def bit_view(value: "float | int | torch.Tensor", fmt: FormatLike = "fp16") -> BitView:
    """Cast ``value`` to ``fmt`` (default 'fp16') with PyTorch and split the stored bits.

    A Python number is first made a float64 tensor, then cast (round to nearest even);
    a 1-element tensor is cast from its own dtype.
    """
    name = parse_format(fmt)
    dtype = _LAYOUT[name][0]
    if isinstance(value, torch.Tensor):
        _scalar(value)  # validates the shape
        stored = value.detach().reshape(()).cpu().to(dtype)
    else:
        stored = torch.tensor(_scalar(value), dtype=torch.float64).to(dtype)
    info = format_info(name)
    raw = int(stored.reshape(1).view(_INT_VIEW[dtype]).item()) & ((1 << info.bits) - 1)
    m = info.mantissa_bits
    return BitView(
        fmt=name,
        input=_scalar(value),
        sign=raw >> (info.bits - 1),
        exponent=(raw >> m) & ((1 << info.exponent_bits) - 1),
        mantissa=raw & ((1 << m) - 1),
    )


# --------------------------------------------------------------------------- spacing


def ulp(x: "float | int | torch.Tensor | np.ndarray", fmt: FormatLike = "fp16") -> Any:
    """Spacing of ``fmt`` (default 'fp16') at the magnitude of ``x``: the gap from |x| (rounded
    into the format) to the next representable number away from zero.

    Below the smallest normal the spacing is the smallest subnormal; NaN where the cast is
    not finite. Returns a float for a number, a float64 tensor for a tensor and a numpy
    array for an array.
    """
    name = parse_format(fmt)
    info = format_info(name)
    if isinstance(x, torch.Tensor):
        if not (x.is_floating_point() or x.dtype in (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8)):
            raise ValueError(f"x must be a real tensor, got dtype {x.dtype}")
        t = x.detach()
        kind = "tensor"
    elif isinstance(x, np.ndarray):
        if not (np.issubdtype(x.dtype, np.floating) or np.issubdtype(x.dtype, np.integer)):
            raise ValueError(f"x must be a real array, got dtype {x.dtype}")
        t = torch.from_numpy(np.asarray(x, dtype=np.float64))
        kind = "array"
    else:
        t = torch.tensor(_scalar(x), dtype=torch.float64)
        kind = "scalar"
    if not t.is_floating_point():
        t = t.to(torch.float64)
    stored = t.to(info.dtype).abs().to(torch.float64)
    _, e = torch.frexp(stored)  # stored = f * 2**e with f in [0.5, 1): unbiased exponent e - 1
    exp = torch.clamp(e.to(torch.float64) - 1, min=info.min_exponent)
    exp = torch.where(stored == 0, torch.full_like(exp, info.min_exponent), exp)
    out = torch.pow(2.0, exp - info.mantissa_bits)
    out = torch.where(torch.isfinite(stored), out, torch.full_like(out, math.nan))
    if kind == "scalar":
        return float(out.item())
    if kind == "array":
        return out.numpy()
    return out


# --------------------------------------------------------------------------- cast statistics

_CATEGORIES = ("normal", "subnormal", "zero", "underflow", "overflow", "nonfinite")


@dataclass(frozen=True)
class CastStats:
    """Where the elements of some tensors land when cast to a format after scaling.

    Categories (they add up to ``total``): ``normal`` and ``subnormal`` (non-zero after
    the cast), ``zero`` (exactly zero before it), ``underflow`` (non-zero before, flushed
    to zero by the cast), ``overflow`` (finite before, inf after) and ``nonfinite``
    (already inf/NaN before the cast).
    """

    fmt: str
    scale: float
    total: int
    normal: int
    subnormal: int
    zero: int
    underflow: int
    overflow: int
    nonfinite: int

    def fraction(self, category: str) -> float:
        """Share of all elements in ``category`` (one of normal, subnormal, zero, underflow,
        overflow, nonfinite)."""
        if category not in _CATEGORIES:
            raise ValueError(f"unknown category {category!r}; allowed: {', '.join(_CATEGORIES)}")
        return getattr(self, category) / self.total

    @property
    def underflow_fraction(self) -> float:
        """Share of all elements flushed to zero by the cast."""
        return self.fraction("underflow")

    @property
    def overflow_fraction(self) -> float:
        """Share of all elements that became inf in the cast."""
        return self.fraction("overflow")

    @property
    def subnormal_fraction(self) -> float:
        """Share of all elements stored as subnormals (fewer significant bits)."""
        return self.fraction("subnormal")

    @property
    def normal_fraction(self) -> float:
        """Share of all elements stored as normal numbers (full precision)."""
        return self.fraction("normal")

    @property
    def nonzero(self) -> int:
        """Elements that were finite and non-zero before the cast (what can be lost)."""
        return self.total - self.zero - self.nonfinite

    @property
    def underflow_share_of_nonzero(self) -> float:
        """Share of the finite non-zero values flushed to zero (NaN when there are none)."""
        return self.underflow / self.nonzero if self.nonzero else math.nan

    @property
    def lost_fraction(self) -> float:
        """Share of non-zero finite values the cast destroyed (underflow + overflow)."""
        return (self.underflow + self.overflow) / self.total

    def as_dict(self) -> dict[str, Any]:
        """Counts and fractions as one flat dict (a row of a comparison table)."""
        row: dict[str, Any] = {"format": self.fmt, "scale": self.scale, "total": self.total}
        for c in _CATEGORIES:
            row[c] = getattr(self, c)
        for c in _CATEGORIES:
            row[f"{c}_fraction"] = self.fraction(c)
        return row

    def to_frame(self) -> "pd.DataFrame":
        """One row per category: count and fraction."""
        import pandas as pd

        return pd.DataFrame(
            {"count": [getattr(self, c) for c in _CATEGORIES], "fraction": [self.fraction(c) for c in _CATEGORIES]},
            index=pd.Index(_CATEGORIES, name=f"{self.fmt}, scale={self.scale:g}"),
        )

    def __str__(self) -> str:
        parts = ", ".join(f"{c} {self.fraction(c):.4%}" for c in _CATEGORIES)
        return f"cast to {self.fmt} after x{self.scale:g} of {self.total} elements: {parts}"

    def _repr_html_(self) -> str:
        frame = self.to_frame()
        frame["fraction"] = [f"{v:.4%}" for v in frame["fraction"]]
        title = html.escape(f"cast to {self.fmt} after x{self.scale:g}, {self.total} elements")
        return f"<b>{title}</b>" + frame.to_html()


def cast_stats(
    tensors: "torch.Tensor | Iterable[torch.Tensor]", fmt: FormatLike = "fp16", scale: float = 1.0
) -> CastStats:
    """Count how the elements of ``tensors`` fare when multiplied by ``scale`` (default 1.0,
    i.e. no loss scaling) and cast to ``fmt`` (default 'fp16').

    Why: gradients that are non-zero in fp32 but flush to zero in fp16 are lost updates;
    a loss scale shifts them into range. The multiplication happens in float32 (float64
    for float64 inputs), as a gradient scaler would do, on the tensors' own device.
    """
    name = parse_format(fmt)
    info = format_info(name)
    if isinstance(scale, bool) or not isinstance(scale, (int, float, np.floating, np.integer)):
        raise ValueError(f"scale must be a positive finite number, got {scale!r}")
    scale = float(scale)
    if not (math.isfinite(scale) and scale > 0):
        raise ValueError(f"scale must be a positive finite number, got {scale!r}")
    if isinstance(tensors, torch.Tensor):
        items: list[Any] = [tensors]
    else:
        try:
            items = list(tensors)
        except TypeError:
            raise ValueError(
                f"tensors must be a tensor or an iterable of tensors, got {type(tensors).__name__}"
            ) from None
    if not items:
        raise ValueError("tensors is empty: give at least one floating-point tensor (e.g. the gradients)")
    counts = dict.fromkeys(_CATEGORIES, 0)
    total = 0
    for i, t in enumerate(items):
        if t is None:
            raise ValueError(f"tensors[{i}] is None (a parameter without .grad? run backward first)")
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"tensors[{i}] is a {type(t).__name__}, not a torch.Tensor")
        if not t.is_floating_point():
            raise ValueError(
                f"tensors[{i}] has dtype {t.dtype}; cast_stats needs floating-point tensors "
                "(float16, bfloat16, float32 or float64)"
            )
        x = t.detach()
        if x.numel() == 0:
            continue
        work = torch.float64 if x.dtype == torch.float64 else torch.float32
        x = x.to(work) * scale
        y = x.to(info.dtype)
        finite_in = torch.isfinite(x)
        zero_in = x == 0
        y_zero = y == 0
        y_inf = torch.isinf(y)
        y_sub = (~y_zero) & (y.abs() < info.smallest_normal) & finite_in
        c = {
            "nonfinite": int((~finite_in).sum()),
            "zero": int(zero_in.sum()),
            "underflow": int((y_zero & ~zero_in).sum()),
            "overflow": int((y_inf & finite_in).sum()),
            "subnormal": int(y_sub.sum()),
        }
        c["normal"] = x.numel() - sum(c.values())
        for k, v in c.items():
            counts[k] += v
        total += x.numel()
    if total == 0:
        raise ValueError("tensors have no elements (every tensor is empty)")
    return CastStats(fmt=name, scale=scale, total=total, **counts)
