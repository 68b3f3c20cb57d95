"""Cast statistics: how many values a format keeps, flushes to zero or overflows, after a loss scale."""

from __future__ import annotations

import html
import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from fp16lab.checks import positive_float, sequence_of
from fp16lab.numerics.formats import FormatInfo, FormatLike, as_float64, format_info

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["CastStats", "cast_stats"]


# --------------------------------------------------------------------------- cast statistics

_CATEGORIES = ("normal", "subnormal", "zero", "underflow", "overflow", "nonfinite")
_CHUNK = 1 << 22  # elements per float64 work chunk (32 MiB)


@dataclass(frozen=True)
class CastStats:
    """Where the elements of some tensors land when scaled and cast to a format.

    Categories (they add up to ``total``): ``normal`` and ``subnormal`` (non-zero after
    the cast), ``zero`` (exactly zero before it), ``underflow`` (non-zero before, flushed
    to zero by the cast), ``overflow`` (finite before, beyond the format's range after
    scaling and rounding: inf, or saturated in fp8_e4m3) and ``nonfinite`` (already
    inf/NaN in the input, before any scaling).
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
            raise ValueError(f"category: unknown {category!r}; allowed: {', '.join(_CATEGORIES)}")
        return int(getattr(self, category)) / self.total

    @property
    def underflow_fraction(self) -> float:
        """Share of all elements flushed to zero by the cast."""
        return self.fraction("underflow")

    @property
    def overflow_fraction(self) -> float:
        """Share of all elements pushed beyond the format's range by the scale and cast."""
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


def _tensor_list(tensors: object) -> list[torch.Tensor]:
    """``tensors`` (a tensor or an iterable of them) checked: floating point, none None."""
    items = [tensors] if isinstance(tensors, torch.Tensor) else sequence_of(
        "tensors", tensors, example="[p.grad for p in model.parameters()] (or one tensor)")
    for i, t in enumerate(items):
        if t is None:
            raise ValueError(f"tensors[{i}] is None (a parameter without .grad? run backward first)")
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"tensors[{i}] is a {type(t).__name__}, not a torch.Tensor")
        if not t.is_floating_point():
            raise ValueError(
                f"tensors[{i}] has dtype {t.dtype}; cast_stats needs floating-point tensors "
                "(float64, float32, float16, bfloat16, float8)"
            )
    if sum(t.numel() for t in items) == 0:
        raise ValueError("tensors have no elements (every tensor is empty)")
    return items


@dataclass(frozen=True)
class _Thresholds:
    """Where rounding to a format changes category, as exact float64 magnitudes.

    Round to nearest, ties to even: a magnitude ``a`` rounds to 0 when ``a <= sub / 2`` (the
    tie goes to 0, the even neighbour), to a subnormal when ``sub / 2 < a < normal - sub / 2``
    (the tie below the smallest normal goes up: the largest subnormal's mantissa is odd), and
    beyond the largest finite value when ``a > top`` or, if the largest value's mantissa is
    odd (formats with inf), ``a == top``, ``top`` being the midpoint above the maximum.
    """

    zero_at_most: float
    subnormal_below: float
    overflow_above: float
    tie_overflows: bool

    @classmethod
    def of(cls, info: FormatInfo) -> _Thresholds:
        sub = info.smallest_subnormal
        half_ulp_at_max = math.ldexp(1.0, info.max_exponent - info.mantissa_bits - 1)
        return cls(sub / 2, info.smallest_normal - sub / 2, info.max + half_ulp_at_max, info.has_inf)


def _count(x: torch.Tensor, scale: float, th: _Thresholds) -> dict[str, int]:
    """Category counts of one chunk (any floating dtype, any device), from exact thresholds."""
    x64 = as_float64(x)  # exact for every floating dtype (float8 has no isfinite of its own)
    finite_in, zero_in = torch.isfinite(x64), x64 == 0
    a = x64.abs() * scale  # float64: a finite input stays finite (or counts as overflow)
    over = (a > th.overflow_above) | ((a == th.overflow_above) if th.tie_overflows else torch.zeros_like(zero_in))
    over = over & finite_in
    flushed = (a <= th.zero_at_most) & ~zero_in
    sub = (a > th.zero_at_most) & (a < th.subnormal_below)
    c = {
        "nonfinite": int((~finite_in).sum()),
        "zero": int(zero_in.sum()),
        "underflow": int(flushed.sum()),
        "overflow": int(over.sum()),
        "subnormal": int(sub.sum()),
    }
    c["normal"] = x.numel() - sum(c.values())
    return c


def cast_stats(
    tensors: "torch.Tensor | Iterable[torch.Tensor]", fmt: FormatLike = "fp16", scale: float = 1.0
) -> CastStats:
    """Count how the elements of ``tensors`` fare when multiplied by ``scale`` (default 1.0,
    i.e. no loss scaling) and stored in ``fmt`` (default 'fp16').

    Why: gradients that are non-zero in fp32 but flush to zero in fp16 are lost updates; a
    loss scale shifts them into range, and too large a one pushes others beyond it. The
    product is taken in float64 (exact for power-of-two scales) and classified by where
    rounding it once, to nearest even, would put it, on the tensors' own device (Apple's MPS has no float64: such tensors are counted on the CPU).
    Values already inf/NaN count as ``nonfinite``; finite values that the scale pushes out
    of range count as ``overflow``.
    """
    info = format_info(fmt)
    scale = positive_float("scale", scale)
    items = _tensor_list(tensors)
    th = _Thresholds.of(info)
    counts = dict.fromkeys(_CATEGORIES, 0)
    for t in items:
        flat = t.detach().reshape(-1)
        for start in range(0, flat.numel(), _CHUNK):
            for k, v in _count(flat[start : start + _CHUNK], scale, th).items():
                counts[k] += v
    return CastStats(fmt=info.name, scale=scale, total=sum(t.numel() for t in items), **counts)
