"""Lesson 09's exercise checks (FP8): each computes the expected answer itself and shows only a verdict or a hint."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import pandas as pd
import torch

from fp16lab.course.answers import verdict
from fp16lab.course.i18n import tr

__all__ = ["check_rowwise", "check_layer_choice", "check_margin", "check_fp8_mm"]


def check_rowwise(fn: object) -> None:
    """Exercise 1: ``fn(x) -> (data, scale)``, E4M3 with one ``448 / amax`` scale per row."""
    from fp16lab.labs.fp8 import quantize

    verdict(callable(fn), tr("write a function x -> (data, scale) and assign it to my_rowwise"))
    assert callable(fn)
    x = torch.randn(6, 32, generator=torch.Generator().manual_seed(3)) * torch.logspace(-3, 2, 6).reshape(6, 1)
    try:
        got = fn(x.clone())
    except (RuntimeError, ValueError, TypeError, IndexError) as err:
        raise AssertionError(tr("my_rowwise raised {kind} ({err}): one scale per row must broadcast against x, "
                                "so take amax over dim=1 with keepdim=True: shape (rows, 1)",
                                kind=type(err).__name__, err=str(err)[:80])) from None
    verdict(isinstance(got, tuple) and len(got) == 2, tr("return a tuple (data, scale)"))
    data, scale = got
    want = quantize(x, "fp8_e4m3", "row")
    verdict(isinstance(scale, torch.Tensor) and tuple(scale.shape) == (6, 1),
            tr("one scale per row: shape (rows, 1) (amax over dim=1 with keepdim=True)"))
    verdict(torch.allclose(scale.float(), want.scale, rtol=1e-6),
            tr("scale = 448 / (the row's largest |value|): the quantisation scale, not its inverse"))
    verdict(isinstance(data, torch.Tensor) and data.dtype == torch.float8_e4m3fn,
            tr("cast the scaled values to torch.float8_e4m3fn"))
    verdict(torch.equal(data.float(), want.data.float()), tr("data = (x * scale) clamped to ±448, then cast"))


def _speedup_at(layers: pd.DataFrame, width: int) -> float:
    ok = layers[layers["error"].fillna("") == ""] if "error" in layers else layers
    row = ok[ok.features == width]
    return float(row.speedup.iloc[0]) if len(row) else math.nan


def check_layer_choice(choice: object, evidence: object, layers: "pd.DataFrame | None", width: int) -> None:
    """Exercise 2: FP8 or BF16 for layers ``width`` wide, defended with the measured speed-up at that width."""
    verdict(choice in ("fp8", "bf16"), tr("choice is the string 'fp8' or 'bf16'"))
    verdict(layers is not None, tr("no per-layer table here: run section 3a first"))
    assert layers is not None
    speed = _speedup_at(layers, width)
    verdict(not math.isnan(speed), tr("the table has no row for width {width}: pick a width it measured", width=width))
    verdict(isinstance(evidence, (int, float)) and not isinstance(evidence, bool),
            tr("evidence is a number: the speedup column of the row for your width"))
    assert isinstance(evidence, (int, float))
    verdict(abs(float(evidence) - speed) <= 0.005,
            tr("evidence: read the speedup of the row whose features equal the model's width, not another row"))
    verdict(choice == ("fp8" if speed >= 1.0 else "bf16"),
            tr("speedup below 1 means FP8 is slower at that width: keep those layers in BF16 (and the reverse)"))


def check_margin(margin: object, amax_log: Sequence[float], window: int) -> None:
    """Exercise 3: the smallest delayed-scaling margin with no saturating step from step 1 on."""
    verdict(isinstance(margin, int) and not isinstance(margin, bool), tr("assign an int (not a float or a bool)"))
    assert isinstance(margin, int)
    growth = max([amax_log[t] / max(amax_log[max(0, t - window):t]) for t in range(1, len(amax_log))] + [1.0])
    want = max(0, math.ceil(math.log2(growth) - 1e-12))
    verdict(margin >= want, tr("some step still saturates: 2**margin must cover the largest growth of amax over "
                            "the window's maximum"))
    verdict(margin == want, tr("no step saturates, but a smaller margin would do: find the smallest"))


def check_fp8_mm(fn: object) -> None:
    """Exercise 4: ``fn(a, b)``, a tensorwise E4M3 product through ``torch._scaled_mm``, in float32."""
    from fp16lab.labs.fp8 import scaled_matmul

    verdict(callable(fn), tr("write a function (a, b) -> tensor and assign it to fp8_mm"))
    assert callable(fn)
    mm: Callable[[torch.Tensor, torch.Tensor], object] = fn
    a = torch.randn(32, 64, generator=torch.Generator().manual_seed(4))
    b = torch.randn(64, 48, generator=torch.Generator().manual_seed(5))
    try:
        out = mm(a.clone(), b.clone())
    except RuntimeError as err:
        raise AssertionError(tr("torch._scaled_mm refused it ({err}): b must be column-major "
                                "(b.t().contiguous()...t()) and the scales float32 tensors",
                                err=str(err).splitlines()[0][:80])) from None
    verdict(isinstance(out, torch.Tensor) and tuple(out.shape) == (32, 48), tr("return the (M, N) product"))
    assert isinstance(out, torch.Tensor)
    verdict(out.dtype == torch.float32, tr("ask torch._scaled_mm for out_dtype=torch.float32"))
    rel = ((out - a @ b).norm() / (a @ b).norm()).item()
    verdict(rel < 0.1, tr("the product is far off: the scales torch._scaled_mm takes are the inverses 1/scale"))
    want = scaled_matmul(a, b, scaling="tensorwise", out_dtype=torch.float32)
    verdict(torch.allclose(out, want, rtol=1e-4, atol=1e-4),
            tr("quantise both operands tensorwise to E4M3 with scale 448/amax, clamped to ±448"))
