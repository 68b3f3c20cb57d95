"""Lesson 09's exercise checks (fp16lab.course.answers.l09): the solution passes, typical wrong answers fail.

Each check is called with the lesson's solution and with at least two plausible wrong answers,
including the mistake its hint names; the wrong ones must raise AssertionError with that hint.
"""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from fp16lab.course.answers import l09
from fp16lab.labs.fp8 import fp8_capable

needs_cpu_fp8 = pytest.mark.skipif(not fp8_capable("cpu").ok, reason="this torch has no CPU kernel for FP8 matmuls")


# ------------------------------------------------------------------ exercise 1: rowwise by hand

def _rowwise(x, *, per_row=True, inverse=False, keepdim=True, clamp=True):
    amax = x.abs().amax(dim=1, keepdim=keepdim) if per_row else x.abs().amax().reshape(1, 1).expand(x.shape[0], 1)
    amax = amax.float().clamp(min=1e-12)
    scale = amax / 448.0 if inverse else 448.0 / amax
    scaled = x.float() * scale  # without keepdim this cannot broadcast: the learner's function raises
    data = (scaled.clamp(-448.0, 448.0) if clamp else scaled).to(torch.float8_e4m3fn)
    return data, scale


def test_rowwise_check_accepts_the_solution(capsys):
    l09.check_rowwise(_rowwise)
    assert "correct" in capsys.readouterr().out


@pytest.mark.parametrize(("wrong", "hint"), [
    (lambda x: _rowwise(x, per_row=False), "448 / \\(the row's largest"),  # one tensor-wide scale
    (lambda x: _rowwise(x, inverse=True), "not its inverse"),
    (lambda x: _rowwise(x, keepdim=False), "shape \\(rows, 1\\)"),
    (lambda x: (x.to(torch.float8_e4m3fn), x.abs().amax(dim=1)), "shape \\(rows, 1\\)"),  # no keepdim, no broadcast
    (lambda x: _rowwise(x)[0], "return a tuple"),
    ("not a function", "assign it to my_rowwise"),
])
def test_rowwise_check_rejects_wrong_answers(wrong, hint):
    with pytest.raises(AssertionError, match=hint):
        l09.check_rowwise(wrong)


# ------------------------------------------------------------------ exercise 2: FP8 or BF16 for a width

def _layers(speedups: dict[int, float]) -> pd.DataFrame:
    return pd.DataFrame({"features": list(speedups), "speedup": list(speedups.values()),
                         "hp_ms": 1.0, "fp8_ms": [1.0 / s for s in speedups.values()], "error": ""})


SLOW_AT_1024 = _layers({512: 0.65, 1024: 0.92, 2048: 0.82, 4096: 1.05})
FAST_AT_1024 = _layers({512: 0.9, 1024: 1.3, 2048: 1.5})


@pytest.mark.parametrize(("layers", "choice", "evidence"), [(SLOW_AT_1024, "bf16", 0.92), (FAST_AT_1024, "fp8", 1.3)])
def test_layer_choice_accepts_the_measured_answer(layers, choice, evidence, capsys):
    l09.check_layer_choice(choice, evidence, layers, 1024)
    assert "correct" in capsys.readouterr().out


@pytest.mark.parametrize(("choice", "evidence", "hint"), [
    ("fp8", 1.05, "read the speedup of the row"),      # the best row of the table, not the model's width
    ("fp8", 0.92, "speedup below 1 means FP8 is slower"),  # right number, FP8 anyway ("twice as fast")
    ("fp8", 1 / 0.92, "read the speedup of the row"),  # the ratio inverted
    ("FP8", 0.92, "'fp8' or 'bf16'"),
    ("bf16", "0.92", "evidence is a number"),
])
def test_layer_choice_rejects_wrong_answers(choice, evidence, hint):
    with pytest.raises(AssertionError, match=hint):
        l09.check_layer_choice(choice, evidence, SLOW_AT_1024, 1024)


def test_layer_choice_needs_a_measured_width():
    with pytest.raises(AssertionError, match="no row for width 1024"):
        l09.check_layer_choice("bf16", 1.0, _layers({512: 0.6}), 1024)
    with pytest.raises(AssertionError, match="run section 3a first"):
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
def test_margin_check_rejects_wrong_answers(margin, hint):
    with pytest.raises(AssertionError, match=hint):
        l09.check_margin(margin, AMAX, 2)


# ------------------------------------------------------------------ exercise 4: fix an FP8 matmul call

def _fp8_mm(a, b, *, invert=True, col_major=True, out_dtype=torch.float32, fmt=torch.float8_e4m3fn):
    sa, sb = 448.0 / a.abs().max().float(), 448.0 / b.abs().max().float()
    fa = (a * sa).clamp(-448, 448).to(fmt)
    if col_major:
        fb = (b.t().contiguous() * sb).clamp(-448, 448).to(torch.float8_e4m3fn).t()
    else:
        fb = (b * sb).clamp(-448, 448).to(torch.float8_e4m3fn)
    scales = (sa.reciprocal(), sb.reciprocal()) if invert else (sa, sb)
    return torch._scaled_mm(fa, fb, scale_a=scales[0], scale_b=scales[1], out_dtype=out_dtype)


@needs_cpu_fp8
def test_fp8_mm_check_accepts_the_fix(capsys):
    l09.check_fp8_mm(_fp8_mm)
    assert "correct" in capsys.readouterr().out


@needs_cpu_fp8
@pytest.mark.parametrize(("wrong", "hint"), [
    (lambda a, b: _fp8_mm(a, b, invert=False), "inverses 1/scale"),
    (lambda a, b: _fp8_mm(a, b, out_dtype=torch.bfloat16), "out_dtype=torch.float32"),
    (lambda a, b: _fp8_mm(a, b, fmt=torch.float8_e5m2), "tensorwise to E4M3|refused"),
    (lambda a, b: (a @ b)[:, :10], "return the \\(M, N\\) product"),
])
def test_fp8_mm_check_rejects_wrong_answers(wrong, hint):
    with pytest.raises(AssertionError, match=hint):
        l09.check_fp8_mm(wrong)
