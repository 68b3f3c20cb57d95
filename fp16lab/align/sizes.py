"""The alignment rule and size arithmetic: multiples of 16 bytes, padded sizes, wave quantization."""

from __future__ import annotations

import math

from fp16lab.checks import positive_int
from fp16lab.precision import Precision, parse_precision

__all__ = [
    "ALIGNMENT_BYTES",
    "alignment_for",
    "check_multiple",
    "pad_to_multiple",
    "is_aligned",
    "wave_quantization",
]

#: Tensor Cores want every leading dimension to be a multiple of 16 bytes.
ALIGNMENT_BYTES = 16

ELEMENT_BYTES = {Precision.FP16: 2, Precision.BF16: 2, Precision.TF32: 4}
_TC_PRECISIONS = tuple(p.value for p in ELEMENT_BYTES)


def alignment_for(precision: "Precision | str" = "fp16") -> int:
    """Elements per 16 bytes for a Tensor Core precision: 8 for fp16/bf16, 4 for tf32.

    Default ``precision="fp16"``. True ``fp32`` does not run on Tensor Cores at all, so it
    has no Tensor Core alignment and is refused with a ``ValueError`` (use ``tf32``).
    """
    p = parse_precision(precision)
    return parsed_alignment(p)


def parsed_alignment(p: Precision) -> int:
    if p not in ELEMENT_BYTES:
        raise ValueError(
            f"precision {p.value!r} (true FP32) does not use Tensor Cores, so it has no Tensor "
            f"Core alignment; allowed: {', '.join(map(repr, _TC_PRECISIONS))}"
        )
    return ALIGNMENT_BYTES // ELEMENT_BYTES[p]


def check_multiple(value: object, name: str = "multiple") -> int:
    """``value`` when it is a sensible padding multiple: a power of two or a multiple of 8.

    The rule of :func:`fp16lab.align.pad_layers`: 8 for fp16/bf16 (16 bytes), 4 for tf32,
    64 or 128 for vocabularies, or any multiple of 8 (24, 96, ...). Other values (7, 12,
    100) align nothing a Tensor Core cares about and are refused.
    """
    m = positive_int(name, value)
    if m & (m - 1) and m % 8:
        raise ValueError(
            f"{name} must be a power of two or a multiple of 8 (8 for fp16/bf16, 4 for tf32, 64 for "
            f"vocabularies), got {value!r}"
        )
    return m


def pad_to_multiple(n: int, multiple: int = 8) -> int:
    """Smallest multiple of ``multiple`` (default 8, any positive int) that is >= ``n``: 50257 -> 50264."""
    return round_up(positive_int("n", n), positive_int("multiple", multiple))


def round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def is_aligned(n: int, multiple: int = 8) -> bool:
    """True when ``n`` is a multiple of ``multiple`` (default 8)."""
    return pad_to_multiple(n, multiple) == n


def wave_quantization(m: int, n: int, sm_count: int, tile: tuple[int, int] = (128, 128)) -> dict[str, float]:
    """How well an m×n output fills the GPU when cut into ``tile`` blocks (default 128×128).

    A GEMM kernel gives each output tile to one SM; ``sm_count`` tiles run at once (one
    *wave*). A last, partly filled wave costs a full wave of time. Tile sizes are chosen
    by cuBLAS per problem, so this is a model for reasoning, not a prediction. Returns
    tiles, waves (fractional), full_waves (rounded up) and efficiency (0..1]: the share
    of the launched waves doing useful work, times the share of each tile inside the matrix.
    """
    m, n = positive_int("m", m), positive_int("n", n)
    sm_count = positive_int("sm_count", sm_count)
    if not isinstance(tile, (tuple, list)) or len(tile) != 2:
        raise ValueError(f"tile must be a pair (rows, cols) such as (128, 128), got {tile!r}")
    tm, tn = positive_int("tile[0]", tile[0]), positive_int("tile[1]", tile[1])
    tiles = math.ceil(m / tm) * math.ceil(n / tn)
    waves = tiles / sm_count
    full_waves = math.ceil(waves)
    tile_fill = (m * n) / (tiles * tm * tn)
    return {
        "m": m,
        "n": n,
        "tiles": tiles,
        "waves": waves,
        "full_waves": full_waves,
        "wave_efficiency": waves / full_waves,
        "tile_efficiency": tile_fill,
        "efficiency": waves / full_waves * tile_fill,
    }
