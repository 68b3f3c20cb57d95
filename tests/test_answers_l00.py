"""Lesson 00's exercise checks accept the right answer and reject the typical wrong ones."""

import pandas as pd
import pytest
import torch

from fp16lab.course.answers import l00
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
    with pytest.raises(AssertionError, match="fails a correct FP16 product"):
        l00.check_tolerance(1e-5, bf16, a, b)
    with pytest.raises(AssertionError, match="passes a BF16 product"):
        l00.check_tolerance(1e-2, bf16, a, b)
    with pytest.raises(AssertionError, match="not the BF16 error"):
        l00.check_tolerance(2 * fp16, fp16, a, b)
    with pytest.raises(AssertionError, match="assign both"):
        l00.check_tolerance(None, bf16, a, b)


def test_fp16_accumulation(capsys):
    l00.check_fp16_accumulation({"RTX 4090D", "RTX 3060"}, CARDS)
    assert "✓" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="data-center parts run both"):
        l00.check_fp16_accumulation({"A100", "H200"}, CARDS)
    with pytest.raises(AssertionError, match="compare fp16_acc16 with fp16"):
        l00.check_fp16_accumulation(set(CARDS), CARDS)
    with pytest.raises(AssertionError, match="exactly as they are written"):
        l00.check_fp16_accumulation({"RTX 4090 D"}, CARDS)
    assert PEAK_TFLOPS["RTX 4090D"].fp16_acc16 == 2 * PEAK_TFLOPS["RTX 4090D"].fp16  # the premise, cited


def _classroom(rule):
    return pd.DataFrame({"recommended": {n: rule(n, c) for n, c in ROOM.items()}})


def _right(name, cap):
    f = chip_features(cap, name)
    return "bf16" if f["bf16_native"] else "fp16" if f["fp16_tensor_cores"] else "fp32"


def test_classroom(capsys):
    l00.check_classroom(_classroom(_right), ROOM)
    assert "✓" in capsys.readouterr().out
    no_name = _classroom(lambda n, c: _right(None, c))       # forgets the GTX 16xx rule
    fp16_first = _classroom(lambda n, c: "fp16" if chip_features(c, n)["fp16_tensor_cores"] else _right(n, c))
    for wrong, who in ((no_name, "GTX 1660 Ti"), (fp16_first, "A100")):
        with pytest.raises(AssertionError, match=rf"look again at \[.*'{who}'.*did you pass the name"):
            l00.check_classroom(wrong, ROOM)
    with pytest.raises(AssertionError, match="one row per GPU"):
        l00.check_classroom(_classroom(_right).drop("GTX 1080"), ROOM)
