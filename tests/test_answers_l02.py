"""Lesson 02's exercise checks accept the right answer and reject the typical wrong ones."""

import copy

import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from fp16lab.course.answers import l02

DEV = torch.device("cpu")


def _loop(*, unscale=True, clip=True, half=False):
    def train(model, batches, lr=0.05, max_norm=0.5):
        if half:
            model = model.half()
        opt = torch.optim.SGD(model.parameters(), lr=lr)
        scaler = torch.amp.GradScaler(DEV.type)
        for x, y in batches:
            with torch.autocast(device_type=DEV.type, dtype=torch.float16):
                loss = F.cross_entropy(model(x), y)
            scaler.scale(loss).backward()
            if unscale:
                scaler.unscale_(opt)
            if clip:
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            scaler.step(opt)
            scaler.update()
            opt.zero_grad(set_to_none=True)
        return model
    return train


@pytest.fixture(scope="module")
def ex1():
    torch.manual_seed(3)
    model = nn.Sequential(nn.Flatten(), nn.Linear(48, 32), nn.ReLU(), nn.Linear(32, 4))
    g = torch.Generator().manual_seed(0)
    batches = [(torch.randn(16, 3, 4, 4, generator=g), torch.randint(0, 4, (16,), generator=g)) for _ in range(4)]
    return model, batches


def test_fixed_loop(ex1, capsys):
    model, batches = ex1
    l02.check_fixed_loop(_loop(), copy.deepcopy(model), batches, DEV)
    assert "✓" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="thousands of times too small"):
        l02.check_fixed_loop(_loop(unscale=False), model, batches, DEV)
    with pytest.raises(AssertionError, match="larger than clipped ones"):
        l02.check_fixed_loop(_loop(clip=False), model, batches, DEV)
    with pytest.raises(AssertionError, match="cannot unscale fp16 gradients"):
        l02.check_fixed_loop(_loop(half=True), model, batches, DEV)
    with pytest.raises(AssertionError, match="not its result"):
        l02.check_fixed_loop(None, model, batches, DEV)


def _probe(skipped, first_scale=2.0**21):
    scales = [first_scale / 2**i for i in range(20)]
    return pd.DataFrame({"step": range(1, 21), "skipped": skipped, "scale": scales})


def test_first_applied(capsys):
    h = _probe([True] * 4 + [False] * 16)
    l02.check_first_applied(h, 5)
    assert "✓" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="not the row index"):
        l02.check_first_applied(h, 4)                       # h.index of the first applied row
    with pytest.raises(AssertionError, match="init_scale=2.0\\*\\*22"):
        l02.check_first_applied(_probe([False] * 20, first_scale=65536.0), 1)   # the default scaler
    with pytest.raises(AssertionError, match="every step was skipped"):
        l02.check_first_applied(_probe([True] * 20), 21)


def _history(n, start_time=0.0, losses=None):
    return pd.DataFrame({"step": range(1, n + 1), "time_s": [start_time + 0.1 * i for i in range(n)],
                         "loss": losses or [2.0 - 0.1 * i for i in range(n)]})


def test_resume(capsys):
    crashed = _history(6)
    reference = _history(9, start_time=5.0)
    resumed = pd.concat([crashed, _history(9, start_time=7.0).iloc[6:]], ignore_index=True)
    l02.check_resume(resumed, crashed, 9, lambda: reference)
    assert "✓" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="trained again"):
        l02.check_resume(_history(9, start_time=3.0), crashed, 9, lambda: reference)       # started over
    with pytest.raises(AssertionError, match="should end at step 9"):
        l02.check_resume(crashed, crashed, 9, lambda: reference)                            # the checkpoint's history
    other = resumed.assign(loss=resumed["loss"] + 1e-7)
    with pytest.raises(AssertionError, match="differ from an uninterrupted run"):
        l02.check_resume(other, crashed, 9, lambda: reference)
