"""Lesson 05's exercise checks accept the right answer and reject the typical wrong ones, with the hint."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

from fp16lab.course.answers import WrongAnswer
from fp16lab.course.answers.l05 import check_batch_plan, check_gated, check_lean


def _fits(fp32=(32, 64, 128, 256, 288), fp16=(32, 64, 128, 256, 512, 544)):
    ok = [{"precision": p, "batch_size": b, "ok": True} for p, sizes in (("fp32", fp32), ("fp16", fp16)) for b in sizes]
    oom = [{"precision": "fp32", "batch_size": 320, "ok": False}, {"precision": "fp16", "batch_size": 576, "ok": False}]
    return pd.DataFrame(ok + oom)


def test_batch_plan_accepts_the_largest_divisor_that_fits(capsys):
    check_batch_plan(_fits(), 512, 3)  # fp16 fits 544: 512 divides 1536, 768 does not fit
    assert "correct" in capsys.readouterr().out
    check_batch_plan(_fits(fp16=(32, 64, 128, 256, 480)), 384, 4)  # below 512: 384, not the power of two 256
    check_batch_plan(_fits(), 512, 2, target=1024)  # the effective batch is the check's argument


@pytest.mark.parametrize(("micro", "accum", "hint"), [
    (256, 6, "that is what fits in FP32"),           # read the fp32 rows
    (544, 2, "must be the effective batch"),          # the largest fit, not a divisor
    (544, 3, "must be the effective batch"),
    (768, 2, "did not fit"),
    (1536, 1, "did not fit"),                         # no accumulation at all
    (384, 4, "a larger micro-batch that divides 1536"),
    (96, 16, "a larger micro-batch"),
    (512, 2, "must be the effective batch, 1536"),    # the 1024 of an older version: a hard-coded plan
    (512, 1, "must be the effective batch"),          # forgot the accumulation
    (3, 512, "a larger micro-batch"),                 # micro_batch and accum_steps swapped
    (1.5, 2, "positive ints"),
    (3, 0, "positive ints"),
])
def test_batch_plan_rejects_wrong_plans(micro, accum, hint):
    with pytest.raises(WrongAnswer, match=hint):
        check_batch_plan(_fits(), micro, accum)


def test_batch_plan_rejects_the_power_of_two_habit():
    fits = _fits(fp32=(32, 64, 128, 160), fp16=(32, 64, 128, 256, 480))  # 512 does not fit; 384 does, divides 1536
    with pytest.raises(WrongAnswer, match="a larger micro-batch"):
        check_batch_plan(fits, 256, 6)


def test_batch_plan_follows_a_smaller_card():
    small = _fits(fp32=(32, 64), fp16=(32, 64, 128, 160))
    check_batch_plan(small, 128, 12)
    with pytest.raises(WrongAnswer, match="FP32"):
        check_batch_plan(small, 64, 24)


def _with(fits, precision, sizes):
    rows = [{"precision": precision, "batch_size": b, "ok": True} for b in sizes]
    return pd.concat([fits, pd.DataFrame(rows + [{"precision": precision, "batch_size": 2 * max(sizes), "ok": False}])],
                     ignore_index=True)


@pytest.mark.parametrize(("precision", "sizes", "micro", "accum", "named"), [
    ("fp8", (256, 512, 1024), 768, 2, "FP8"),       # the FP8 rows (lesson 09) fit more: not this exercise's precision
    ("bf16", (256, 384, 400), 384, 4, "BF16"),      # a smaller fit than fp16's: not just "a larger micro-batch"
])
def test_batch_plan_names_the_precision_whose_rows_were_read(precision, sizes, micro, accum, named):
    fits = _with(_fits(), precision, sizes)
    with pytest.raises(WrongAnswer, match=f"that is what fits in {named}; you train in FP16 AMP"):
        check_batch_plan(fits, micro, accum)
    check_batch_plan(fits, 512, 3)  # the fp16 rows' answer still passes


def test_batch_plan_reading_every_precisions_rows_at_once_is_named():
    fits = _with(_fits(), "fp8", (256, 512, 1024))
    ok = fits[fits["ok"]]
    largest = int(ok["batch_size"].max())  # the mistake: no precision filter
    micro = max(d for d in range(1, min(largest, 1536) + 1) if 1536 % d == 0)
    with pytest.raises(WrongAnswer, match="FP8"):
        check_batch_plan(fits, micro, 1536 // micro)


def test_batch_plan_with_the_ok_column_ignored_did_not_fit():
    fits = pd.concat([_fits(), pd.DataFrame([{"precision": "fp16", "batch_size": 1024, "ok": False}])],
                     ignore_index=True)  # the search's doubling step ran out of memory at 1024, as on the 4090D budget
    largest = int(fits[fits["precision"] == "fp16"]["batch_size"].max())
    micro = max(d for d in range(1, min(largest, 1536) + 1) if 1536 % d == 0)
    assert micro == 768
    with pytest.raises(WrongAnswer, match="did not fit: read the fp16 rows with ok=True"):
        check_batch_plan(fits, micro, 1536 // micro)


def test_batch_plan_without_a_search_fails_and_says_why():
    with pytest.raises(WrongAnswer, match="cannot run here.*fits.frame is None"):
        check_batch_plan(None, 512, 3)
    with pytest.raises(WrongAnswer, match="pass the search's table"):
        check_batch_plan(pd.DataFrame({"batch_size": [512]}), 512, 3)


def test_a_wrong_answer_shows_the_hint_alone():
    with pytest.raises(WrongAnswer) as caught:
        check_batch_plan(_fits(), 256, 6)
    shown = caught.value._render_traceback_()  # what IPython prints instead of a traceback
    assert shown == ["✗ " + str(caught.value)] and "fp16" in shown[0] and "_largest" not in "".join(shown)


def normalise(x):
    centred = x - x.mean(dim=1, keepdim=True)
    return (centred / centred.std(dim=1, keepdim=True)).clamp(-3, 3)


def lean(x):
    y = x - x.mean(dim=1, keepdim=True)
    y.div_(y.std(dim=1, keepdim=True))
    return y.clamp_(-3, 3)


def in_place_on_input(x):
    x.sub_(x.mean(dim=1, keepdim=True))
    x.div_(x.std(dim=1, keepdim=True))
    return x.clamp_(-3, 3)


def clamp_out_of_place(x):
    y = x - x.mean(dim=1, keepdim=True)
    y.div_(y.std(dim=1, keepdim=True))
    return y.clamp(-3, 3)


X = torch.randn(64, 512) * 5 + 2


def test_lean_accepts_one_allocation(capsys):
    check_lean(lean, normalise, X.clone())
    assert "correct" in capsys.readouterr().out


def biased_std(x):
    y = x - x.mean(dim=1, keepdim=True)
    y.div_(y.std(dim=1, keepdim=True, unbiased=False))
    return y.clamp_(-3, 3)


def no_clamp(x):
    y = x - x.mean(dim=1, keepdim=True)
    return y.div_(y.std(dim=1, keepdim=True))


def in_half(x):
    y = x.half()
    y.sub_(y.mean(dim=1, keepdim=True))
    y.div_(y.std(dim=1, keepdim=True))
    return y.clamp_(-3, 3)


@pytest.mark.parametrize(("fn", "hint"), [
    (in_place_on_input, "changed its input"),
    (normalise, "allocated .* times its input's size"),
    (clamp_out_of_place, "allocated .* times its input's size"),
    (lambda x: x.clone().mul_(2), "values differ"),
    (biased_std, "constant factor per row: compute the standard deviation"),
    (no_clamp, "the clamp is missing"),
    (in_half, "returns torch.float16, its input is torch.float32"),
    (lambda x: 3, "values differ"),
])
def test_lean_rejects_wrong_answers(fn, hint):
    x = X.clone()
    with pytest.raises(AssertionError, match=hint):
        check_lean(fn, normalise, x)
    assert torch.equal(x, X)  # the check restores the input for the next try


def gated_right(x, w):
    h = x @ w
    return h * torch.sigmoid(h)


def gated_in_place(x, w):
    h = x @ w
    g = torch.sigmoid(h)
    return g.mul_(h)


def gated_detached(x, w):
    h = x @ w
    return h * torch.sigmoid(h).detach()


XG, WG = torch.randn(8, 16), torch.randn(16, 4, requires_grad=True)


def test_gated_accepts_out_of_place(capsys):
    check_gated(gated_right, XG, WG)
    assert "correct" in capsys.readouterr().out


def gated_no_grad(x, w):
    with torch.no_grad():
        h = x @ w
        return h * torch.sigmoid(h)


def gated_h_detached(x, w):
    h = x @ w
    return h.detach() * torch.sigmoid(h)


@pytest.mark.parametrize(("fn", "hint"), [
    (gated_in_place, "backward pass fails"),
    (gated_detached, "gradient for w is wrong"),
    (gated_h_detached, "gradient for w is wrong"),
    (gated_no_grad, "does not require grad: torch.no_grad"),
    (lambda x, w: (x @ w).detach(), "does not require grad"),
    (lambda x, w: torch.sigmoid(x @ w), "values differ"),
    (None, "assign your function"),
])
def test_gated_rejects_wrong_answers(fn, hint):
    with pytest.raises(AssertionError, match=hint):
        check_gated(fn, XG, WG)
