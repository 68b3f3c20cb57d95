"""Lesson 01's exercise checks accept the right answer and reject the typical wrong ones."""

import pytest
import torch

from fp16lab.course.answers import l01

RANGES = {"pixel values": 256, "ImageNet labels": 1000, "positions in a 4096-token context": 4096,
          "GPT-2 token ids": 50257}
RIGHT = {"pixel values": "fp16", "ImageNet labels": "fp16", "positions in a 4096-token context": "fp32",
         "GPT-2 token ids": "fp32"}


def test_storage(capsys):
    l01.check_storage(dict(RIGHT), RANGES)
    assert capsys.readouterr().out == "✓ correct\n"
    fits_range = {k: "fp16" for k in RANGES}                                   # 50256 < 65504, so fp16?
    bf16_range = {**RIGHT, "positions in a 4096-token context": "bf16", "GPT-2 token ids": "bf16"}
    for wrong in (fits_range, bf16_range):
        with pytest.raises(AssertionError, match="range is not precision"):
            l01.check_storage(wrong, RANGES)
    with pytest.raises(AssertionError, match=r"\['ImageNet labels', 'pixel values'\] fit a smaller"):
        l01.check_storage({k: "fp32" for k in RANGES}, RANGES)
    with pytest.raises(AssertionError, match="one entry per name"):
        l01.check_storage({"pixel values": "fp16"}, RANGES)


def _grads():
    g = torch.Generator().manual_seed(0)
    return [torch.randn(1000, generator=g) * 1e-3, torch.randn(500, generator=g) * 0.05]


def test_static_scale(capsys):
    grads = _grads()
    largest = max(t.abs().max().item() for t in grads)
    right = 1.0
    while (2 * right) * largest <= 65504:
        right *= 2
    l01.check_static_scale(right, grads)
    assert "✓" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="some gradient overflows"):
        l01.check_static_scale(2 * right, grads)                       # doubled once too often
    with pytest.raises(AssertionError, match="a power of two"):
        l01.check_static_scale(65504 / largest, grads)                 # not rounded to a power of two
    with pytest.raises(AssertionError, match="keep doubling"):
        l01.check_static_scale(right / 2, grads)


def _fake(lo, hi, seed):
    g = torch.Generator().manual_seed(seed)
    exps = torch.empty(20_000, dtype=torch.float64).uniform_(lo, hi, generator=g)
    signs = torch.randint(0, 2, (20_000,), generator=g) * 2 - 1
    return (signs * torch.exp2(exps)).float()


def test_decisions(capsys):
    a, b = _fake(-32, -6, 1), _fake(-44, 4, 2)
    best = max(2.0**k for k in range(41) if (a.double() * 2.0**k).abs().max() < 65520)
    l01.check_decisions("fp16", "bf16", best, a, b)
    assert "✓" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="look again at grads_b"):
        l01.check_decisions("fp16", "fp16", best, a, b)                  # judged on overflow (or underflow) alone
    with pytest.raises(AssertionError, match="look again at grads_a"):
        l01.check_decisions("bf16", "bf16", best, a, b)
    with pytest.raises(AssertionError, match="at best_scale_a something overflows"):
        l01.check_decisions("fp16", "bf16", 2 * best, a, b)
