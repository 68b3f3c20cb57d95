"""Bit views: the sign, exponent and mantissa a format stores for one value."""

from __future__ import annotations

import html
import math
from dataclasses import dataclass

import torch

from fp16lab.checks import say
from fp16lab.numerics.formats import (
    FORMAT_INFO,
    INT_VIEW,
    FormatInfo,
    FormatLike,
    format_info,
    round_exact,
    scalar_tensor,
)

__all__ = ["BitView", "bit_view"]


# --------------------------------------------------------------------------- bit view


@dataclass(frozen=True)
class BitView:
    """The sign, exponent and mantissa bits of one value stored in a format.

    ``value`` is what the format stores (the input rounded once, to nearest even);
    :meth:`reconstruct` recomputes it from the three fields alone. ``overflow`` is True
    when a finite input rounded beyond the format's finite range (stored as inf, or as ±max
    in fp8_e4m3, which has no inf), or an infinite input was saturated (fp8_e4m3).
    """

    fmt: str
    input: float
    sign: int
    exponent: int
    mantissa: int
    overflow: bool = False

    @property
    def info(self) -> FormatInfo:
        """The :class:`FormatInfo` of this view's format."""
        return FORMAT_INFO[self.fmt]

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
        info = self.info
        all_ones = 2**info.exponent_bits - 1
        if self.exponent == all_ones:
            if not info.has_inf:  # fp8_e4m3: only the all-ones mantissa is NaN
                return "nan" if self.mantissa == 2**info.mantissa_bits - 1 else "normal"
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
        if kind == "inf":
            return say("exponent all ones, mantissa 0 -> {sign}inf", sign=s)
        if kind == "nan":
            return say("exponent all ones, mantissa all ones -> nan") if not info.has_inf else \
                say("exponent all ones, mantissa != 0 -> nan")
        if kind == "normal":
            return (
                f"{s}2^({self.exponent}-{info.bias}) x (1 + {self.mantissa}/2^{m})"
                f" = {s}2^{self.exponent - info.bias} x {1 + self.mantissa / 2**m!r}"
            )
        return f"{s}2^{info.min_exponent} x ({self.mantissa}/2^{m})  [{say('exponent bits 0: no implicit 1')}]"

    def _title(self) -> str:
        note = ""
        if self.overflow:
            note = say(", overflow") if self.info.has_inf else say(", overflow: saturated to the max, {fmt} has no inf",
                                                                   fmt=self.fmt)
        kind = {"zero": say("zero"), "subnormal": say("subnormal"), "normal": say("normal")}.get(self.kind, self.kind)
        return say("{fmt}: {input!r} is stored as {value!r} ({kind}{note})", fmt=self.fmt, input=self.input,
                   value=self.value, kind=kind, note=note)

    def __str__(self) -> str:
        e = self.info.exponent_bits
        m = self.info.mantissa_bits
        lines = [
            self._title(),
            f"  {'sign':<4}  {'exponent':<{max(e, 8)}}  mantissa",
            f"  {self.sign:<4}  {self.exponent_bits:<{max(e, 8)}}  {self.mantissa_bits:<{m}}",
            f"  = {self._formula()}",
        ]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (
            f"BitView(fmt={self.fmt!r}, input={self.input!r}, bits='{self.sign} {self.exponent_bits} "
            f"{self.mantissa_bits}', value={self.value!r}, kind={self.kind!r}, overflow={self.overflow!r})"
        )

    def _repr_html_(self) -> str:
        def cells(bits: str, colour: str) -> str:
            return "".join(
                f'<td style="background:{colour};font-family:monospace;padding:1px 3px">{b}</td>'
                for b in bits
            )

        e, m = self.info.exponent_bits, self.info.mantissa_bits
        return (
            f"<div><b>{html.escape(self._title())}</b>"
            '<table style="border-collapse:collapse;margin:2px 0"><tr>'
            f"{cells(str(self.sign), '#f4cccc')}{cells(self.exponent_bits, '#cfe2f3')}"
            f"{cells(self.mantissa_bits, '#d9ead3')}</tr></table>"
            f'<span style="background:#f4cccc">{say("sign {n}", n=1)}</span> '
            f'<span style="background:#cfe2f3">{say("exponent {n}", n=e)}</span> '
            f'<span style="background:#d9ead3">{say("mantissa {n}", n=m)}</span><br>'
            f"<code>{html.escape(self._formula())}</code></div>"
        )


def bit_view(value: "float | int | torch.Tensor", fmt: FormatLike = "fp16") -> BitView:
    """Round ``value`` once to ``fmt`` (default 'fp16', nearest even) and split the stored bits.

    ``value`` is a real number or a 1-element tensor of any floating dtype; its exact value
    is rounded (``bit_view(1 + 2**-11 + 2**-40).value == 1 + 2**-10``, where a detour through
    float32 would give 1.0).
    """
    info = format_info(fmt)
    x = scalar_tensor(value)
    stored, over = round_exact(x.reshape(1), info)
    raw = int(stored.to(info.dtype).view(INT_VIEW[info.dtype]).item()) & ((1 << info.bits) - 1)
    m = info.mantissa_bits
    return BitView(
        fmt=info.name,
        input=float(x.item()),
        sign=raw >> (info.bits - 1),
        exponent=(raw >> m) & ((1 << info.exponent_bits) - 1),
        mantissa=raw & ((1 << m) - 1),
        overflow=bool(over.item()) or (math.isinf(float(x.item())) and not info.has_inf),
    )


