"""Lesson 04's exercise checks accept the right answer and reject the typical wrong ones."""

import copy

import numpy as np
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


class WideIsland(Net):
    def forward(self, x):
        with torch.autocast(device_type=x.device.type, enabled=False):  # FP32 from the input on
            h = self.norm(self.mid(torch.relu(self.inp(x.float()))))
        return self.out(h)


class NoCast(Net):
    def forward(self, x):
        h = torch.relu(self.inp(x))
        with torch.autocast(device_type=x.device.type, enabled=False):  # forgot .float()
            h = self.norm(self.mid(h))
        return self.out(h)


class Scaled(Net):
    """Hides the overflow: mid runs in FP16 on an input divided by 1024 (LayerNorm undoes the scale)."""

    def forward(self, x):
        return self.out(self.norm(self.mid(torch.relu(self.inp(x)) / 1024)))


class BF16Island(Net):
    def forward(self, x):
        h = torch.relu(self.inp(x))
        with torch.autocast(device_type=x.device.type, dtype=torch.bfloat16):  # another 16-bit dtype
            h = self.norm(self.mid(h))
        return self.out(h.float())


class IslandBackToFP16(Net):
    """The right island, whose output goes back to FP16 by hand afterwards: right, and runs under autocast only."""

    def forward(self, x):
        h = torch.relu(self.inp(x))
        with torch.autocast(device_type=x.device.type, enabled=False):
            h = self.norm(self.mid(h.float()))
        return self.out(h.half())


class IslandWithoutReLU(Net):
    """The right island and the copied weights, but the functional ReLU left out of the forward."""

    def forward(self, x):
        h = self.inp(x)
        with torch.autocast(device_type=x.device.type, enabled=False):
            h = self.norm(self.mid(h.float()))
        return self.out(h)


class Typo(Net):
    def forward(self, x):
        return self.out(self.norm(self.midd(torch.relu(self.inp(x)))))


def _sequential(model, island: slice):
    """The same net rebuilt as nn.Sequential with copied weights and an FP32 island over layers[island]."""
    layers = copy.deepcopy([model.inp, nn.ReLU(), model.mid, model.norm, model.out])

    class Seq(nn.Sequential):
        def forward(self, x):
            for i, layer in enumerate(self):
                if i in range(len(self))[island]:
                    with torch.autocast(device_type=x.device.type, enabled=False):
                        x = layer(x.float())
                else:
                    x = layer(x)
            return x

    return Seq(*layers)


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
    with pytest.raises(AssertionError, match="inp run in FP32 but never see values"):
        l04.check_overflow_fix("mid", _copy(WideIsland, model), model, x)
    with pytest.raises(AssertionError, match="nothing is cast for you"):
        l04.check_overflow_fix("mid", _copy(NoCast, model), model, x)
    with pytest.raises(AssertionError, match="nothing runs in FP16"):
        l04.check_overflow_fix("mid", _copy(AllFP32, model), model, x)
    with pytest.raises(AssertionError, match="did you copy the weights"):
        l04.check_overflow_fix("mid", Island(), model, x)
    with pytest.raises(AssertionError, match="has ex1_model's weights, but .* something other than Ex1Net.forward"):
        l04.check_overflow_fix("mid", _copy(IslandWithoutReLU, model), model, x)
    with pytest.raises(AssertionError, match=r"forward raised AttributeError: [^\n]*$") as info:  # a typo, not a dtype
        l04.check_overflow_fix("mid", _copy(Typo, model), model, x)
    assert "nothing is cast for you" not in str(info.value)
    l04.check_overflow_fix("mid", _copy(IslandBackToFP16, model), model, x)  # ran once more in FP32, it used to crash
    assert "✓" in capsys.readouterr().out
    l04.check_overflow_fix("mid", _sequential(model, slice(2, 4)), model, x)  # the right island, as a Sequential
    assert "✓" in capsys.readouterr().out
    with pytest.raises(AssertionError, match="out run in FP32 but never see"):
        l04.check_overflow_fix("mid", _sequential(model, slice(2, 5)), model, x)  # mid, norm, out
    with pytest.raises(AssertionError, match="inp run in FP32 but never see"):
        l04.check_overflow_fix("mid", _sequential(model, slice(0, 4)), model, x)  # inp, ReLU, mid, norm
    with pytest.raises(AssertionError, match="mid itself runs in float16"):
        l04.check_overflow_fix("mid", _copy(Scaled, model), model, x)
    with pytest.raises(AssertionError, match="mid itself runs in bfloat16"):
        l04.check_overflow_fix("mid", _copy(BF16Island, model), model, x)


def _run_of(rows, asked=None):
    """A stand-in for the lesson's explosion_run(max_norm, seed): a history (loss, grad_norm, skipped) per
    threshold, the same on every seed, or per seed where ``rows[max_norm]`` is a dict {seed: row}."""
    def run(max_norm, seed=0):
        if max_norm is None:  # unclipped: section 4's run, which fit stops on seed 0
            row = rows.get(None, {0: EXPLODES, 1: NET, 2: NET})
            norms, losses, finished = row[seed] if isinstance(row, dict) else row
            return pd.DataFrame({"loss": losses, "grad_norm": norms}), None if finished else RuntimeError("diverged")
        if asked is not None:
            asked.append((max_norm, seed))
        row = rows[max_norm]
        norms, losses, finished = row[seed] if isinstance(row, dict) else row
        hist = pd.DataFrame({"loss": losses, "grad_norm": norms, "skipped": [False] * len(norms)})
        return hist, None if finished else RuntimeError("diverged")
    return run


NET = ([6.0] * 3 + [2.0] * 7, [1.0] * 5 + [0.2] * 5, True)   # at threshold 5: clips 30 %, learns: a safety net
EXPLODES = ([50.0] * 4, [1.0] * 4, False)
RUNS = _run_of({
    5.0: NET,
    1.0: ([3.0] * 10, [1.0] * 5 + [0.3] * 5, True),                 # clips every step: a brake
    100.0: ([50.0] * 10, [1.0] * 10, True),                         # too loose: finishes, does not learn
    25.0: ([30.0] * 10, [1.0] * 5 + [200.0] + [0.3] * 4, True),     # finishes and ends low, but blew up on the way
    1000.0: ([50.0] * 4, [1.0] * 4, False),                         # explodes
    0.05: ([3.0] * 10, [1.0] * 10, True),                           # far too low: clips every step and cannot learn
    # tuned on seed 0 alone: a safety net there, a brake on seed 1 (its gradients run larger)
    4.0: {0: ([6.0] * 3 + [2.0] * 7, [1.0] * 5 + [0.2] * 5, True), 1: ([6.0] * 8 + [2.0] * 2, [1.0] * 5 + [0.2] * 5, True),
          2: NET},
    # tuned on seed 0 alone: seed 2 explodes, seed 1 blows up on the way
    8.0: {0: ([6.0] * 3 + [2.0] * 7, [1.0] * 5 + [0.2] * 5, True), 1: ([6.0] * 10, [1.0] * 5 + [40.0] + [0.3] * 4, True),
          2: ([50.0] * 4, [1.0] * 4, False)},
})


def test_clip_threshold(capsys):
    asked = []
    l04.check_clip_threshold(5.0, _run_of({5.0: NET}, asked), 10)
    assert capsys.readouterr().out == "✓ correct: a safety net that stops the explosion and lets the run learn\n"
    assert asked == [(5.0, seed) for seed in l04.CLIP_SEEDS] and len(l04.CLIP_SEEDS) >= 3  # judged on several seeds
    with pytest.raises(AssertionError, match="on seed 0 the threshold acts on 100% of the applied steps"):
        l04.check_clip_threshold(1.0, RUNS, 10)
    with pytest.raises(AssertionError, match="does not learn"):
        l04.check_clip_threshold(100.0, RUNS, 10)
    with pytest.raises(AssertionError, match="acts on 100%.*a brake"):  # too low: not "lets too large updates through"
        l04.check_clip_threshold(0.05, RUNS, 10)
    with pytest.raises(AssertionError, match="on seed 0 the run still explodes"):
        l04.check_clip_threshold(1000.0, RUNS, 10)
    with pytest.raises(AssertionError, match="rose to 200×"):
        l04.check_clip_threshold(25.0, RUNS, 10)
    with pytest.raises(AssertionError, match="positive, finite"):
        l04.check_clip_threshold(-1.0, RUNS, 10)
    l04.check_clip_threshold(np.float64(5.0), RUNS, 10)  # pandas' idxmax/idxmin give NumPy numbers: accepted
    assert "✓" in capsys.readouterr().out


def test_clip_threshold_tuned_on_seed_0_alone_fails():
    """A threshold that is a safety net on seed 0 but not on another seed used to pass (the check ran seed 0 only)."""
    with pytest.raises(AssertionError, match="on seed 1 the threshold acts on 80% of the applied steps"):
        l04.check_clip_threshold(4.0, RUNS, 10)
    with pytest.raises(AssertionError, match=r"on seed 1 the run finishes, but on the way its loss rose to 40×"):
        l04.check_clip_threshold(8.0, RUNS, 10)
    with pytest.raises(AssertionError, match="on seed 2 the run still explodes"):
        l04.check_clip_threshold(8.0, _run_of({8.0: {0: NET, 1: NET, 2: ([50.0] * 4, [1.0] * 4, False)}}), 10)
    l04.check_clip_threshold(4.0, RUNS, 10, seeds=(0,))  # what the old check judged: seed 0 alone passes it


def test_clip_threshold_rejects_a_weakened_run():
    """The check runs the learner's explosion_run: one that no longer explodes without clipping (a lower learning
    rate, fewer steps, the steep feature removed) would pass any threshold, so it is rejected first."""
    weakened = _run_of({None: NET, 1000.0: ([50.0] * 3 + [2.0] * 7, [1.0] * 5 + [0.2] * 5, True)})
    with pytest.raises(AssertionError, match="no longer explodes on seeds 0, 1, 2.*change only max_norm"):
        l04.check_clip_threshold(1000.0, weakened, 10)
    with pytest.raises(AssertionError, match="no longer explodes"):  # whatever the threshold
        l04.check_clip_threshold(5.0, _run_of({None: NET, 5.0: NET}), 10)
    # the lesson's run explodes unclipped on seed 0 only: enough
    l04.check_clip_threshold(5.0, _run_of({None: {0: EXPLODES, 1: NET, 2: NET}, 5.0: NET}), 10)


def _square_fn(cast=torch.float32, decorate: bool = True, factor: float = 2.0, upstream: bool = True,
               island: bool = False, half_backward: bool = False):
    """SumSquares variants: the right one and the typical wrong ones."""
    class Fn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x.half() if half_backward else x)
            if island:  # autocast off inside, but x still arrives in FP16
                with torch.autocast(device_type=x.device.type, enabled=False):
                    return (x * x).sum(dim=-1)
            return (x * x).sum(dim=-1)

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            if half_backward:  # forward in FP32, backward in FP16
                return factor * x * grad.half().unsqueeze(-1)
            return factor * x * (grad.unsqueeze(-1) if upstream else 1)

    if decorate:
        fwd = torch.amp.custom_fwd(device_type="cpu", cast_inputs=cast)
        Fn.forward = staticmethod(fwd(Fn.forward))
        Fn.backward = staticmethod(torch.amp.custom_bwd(device_type="cpu")(Fn.backward))
    return Fn


class CastInside(torch.autograd.Function):
    """Also right: an FP32 island inside forward, by hand."""

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        xf = x.float()
        return (xf * xf).sum(dim=-1)

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 2 * x.float() * grad.unsqueeze(-1)


@pytest.fixture(scope="module")
def ex3():
    torch.manual_seed(0)
    return nn.Linear(8, 64), torch.randn(4, 8) * 400


def test_unmodified_function_fails(ex3):
    layer, x = ex3
    with pytest.raises(AssertionError, match="the output still overflows"):
        l04.check_safe_function(_square_fn(decorate=False), layer, x)  # the exercise's SumSquares as given


def test_safe_function(ex3, capsys):
    layer, x = ex3
    for right in (_square_fn(), CastInside):
        l04.check_safe_function(right, layer, x)
        assert "✓" in capsys.readouterr().out
    wrong = {
        "the output still overflows": [_square_fn(cast=None), _square_fn(decorate=False, island=True)],  # no cast; island without .float()
        "the output is bfloat16": [_square_fn(cast=torch.bfloat16)],  # right formula, wrong dtype
        "off by a constant factor": [_square_fn(factor=1.0)],  # forgot the 2
        "ignores the upstream gradient": [_square_fn(upstream=False)],  # tested with ones, this passed
        "the backward computes in float16": [_square_fn(half_backward=True)],  # finite, but FP16 math
    }
    for match, fns in wrong.items():
        for fn in fns:
            with pytest.raises(AssertionError, match=match):
                l04.check_safe_function(fn, layer, x)
    with pytest.raises(AssertionError, match="subclass of torch.autograd.Function"):
        l04.check_safe_function(nn.Linear, layer, x)
    with pytest.raises(AssertionError, match="cannot run here"):
        l04.check_safe_function(_square_fn(), layer, x / 100)  # activations too small to overflow


def test_wrong_answer_shows_only_the_hint(ex3):
    layer, x = ex3
    with pytest.raises(l04.WrongAnswer) as info:
        l04.check_safe_function(_square_fn(factor=1.0), layer, x)
    shown = "".join(info.value._render_traceback_())
    assert shown.startswith("✗ Hint:") and "2 *" not in shown and "def " not in shown
