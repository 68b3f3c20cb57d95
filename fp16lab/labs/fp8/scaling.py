"""FP8 scaling: one scale per tensor or per row, the quantize/dequantize round trip, and its error.

Why: FP8 keeps 3 (E4M3) or 2 (E5M2) mantissa bits over a narrow range (E4M3: 2**-9 to 448), so
a tensor is multiplied by a *scale* before the cast, chosen from its largest magnitude (*amax*)
so that amax lands on the format's maximum, and divided by it afterwards. One scale for the whole
tensor (*tensorwise*) is cheap; one per row (*rowwise*, per token for activations) keeps small
rows away from the subnormals when another row holds an outlier. This is the arithmetic of
``torchao.float8``'s dynamic ("current") scaling, written out so a lesson can measure it on the
CPU: ``scale = max / amax`` (amax clamped below at 1e-12), optionally rounded down to a power of
two, values clamped to ±max, then cast (saturating, as torchao does, rather than relying on the
cast's overflow behaviour, which changed between PyTorch releases).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import pandas as pd
import torch

from fp16lab.checks import boolean, distinct, one_of, sequence_of, values_readable
from fp16lab.numerics import format_info, parse_format

__all__ = ["FP8_FORMATS", "GRANULARITIES", "Quantized", "amax_scale", "quantize", "quantization_error", "scaling_table"]

#: The two FP8 formats (names of :mod:`fp16lab.numerics`).
FP8_FORMATS = ("fp8_e4m3", "fp8_e5m2")
#: One scale for the tensor, or one per row (the last dimension is the row).
GRANULARITIES = ("tensor", "row")
_EPS = 1e-12  # torchao's floor on amax: an all-zero tensor gets a finite scale


def _fp8_format(fmt: object, label: str = "fmt") -> str:
    name = parse_format(fmt, name=label)  # type: ignore[arg-type]
    if name not in FP8_FORMATS:
        raise ValueError(f"{label} must be an FP8 format, one of {', '.join(map(repr, FP8_FORMATS))}; got {fmt!r}")
    return name


def _float_tensor(name: str, x: object) -> torch.Tensor:
    if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.numel() == 0 or x.dim() == 0:
        raise ValueError(f"{name} must be a non-empty floating-point tensor of 1 or more dimensions, got {_what(x)}")
    if x.dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        raise ValueError(f"{name} is already FP8 ({x.dtype}); give the high-precision tensor")
    # an inf amax makes the scale 0: every value would become 0 or NaN. Read only where free (no GPU sync).
    if values_readable(x) and not bool(torch.isfinite(x).all()):
        raise ValueError(f"{name} holds {int((~torch.isfinite(x)).sum())} inf/NaN values; amax scaling needs finite "
                         "values (find where they come from with fp16lab.debug.first_nonfinite)")
    return x


def _names(name: str, values: object, allowed: "Sequence[str]", parse: "Callable[[str, object], str]") -> list[str]:
    return distinct(name, sequence_of(name, values, example=f"[{allowed[0]!r}]", item=parse))


def _what(x: object) -> str:
    if isinstance(x, torch.Tensor):
        return f"a {x.dtype} tensor of shape {tuple(x.shape)}"
    return f"{x!r} ({type(x).__name__})"


def _scale(amax: torch.Tensor, fmax: float, power_of_2: bool) -> torch.Tensor:
    scale = fmax / amax.float().clamp(min=_EPS)
    if power_of_2:  # as torchao's rowwise recipe: exact to apply, never pushes amax past max
        scale = torch.exp2(torch.floor(torch.log2(scale)))
    return scale


def amax_scale(amax: "torch.Tensor | float", fmt: str = "fp8_e4m3", *, power_of_2: bool = False) -> torch.Tensor:
    """The scale that maps ``amax`` onto ``fmt``'s largest finite value: ``max / amax`` (float32).

    Defaults: ``fmt="fp8_e4m3"`` (max 448; ``"fp8_e5m2"``: 57344), ``power_of_2=False`` (True:
    rounded down to a power of two, as torchao's rowwise recipe does). ``amax`` is clamped below at
    1e-12 so an all-zero tensor gets a finite scale. Works elementwise on a tensor of amaxes.
    """
    info = format_info(_fp8_format(fmt))
    boolean("power_of_2", power_of_2)
    if isinstance(amax, bool) or not isinstance(amax, (numbers.Real, torch.Tensor)):
        raise ValueError(f"amax must be a number or a tensor of them, got {_what(amax)}")
    t = torch.as_tensor(amax if isinstance(amax, torch.Tensor) else float(amax), dtype=torch.float32)
    if not torch.isfinite(t).all() or (t < 0).any():
        raise ValueError(f"amax must be finite and >= 0 (a largest magnitude), got {amax!r}")
    return _scale(t, info.max, power_of_2)


@dataclass(frozen=True)
class Quantized:
    """An FP8 tensor and the scale it was multiplied by: ``data ≈ x * scale``, so ``x ≈ data / scale``.

    ``scale`` is a 0-d float32 tensor (tensorwise) or ``(rows, 1)`` (rowwise, rows = all leading
    dimensions flattened). ``torch._scaled_mm`` takes the *inverse* (``1 / scale``) as its
    ``scale_a``/``scale_b``: the factor that turns the stored values back into real ones.
    """

    data: torch.Tensor
    scale: torch.Tensor
    fmt: str
    granularity: str

    @property
    def inverse_scale(self) -> torch.Tensor:
        """``1 / scale`` (float32): what ``torch._scaled_mm`` multiplies the product by."""
        return self.scale.reciprocal()

    def dequantize(self) -> torch.Tensor:
        """The values the FP8 tensor stands for, in float32: ``data / scale`` (original shape)."""
        flat = self.data.reshape(-1, self.data.shape[-1]).float() / self.scale
        return flat.reshape(self.data.shape)


def quantize(
    x: torch.Tensor, fmt: str = "fp8_e4m3", granularity: str = "tensor", *, power_of_2: bool = False
) -> Quantized:
    """``x`` scaled by its amax (per tensor or per row), clamped to ±max and cast to ``fmt``.

    Defaults: ``fmt="fp8_e4m3"``, ``granularity="tensor"`` (``"row"``: one scale per row of the
    last dimension, e.g. per token of an activation), ``power_of_2=False``. The scale is computed
    from ``x`` itself ("current" or "dynamic" scaling), so nothing overflows. ``x`` must be finite
    (an inf amax would scale everything to 0): checked where reading values is free (CPU tensors).
    """
    x = _float_tensor("x", x)
    name = _fp8_format(fmt)
    one_of("granularity", granularity, GRANULARITIES)
    boolean("power_of_2", power_of_2)
    info = format_info(name)
    rows = x.detach().reshape(-1, x.shape[-1]).float()
    amax = rows.abs().amax() if granularity == "tensor" else rows.abs().amax(dim=1, keepdim=True)
    scale = _scale(amax, info.max, power_of_2)
    data = (rows * scale).clamp(-info.max, info.max).to(info.dtype).reshape(x.shape)
    return Quantized(data, scale, name, granularity)


def _error_row(x: torch.Tensor, q: Quantized) -> dict[str, float]:
    ref = x.detach().reshape(-1, x.shape[-1]).double()
    back = q.dequantize().reshape(ref.shape).double()
    nonzero = ref != 0
    err = (back - ref).norm() / ref.norm() if ref.norm() > 0 else torch.tensor(0.0)
    info = format_info(q.fmt)
    scaled = (ref.abs() * q.scale.double()).float()
    return {
        "rel_error": float(err),
        "underflow": float(((back == 0) & nonzero).sum()) / max(1, int(nonzero.sum())),
        "subnormal": float(((scaled > 0) & (scaled < info.smallest_normal)).sum()) / max(1, int(nonzero.sum())),
    }


def quantization_error(
    x: torch.Tensor, fmt: str = "fp8_e4m3", granularity: str = "tensor", *, power_of_2: bool = False
) -> dict[str, float]:
    """How much of ``x`` survives :func:`quantize` and back: a dict of error measures.

    ``rel_error`` = ‖dequantize(quantize(x)) − x‖ / ‖x‖ (Frobenius, in float64); ``underflow`` =
    share of the non-zero values that became 0; ``subnormal`` = share stored as FP8 subnormals
    (fewer significant bits). Defaults as :func:`quantize`.
    """
    x = _float_tensor("x", x)
    return _error_row(x, quantize(x, fmt, granularity, power_of_2=power_of_2))


def scaling_table(
    tensors: Mapping[str, torch.Tensor],
    fmts: "tuple[str, ...] | list[str]" = ("fp8_e4m3",),
    granularities: "tuple[str, ...] | list[str]" = GRANULARITIES,
) -> pd.DataFrame:
    """:func:`quantization_error` of every named tensor × format × granularity, one row each.

    Also reports the tensor's ``row_amax_spread`` (largest row amax / median row amax: large
    when a few rows hold outliers, which is where rowwise scaling pays). Defaults:
    ``fmts=("fp8_e4m3",)``, ``granularities=("tensor", "row")``.
    """
    if not isinstance(tensors, Mapping) or not tensors:
        raise ValueError(f"tensors must be a non-empty mapping of name -> tensor, got {_what(tensors)}")
    bad_keys = [k for k in tensors if not isinstance(k, str) or not k]
    if bad_keys:
        raise ValueError(f"tensors must map names (non-empty strings) to tensors; got keys {bad_keys!r}")
    fmt_list = _names("fmts", fmts, FP8_FORMATS, lambda label, f: _fp8_format(f, label))
    gran_list = _names("granularities", granularities, GRANULARITIES, lambda label, g: one_of(label, g, GRANULARITIES))
    items = {k: _float_tensor(f"tensors[{k!r}]", v) for k, v in tensors.items()}
    rows = []
    for name, x in items.items():
        row_amax = x.detach().reshape(-1, x.shape[-1]).abs().amax(dim=1).float()
        median = float(row_amax.median())
        spread = float(row_amax.max()) / median if median > 0 else math.inf
        for f in fmt_list:
            for g in gran_list:
                rows.append({"tensor": name, "fmt": f, "granularity": g, "row_amax_spread": spread,
                             **_error_row(x, quantize(x, f, g))})
    return pd.DataFrame(rows)
