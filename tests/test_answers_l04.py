"""Lesson 04's exercise checks accept the right answer and reject the typical wrong ones."""

import pandas as pd
import pytest
import torch
from torch import nn

from fp16lab.course.answers import l04


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inp, self.mid, self.norm, self.out = nn.Linear(8, 64), nn.Linear(64, 64), nn.LayerNorm(64), nn.Linear(64, 2)

    def forward(self, x):
        return self.out(self.norm(self.mid(torch.relu(self.inp(x)))))


class Island(Net):
    def forward(self, x):
        h = torch.relu(self.inp(x))
        with torch.autocast(device_type=x.device.type, enabled=False):
            h = self.norm(self.mid(h.float()))
        return self.out(h)


class LateIsland(Net):
    def forward(self, x):
        h = self.mid(torch.relu(self.inp(x)))
        with torch.autocast(device_type=x.device.type, enabled=False):
            return self.out(self.norm(h.float()))


class AllFP32(Net):
    def forward(self, x):
        with torch.autocast(device_type=x.device.type, enabled=False):
            return super().forward(x.float())


@pytest.fixture(scope="module")
def ex1():
    torch.manual_seed(0)
    model = Net()
    with torch.no_grad():
        model.mid.weight.mul_(400.0)
    return model, torch.randn(16, 8) * 300


def _copy(cls, model):
    m = cls()
    m.load_state_dict(model.state_dict())
    return m


def test_overflow_fix(ex1, capsys):
    model, x = ex1
    l04.check_overflow_fix("mid", _copy(Island, model), model, x)
    assert "✓" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="'inp' is not the first module"):
        l04.check_overflow_fix("inp", _copy(Island, model), model, x)
    with pytest.raises(AssertionError, match="still holds inf/NaN"):
        l04.check_overflow_fix("mid", _copy(LateIsland, model), model, x)
    with pytest.raises(AssertionError, match="nothing runs in FP16"):
        l04.check_overflow_fix("mid", _copy(AllFP32, model), model, x)
    with pytest.raises(AssertionError, match="did you copy the weights"):
        l04.check_overflow_fix("mid", Island(), model, x)


def _run_of(rows):
    """A stand-in for the lesson's explosion_run: a history per threshold (loss, grad_norm, skipped)."""
    def run(max_norm):
        norms, losses, finished = rows[max_norm]
        hist = pd.DataFrame({"loss": losses, "grad_norm": norms, "skipped": [False] * len(norms)})
        return hist, None if finished else RuntimeError("diverged")
    return run


RUNS = _run_of({
    5.0: ([6.0] * 3 + [2.0] * 7, [1.0] * 5 + [0.2] * 5, True),      # clips 30 %, learns: a safety net
    1.0: ([3.0] * 10, [1.0] * 5 + [0.3] * 5, True),                 # clips every step: a brake
    100.0: ([50.0] * 10, [1.0] * 5 + [9.0] * 5, True),              # too loose: finishes, does not learn
    1000.0: ([50.0] * 4, [1.0] * 4, False),                         # explodes
})


def test_clip_threshold(capsys):
    l04.check_clip_threshold(5.0, RUNS, 10)
    assert "✓" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="a brake, not a safety net"):
        l04.check_clip_threshold(1.0, RUNS, 10)
    with pytest.raises(AssertionError, match="does not learn"):
        l04.check_clip_threshold(100.0, RUNS, 10)
    with pytest.raises(AssertionError, match="still explodes"):
        l04.check_clip_threshold(1000.0, RUNS, 10)
    with pytest.raises(AssertionError, match="positive, finite"):
        l04.check_clip_threshold(-1.0, RUNS, 10)


def _square_fn(cast: bool, decorate: bool, factor: float):
    class Fn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return (x * x).sum(dim=-1)

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return factor * x * grad.unsqueeze(-1)

    if decorate:
        fwd = torch.amp.custom_fwd(device_type="cpu", cast_inputs=torch.float32 if cast else None)
        Fn.forward = staticmethod(fwd(Fn.forward.__func__ if hasattr(Fn.forward, "__func__") else Fn.forward))
        Fn.backward = staticmethod(torch.amp.custom_bwd(device_type="cpu")(Fn.backward))
    return Fn


def test_safe_function(capsys):
    torch.manual_seed(0)
    layer, x = nn.Linear(8, 64), torch.randn(4, 8) * 100
    l04.check_safe_function(_square_fn(True, True, 2.0), layer, x)
    assert "✓" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="do the inputs reach forward in FP16"):
        l04.check_safe_function(_square_fn(False, False, 2.0), layer, x)      # no decorators
    with pytest.raises(AssertionError, match="do the inputs reach forward in FP16"):
        l04.check_safe_function(_square_fn(False, True, 2.0), layer, x)       # custom_fwd without cast_inputs
    with pytest.raises(AssertionError, match="the gradient is wrong"):
        l04.check_safe_function(_square_fn(True, True, 1.0), layer, x)        # forgot the 2
    with pytest.raises(AssertionError, match="subclass of torch.autograd.Function"):
        l04.check_safe_function(nn.Linear, layer, x)
