"""Lesson 03's exercise checks accept the right answer and reject the typical wrong ones, with the hint."""

from __future__ import annotations

import copy

import pandas as pd
import pytest
import torch
from torch import nn

from fp16lab.align import audit, pad_layers
from fp16lab.course.answers import WrongAnswer
from fp16lab.course.answers.l03 import (
    card_precision,
    check_card_audit,
    check_layout_choice,
    check_padded_copy,
)
from fp16lab.hardware import PROFILES, chip_features


class Unseen(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(300, 16)
        self.proj = nn.Linear(16, 100)
        self.mid = nn.Linear(100, 32)
        self.tags = nn.Linear(32, 17)

    def forward(self, idx):
        h = torch.relu(self.proj(self.embed(idx).mean(1)))
        return self.tags(torch.relu(self.mid(h)))


def _unseen():
    torch.manual_seed(3)
    return Unseen()


def _right(unseen):
    report = audit(unseen)
    fixed = pad_layers(copy.deepcopy(unseen), report.pad_names(), multiple=8)
    must = {(f.module, f.dim) for f in report.misaligned if not f.paddable}
    return fixed, torch.optim.AdamW(fixed.parameters()), must


PROBE = torch.randint(0, 300, (4, 5))


def test_padded_copy_accepts_the_solution(capsys):
    unseen = _unseen()
    check_padded_copy(_unseen, unseen, *_right(unseen), PROBE)
    assert "correct" in capsys.readouterr().out


def test_padded_copy_rejects_padding_in_place():
    unseen = _unseen()
    report = audit(unseen)
    fixed = pad_layers(unseen, report.pad_names(), multiple=8)
    must = {(f.module, f.dim) for f in report.misaligned if not f.paddable}
    with pytest.raises(AssertionError, match="copy"):
        check_padded_copy(_unseen, unseen, fixed, torch.optim.AdamW(fixed.parameters()), must, PROBE)


def test_padded_copy_rejects_every_finding_as_must_change():
    unseen = _unseen()
    fixed, opt, _ = _right(unseen)
    every = {(f.module, f.dim) for f in audit(unseen).misaligned}
    with pytest.raises(AssertionError, match="findings pad_layers can pad"):
        check_padded_copy(_unseen, unseen, fixed, opt, every, PROBE)


@pytest.mark.parametrize(("answer", "hint"), [
    ({"mid"}, "holds module names"),                          # names, not (module, dim) pairs
    (set(), "must_change is empty"),                          # "padding fixed everything"
    ({("mid", "out_features")}, "must_change is off"),        # the wrong dim of the right layer
])
def test_padded_copy_names_each_must_change_mistake(answer, hint):
    unseen = _unseen()
    fixed, opt, _ = _right(unseen)
    with pytest.raises(WrongAnswer, match=hint):
        check_padded_copy(_unseen, unseen, fixed, opt, answer, PROBE)


def test_padded_copy_rejects_a_partial_pad_and_a_stale_optimizer():
    unseen = _unseen()
    _, _, must = _right(unseen)
    partial = pad_layers(copy.deepcopy(unseen), ["embed"], multiple=8)
    with pytest.raises(AssertionError, match="something paddable is left"):
        check_padded_copy(_unseen, unseen, partial, torch.optim.AdamW(partial.parameters()), must, PROBE)
    fixed, _, _ = _right(unseen)
    stale = torch.optim.AdamW(copy.deepcopy(unseen).parameters())
    with pytest.raises(AssertionError, match="build the optimizer after padding"):
        check_padded_copy(_unseen, unseen, fixed, stale, must, PROBE)


MLP = nn.Sequential(nn.Linear(100, 300), nn.ReLU(), nn.Linear(300, 10))


def _rule(pick):
    """needs_fix(model, card) with the precision chosen by pick(card)."""
    return lambda model, card: {(f.module, f.dim) for f in audit(model, precision=pick(card)).misaligned}


RIGHT = _rule(lambda card: "tf32" if chip_features(card.capability, card.name)["tf32"] else "fp16")


def test_card_precision_follows_the_capability():
    assert card_precision("a100-40gb") == "tf32" and card_precision("t4") == "fp16"


def test_card_audit_accepts_the_solution(capsys):
    check_card_audit(MLP, RIGHT)
    assert "correct" in capsys.readouterr().out


def test_card_audit_accepts_any_rule_that_decides_by_capability(capsys):
    check_card_audit(MLP, _rule(lambda card: "tf32" if card.capability >= (8, 0) else "bf16"))   # bf16 aligns as fp16
    assert "correct" in capsys.readouterr().out


_TYPED = {"a100-40gb": {("2", "out_features")},
          "t4": {("0", "in_features"), ("0", "out_features"), ("2", "in_features"), ("2", "out_features")}}


@pytest.mark.parametrize(("answer", "hint"), [
    (_rule(lambda card: "fp16"), "a100-40gb: that is the fp16 audit.*has TF32"),
    (_rule(lambda card: "tf32"), "t4: that is the tf32 audit.*no TF32"),
    (_rule(lambda card: "fp16" if card.capability >= (8, 0) else "tf32"), "a100-40gb: that is the fp16 audit"),
    (_rule(lambda card: "tf32" if card.key == "a100-40gb" else "fp16"), "not for a card or model it was not shown"),
    (lambda model, card: _TYPED[card.key], "not for a card or model it was not shown"),       # typed sets
    (lambda model, card: RIGHT(MLP, card), "not for a card or model it was not shown"),       # the model ignored
    (lambda model, card: RIGHT(model, card) if card.key in _TYPED else set(), "not for a card or model"),
    (_rule(lambda card: "fp32"), "raised ValueError: precision 'fp32'"),                     # audit's own refusal
    (lambda model, card: set(), "a100-40gb: not the audit's findings"),
    (lambda model, card: 1 / 0, "raised ZeroDivisionError"),
    (lambda model, card: sorted(RIGHT(model, card)), "must return a set"),
    (_TYPED, "must be a function of \\(model, card\\)"),                             # the old dict answer
])
def test_card_audit_rejects_each_mistake_naming_it(answer, hint):
    with pytest.raises(WrongAnswer, match=hint):
        check_card_audit(MLP, answer)


def test_the_check_only_cards_are_not_the_exercise_cards_and_need_both_precisions():
    from fp16lab.course.answers.l03 import _CHECK_CARDS

    assert {p.key for p in _CHECK_CARDS}.isdisjoint(PROFILES)
    assert {"tf32" if chip_features(p.capability, p.name)["tf32"] else "fp16" for p in _CHECK_CARDS} == {"tf32", "fp16"}


def _measured(busy=0.7, rounds=3):
    """Section 10's table as time_interleaved gives it: one row per variant and round (kernel times jitter a little)."""
    rows = [("NCHW (default format)", 3000.0, 42.0), ("channels_last", 4150.0, 22.0),
            ("channels_last + fc padded 101->104", 4100.0, 22.0), ("channels_last, cudnn.benchmark=False", 3400.0, 22.0)]
    frame = pd.DataFrame([{"section": "resnet50", "variant": v, "round": r, "batch": 128, "per_s": p * (1 + 0.01 * r),
                           "ms": 128 / (p * (1 + 0.01 * r)) * 1e3, "gpu_kernel_ms": k * (1 + 0.005 * (r - 1)),
                           "gpu_busy": busy, "status": "ok"} for r in range(rounds) for v, p, k in rows])
    return pd.concat([frame, pd.DataFrame([{"section": "gpt", "variant": "x", "round": 0, "per_s": 1.0, "ms": 1.0,
                                            "status": "ok"}])], ignore_index=True)


def _typed(layout, gain):
    """A choose_layout that returns typed values, whatever the table."""
    return lambda measured: (layout, gain)


def choose_layout(measured):
    """The lesson's solution: the median kernel time per variant over the rounds."""
    kern = measured.query("section == 'resnet50'").groupby("variant").gpu_kernel_ms.median()
    gain = float(kern["NCHW (default format)"] / kern["channels_last"])
    return ("channels_last" if gain > 1 else "NCHW"), gain


def test_layout_choice_accepts_the_median_kernel_time_ratio(capsys):
    check_layout_choice(_measured(), choose_layout)
    assert "correct" in capsys.readouterr().out


def test_layout_choice_accepts_a_single_measurement_per_variant(capsys):
    check_layout_choice(_measured(rounds=1).drop(columns="round"), choose_layout)
    assert "correct" in capsys.readouterr().out


@pytest.mark.parametrize(("layout", "gain", "hint"), [
    ("channels_last", 4150.0 / 3000.0, "wall-time \\(images/s\\) ratio"),       # images/s instead of kernel time
    ("channels_last", (128 / 3000.0) / (128 / 4150.0), "wall-time"),             # step wall time instead of kernels
    ("NCHW", 22.0 / 42.0, "favours the other layout"),                           # ratio inverted, layout from it
    ("channels_last", 22.0 / 42.0, "upside down"),                              # ratio inverted
    ("channels_last", 1.5, "kernel_gain is off"),
    ("NHWC please", 1.9, "layout is one of"),
    ("channels_last", "1.9", "kernel_gain must be a positive number"),
])
def test_layout_choice_rejects_wrong_answers(layout, gain, hint):
    with pytest.raises(WrongAnswer, match=hint):
        check_layout_choice(_measured(), _typed(layout, gain))


def test_a_wrong_answer_shows_the_hint_alone():
    with pytest.raises(WrongAnswer) as info:
        check_layout_choice(_measured(), _typed("channels_last", 22.0 / 42.0))
    shown = info.value._render_traceback_()
    assert len(shown) == 1 and "upside down" in shown[0] and "kern[" not in shown[0]


@pytest.mark.parametrize("measured", [None, pd.DataFrame({"section": ["gpt"], "variant": ["x"]}),
                                      _measured().query("section == 'gpt'").assign(gpu_kernel_ms=float("nan"))])
def test_layout_choice_without_a_measurement_fails_and_says_why(measured, capsys):
    with pytest.raises(WrongAnswer, match="cannot run here"):
        check_layout_choice(measured, choose_layout)
    assert "correct" not in capsys.readouterr().out


def test_every_check_raises_wrong_answer_not_a_bare_assertion():
    unseen = _unseen()
    with pytest.raises(WrongAnswer):
        check_padded_copy(_unseen, unseen, None, None, None, PROBE)
    with pytest.raises(WrongAnswer):
        check_card_audit(MLP, None)


def test_padded_copy_accepts_must_change_as_any_collection_of_pairs(capsys):
    unseen = _unseen()
    fixed, opt, must = _right(unseen)
    for answer in (sorted(must), frozenset(must), tuple(must)):
        check_padded_copy(_unseen, unseen, fixed, opt, answer, PROBE)
        assert "correct" in capsys.readouterr().out
    with pytest.raises(WrongAnswer, match="set of \\(module, dim\\) pairs"):
        check_padded_copy(_unseen, unseen, fixed, opt, "mid", PROBE)


def test_padded_copy_names_the_tf32_multiple():
    unseen = _unseen()
    _, _, must = _right(unseen)
    by4 = pad_layers(copy.deepcopy(unseen), audit(unseen, precision="tf32").pad_names(), multiple=4)
    with pytest.raises(WrongAnswer, match="TF32's multiple \\(4\\)"):
        check_padded_copy(_unseen, unseen, by4, torch.optim.AdamW(by4.parameters()), must, PROBE)


def test_padded_copy_names_a_forgotten_layer_not_the_tf32_multiple():
    # a layer left out is named, even where its size happens to be a multiple of 4 (no TF32 padding happened)
    unseen = _unseen()
    _, _, must = _right(unseen)
    names = audit(unseen).pad_names()
    sizes = {f.module: f.size for f in audit(unseen).misaligned}
    forgotten = next((n for n in names if sizes.get(n, 1) % 4 == 0), names[-1])
    partial = pad_layers(copy.deepcopy(unseen), [n for n in names if n != forgotten], multiple=8)
    with pytest.raises(WrongAnswer, match=f"something paddable is left: {forgotten}") as err:
        check_padded_copy(_unseen, unseen, partial, torch.optim.AdamW(partial.parameters()), must, PROBE)
    assert "TF32" not in str(err.value)


def test_layout_choice_accepts_numpy_numbers(capsys):
    np = pytest.importorskip("numpy")
    check_layout_choice(_measured(), lambda m: (choose_layout(m)[0], np.float32(choose_layout(m)[1])))
    assert "correct" in capsys.readouterr().out


@pytest.mark.parametrize(("gain", "hint"), [
    (42.0 / 22.0 - 1, "ratio minus 1"),                      # the relative gain
    (100 * 42.0 / 22.0, "percentage"),                       # the ratio in percent
    (100 * (42.0 / 22.0 - 1), "percentage"),                 # the relative gain in percent
    (True, "positive number"),
])
def test_layout_choice_names_each_mistake(gain, hint):
    with pytest.raises(WrongAnswer, match=hint):
        check_layout_choice(_measured(), _typed("channels_last", gain))


def test_layout_choice_names_the_mean_over_rounds():
    measured = _measured()
    slow = (measured.variant == "NCHW (default format)") & (measured["round"] == 2)
    measured.loc[slow, "gpu_kernel_ms"] = 60.0            # one slow round: the mean moves, the median does not
    rn = measured[measured.section == "resnet50"].groupby("variant").gpu_kernel_ms
    mean_ratio = rn.mean()["NCHW (default format)"] / rn.mean()["channels_last"]
    with pytest.raises(WrongAnswer, match="means over the rounds"):
        check_layout_choice(measured, _typed("channels_last", mean_ratio))
    median_ratio = rn.median()["NCHW (default format)"] / rn.median()["channels_last"]
    assert choose_layout(measured)[1] == pytest.approx(median_ratio)
    check_layout_choice(measured, choose_layout)


@pytest.mark.parametrize(("answer", "hint"), [
    (_typed("channels_last", 42.0 / 22.0), "not for another one"),                    # the right values, typed
    (lambda m: ("channels_last", choose_layout(m)[1]), "not for another one"),        # the layout typed
    (lambda m: 1 / 0, "raised ZeroDivisionError"),
    (lambda m: "channels_last", "must return a pair"),
    ("channels_last", "must be a function of measured"),
])
def test_layout_choice_rejects_a_typed_or_broken_function(answer, hint):
    with pytest.raises(WrongAnswer, match=hint):
        check_layout_choice(_measured(), answer)
