"""Lesson 00's exercise checks accept the right answer and reject the typical wrong ones (PyTorch as the oracle)."""

import pandas as pd
import pytest
import torch

from fp16lab.course.answers import WrongAnswer, l00
from fp16lab.hardware import PEAK_TFLOPS, chip_features

CARDS = ["RTX 4090D", "RTX 3060", "A100", "H200", "L4", "T4"]
ROOM = {"RTX 4090D": (8, 9), "RTX 3060": (8, 6), "GTX 1660 Ti": (7, 5), "Tesla T4": (7, 5),
        "A100": (8, 0), "GTX 1080": (6, 1)}


@pytest.fixture(scope="module")
def ab():
    g = torch.Generator().manual_seed(0)
    return torch.randn(128, 128, generator=g), torch.randn(128, 128, generator=g)


def _err(a, b, dtype):
    ref = a.double() @ b.double()
    return (((a.to(dtype) @ b.to(dtype)).double() - ref).norm() / ref.norm()).item()


def test_tolerance(ab, capsys):
    a, b = ab
    fp16, bf16 = _err(a, b, torch.float16), _err(a, b, torch.bfloat16)
    l00.check_tolerance((fp16 * bf16) ** 0.5, bf16, a, b)
    assert "✓" in capsys.readouterr().out
    with pytest.raises(WrongAnswer, match="fails a correct FP16 product"):
        l00.check_tolerance(1e-5, bf16, a, b)
    with pytest.raises(WrongAnswer, match="passes a BF16 product"):
        l00.check_tolerance(1e-2, bf16, a, b)
    with pytest.raises(WrongAnswer, match="not the BF16 error"):
        l00.check_tolerance(2 * fp16, fp16, a, b)
    with pytest.raises(WrongAnswer, match="not the BF16 error"):        # the error in FP32, not BF16
        l00.check_tolerance(2 * fp16, _err(a, b, torch.float32), a, b)
    with pytest.raises(WrongAnswer, match="looks typed in"):           # the stored output's value, copied
        l00.check_tolerance((fp16 * bf16) ** 0.5, float(f"{bf16:.1e}"), a, b)
    with pytest.raises(WrongAnswer, match="looks typed in"):
        l00.check_tolerance((fp16 * bf16) ** 0.5, float(f"{bf16:.3e}"), a, b)
    with pytest.raises(WrongAnswer, match="assign both"):
        l00.check_tolerance(None, bf16, a, b)
    with pytest.raises(WrongAnswer, match="Python floats"):
        l00.check_tolerance(torch.tensor(1e-3), bf16, a, b)
    with pytest.raises(WrongAnswer, match="cannot run here.*section 5a"):
        l00.check_tolerance(1e-3, bf16, None, b)


def _right_pays(name):
    p = PEAK_TFLOPS[name]
    return p.fp16_acc16 >= 1.5 * p.fp16


def test_fp16_accumulation(capsys):
    l00.check_fp16_accumulation(_right_pays, CARDS)
    l00.check_fp16_accumulation(lambda n: PEAK_TFLOPS[n].fp16_acc16 > PEAK_TFLOPS[n].fp16, CARDS)  # a strict >
    assert capsys.readouterr().out.count("✓") == 2
    assert {c for c in CARDS if _right_pays(c)} == {"RTX 4090D", "RTX 3060"}   # the premise, from cited peaks
    wrong = {  # a wrong answer -> the mistake its hint names
        "big chips": (lambda n: n in {"A100", "H200"}, "data-center parts run both"),
        "ties count": (lambda n: PEAK_TFLOPS[n].fp16_acc16 >= PEAK_TFLOPS[n].fp16, "count a tie as no gain"),
        "wrong field": (lambda n: PEAK_TFLOPS[n].fp16_acc16 >= 1.5 * PEAK_TFLOPS[n].fp32, "not with fp32"),
        "hard-coded": (lambda n: n in {"RTX 4090D", "RTX 3060"}, "answers from a list of names"),
        "a lookup": (lambda n: {"RTX 4090D": True, "RTX 3060": True, "A100": False, "H200": False, "L4": False,
                                "T4": False}[n], "raised KeyError"),
        "a difference": (lambda n: PEAK_TFLOPS[n].fp16_acc16 - PEAK_TFLOPS[n].fp16 > 50, "a difference in TFLOP/s"),
        "a bigger gap": (lambda n: (PEAK_TFLOPS[n].fp16_acc16 or 0) - (PEAK_TFLOPS[n].fp16 or 0) > 100,
                         "a gain is a ratio"),
        "not a function": ({"RTX 4090D", "RTX 3060"}, "define a function pays_off"),
        "no verdict": (lambda n: None, "must return True or False"),
    }
    for label, (answer, hint) in wrong.items():
        with pytest.raises(WrongAnswer, match=hint):
            l00.check_fp16_accumulation(answer, CARDS)
        assert label


def _right(name, cap):
    f = chip_features(cap, name)
    return "bf16" if f["bf16_native"] else "fp16" if f["fp16_tensor_cores"] else "fp32"


def _classroom(rule):
    return pd.DataFrame({"recommended": {n: rule(n, c) for n, c in ROOM.items()}})


def test_classroom(capsys):
    l00.check_classroom(_classroom(_right), ROOM, _right)
    assert "✓" in capsys.readouterr().out
    no_name = lambda n, c: _right(None, c)  # noqa: E731  forgets the GTX 16xx rule
    fp16_first = lambda n, c: "fp16" if chip_features(c, n)["fp16_tensor_cores"] else _right(n, c)  # noqa: E731
    table = _classroom(_right)["recommended"].to_dict()
    looked_up = lambda n, c: table[n]  # noqa: E731  a hard-coded table of room's answers
    this_gpu = lambda n, c: "bf16"  # noqa: E731  is_bf16_supported() on this machine, for every row
    emulated = lambda n, c: "bf16" if c >= (7, 0) and not n.startswith("GTX 16") else _right(n, c)  # noqa: E731
    cases = [(no_name, r"\['GTX 1650', 'GTX 1660 Ti'\]: did you pass the name"),
             (fp16_first, r"check bf16_native before fp16_tensor_cores"),
             (looked_up, r"raised KeyError: derive the answer from chip_features"),
             (this_gpu, r"same answer: torch.cuda.is_bf16_supported\(\)"),
             (emulated, r"says bf16 for .*'Tesla T4'.*emulated")]
    for rule, hint in cases:
        with pytest.raises(WrongAnswer, match=hint):
            l00.check_classroom(_classroom(lambda n, c: _right(n, c)), ROOM, rule)
    with pytest.raises(WrongAnswer, match="one row per GPU"):
        l00.check_classroom(_classroom(_right).drop("GTX 1080"), ROOM, _right)
    with pytest.raises(WrongAnswer, match="disagrees with your recommend"):
        l00.check_classroom(_classroom(lambda n, c: "fp32"), ROOM, _right)
    with pytest.raises(WrongAnswer, match="define a function recommend"):
        l00.check_classroom(_classroom(_right), ROOM, None)


def test_a_wrong_answer_shows_the_hint_alone():
    with pytest.raises(WrongAnswer) as info:
        l00.check_fp16_accumulation(lambda n: n in {"RTX 4090D", "RTX 3060"}, CARDS)
    shown = info.value._render_traceback_()
    assert len(shown) == 1 and shown[0].startswith("✗ Hint:") and "fp16_acc16 >=" not in shown[0]


def test_round_two_wrong_answers(ab, capsys):
    """The wrong answers of the second review: a name rule, another field, an exact 2, a strict sm_80."""
    a, b = ab
    l00.check_tolerance(2.0**-11, _err(a, b, torch.bfloat16), a, b)      # FP16's unit roundoff is a fine bound
    assert "✓" in capsys.readouterr().out
    assert "RTX 6000 Ada" not in PEAK_TFLOPS                             # the hidden rows are given back
    for answer, hint in [
        (lambda n: "RTX" in n, "workstation Ada card"),
        (lambda n: PEAK_TFLOPS[n].tf32 == PEAK_TFLOPS[n].fp32, "or another field"),
        (lambda n: PEAK_TFLOPS[n].fp16_acc16 / (PEAK_TFLOPS[n].fp16 or 1e9) >= 2, "compare with a margin"),
    ]:
        with pytest.raises(WrongAnswer, match=hint):
            l00.check_fp16_accumulation(answer, CARDS)
    assert "RTX 6000 Ada" not in PEAK_TFLOPS

    def strict(name, cap):
        f = chip_features(cap, name)
        return "bf16" if tuple(cap) > (8, 0) else "fp16" if f["fp16_tensor_cores"] else "fp32"
    with pytest.raises(WrongAnswer, match="sm_80 itself"):
        l00.check_classroom(_classroom(strict), ROOM, strict)


def test_pays_off_may_not_borrow_the_lessons_rule(capsys):
    """Lesson 00 cell 28 calls fp16lab.labs.setup.acc16_cited: a pays_off that calls it, by any name, is refused,
    and the lab's function works again afterwards."""
    from fp16lab.hardware import PEAK_TFLOPS
    from fp16lab.labs.setup import acc16_cited

    alias = acc16_cited
    for borrowed in (lambda n: acc16_cited(PEAK_TFLOPS[n]) == "faster", lambda n: alias(PEAK_TFLOPS[n]) != "same"):
        with pytest.raises(AssertionError, match="calls the lesson's acc16_cited"):
            l00.check_fp16_accumulation(borrowed, ["RTX 4090D", "H200"])
    assert acc16_cited(PEAK_TFLOPS["RTX 4090D"]) == "faster"
