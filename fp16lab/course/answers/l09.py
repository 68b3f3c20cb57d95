"""Lesson 09's exercise checks (FP8): each computes the expected answer itself and shows only a verdict or a hint."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd
import torch
from torch.overrides import TorchFunctionMode

from fp16lab.course.answers import WrongAnswer, cannot_check, require, verdict
from fp16lab.labs.runtime.i18n import tr

__all__ = ["check_rowwise", "check_layer_choice", "check_margin", "check_fp8_mm", "TIE"]

#: Exercise 2: a per-layer speed-up within this fraction of 1 is a tie. Section 3a's table holds one timing
#: per width, not interleaved rounds; its BF16 column moves by more than this between widths whose work
#: differs fourfold, so a smaller gap cannot be told from noise.
TIE = 0.1


def check_rowwise(fn: object) -> None:
    """Exercise 1: ``fn(x) -> (data, scale)``, E4M3 with one ``448 / amax`` scale per row."""
    from fp16lab.labs.fp8 import quantize

    require(callable(fn), tr("write a function x -> (data, scale) and assign it to my_rowwise"))
    assert callable(fn)
    x = torch.randn(7, 32, generator=torch.Generator().manual_seed(3)) * torch.logspace(-3, 2, 7).reshape(7, 1)
    x[:, 0] = -x.abs().amax(dim=1) * 2  # every row's largest magnitude is negative: amax needs abs()
    x[-1] = 0.0  # an all-zero row (a padding token): amax must be clamped, or its scale is inf
    try:
        got = fn(x.clone())
    except (RuntimeError, ValueError, TypeError, IndexError) as err:
        raise WrongAnswer(tr("my_rowwise raised {kind} ({err}): one scale per row must broadcast against x, "
                             "so take amax over dim=1 with keepdim=True: shape (rows, 1)",
                             kind=type(err).__name__, err=str(err)[:80])) from None
    require(isinstance(got, tuple) and len(got) == 2, tr("return a tuple (data, scale)"))
    assert isinstance(got, tuple)
    data, scale = got
    want = quantize(x, "fp8_e4m3", "row")
    require(isinstance(scale, torch.Tensor) and tuple(scale.shape) == (7, 1),
            tr("one scale per row: shape (rows, 1) (amax over dim=1 with keepdim=True)"))
    assert isinstance(scale, torch.Tensor)
    require(scale.dtype == torch.float32, tr("scale must be float32, as torch._scaled_mm takes it (yours is {dtype})",
                                             dtype=str(scale.dtype)))
    require(torch.allclose(scale, want.scale, rtol=1e-6), _scale_hint(scale, x, want.scale))
    require(isinstance(data, torch.Tensor) and data.dtype == torch.float8_e4m3fn,
            tr("cast the scaled values to torch.float8_e4m3fn"))
    assert isinstance(data, torch.Tensor)
    verdict(torch.equal(data.float(), want.data.float()), tr("data = (x * scale) clamped to ±448, then cast"))


def _scale_hint(scale: torch.Tensor, x: torch.Tensor, want: torch.Tensor) -> str:
    """Name the mistake behind a wrong per-row scale: each plausible slip gives its own recognisable scale."""
    live = slice(0, -1)  # the rows with data; the last row is all zeros

    def same(a: torch.Tensor, b: torch.Tensor, rows: slice = live) -> bool:
        return bool(torch.allclose(a[rows].double(), b[rows].double(), rtol=1e-5))

    s = scale.detach()
    if not bool(torch.isfinite(s[-1]).all()):
        return tr("the all-zero row gets scale inf (448 / 0): clamp amax below at 1e-12 before dividing")
    if same(s, want) and not same(s, want, slice(-1, None)):
        return tr("an all-zero row's scale is set by the clamp on amax: clamp below at 1e-12, as the exercise says")
    if same(s * want, torch.ones_like(want)) or same(s, 1.0 / want):
        return tr("that is the dequantisation factor amax / 448: the quantisation scale is 448 / amax")
    if same(s, want * 128.0):
        return tr("448 is E4M3's max; 57344 is E5M2's")
    if same(s, want.bfloat16().float()):
        return tr("the scale was rounded to 16 bits on the way: compute amax and 448 / amax in float32")
    if s[live].unique().numel() == 1:
        return tr("one scale for the whole tensor: rowwise means one amax per row")
    if same(s, 448.0 / x.amax(dim=1, keepdim=True).float()):
        return tr("amax is the largest magnitude: take x.abs() before the max (a row's largest value may be negative)")
    if same(s, 448.0 / x.abs().mean(dim=1, keepdim=True).float()):
        return tr("amax is the row's largest |value|, not its mean: a mean-based scale overflows past 448")
    return tr("scale = 448 / (the row's largest |value|), one per row")


def _measured(layers: pd.DataFrame) -> pd.DataFrame:
    return layers[layers["error"].fillna("") == ""] if "error" in layers else layers


def _evidence_hint(evidence: float, layers: pd.DataFrame, width: int) -> str:
    """Name the mistake behind a wrong ``evidence``: an inverted ratio, a time, another row, or a number from elsewhere."""
    ok = _measured(layers)
    row = ok[ok.features == width].iloc[0]

    def near(value: object) -> bool:
        v = float(value)  # type: ignore[arg-type]
        return math.isfinite(v) and abs(evidence - v) <= 0.005 * max(1.0, abs(v))

    if near(1.0 / float(row.speedup)):
        return tr("evidence is inverted: speedup = BF16 time / FP8 time (hp_ms / fp8_ms), above 1 when FP8 is faster")
    if any(near(row[c]) for c in ("hp_ms", "fp8_ms") if c in row):
        return tr("evidence is a time in ms: the speed-up is the ratio hp_ms / fp8_ms (the speedup column)")
    if any(near(s) for s in ok[ok.features != width].speedup):
        return tr("evidence: read the speedup of the row whose features equal the model's width, not another row")
    return tr("evidence is not in the table: use the measured speedup at the model's width, not a datasheet "
              "ratio or a typed-in number")


def check_layer_choice(choice: object, evidence: object, layers: "pd.DataFrame | None", width: int) -> None:
    """Exercise 2: FP8 or BF16 for layers ``width`` wide, defended with the measured speed-up at that width.

    The choice must follow the measurement (FP8 where the speed-up is at least 1); when the speed-up
    lies within :data:`TIE` of 1 either choice passes and the verdict says it is a tie, which one timing per
    width cannot settle.
    """
    require(choice in ("fp8", "bf16"), tr("choice is the string 'fp8' or 'bf16'"))
    if layers is None:
        cannot_check(tr("no per-layer table here: run section 3a first"))
    assert layers is not None
    speed = float(_measured(layers).loc[lambda f: f.features == width, "speedup"].iloc[0]) \
        if (_measured(layers).features == width).any() else math.nan
    require(not math.isnan(speed), tr("the table has no row for width {width}: pick a width it measured", width=width))
    require(isinstance(evidence, (int, float)) and not isinstance(evidence, bool),
            tr("evidence is a number: the speedup column of the row for your width"))
    assert isinstance(evidence, (int, float))
    require(abs(float(evidence) - speed) <= 0.005, _evidence_hint(float(evidence), layers, width))
    tie = abs(speed - 1.0) < TIE
    done = tr("correct reading of the table, and a tie: this speed-up is within {tie:.0%} of 1, closer than one "
              "timing per width can resolve, so either choice is defensible; section 3a says which measurement "
              "decides", tie=TIE) if tie else None
    verdict(tie or choice == ("fp8" if speed >= 1.0 else "bf16"),
            tr("speedup below 1 means FP8 is slower at that width: keep those layers in BF16 (and the reverse)"),
            done=done)


def check_margin(margin: object, amax_log: Sequence[float], window: int) -> None:
    """Exercise 3: the smallest delayed-scaling margin with no saturating step from step 1 on."""
    require(isinstance(margin, int) and not isinstance(margin, bool), tr("assign an int (not a float or a bool)"))
    assert isinstance(margin, int)
    if len(amax_log) < 2:
        cannot_check(tr("amax_log holds fewer than two steps: run section 2's probe training first"))
    growth = max([amax_log[t] / max(amax_log[max(0, t - window):t]) for t in range(1, len(amax_log))] + [1.0])
    want = max(0, math.ceil(math.log2(growth) - 1e-12))
    require(margin >= want, tr("some step still saturates with this margin: count the saturating steps "
                               "for each margin, as section 2c counts them"))
    verdict(margin == want, tr("no step saturates, but a smaller margin would do: find the smallest"))


def _bf16_operands(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Exercise 4's product with the scaled operands rounded to BF16 before the FP8 cast (a plausible slip)."""
    sa, sb = 448.0 / a.abs().max().float(), 448.0 / b.abs().max().float()
    fa = (a.bfloat16() * sa).clamp(-448, 448).to(torch.float8_e4m3fn)
    fb = (b.t().contiguous().bfloat16() * sb).clamp(-448, 448).to(torch.float8_e4m3fn).t()
    return torch._scaled_mm(fa, fb, scale_a=sa.reciprocal(), scale_b=sb.reciprocal(), out_dtype=torch.float32)


class _ScaledMmCalls(TorchFunctionMode):
    """Counts the ``torch._scaled_mm`` calls the learner's function makes and holds each to CUDA's rules first."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def __torch_function__(self, func: Any, types: Any, args: tuple[Any, ...] = (),
                           kwargs: "dict[str, Any] | None" = None) -> Any:
        kwargs = kwargs or {}
        if func is torch._scaled_mm:
            self.calls += 1
            hint = _cuda_layout_hint(args, kwargs)
            if hint is not None:
                raise WrongAnswer(hint)  # before the CPU kernel, which would accept a row-major b
        return func(*args, **kwargs)


def _cuda_layout_hint(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
    """What CUDA's ``torch._scaled_mm`` refuses that the CPU kernel accepts: a row-major b, or scales not float32 tensors."""
    names = ("self", "mat2", "scale_a", "scale_b")
    given = dict(zip(names, args, strict=False)) | {k: v for k, v in kwargs.items() if k in names}
    a, b = given.get("self"), given.get("mat2")
    if isinstance(b, torch.Tensor) and b.dim() == 2 and b.stride(0) != 1:
        return tr("the second operand is row-major: CUDA's torch._scaled_mm wants it column-major (this CPU kernel "
                  "accepts both); quantise b.t().contiguous() and pass its .t()")
    if isinstance(a, torch.Tensor) and a.dim() == 2 and a.stride(1) != 1:
        return tr("the first operand must stay row-major: the column-major layout belongs to the second, b")
    scales = [given.get("scale_a"), given.get("scale_b")]
    if not all(isinstance(s, torch.Tensor) and s.dtype == torch.float32 for s in scales):
        return tr("pass scale_a and scale_b as float32 tensors (0-d for tensorwise): torch._scaled_mm takes no "
                  "Python floats and no 16-bit scales")
    return None


def check_fp8_mm(fn: object) -> None:
    """Exercise 4: ``fn(a, b)``, a tensorwise E4M3 product through ``torch._scaled_mm``, in float32.

    The operands are CPU tensors (the check runs anywhere), but the layout rules checked are CUDA's:
    PyTorch's CPU kernel accepts a row-major second operand that a GPU refuses, so every call the
    function makes to ``torch._scaled_mm`` is held to the GPU's rules before it runs.
    """
    from fp16lab.labs.fp8 import scaled_matmul

    require(callable(fn), tr("write a function (a, b) -> tensor and assign it to fp8_mm"))
    assert callable(fn)
    mm: Callable[[torch.Tensor, torch.Tensor], object] = fn
    a = torch.randn(32, 64, generator=torch.Generator().manual_seed(4))
    b = torch.randn(64, 48, generator=torch.Generator().manual_seed(5))
    recorder = _ScaledMmCalls()
    try:
        with recorder:
            out = mm(a.clone(), b.clone())
    except (RuntimeError, TypeError, ValueError) as err:
        raise WrongAnswer(tr("torch._scaled_mm refused it ({err}): b must be column-major "
                             "(b.t().contiguous()...t()) and the scales float32 tensors",
                             err=str(err).splitlines()[0][:80])) from None
    require(recorder.calls > 0, tr("call torch._scaled_mm (the exercise's operator) for the product"))
    require(isinstance(out, torch.Tensor) and tuple(out.shape) == (32, 48), tr("return the (M, N) product"))
    assert isinstance(out, torch.Tensor)
    require(out.dtype == torch.float32, tr("ask torch._scaled_mm for out_dtype=torch.float32"))
    rel = ((out - a @ b).norm() / (a @ b).norm()).item()
    require(rel < 0.1, tr("the product is far off: the scales torch._scaled_mm takes are the inverses 1/scale"))
    want = scaled_matmul(a, b, scaling="tensorwise", out_dtype=torch.float32)
    if not torch.allclose(out, want, rtol=1e-4, atol=1e-4):
        require(not torch.equal(out, want.bfloat16().float()),
                tr("the product was rounded to BF16 (out_dtype=torch.bfloat16, then .float()?): ask "
                   "torch._scaled_mm for out_dtype=torch.float32 directly"))
        require(not torch.allclose(out, _bf16_operands(a, b), rtol=1e-4, atol=1e-4),
                tr("the operands were scaled in BF16 and rounded twice: multiply x * scale in float32, "
                   "then clamp and cast to E4M3"))
    verdict(torch.allclose(out, want, rtol=1e-4, atol=1e-4),
            tr("quantise both operands tensorwise to E4M3 with scale 448/amax, clamped to ±448"))
