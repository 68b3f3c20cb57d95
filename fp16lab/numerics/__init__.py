"""Numerics of the floating-point *formats*: facts, bit views, spacing and cast statistics.

Why: mixed precision works or fails on a handful of facts about the number formats
(range, precision, subnormals). These helpers compute them from the bit layout and round
values exactly as the format does, so a lesson can show and assert them instead of
quoting them.

**Formats are not precisions.** A *format* is how a number is stored: ``'fp32'``,
``'fp16'``, ``'bf16'``, ``'fp8_e4m3'`` or ``'fp8_e5m2'``, or the matching torch dtype
(``torch.float16`` is the format ``'fp16'``). A *precision* (:mod:`fp16lab.precision`:
``'fp32'``, ``'tf32'``, ``'fp16'``, ``'bf16'``) is how a training step computes, and takes
names only, because ``'fp32'`` and ``'tf32'`` store the same dtype. The short names mean
the same thing in both places; dtype *names* such as ``'float16'`` are refused everywhere
(with a hint), and a dtype object is accepted only where a storage format is meant.

Rounding is round-to-nearest-even, done once, from the exact value of the input (a Python
float or a tensor of any floating dtype is read as float64 first): no double rounding
through float32. Overflow: fp32/fp16/bf16/fp8_e5m2 go to inf; fp8_e4m3
(``torch.float8_e4m3fn``) has no inf and saturates to ±448 (as PyTorch >= 2.12's casts do;
older releases give NaN: pytorch/pytorch#178817). Either way the helpers report it as an
overflow.
"""

from __future__ import annotations

from fp16lab.numerics.bits import BitView, bit_view
from fp16lab.numerics.casts import CastStats, cast_stats
from fp16lab.numerics.formats import (
    FORMAT_NAMES,
    FORMATS,
    FormatInfo,
    FormatLike,
    format_info,
    formats_table,
    parse_format,
    round_to_format,
    ulp,
)

__all__ = [
    "FormatLike",
    "FORMATS",
    "FORMAT_NAMES",
    "parse_format",
    "FormatInfo",
    "format_info",
    "formats_table",
    "round_to_format",
    "BitView",
    "bit_view",
    "ulp",
    "CastStats",
    "cast_stats",
]
