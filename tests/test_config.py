"""Quick mode: one switch, read from the environment."""

from __future__ import annotations

import pytest
import torch

from fp16lab.labs.runtime.quick import is_quick, mode, pick


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    monkeypatch.delenv("FP16LAB_QUICK", raising=False)
    monkeypatch.delenv("CI", raising=False)


def test_explicit_switch_wins(monkeypatch):
    monkeypatch.setenv("FP16LAB_QUICK", "1")
    assert is_quick() and pick(1, 2) == 1
    monkeypatch.setenv("FP16LAB_QUICK", "0")
    monkeypatch.setenv("CI", "true")
    assert not is_quick() and pick(1, 2) == 2
    assert mode().reason == "FP16LAB_QUICK=0"


def test_ci_means_quick(monkeypatch, fake_gpu):
    fake_gpu("hopper")
    assert not is_quick()
    monkeypatch.setenv("CI", "github-actions")
    assert is_quick() and mode().reason == "CI is set"


def test_no_gpu_means_quick(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    m = mode()
    assert m.quick and m.reason == "no CUDA GPU"
    assert "QUICK MODE" in str(m) and "QUICK MODE" in m._repr_html_()


def test_bad_value_is_quoted(monkeypatch):
    monkeypatch.setenv("FP16LAB_QUICK", "maybe")
    with pytest.raises(ValueError, match="'maybe'"):
        mode()


def test_smoke_keeps_full_sizes_and_shortens_steps(monkeypatch, fake_gpu):
    fake_gpu("hopper")
    monkeypatch.setenv("FP16LAB_SMOKE", "1")
    assert not is_quick() and mode().name == "full-smoke"
    assert pick(1, 100, smoke=10) == 10 and pick(1, 100) == 100
    monkeypatch.setenv("FP16LAB_QUICK", "1")
    assert pick(1, 100, smoke=10) == 1 and mode().name == "quick"


def test_live_gpu_is_full_mode_on_a_cuda_gpu(monkeypatch, fake_gpu):
    from fp16lab.labs.runtime.quick import live_gpu

    fake_gpu("hopper")
    assert live_gpu()
    monkeypatch.setenv("FP16LAB_QUICK", "1")
    assert not live_gpu()
    fake_gpu("none")
    monkeypatch.setenv("FP16LAB_QUICK", "0")  # full sizes forced on a CPU: still nothing to measure live
    assert not live_gpu()
