"""Lesson 09's exercise checks (fp16lab.course.answers.l09): the solution passes, typical wrong answers fail.

Each check is called with the lesson's solution and with at least two plausible wrong answers,
including the mistake its hint names; the wrong ones must raise AssertionError with that hint.
"""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from fp16lab.course.answers import WrongAnswer, l09
from fp16lab.labs.fp8 import fp8_capable

needs_cpu_fp8 = pytest.mark.skipif(not fp8_capable("cpu").ok, reason="this torch has no CPU kernel for FP8 matmuls")


# ------------------------------------------------------------------ exercise 1: rowwise by hand

def _rowwise(x, *, per_row=True, inverse=False, keepdim=True, clamp=True, dtype=torch.float32,
             fmt=torch.float8_e4m3fn, dim=1, absolute=True, floor=1e-12, fmt_max=448.0, mean=False, rounded=False):
    mag = x.abs() if absolute else x
    if mean:
        amax = mag.mean(dim=dim, keepdim=keepdim)
    else:
        amax = mag.amax(dim=dim, keepdim=keepdim) if per_row else mag.amax().reshape(1, 1).expand(x.shape[0], 1)
    amax = amax.to(dtype)
    amax = amax.clamp(min=floor) if floor is not None else amax
    scale = amax / fmt_max if inverse else fmt_max / amax
    if rounded:
        scale = scale.bfloat16().float()
    scaled = x.float() * scale  # without keepdim this cannot broadcast: the learner's function raises
    data = (scaled.clamp(-448.0, 448.0) if clamp else scaled).to(fmt)
    return data, scale


def test_rowwise_check_accepts_the_solution(capsys):
    l09.check_rowwise(_rowwise)
    assert "correct" in capsys.readouterr().out


@pytest.mark.parametrize(("wrong", "hint"), [
    (lambda x: _rowwise(x, per_row=False), "one scale for the whole tensor"),  # one tensor-wide scale
    (lambda x: _rowwise(x, inverse=True), "dequantisation factor"),
    (lambda x: _rowwise(x, keepdim=False), "shape \\(rows, 1\\)"),
    (lambda x: (x.to(torch.float8_e4m3fn), x.abs().amax(dim=1)), "shape \\(rows, 1\\)"),  # no keepdim, no broadcast
    (lambda x: _rowwise(x)[0], "return a tuple"),
    ("not a function", "assign it to my_rowwise"),
    (lambda x: _rowwise(x, dtype=torch.bfloat16), "scale must be float32"),  # right formula, 16-bit scale
    (lambda x: _rowwise(x, absolute=False), "take x.abs\\(\\) before the max"),  # amax without abs()
    (lambda x: _rowwise(x, dim=0), "shape \\(rows, 1\\)"),  # one scale per column
    (lambda x: _rowwise(x, fmt=torch.float8_e5m2), "torch.float8_e4m3fn"),
    (lambda x: _rowwise(x, floor=None), "all-zero row gets scale inf"),  # amax not clamped
    (lambda x: _rowwise(x, floor=1e-4), "clamp below at 1e-12"),  # a floor that changes the zero row's scale
    (lambda x: _rowwise(x, fmt_max=57344.0), "57344 is E5M2's"),  # E5M2's max with E4M3 data
    (lambda x: _rowwise(x, mean=True), "not its mean"),
    (lambda x: _rowwise(x, rounded=True), "rounded to 16 bits"),  # float32 tensor holding a BF16-rounded scale
    (lambda x: _rowwise(x, dtype=torch.float64), "yours is torch.float64"),
])
def test_rowwise_check_rejects_wrong_answers(wrong, hint, capsys):
    with pytest.raises(WrongAnswer, match=hint):
        l09.check_rowwise(wrong)
    assert "✓" not in capsys.readouterr().out  # a partly right answer shows no tick before its hint


# ------------------------------------------------------------------ exercise 2: FP8 or BF16 for a width

def _layers(speedups: dict[int, float]) -> pd.DataFrame:
    return pd.DataFrame({"features": list(speedups), "speedup": list(speedups.values()),
                         "hp_ms": 1.0, "fp8_ms": [1.0 / s for s in speedups.values()], "error": ""})


SLOW_AT_1024 = _layers({512: 0.65, 1024: 0.82, 2048: 0.88, 4096: 1.05})
FAST_AT_1024 = _layers({512: 0.9, 1024: 1.3, 2048: 1.5})
TIE_AT_1024 = _layers({512: 0.597, 1024: 1.071, 2048: 0.610, 4096: 0.914})  # the H200 reference's shape


@pytest.mark.parametrize(("layers", "choice", "evidence"), [(SLOW_AT_1024, "bf16", 0.82), (FAST_AT_1024, "fp8", 1.3)])
def test_layer_choice_accepts_the_measured_answer(layers, choice, evidence, capsys):
    l09.check_layer_choice(choice, evidence, layers, 1024)
    out = capsys.readouterr().out
    assert out.count("✓") == 1 and "correct" in out and "tie" not in out


@pytest.mark.parametrize("choice", ["fp8", "bf16"])  # inside the tie band both are defensible
def test_layer_choice_calls_a_tie_a_tie(choice, capsys):
    l09.check_layer_choice(choice, 1.071, TIE_AT_1024, 1024)
    out = capsys.readouterr().out
    assert out.count("✓") == 1 and "a tie" in out and "either choice" in out


def test_layer_choice_outside_the_tie_band_follows_the_rule():
    with pytest.raises(WrongAnswer, match="speedup below 1 means"):  # 0.82 is more than a tenth below 1
        l09.check_layer_choice("fp8", 0.82, SLOW_AT_1024, 1024)


@pytest.mark.parametrize(("choice", "evidence", "hint"), [
    ("fp8", 1.05, "read the speedup of the row"),      # the best row of the table, not the model's width
    ("fp8", 0.82, "speedup below 1 means FP8 is slower"),  # right number, FP8 anyway ("twice as fast")
    ("fp8", 1 / 0.82, "evidence is inverted"),  # the ratio inverted: fp8_ms / hp_ms
    ("fp8", 1.0 / 0.82, "hp_ms / fp8_ms"),
    ("bf16", 1.0, "evidence is a time in ms"),  # hp_ms read instead of the speed-up
    ("fp8", 2.0, "not a datasheet ratio"),  # the cited FP8/BF16 peak ratio, typed in
    ("FP8", 0.82, "'fp8' or 'bf16'"),
    ("bf16", "0.82", "evidence is a number"),
])
def test_layer_choice_rejects_wrong_answers(choice, evidence, hint, capsys):
    with pytest.raises(WrongAnswer, match=hint):
        l09.check_layer_choice(choice, evidence, SLOW_AT_1024, 1024)
    assert "✓" not in capsys.readouterr().out


def test_layer_choice_needs_a_measured_width():
    with pytest.raises(WrongAnswer, match="no row for width 1024"):
        l09.check_layer_choice("bf16", 1.0, _layers({512: 0.6}), 1024)
    with pytest.raises(WrongAnswer, match="cannot run here.*run section 3a first"):
        l09.check_layer_choice("bf16", 1.0, None, 1024)


# ------------------------------------------------------------------ exercise 3: a delayed-scaling margin

AMAX = [1.0, 1.5, 1.2, 5.0, 4.0, 4.5, 9.0, 3.0]  # largest growth over the window: 5.0 / 1.5 = 3.33 -> margin 2


def _margin(log, window, extra_halving=False):
    def saturating(m):
        count = 0
        for t in range(1, len(log)):
            scale = 448.0 / max(log[max(0, t - window):t]) / 2**m / (2 if extra_halving else 1)
            count += log[t] * scale > 448.0
        return count
    return next(m for m in range(64) if saturating(m) == 0)


def test_margin_check_accepts_the_smallest_margin(capsys):
    assert _margin(AMAX, 2) == 2
    l09.check_margin(_margin(AMAX, 2), AMAX, 2)
    assert "correct" in capsys.readouterr().out


@pytest.mark.parametrize(("margin", "hint"), [
    (0, "some step still saturates"),                      # TE's default
    (_margin(AMAX, 2) + 1, "a smaller margin would do"),   # one more, to be safe
    (_margin(AMAX, 2, extra_halving=True), "some step still saturates"),  # scale halved twice over
    (2.0, "assign an int"),
    (True, "assign an int"),
])
def test_margin_check_rejects_wrong_answers(margin, hint, capsys):
    with pytest.raises(WrongAnswer, match=hint):
        l09.check_margin(margin, AMAX, 2)
    assert "✓" not in capsys.readouterr().out


def test_margin_check_without_a_history_says_so():
    with pytest.raises(WrongAnswer, match="cannot run here.*probe training"):
        l09.check_margin(0, [], 2)


# ------------------------------------------------------------------ exercise 4: fix an FP8 matmul call

def _fp8_mm(a, b, *, invert=True, col_major=True, out_dtype=torch.float32, fmt=torch.float8_e4m3fn,
            a_col_major=False, scale_dtype=torch.float32):
    sa, sb = 448.0 / a.abs().max().to(scale_dtype), 448.0 / b.abs().max().to(scale_dtype)
    fa = (a * sa).clamp(-448, 448).to(fmt)
    if a_col_major:
        fa = fa.t().contiguous().t()
    if col_major:
        fb = (b.t().contiguous() * sb).clamp(-448, 448).to(torch.float8_e4m3fn).t()
    else:
        fb = (b * sb).clamp(-448, 448).to(torch.float8_e4m3fn)
    scales = (sa.reciprocal(), sb.reciprocal()) if invert else (sa, sb)
    return torch._scaled_mm(fa, fb, scale_a=scales[0], scale_b=scales[1], out_dtype=out_dtype)


def _bf16_scaled(a, b):
    sa, sb = 448.0 / a.abs().max(), 448.0 / b.abs().max()
    fa = (a.bfloat16() * sa).clamp(-448, 448).to(torch.float8_e4m3fn)
    fb = (b.t().contiguous().bfloat16() * sb).clamp(-448, 448).to(torch.float8_e4m3fn).t()
    return torch._scaled_mm(fa, fb, scale_a=sa.reciprocal(), scale_b=sb.reciprocal(), out_dtype=torch.float32)


@needs_cpu_fp8
def test_fp8_mm_check_accepts_the_fix(capsys):
    l09.check_fp8_mm(_fp8_mm)
    assert "correct" in capsys.readouterr().out


@needs_cpu_fp8
@pytest.mark.parametrize(("wrong", "hint"), [
    (lambda a, b: _fp8_mm(a, b, invert=False), "inverses 1/scale"),
    (lambda a, b: _fp8_mm(a, b, out_dtype=torch.bfloat16), "out_dtype=torch.float32"),
    (lambda a, b: _fp8_mm(a, b, fmt=torch.float8_e5m2), "tensorwise to E4M3|refused"),
    (lambda a, b: (a @ b)[:, :10], "torch._scaled_mm \\(the exercise's operator\\)"),
    (lambda a, b: _fp8_mm(a, b, col_major=False), "second operand is row-major"),  # the CPU kernel runs it
    (lambda a, b: _fp8_mm(a, b, col_major=False, invert=False), "second operand is row-major"),  # nothing fixed
    (lambda a, b: _fp8_mm(a, b, a_col_major=True), "first operand must stay row-major"),  # layout fixed on a
    (lambda a, b: _fp8_mm(a, b, scale_dtype=torch.float64), "float32 tensors"),  # right formula, float64 scales
    (lambda a, b: a @ b, "call torch._scaled_mm"),  # FP32 product, no FP8 at all
    (lambda a, b: _fp8_mm(a, b, out_dtype=torch.bfloat16).float(), "rounded to BF16"),  # right dtype, BF16 values
    (_bf16_scaled, "scaled in BF16"),  # operands rounded to BF16 before the FP8 cast
])
def test_fp8_mm_check_rejects_wrong_answers(wrong, hint, capsys):
    with pytest.raises(WrongAnswer, match=hint):
        l09.check_fp8_mm(wrong)
    assert "✓" not in capsys.readouterr().out


@needs_cpu_fp8
def test_the_cpu_kernel_accepts_the_row_major_operand_the_check_rejects():
    """Why the check records the call: here the mistake runs and gives the right product."""
    a = torch.randn(32, 64, generator=torch.Generator().manual_seed(4))
    b = torch.randn(64, 48, generator=torch.Generator().manual_seed(5))
    out = _fp8_mm(a, b, col_major=False)
    assert ((out - a @ b).norm() / (a @ b).norm()).item() < 0.1
