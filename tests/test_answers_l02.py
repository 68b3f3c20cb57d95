"""Lesson 02's exercise checks accept the right answer and reject the typical wrong ones."""

import copy

import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from fp16lab.course.answers import WrongAnswer, l02

DEV = torch.device("cpu")


def _loop(*, unscale=True, clip=True, half=False, zero="after", scaler_on=True, update=True, dtype=torch.float16,
          autocast_on=True, loss_inside=True, fixed_lr=None, fixed_norm=None, step_first=False, clip_first=False,
          returns=True):
    def train(model, batches, lr=0.05, max_norm=0.5):
        if half:
            model = model.half()
        opt = torch.optim.SGD(model.parameters(), lr=fixed_lr or lr)
        scaler = torch.amp.GradScaler(DEV.type, enabled=scaler_on)
        for x, y in batches:
            with torch.autocast(device_type=DEV.type, dtype=dtype, enabled=autocast_on):
                out = model(x)
                if loss_inside:
                    loss = F.cross_entropy(out, y)
            if not loss_inside:
                loss = F.cross_entropy(out, y)
            scaler.scale(loss).backward()
            if step_first:   # the broken loop's order kept: the step before the unscale_ and the clip
                scaler.step(opt)
            if clip_first:   # the clip moved before the step, but also before unscale_
                torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
            if unscale:
                scaler.unscale_(opt)
            if clip and not clip_first:
                torch.nn.utils.clip_grad_norm_(model.parameters(), fixed_norm or max_norm)
            if zero == "before step":
                opt.zero_grad(set_to_none=True)
            if not step_first:
                scaler.step(opt)
            if update:
                scaler.update()
            if zero == "after":
                opt.zero_grad(set_to_none=True)
        return model if returns else None
    return train


def _no_scaler(model, batches, lr=0.05, max_norm=0.5):
    # plain autocast, no GradScaler at all: the same updates as long as nothing underflows
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    for x, y in batches:
        with torch.autocast(device_type=DEV.type, dtype=torch.float16):
            loss = F.cross_entropy(model(x), y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        opt.step()
        opt.zero_grad(set_to_none=True)
    return model


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
    with pytest.raises(AssertionError, match="never clipped"):
        l02.check_fixed_loop(_loop(clip=False), model, batches, DEV)
    with pytest.raises(AssertionError, match="cannot unscale fp16 gradients"):
        l02.check_fixed_loop(_loop(half=True), model, batches, DEV)
    with pytest.raises(AssertionError, match="not its result"):
        l02.check_fixed_loop(None, model, batches, DEV)


@pytest.mark.parametrize(("wrong", "hint"), [
    (_loop(zero="never"), "not cleared every step"),                     # a forgotten step
    (_loop(zero="before step"), r"never between backward\(\) and step\(\)"),  # the right call in the wrong place
    (_loop(scaler_on=False), "enabled GradScaler"),                      # a scaler that does nothing
    (_no_scaler, "enabled GradScaler"),                                  # no scaler at all
    (_loop(update=False), "scaler.update\\(\\) must follow"),            # a forgotten update
    (_loop(autocast_on=False), "do not compute in fp16"),                 # autocast dropped
    (_loop(dtype=torch.bfloat16), "do not compute in fp16"),              # the other 16-bit dtype
    (_loop(loss_inside=False), "the loss both inside"),                   # the loss outside autocast
    (_loop(fixed_norm=1.0), "wrong clip threshold"),                      # another threshold
    (_loop(fixed_norm=0.5), "wrong clip threshold"),                      # the default typed in
    (_loop(fixed_lr=0.05), "learning rate passed in"),                       # the default lr typed in
    (_loop(step_first=True), "unscale_ and the clip go before scaler.step"),  # step -> unscale_ -> clip -> update
    (_loop(step_first=True, unscale=False), "did not act on the gradients the optimizer used"),  # step -> clip -> update
    (_loop(clip_first=True), "still multiplied by the\\s+loss scale"),  # clip -> unscale_ -> step: the wrong order
    (_loop(returns=False), "must return the trained model"),             # trained in place, nothing returned
])
def test_fixed_loop_rejects(ex1, wrong, hint):
    model, batches = ex1
    with pytest.raises(WrongAnswer, match=hint):
        l02.check_fixed_loop(wrong, copy.deepcopy(model), batches, DEV)


def _module_zero_grad(model, batches, lr=0.05, max_norm=0.5):
    # right, with model.zero_grad() instead of optimizer.zero_grad(): the same gradients cleared
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    scaler = torch.amp.GradScaler(DEV.type)
    for x, y in batches:
        model.zero_grad(set_to_none=True)
        with torch.autocast(device_type=DEV.type, dtype=torch.float16):
            loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm)
        scaler.step(opt)
        scaler.update()
    return model


def test_fixed_loop_accepts_model_zero_grad(ex1, capsys):
    model, batches = ex1
    l02.check_fixed_loop(_module_zero_grad, copy.deepcopy(model), batches, DEV)
    assert "✓" in capsys.readouterr().out


def test_fixed_loop_restores_torch(ex1):
    """The check's recording of GradScaler and zero_grad calls is undone, also after a wrong answer."""
    model, batches = ex1
    before = (torch.amp.GradScaler.scale, torch.amp.GradScaler.step, torch.optim.Optimizer.zero_grad, nn.Module.zero_grad)
    with pytest.raises(AssertionError):
        l02.check_fixed_loop(_loop(zero="never"), copy.deepcopy(model), batches, DEV)
    assert (torch.amp.GradScaler.scale, torch.amp.GradScaler.step, torch.optim.Optimizer.zero_grad,
            nn.Module.zero_grad) == before


def test_fixed_loop_cannot_check_without_batches(ex1):
    model, batches = ex1
    with pytest.raises(AssertionError, match="cannot run here"):
        l02.check_fixed_loop(_loop(), model, batches[:1], DEV)


def _probe(skipped, first_scale=2.0**21):
    scales = [first_scale / 2**i for i in range(20)]
    return pd.DataFrame({"step": range(1, 21), "skipped": skipped, "scale": scales})


def test_first_applied(capsys):
    h = _probe([True] * 4 + [False] * 16)
    l02.check_first_applied(h, 5)
    assert "✓" in capsys.readouterr().out
    with pytest.raises(WrongAnswer, match="one step too early"):
        l02.check_first_applied(h, 4)                       # h.index of the first applied row (also: the count of skips)
    with pytest.raises(WrongAnswer, match="not that step"):
        l02.check_first_applied(h, 1)                       # the first skipped step
    with pytest.raises(WrongAnswer, match="not that step"):
        l02.check_first_applied(h, 6)                       # one too far
    with pytest.raises(AssertionError, match="starting at 2\\*\\*22"):
        l02.check_first_applied(_probe([False] * 20, first_scale=65536.0), 1)   # the default scaler
    with pytest.raises(AssertionError, match="every step was skipped"):
        l02.check_first_applied(_probe([True] * 20), 21)
    with pytest.raises(WrongAnswer, match="not a Series"):
        l02.check_first_applied(h, h.loc[~h.skipped, "step"].iloc[:1])   # a Series, not the number
    with pytest.raises(WrongAnswer, match="did not start at 2\\*\\*22"):
        l02.check_first_applied(_probe([True] * 4 + [False] * 16, first_scale=2.0**22), 5)   # init_scale=2**23


def _run_by_hand(model0, batches, steps=8, every=2):
    """The notebook's run_by_hand, on the test's model and batches."""
    def run(save_state, load_state, path, *, crash_in=None, resume=False):
        model = copy.deepcopy(model0)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        scaler = torch.amp.GradScaler(DEV.type, init_scale=2.0**10, growth_interval=3)
        start = load_state(path, model, opt, scaler) + 1 if resume else 1
        for step in range(start, steps + 1):
            if step == crash_in:
                raise RuntimeError(f"simulated crash in step {step}")
            x, y = batches[(step - 1) % len(batches)]
            with torch.autocast(device_type=DEV.type, dtype=torch.float16):
                loss = F.cross_entropy(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
            opt.zero_grad(set_to_none=True)
            if step % every == 0:
                save_state(path, model, opt, scaler, step)
        return model, opt, scaler
    return run


def _save(*, scaler=True, optimizer=True, objects=False, model_state=True):
    def save_state(path, model, opt, sc, step):
        if objects:
            torch.save({"model": model, "optimizer": opt, "scaler": sc, "step": step}, path)
            return
        state = {"step": step}
        if model_state:
            state["model"] = model.state_dict()
        if optimizer:
            state["optimizer"] = opt.state_dict()
        if scaler:
            state["scaler"] = sc.state_dict()
        torch.save(state, path)
    return save_state


def _save_scale_only(path, model, opt, sc, step):
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "scale": sc.get_scale(), "step": step},
               path)


def _load_scale_only(path, model, opt, sc):
    # rebuilds the scaler from its scale alone: the growth tracker restarts at 0
    state = torch.load(path, weights_only=True)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["optimizer"])
    sc.load_state_dict({**sc.state_dict(), "scale": state["scale"]})
    return state["step"]


def _load_objects(path, model, opt, sc):
    # whole objects, loaded with weights_only=False (can run code from the file)
    state = torch.load(path, weights_only=False)
    model.load_state_dict(state["model"].state_dict())
    opt.load_state_dict(state["optimizer"].state_dict())
    sc.load_state_dict(state["scaler"].state_dict())
    return state["step"]


def _load(*, offset=0):
    def load_state(path, model, opt, sc):
        state = torch.load(path, weights_only=True)
        if "model" in state:
            model.load_state_dict(state["model"])
        if "optimizer" in state:
            opt.load_state_dict(state["optimizer"])
        if "scaler" in state:
            sc.load_state_dict(state["scaler"])
        return state["step"] + offset
    return load_state


def test_resume_by_hand(ex1, tmp_path, capsys):
    model, batches = ex1
    l02.check_resume_by_hand(_save(), _load(), _run_by_hand(model, batches), str(tmp_path), crash_in=6)
    assert "✓" in capsys.readouterr().out


@pytest.mark.parametrize(("save", "load", "hint"), [
    (_save(scaler=False), _load(), "growth tracker"),                       # a forgotten piece
    (_save_scale_only, _load_scale_only, "growth tracker"),                 # the scale alone
    (_save(objects=True), _load_objects, "weights_only=True\\)"),            # whole objects, unsafe load
    (_save(optimizer=False), _load(), "Adam's moments"),                    # another
    (_save(model_state=False), _load(), "weights after load_state"),        # the weights themselves forgotten
    (_save(objects=True), _load(), "state_dict\\(\\)s, not the objects"),   # whole objects, weights_only load
    (_save(), _load(offset=1), "returned another step"),                    # off by one: the next step
    (_save(), lambda path, model, opt, sc: None, "an int"),                 # nothing returned
])
def test_resume_by_hand_rejects(ex1, tmp_path, save, load, hint):
    model, batches = ex1
    with pytest.raises(WrongAnswer, match=hint):
        l02.check_resume_by_hand(save, load, _run_by_hand(model, batches), str(tmp_path), crash_in=6)


def test_resume_by_hand_cannot_check_without_folder(ex1, tmp_path):
    model, batches = ex1
    with pytest.raises(WrongAnswer, match="cannot run here"):
        l02.check_resume_by_hand(_save(), _load(), _run_by_hand(model, batches), str(tmp_path / "gone"), crash_in=6)
