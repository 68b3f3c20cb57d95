"""fp16lab.train: the loop against a hand-written torch.amp loop, accumulation, skipped steps,
scheduler, checkpoint/resume, the divergence guard and bad input. CPU half precision is
slow on the CI machine, so the models here are tiny MLPs."""

from __future__ import annotations

import copy
import json
import math
import os
import warnings
from pathlib import Path

import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import fp16lab.precision
import fp16lab.train.loop
import fp16lab.train.run
import fp16lab.train.step
from fp16lab.train import (
    Checkpoint,
    DivergenceGuard,
    Evaluate,
    History,
    ProgressBar,
    Schedule,
    TrainingDiverged,
    amp_step,
    evaluate,
    fit,
    load_checkpoint,
    make_scaler,
    save_checkpoint,
    train_step,
)

DTYPE = {"fp16": torch.float16, "bf16": torch.bfloat16}


@pytest.fixture(autouse=True)
def _quiet_cpu_half_warning():
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*on the CPU runs, but is slow.*")
        yield


def mlp(seed: int = 0, dropout: float = 0.0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Dropout(dropout), nn.Linear(32, 4))


def data(n: int = 64, seed: int = 1) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 12, generator=g)
    y = (x[:, :4].argmax(1)).long()
    return TensorDataset(x, y)


def loader(n: int = 64, batch: int = 8, shuffle: bool = False, seed: int = 2) -> DataLoader:
    gen = torch.Generator().manual_seed(seed) if shuffle else None
    return DataLoader(data(n), batch_size=batch, shuffle=shuffle, generator=gen)


def hand_written(model: nn.Module, batches, opt, precision: str, clip: float | None = None):
    """The oracle: the documented torch.amp recipe, written out."""
    use = precision in DTYPE
    scaler = torch.amp.GradScaler("cpu", enabled=precision == "fp16")
    losses = []
    for x, y in batches:
        with torch.autocast("cpu", dtype=DTYPE.get(precision, torch.float32), enabled=use):
            loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        if clip is not None:
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    return losses, scaler


@pytest.mark.parametrize("precision,tol", [("fp32", 0.0), ("bf16", 1e-2), ("fp16", 1e-3)])
@pytest.mark.parametrize("clip", [None, 0.5])
def test_matches_hand_written_loop(precision: str, tol: float, clip: float | None) -> None:
    a, b = mlp(), mlp()
    oa = torch.optim.Adam(a.parameters(), lr=1e-2)
    ob = torch.optim.Adam(b.parameters(), lr=1e-2)
    ld = loader(64, 8)
    want, scaler = hand_written(a, list(ld), oa, precision, clip)
    hist = fit(b, ld, ob, precision=precision, clip_grad_norm=clip, callbacks=[])
    assert isinstance(hist, History) and len(hist) == len(ld)
    got = hist["loss"].tolist()
    if tol == 0.0:
        assert got == want  # bit-for-bit the same computation in fp32
        for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
            assert torch.equal(pa, pb)
    else:
        torch.testing.assert_close(torch.tensor(got), torch.tensor(want), rtol=tol, atol=tol)
        for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
            torch.testing.assert_close(pa, pb, rtol=10 * tol, atol=10 * tol)
    assert hist["scale"].iloc[-1] == scaler.get_scale()
    assert set(hist.columns) >= {"step", "loss", "accuracy", "scale", "skipped", "grad_norm", "samples_per_s"}
    assert hist["step"].tolist() == list(range(1, len(ld) + 1))
    assert hist["accuracy"].between(0, 1).all() and (hist["samples_per_s"] > 0).all()
    if clip is not None:
        assert (hist["grad_norm"] > 0).all()  # the norm before clipping is recorded


def test_grad_norm_is_the_unscaled_norm_in_fp16() -> None:
    model, opt = mlp(), None
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    ref = mlp()
    x, y = data(16)[:]
    F.cross_entropy(ref(x), y).backward()
    want = torch.linalg.vector_norm(torch.cat([p.grad.flatten() for p in ref.parameters()])).item()
    scaler = make_scaler("fp16", "cpu")
    r = train_step(model, opt, scaler, [(x, y)], precision="fp16")
    assert r.scale_before == 2.0**16 and not r.skipped
    assert math.isclose(r.grad_norm, want, rel_tol=2e-2)  # fp16 forward, so not bit-equal


def test_accumulation_equals_large_batch() -> None:
    big, small = mlp(), mlp()
    ob = torch.optim.SGD(big.parameters(), lr=0.5)
    os_ = torch.optim.SGD(small.parameters(), lr=0.5)
    x, y = data(32)[:]
    scaler = make_scaler("fp32", "cpu")
    rb = train_step(big, ob, scaler, [(x, y)], precision="fp32")
    micro = [(x[i : i + 8], y[i : i + 8]) for i in range(0, 32, 8)]
    rs = train_step(small, os_, scaler, micro, precision="fp32")
    assert math.isclose(rb.loss, rs.loss, rel_tol=1e-6)
    assert math.isclose(rb.grad_norm, rs.grad_norm, rel_tol=1e-5)
    for pb, ps in zip(big.parameters(), small.parameters(), strict=True):
        torch.testing.assert_close(pb, ps, rtol=1e-6, atol=1e-7)
        assert pb.grad is None and ps.grad is None  # zeroed at the boundary
    # through fit: 8 micro-batches of 8 with accum_steps=4 are 2 steps of 32
    m = mlp()
    h = fit(m, loader(64, 8), torch.optim.SGD(m.parameters(), lr=0.1), precision="fp32", accum_steps=4, callbacks=[])
    assert len(h) == 2 and (h["samples"] == 32).all()


def _inf_on(calls: set[int]):
    count = {"n": 0}

    def loss_fn(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        count["n"] += 1
        loss = F.cross_entropy(out, y)
        return loss * math.inf if count["n"] in calls else loss

    return loss_fn


def test_skipped_steps_counted_and_scheduler_not_stepped() -> None:
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    bad = {2, 5}
    h = fit(model, loader(64, 8), opt, precision="fp16", loss_fn=_inf_on(bad), callbacks=[Schedule(sched)])
    assert h["skipped"].tolist() == [i in bad for i in range(1, 9)]
    assert h.n_skipped == 2
    scales = [2.0**16] + h["scale"].tolist()
    for i in range(1, 9):
        assert scales[i] == (scales[i - 1] * 0.5 if i in bad else scales[i - 1])
    # 8 steps, 2 skipped: the scheduler stepped 6 times, and the lr used is unchanged after a skip
    assert sched.last_epoch == 6
    lrs = h["lr"].tolist()
    assert lrs[2] == lrs[1]  # step 2 was skipped, so step 3 runs at step 2's lr
    assert lrs[1] == lrs[0] * 0.5


def test_skipped_step_leaves_weights_unchanged() -> None:
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    before = copy.deepcopy(model.state_dict())
    x, y = data(8)[:]
    r = train_step(model, opt, make_scaler("fp16", "cpu"), [(x, y)], precision="fp16", loss_fn=_inf_on({1}))
    assert r.skipped and r.scale == 2.0**15
    assert not math.isfinite(r.grad_norm)
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k])


@pytest.mark.parametrize("precision", ["fp32", "fp16"])
def test_resume_equals_uninterrupted(tmp_path: Path, precision: str) -> None:
    def setup():
        model = mlp(0, dropout=0.2)  # dropout: the RNG state must be restored too
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.7)
        return model, opt, sched, loader(40, 8, shuffle=True)  # 5 batches an epoch

    steps = 13  # crosses two epoch boundaries
    bad = {4}  # a skipped step in fp16: the scaler state must travel too
    m1, o1, s1, l1 = setup()
    torch.manual_seed(123)
    full = fit(m1, l1, o1, precision=precision, steps=steps, loss_fn=_inf_on(bad) if precision == "fp16" else None, callbacks=[Schedule(s1)])

    ckpt = tmp_path / "run.pt"
    m2, o2, s2, l2 = setup()
    torch.manual_seed(123)

    n = {"n": 0}

    def crashing(out, y):
        n["n"] += 1
        if n["n"] == 10:
            raise KeyboardInterrupt("simulated crash at step 10")
        loss = F.cross_entropy(out, y)
        return loss * math.inf if precision == "fp16" and n["n"] in bad else loss

    with pytest.raises(KeyboardInterrupt, match="simulated crash at step 10"):
        fit(m2, l2, o2, precision=precision, steps=steps, loss_fn=crashing, callbacks=[Schedule(s2), Checkpoint(ckpt, every=4)])
    assert ckpt.exists() and not list(tmp_path.glob("*.tmp"))

    m3, o3, s3, l3 = setup()  # a fresh process would build everything again
    torch.manual_seed(999)  # and its RNG would be elsewhere
    resumed = fit(m3, l3, o3, precision=precision, steps=steps, callbacks=[Schedule(s3), Checkpoint(ckpt, resume=True)])
    assert resumed["step"].tolist() == list(range(1, steps + 1))
    assert resumed["loss"].tolist() == full["loss"].tolist()
    assert resumed["scale"].tolist() == full["scale"].tolist()
    for pa, pb in zip(m1.parameters(), m3.parameters(), strict=True):
        assert torch.equal(pa, pb)
    assert s3.last_epoch == s1.last_epoch
    if precision == "fp16":
        assert full.n_skipped == 1 and resumed.n_skipped == 1


def test_checkpoint_roundtrip_and_atomic(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = mlp()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    scaler = make_scaler("fp16", "cpu")
    fit(model, loader(16, 8), opt, precision="fp16", scaler=scaler, callbacks=[])
    path = tmp_path / "c.pt"
    save_checkpoint(path, model, opt, scaler=scaler, step=2, extra={"note": "hi"})
    good = path.read_bytes()

    m2 = mlp(5)
    o2 = torch.optim.Adam(m2.parameters(), lr=1e-3)
    s2 = torch.amp.GradScaler("cpu", init_scale=4.0)
    payload = load_checkpoint(path, m2, o2, scaler=s2)
    assert payload["step"] == 2 and payload["extra"] == {"note": "hi"}
    assert s2.get_scale() == scaler.get_scale()
    for pa, pb in zip(model.parameters(), m2.parameters(), strict=True):
        assert torch.equal(pa, pb)
    assert o2.state_dict()["state"][0]["step"] == opt.state_dict()["state"][0]["step"]

    def broken_save(obj, f, *a, **k):
        f.write(b"half a checkpoint")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", broken_save)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint(path, model, opt, scaler=scaler, step=3)
    assert path.read_bytes() == good  # the last good checkpoint survives
    assert [p.name for p in tmp_path.iterdir()] == ["c.pt"]  # no temp file left behind

    with pytest.raises(ValueError, match="scaler mismatch"):
        load_checkpoint(path, mlp(), scaler=make_scaler("fp32", "cpu"))
    with pytest.raises(FileNotFoundError, match="missing.pt"):
        load_checkpoint(tmp_path / "missing.pt", mlp())


def test_guard_non_finite_loss_fp32() -> None:
    with pytest.raises(TrainingDiverged, match=r"step \d+") as info:
        m = mlp()
        fit(m, loader(64, 8), torch.optim.SGD(m.parameters(), lr=0.1), precision="fp32", loss_fn=_inf_on({3}), callbacks=[])
    err = info.value
    assert err.step == 3 and err.reason == "loss" and math.isinf(err.value)
    msg = str(err)
    assert "step 3" in msg and "inf" in msg and "lower learning rate" in msg and "FP32 island" in msg
    assert len(err.history) == 3 and err.history["step"].tolist() == [1, 2, 3]


def test_guard_scale_collapse_fp16() -> None:
    scaler = torch.amp.GradScaler("cpu", init_scale=8.0)
    with pytest.raises(TrainingDiverged, match=r"step \d+") as info:
        m = mlp()
        fit(m, loader(64, 8), torch.optim.SGD(m.parameters(), lr=0.1), precision="fp16", scaler=scaler, loss_fn=_inf_on(set(range(1, 100))), callbacks=[])
    err = info.value
    assert err.reason == "scale" and err.step == 4 and err.value == 0.5  # 8 -> 4 -> 2 -> 1 -> 0.5
    assert "bf16" in str(err) and "min_scale" in str(err) and "clip" in str(err)
    assert err.history.n_skipped == 4
    # an fp16 inf loss with a healthy scale is just a skipped step, not an error
    m = mlp()
    h = fit(m, loader(64, 8), torch.optim.SGD(m.parameters(), lr=0.1), precision="fp16", loss_fn=_inf_on({1}), callbacks=[])
    assert h.n_skipped == 1


@pytest.mark.parametrize("bad", ["fp8", "half", 16, None])
def test_unknown_precision(bad: object) -> None:
    m = mlp()
    with pytest.raises(ValueError, match="allowed: 'fp32', 'tf32', 'fp16', 'bf16'"):
        fit(m, loader(), torch.optim.SGD(m.parameters(), lr=0.1), precision=bad, callbacks=[])


def test_bf16_on_pre_ampere_gpu_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fp16lab.precision, "cuda_capability", lambda device=0: (7, 5))
    monkeypatch.setattr(fp16lab.train.loop, "model_device", lambda model: torch.device("cuda"))
    m = mlp()
    with pytest.raises(ValueError, match="bf16 needs native support.*sm_75"):
        fit(m, loader(), torch.optim.SGD(m.parameters(), lr=0.1), precision="bf16", callbacks=[])


def test_fp16_on_cpu_warns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fp16lab.precision, "_WARNED_CPU", set())  # said once per session
    with warnings.catch_warnings():
        warnings.resetwarnings()
        m = mlp()
        with pytest.warns(UserWarning, match="slow"):
            fit(m, loader(16, 8), torch.optim.SGD(m.parameters(), lr=0.1), precision="fp16", callbacks=[])


def test_fit_refuses_a_meta_model_before_any_work() -> None:
    with torch.device("meta"):
        m = mlp()
    with pytest.raises(ValueError, match="model: parameter '0.weight' is on the 'meta' device"):
        fit(m, loader(), torch.optim.SGD(m.parameters(), lr=0.1), precision="fp32", callbacks=[])


def test_fit_trains_on_the_model_device_and_never_moves_it() -> None:
    m = mlp()
    h = fit(m, loader(16, 8), torch.optim.SGD(m.parameters(), lr=0.1), precision="fp32", callbacks=[])
    assert h.attrs["device"] == "cpu" and next(m.parameters()).device.type == "cpu"


def test_bad_inputs() -> None:
    opt = lambda m: torch.optim.SGD(m.parameters(), lr=0.1)  # noqa: E731
    m = mlp()
    empty = DataLoader(TensorDataset(torch.zeros(0, 12), torch.zeros(0, dtype=torch.long)), batch_size=4)
    with pytest.raises(ValueError, match="empty"):
        fit(m, empty, opt(m), precision="fp32", callbacks=[])
    with pytest.raises(ValueError, match="empty"):
        fit(m, [], opt(m), precision="fp32", steps=1, callbacks=[])

    class Empty:
        def __iter__(self):
            return iter(())

    with pytest.raises(ValueError, match="no batches"):
        fit(m, Empty(), opt(m), precision="fp32", steps=1, callbacks=[])
    frozen = mlp()
    for q in frozen.parameters():
        q.requires_grad_(False)
    with pytest.raises(ValueError, match="no trainable parameters"):
        fit(frozen, loader(), opt(mlp()), precision="fp32", callbacks=[])
    for bad in (0, -1, 1.5):
        with pytest.raises(ValueError, match="accum_steps must be an int >= 1"):
            fit(m, loader(), opt(m), precision="fp32", accum_steps=bad, callbacks=[])
    with pytest.raises(ValueError, match="path must be a file path"):
        Checkpoint(None, resume=True)
    with pytest.raises(ValueError, match="clip_grad_norm"):
        fit(m, loader(), opt(m), precision="fp32", clip_grad_norm=0, callbacks=[])
    with pytest.raises(ValueError, match="GradScaler"):
        fit(m, loader(), opt(m), precision="fp32", scaler=make_scaler("fp16", "cpu"), callbacks=[])
    with pytest.raises(ValueError, match="optimizer does not hold"):
        fit(m, loader(), opt(mlp()), precision="fp32", callbacks=[])
    with pytest.raises(ValueError, match="pair"):
        fit(m, [torch.zeros(4, 12)], opt(m), precision="fp32", steps=1, callbacks=[])


def test_evaluate_and_eval_columns() -> None:
    model = mlp()
    ld = loader(64, 8)
    h = fit(model, ld, torch.optim.Adam(model.parameters(), lr=1e-2), precision="fp32", steps=2 * len(ld),
            callbacks=[Evaluate(loader=ld, fn=lambda m: {"probe": 1.0}, every=4)])
    assert h["val_loss"].notna().sum() == 4  # steps 4, 8, 12, 16
    assert h["probe"].notna().sum() == 4
    model.train()
    e = evaluate(model, ld)
    assert model.training  # mode restored
    x, y = data(64)[:]
    with torch.no_grad():
        model.eval()
        out = model(x)
        model.train()
    assert math.isclose(e["val_loss"], F.cross_entropy(out, y).item(), rel_tol=1e-5)
    assert math.isclose(e["val_accuracy"], (out.argmax(1) == y).float().mean().item(), rel_tol=1e-6)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_cuda_channels_last_runs(precision: str) -> None:
    if precision == "bf16" and torch.cuda.get_device_capability() < (8, 0):
        pytest.skip("bf16 needs sm_80+")
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
                          nn.Linear(16, 4))
    ds = TensorDataset(torch.randn(64, 3, 16, 16), torch.randint(0, 4, (64,)))
    model.cuda().to(memory_format=torch.channels_last)
    h = fit(model, DataLoader(ds, batch_size=16, pin_memory=True), torch.optim.Adam(model.parameters()),
            precision=precision, steps=8, callbacks=[])
    assert h["loss"].map(math.isfinite).all() and len(h) == 8
    assert next(model.parameters()).dtype == torch.float32  # weights stay fp32


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_train_step_waits_once_and_equals_the_hand_written_fused_step() -> None:
    # The read-back is the step's one host sync: no unscale_ + found_inf.item() before a fused Adam (the
    # H200 runs of lessons 02/06 measured train_step below 0.97 of the hand-written step while it synced
    # three times), and the weights are those of the article's loop with Adam(fused=True).
    def setup():
        torch.manual_seed(0)
        m = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)).cuda()
        return m, torch.optim.Adam(m.parameters(), lr=1e-2, fused=True), torch.amp.GradScaler("cuda")

    x, y = torch.randn(16, 32, device="cuda"), torch.randint(0, 4, (16,), device="cuda")
    hand, ho, hs = setup()
    for _ in range(3):
        with torch.autocast("cuda", dtype=torch.float16):
            loss = F.cross_entropy(hand(x), y)
        hs.scale(loss).backward()
        hs.step(ho)
        hs.update()
        ho.zero_grad(set_to_none=True)
    mine, mo, ms = setup()
    train_step(mine, mo, ms, [(x, y)])  # the scaler's first scale() allocates; count from step 2
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            r = train_step(mine, mo, ms, [(x, y)])
            train_step(mine, mo, ms, [(x, y)])
    finally:
        torch.cuda.set_sync_debug_mode("default")
    syncs = [w for w in seen if "synchroniz" in str(w.message)]
    assert len(syncs) == 2, [str(w.message)[:120] for w in syncs]  # one read-back per step
    for a, b in zip(hand.parameters(), mine.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    assert r.scale_before == r.scale == 65536.0 and math.isfinite(r.grad_norm)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_resume_restores_rng_from_a_gpu_loaded_checkpoint(tmp_path: Path) -> None:
    # fit(resume=True) loads the checkpoint onto the GPU; RNG states must still be restored
    # (they have to be CPU ByteTensors: the first H200 run of lesson 02 failed here).
    def setup():
        torch.manual_seed(0)
        model = nn.Sequential(nn.Flatten(), nn.Dropout(0.2), nn.Linear(48, 4)).cuda()
        ds = TensorDataset(torch.randn(40, 3, 4, 4), torch.randint(0, 4, (40,)))
        ld = DataLoader(ds, batch_size=8, shuffle=True, generator=torch.Generator().manual_seed(0))
        return model, torch.optim.SGD(model.parameters(), lr=0.1), ld

    m1, o1, l1 = setup()
    full = fit(m1, l1, o1, precision="fp16", steps=8, callbacks=[])
    ckpt = tmp_path / "run.pt"
    m2, o2, l2 = setup()
    n = {"n": 0}

    def crashing(out, y):
        n["n"] += 1
        if n["n"] == 6:
            raise KeyboardInterrupt("simulated crash at step 6")
        return F.cross_entropy(out, y)

    with pytest.raises(KeyboardInterrupt, match="simulated crash at step 6"):
        fit(m2, l2, o2, precision="fp16", steps=8, loss_fn=crashing, callbacks=[Checkpoint(ckpt, every=4)])
    m3, o3, l3 = setup()
    resumed = fit(m3, l3, o3, precision="fp16", steps=8, callbacks=[Checkpoint(ckpt, resume=True)])
    assert resumed["loss"].tolist()[-4:] == full["loss"].tolist()[-4:]


# ---------------------------------------------------------------- issue 14: regression tests
# Each test below failed on main before the fix (commit 632bd95) and names the defect it guards.


def _state(model: nn.Module, opt: torch.optim.Optimizer | None = None) -> dict:
    """A deep copy of everything a refused operation must leave alone."""
    out = {"model": copy.deepcopy(model.state_dict()), "rng": torch.get_rng_state()}
    if opt is not None:
        out["opt"] = copy.deepcopy(opt.state_dict())
    return out


def _same_state(a: dict, b: dict) -> bool:
    def eq(x, y) -> bool:
        if isinstance(x, torch.Tensor):
            return isinstance(y, torch.Tensor) and torch.equal(x, y)
        if isinstance(x, dict):
            return isinstance(y, dict) and x.keys() == y.keys() and all(eq(x[k], y[k]) for k in x)
        if isinstance(x, (list, tuple)):
            return isinstance(y, (list, tuple)) and len(x) == len(y) and all(map(eq, x, y))
        return x == y

    return eq(a, b)


class CountingLoader:
    """A DataLoader stand-in that counts how often it was iterated (work started = iterated)."""

    def __init__(self, inner: DataLoader) -> None:
        self.inner, self.iterated = inner, 0
        self.batch_size, self.generator = inner.batch_size, inner.generator

    def __len__(self) -> int:
        return len(self.inner)

    def __iter__(self):
        self.iterated += 1
        return iter(self.inner)


def _trained_checkpoint(tmp_path: Path, precision: str = "fp32", steps: int = 4, **kw) -> Path:
    m = mlp()
    ckpt = tmp_path / "run.pt"
    fit(m, loader(64, 8, shuffle=True), torch.optim.Adam(m.parameters(), lr=1e-2), precision=precision,
        steps=steps, callbacks=[Checkpoint(ckpt, **kw)])
    return ckpt


# item 1: numpy metrics from eval_fn


def test_numpy_metrics_from_eval_fn_resume(tmp_path: Path) -> None:
    import numpy as np

    def eval_fn(model):
        return {"np_acc": np.float64(0.5), "np_count": np.int64(3), "t_metric": torch.tensor(0.25),
                "np32": np.float32(0.125)}

    def run(steps, **kw):
        m = mlp()
        return m, fit(m, loader(64, 8), torch.optim.Adam(m.parameters(), lr=1e-2), precision="fp32", steps=steps,
                      callbacks=[Evaluate(fn=eval_fn, every=2), Checkpoint(tmp_path / "run.pt", **kw)])

    _, first = run(4)
    payload = torch.load(tmp_path / "run.pt", weights_only=True)  # a plain torch.load works too
    assert payload["step"] == 4
    _, resumed = run(6, resume=True)
    assert resumed["step"].tolist() == list(range(1, 7))
    evals = resumed.dropna(subset=["np_acc"])
    assert evals["step"].tolist() == [2, 4, 6]
    for col, want in (("np_acc", 0.5), ("np_count", 3.0), ("t_metric", 0.25), ("np32", 0.125)):
        assert evals[col].tolist() == [want] * 3 and all(type(v) is float for v in evals[col].tolist())


@pytest.mark.parametrize("result,match", [
    ([0.5], "must return a dict"),
    ({"loss": 0.5}, "'loss'.*History columns"),
    ({"acc": "high"}, "'acc'.*numbers"),
    ({"acc": True}, "'acc'.*numbers"),
    ({"acc": torch.ones(3)}, "'acc'.*numbers"),
    ({1: 0.5}, "keys must be str"),
])
def test_eval_fn_bad_results(result, match: str) -> None:
    m = mlp()
    with pytest.raises(ValueError, match=f"eval_fn.*{match}|{match}"):
        fit(m, loader(16, 8), torch.optim.SGD(m.parameters(), lr=0.1), precision="fp32", steps=2, callbacks=[Evaluate(fn=lambda model: result)])


def test_save_checkpoint_refuses_what_weights_only_cannot_read(tmp_path: Path) -> None:
    import numpy as np

    m = mlp()
    path = tmp_path / "c.pt"
    with pytest.raises(ValueError, match=r"extra\['acc'\] is a numpy.float64.*float\(x\)"):
        save_checkpoint(path, m, extra={"acc": np.float64(0.5)})
    with pytest.raises(ValueError, match=r"extra\['nested'\]\[1\] is a builtins.object"):
        save_checkpoint(path, m, extra={"nested": [1, object()]})
    assert not path.exists() and list(tmp_path.iterdir()) == []  # refused before anything was written
    save_checkpoint(path, m, extra={"ok": [1, 2.5, "x", None, torch.ones(2), {"k": (True, b"b")}]})
    assert load_checkpoint(path, mlp())["extra"]["ok"][3] is None


# item 2 (fit's side): an optimizer that misses some of the model's parameters


def test_optimizer_missing_parameters_is_refused_before_training() -> None:
    m = mlp()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    m[3] = nn.Linear(32, 8)  # e.g. a padded / replaced head after the optimizer was built
    before = _state(m)
    ld = CountingLoader(loader(16, 8))
    with pytest.raises(ValueError, match=r"optimizer does not hold 2 .*3\.weight, 3\.bias.*after changing the model"):
        fit(m, ld, opt, precision="fp32", steps=2, callbacks=[])
    assert ld.iterated == 0 and _same_state(before, _state(m))
    # train_step refuses an optimizer of another model at its entry (checks.optimizer_holds, as fit)
    with pytest.raises(ValueError, match="optimizer holds none of this model's parameters"):
        train_step(m, torch.optim.SGD(mlp().parameters(), lr=0.1), make_scaler("fp32", "cpu"), [data(8)[:]],
                   precision="fp32")
    assert _same_state(before["model"], _state(m)["model"]) and all(q.grad is None for q in m.parameters())
    frozen = mlp()  # training part of a model on purpose: freeze the rest, then it is accepted
    for q in frozen[0].parameters():
        q.requires_grad_(False)
    h = fit(frozen, loader(16, 8), torch.optim.SGD(frozen[3].parameters(), lr=0.1), precision="fp32", steps=2, callbacks=[])
    assert len(h) == 2


# item 3: the checkpoint folder is checked before any work


def test_missing_checkpoint_folder_fails_before_training(tmp_path: Path) -> None:
    m = mlp()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    before = _state(m, opt)
    ld = CountingLoader(loader(16, 8))
    with pytest.raises(ValueError, match=r"path=.*the folder .*nope.* does not exist"):
        fit(m, ld, opt, precision="fp32", steps=2, callbacks=[Checkpoint(tmp_path / "nope" / "run.pt")])
    (tmp_path / "adir.pt").mkdir()
    with pytest.raises(ValueError, match="is a folder"):
        fit(m, ld, opt, precision="fp32", steps=2, callbacks=[Checkpoint(tmp_path / "adir.pt")])
    (tmp_path / "x.pt.history.jsonl").mkdir()
    with pytest.raises(ValueError, match="history.*is a folder"):
        fit(m, ld, opt, precision="fp32", steps=2, callbacks=[Checkpoint(tmp_path / "x.pt")])
    for bad in ("", 3, True):
        with pytest.raises(ValueError, match="path must be a file path"):
            fit(m, ld, opt, precision="fp32", steps=2, callbacks=[Checkpoint(bad)])
    assert ld.iterated == 0 and _same_state(before, _state(m, opt))


@pytest.mark.skipif(not Path("/sys").is_dir(), reason="needs a read-only /sys (Linux)")
def test_read_only_checkpoint_folder_fails_before_training() -> None:
    # /sys refuses new files even to root (a chmod'ed folder does not, when tests run as root)
    m = mlp()
    ld = CountingLoader(loader(16, 8))
    with pytest.raises(ValueError, match=r"cannot write in the folder '/sys'"):
        fit(m, ld, torch.optim.SGD(m.parameters(), lr=0.1), precision="fp32", steps=2, callbacks=[Checkpoint("/sys/run.pt")])
    assert ld.iterated == 0


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() == 0, reason="root writes into read-only folders")
def test_chmod_read_only_checkpoint_folder(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        m = mlp()
        with pytest.raises(ValueError, match="cannot write in the folder"):
            fit(m, loader(16, 8), torch.optim.SGD(m.parameters(), lr=0.1), precision="fp32", steps=2, callbacks=[Checkpoint(ro / "run.pt")])
    finally:
        ro.chmod(0o755)


# items 4 and 5: resume is checked completely, and a refused resume changes nothing


def _resume_setup(precision="fp32", batch=8, n=64, model=None, opt_cls=torch.optim.Adam, sched=False):
    m = model if model is not None else mlp(7)
    opt = opt_cls(m.parameters(), lr=1e-2)
    s = torch.optim.lr_scheduler.StepLR(opt, step_size=2) if sched else None
    return m, opt, s, loader(n, batch, shuffle=True)


@pytest.mark.parametrize("change,match", [
    (dict(precision="fp16"), "precision: checkpoint 'fp32', now 'fp16'"),
    (dict(precision="bf16"), "precision: checkpoint 'fp32', now 'bf16'"),
    (dict(batch=16), "batch_size: checkpoint 8, now 16"),
    (dict(n=48), "batches_per_epoch: checkpoint 8, now 6"),
    (dict(model="wider"), r"different shapes: 3\.weight"),
    (dict(opt_cls=torch.optim.SGD), "holds a Adam optimizer state; the optimizer given is a SGD"),
    (dict(sched=True), "has no scheduler state"),
    (dict(accum=2), "accum_steps: checkpoint 1, now 2"),
])
def test_refused_resume_changes_nothing(tmp_path: Path, change: dict, match: str) -> None:
    ckpt = _trained_checkpoint(tmp_path)
    sidecar = ckpt.with_name("run.pt.history.jsonl")
    files = (ckpt.read_bytes(), sidecar.read_bytes())
    accum = change.pop("accum", 1)
    if change.get("model") == "wider":
        torch.manual_seed(3)
        change["model"] = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Dropout(0.0), nn.Linear(32, 5))
    m, opt, s, ld = _resume_setup(**change)
    before = _state(m, opt)
    with pytest.raises(ValueError, match=match):
        fit(m, ld, opt, precision=change.get("precision", "fp32"), steps=8, accum_steps=accum, callbacks=[Schedule(s), Checkpoint(ckpt, resume=True)])
    assert _same_state(before, _state(m, opt))  # not even the matching first layer was loaded
    assert (ckpt.read_bytes(), sidecar.read_bytes()) == files


def test_load_checkpoint_refused_changes_nothing(tmp_path: Path) -> None:
    ckpt = _trained_checkpoint(tmp_path)
    torch.manual_seed(3)
    wider = nn.Sequential(nn.Linear(12, 32), nn.ReLU(), nn.Dropout(0.0), nn.Linear(32, 5))
    before = _state(wider)
    with pytest.raises(ValueError, match=r"does not fit this model.*3\.weight.*nothing was loaded"):
        load_checkpoint(ckpt, wider)
    assert _same_state(before, _state(wider))
    m = mlp(9)
    before = _state(m)
    with pytest.raises(ValueError, match="scaler mismatch"):
        load_checkpoint(ckpt, m, scaler=make_scaler("fp16", "cpu"))  # the model fits, the scaler does not
    assert _same_state(before, _state(m))  # so nothing was loaded, the RNG not restored


def test_resume_with_missing_file_is_an_error(tmp_path: Path) -> None:
    m, opt, _, ld = _resume_setup()
    with pytest.raises(FileNotFoundError, match=r"Checkpoint\(resume=True\), but there is no checkpoint.*resume=False.*exists\(\)"):
        fit(m, ld, opt, precision="fp32", steps=4, callbacks=[Checkpoint(tmp_path / "typo.pt", resume=True)])
    # the documented way to resume only when there is something to resume
    ckpt = tmp_path / "run.pt"
    h = fit(m, ld, opt, precision="fp32", steps=4, callbacks=[Checkpoint(ckpt, resume=ckpt.exists())])
    assert len(h) == 4 and ckpt.exists()


def test_resume_steps_below_or_at_the_checkpoint(tmp_path: Path) -> None:
    ckpt = _trained_checkpoint(tmp_path, steps=6)
    m, opt, _, ld = _resume_setup()
    with pytest.raises(ValueError, match=r"at step 6, past the steps=4.*steps >= 6"):
        fit(m, ld, opt, precision="fp32", steps=4, callbacks=[Checkpoint(ckpt, resume=True)])
    before = _state(m, opt)
    h = fit(m, CountingLoader(ld), opt, precision="fp32", steps=6, callbacks=[Checkpoint(ckpt, resume=True)])
    assert h["step"].tolist() == list(range(1, 7))  # nothing left to do: the history, and the weights loaded
    assert not _same_state(before, _state(m, opt))


def test_resume_of_a_checkpoint_not_written_by_fit(tmp_path: Path) -> None:
    m = mlp()
    save_checkpoint(tmp_path / "c.pt", m, torch.optim.SGD(m.parameters(), lr=0.1))
    with pytest.raises(ValueError, match="not written by fit"):
        fit(m, loader(), torch.optim.SGD(m.parameters(), lr=0.1), precision="fp32", steps=2, callbacks=[Checkpoint(tmp_path / "c.pt", resume=True)])


# item 6: corrupt checkpoints


def _bad_files(tmp_path: Path) -> dict[str, Path]:
    good = _trained_checkpoint(tmp_path)
    raw = good.read_bytes()
    files = {"empty": b"", "random": bytes(range(256)) * 8, "truncated": raw[: len(raw) // 2],
             "tail cut": raw[:-40], "text": b"hello, not a checkpoint\n"}
    out = {}
    for name, content in files.items():
        out[name] = tmp_path / f"{name.replace(' ', '_')}.pt"
        out[name].write_bytes(content)
    out["other torch file"] = tmp_path / "other.pt"
    torch.save({"weights": torch.ones(2)}, out["other torch file"])
    out["missing parts"] = tmp_path / "parts.pt"
    torch.save({"format": "fp16lab-checkpoint-2", "step": 1}, out["missing parts"])
    return out


def test_corrupt_checkpoints_give_a_clear_error(tmp_path: Path) -> None:
    for name, path in _bad_files(tmp_path).items():
        m = mlp(4)
        before = _state(m)
        with pytest.raises(ValueError, match=rf"{path.name}' is not a valid, complete fp16lab checkpoint") as info:
            load_checkpoint(path, m)
        assert "weights_only=False" not in str(info.value), name  # not the misleading advice
        sidecar = path.with_name(path.name + ".history.jsonl")
        sidecar.write_bytes(b"")
        with pytest.raises(ValueError, match=rf"{path.name}' is not a valid, complete fp16lab checkpoint"):
            fit(m, loader(64, 8, shuffle=True), torch.optim.Adam(m.parameters()), precision="fp32", steps=8, callbacks=[Checkpoint(path, resume=True)])
        assert _same_state(before, _state(m)), name
    with pytest.raises(ValueError, match="is a folder"):
        load_checkpoint(tmp_path, mlp())


def test_checkpoint_holding_python_objects_names_weights_only(tmp_path: Path) -> None:
    import numpy as np

    path = tmp_path / "np.pt"
    torch.save({"format": "fp16lab-checkpoint-2", "x": np.float64(1.0)}, path)
    with pytest.raises(ValueError, match="python objects that weights_only=True refuses.*weights_only=False"):
        load_checkpoint(path, mlp())


# item 7: the history is stored once, not re-written into every checkpoint


def test_checkpoint_size_does_not_grow_with_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import fp16lab.train.checkpoint as ck

    written: list[int] = []
    real = ck._jsonl
    monkeypatch.setattr(ck, "_jsonl", lambda rows: (written.append(len(rows)), real(rows))[1])
    sizes = {}
    for steps in (4, 40):
        ckpt = tmp_path / f"run{steps}.pt"
        m = mlp()
        h = fit(m, loader(64, 8), torch.optim.Adam(m.parameters()), precision="fp32", steps=steps, callbacks=[Checkpoint(ckpt, every=2)])
        sizes[steps] = ckpt.stat().st_size
        assert "history" not in torch.load(ckpt, weights_only=True)["extra"].get("fit", {}).get("settings", {})
        lines = ckpt.with_name(ckpt.name + ".history.jsonl").read_text().splitlines()
        assert len(lines) == steps + 1 and len(h) == steps  # a header, then one row per step, once
    assert abs(sizes[40] - sizes[4]) < 256, sizes  # 10x the steps, the same checkpoint size
    # every save wrote only the rows since the previous save (the first one: a header + 2 rows)
    assert written == [3, 2] + [3] + [2] * 19


def test_resume_cuts_history_rows_written_after_the_checkpoint(tmp_path: Path) -> None:
    ckpt = _trained_checkpoint(tmp_path, steps=4)
    sidecar = ckpt.with_name("run.pt.history.jsonl")
    with open(sidecar, "a") as fh:  # a crash between appending the rows and replacing the checkpoint
        fh.write('{"step": 5, "loss": 1.0}\n{"step": 6, "lo')
    m, opt, _, ld = _resume_setup()
    h = fit(m, ld, opt, precision="fp32", steps=8, callbacks=[Checkpoint(ckpt, every=2, resume=True)])
    assert h["step"].tolist() == list(range(1, 9))
    rows = [json.loads(line) for line in sidecar.read_text().splitlines()[1:]]
    assert [r["step"] for r in rows] == list(range(1, 9)) and rows[4]["loss"] != 1.0


def test_resume_refuses_a_missing_or_foreign_history(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = _trained_checkpoint(tmp_path / "a", steps=4)
    b = _trained_checkpoint(tmp_path / "b", steps=6)  # a longer history than a's
    side_a, side_b = (p.with_name("run.pt.history.jsonl") for p in (a, b))
    side_a.write_bytes(side_b.read_bytes())  # another run's history next to this checkpoint
    m, opt, _, ld = _resume_setup()
    with pytest.raises(ValueError, match="belongs to another run"):
        fit(m, ld, opt, precision="fp32", steps=8, callbacks=[Checkpoint(a, resume=True)])
    side_a.unlink()
    with pytest.raises(ValueError, match="history file .* is missing"):
        fit(m, ld, opt, precision="fp32", steps=8, callbacks=[Checkpoint(a, resume=True)])


# item 8: gradient accumulation is one big batch, and nothing is dropped at an epoch's end


def test_accumulation_with_unequal_micro_batches_equals_one_big_batch() -> None:
    x, y = data(32)[:]
    big, acc = mlp(), mlp()
    ob, oa = torch.optim.SGD(big.parameters(), lr=0.5), torch.optim.SGD(acc.parameters(), lr=0.5)
    F.cross_entropy(big(x), y).backward()  # the oracle: plain PyTorch, one batch of 32
    want_loss = F.cross_entropy(mlp()(x), y).item()
    ob.step()
    cuts = [0, 5, 16, 32]  # micro-batches of 5, 11 and 16
    micro = [(x[a:b], y[a:b]) for a, b in zip(cuts, cuts[1:], strict=False)]
    r = train_step(acc, oa, make_scaler("fp32", "cpu"), micro, precision="fp32")
    assert r.samples == 32 and math.isclose(r.loss, want_loss, rel_tol=1e-6)
    for pb, pa in zip(big.parameters(), acc.parameters(), strict=True):
        torch.testing.assert_close(pa, pb, rtol=1e-6, atol=1e-7)


def test_accumulation_keeps_the_left_over_micro_batches() -> None:
    # 36 samples in batches of 8: 8, 8, 8, 8, 4; accum_steps=2 -> steps of 16, 16 and a last one of 4
    ds = data(36)
    m, ref = mlp(), mlp()
    h = fit(m, DataLoader(ds, batch_size=8), torch.optim.SGD(m.parameters(), lr=0.2), precision="fp32",
            steps=6, accum_steps=2, callbacks=[])
    assert h["samples"].tolist() == [16, 16, 4] * 2 and h["epoch"].tolist() == [0, 0, 0, 1, 1, 1]
    opt = torch.optim.SGD(ref.parameters(), lr=0.2)
    x, y = ds[:]
    for _ in range(2):  # the oracle: the same steps as plain big batches
        for a, b in ((0, 16), (16, 32), (32, 36)):
            F.cross_entropy(ref(x[a:b]), y[a:b]).backward()
            opt.step()
            opt.zero_grad()
    for pa, pb in zip(m.parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(pa, pb, rtol=1e-5, atol=1e-6)


def test_accumulation_with_steps_never_spans_an_epoch() -> None:
    m = mlp()
    h = fit(m, DataLoader(data(40), batch_size=8), torch.optim.SGD(m.parameters(), lr=0.1), precision="fp32", steps=7, accum_steps=2, callbacks=[])
    assert h["samples"].tolist() == [16, 16, 8, 16, 16, 8, 16] and h["epoch"].tolist() == [0, 0, 0, 1, 1, 1, 2]


# item 9: a device this machine does not have


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error on a machine without CUDA")
def test_missing_device_gives_a_clear_error(tmp_path: Path) -> None:
    m = mlp()
    for dev in ("cuda", "cuda:0", torch.device("cuda")):
        with pytest.raises(ValueError, match="CUDA"):
            make_scaler("fp16", dev)
    save_checkpoint(tmp_path / "c.pt", m)
    with pytest.raises(ValueError, match="map_location.*CUDA"):
        load_checkpoint(tmp_path / "c.pt", m, map_location="cuda")
    if not torch.backends.mps.is_available():
        with pytest.raises(ValueError, match="MPS"):
            make_scaler("fp16", "mps")


# item 10: a loss function that does not return one number


def test_non_scalar_loss_fn() -> None:
    m = mlp()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    before = _state(m, opt)
    with pytest.raises(ValueError, match=r"loss_fn must return one number.*shape \(8,\).*reduction='mean'"):
        fit(m, loader(16, 8), opt, precision="fp32", steps=2, loss_fn=nn.CrossEntropyLoss(reduction="none"), callbacks=[])
    with pytest.raises(ValueError, match="loss_fn must return a floating-point torch.Tensor, got float"):
        fit(m, loader(16, 8), opt, precision="fp32", steps=2, loss_fn=lambda o, y: 1.0, callbacks=[])
    with pytest.raises(ValueError, match="loss_fn must be a function"):
        fit(m, loader(16, 8), opt, precision="fp32", steps=2, loss_fn="cross_entropy", callbacks=[])
    with pytest.raises(ValueError, match="loss_fn must return one number"):
        evaluate(m, loader(16, 8), loss_fn=nn.CrossEntropyLoss(reduction="none"))
    after = _state(m, opt)  # no backward, no step (the loader was iterated: the global RNG moved)
    assert _same_state(before["model"], after["model"]) and _same_state(before["opt"], after["opt"])


# item 11: NaN data, NaN losses


def _nan_loader(precision_target: bool = False) -> DataLoader:
    x, y = data(64)[:]
    x = x.clone()
    x[20, 3] = math.nan  # in the third batch of 8
    if precision_target:
        return DataLoader(TensorDataset(x.nan_to_num(), torch.where(x.isnan(), x, 0.0)), batch_size=8)
    return DataLoader(TensorDataset(x, y), batch_size=8)


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_nan_in_the_data_says_check_your_data(precision: str) -> None:
    m = mlp()
    with pytest.raises(TrainingDiverged, match=r"step \d+") as info:
        fit(m, _nan_loader(), torch.optim.SGD(m.parameters(), lr=0.1), precision=precision, callbacks=[])
    err = info.value
    assert err.reason == "data" and err.step == 3  # at once, also in fp16 (no run of skipped steps first)
    assert "Check your data" in str(err) and "inputs hold 1 NaN" in str(err)
    assert len(err.history) == 3


def test_nan_in_regression_targets() -> None:
    m = nn.Sequential(nn.Linear(12, 12))
    with pytest.raises(TrainingDiverged, match="targets hold 1 NaN.*Check your data"):
        fit(m, _nan_loader(precision_target=True), torch.optim.SGD(m.parameters(), lr=0.1), precision="fp32", loss_fn=F.mse_loss, callbacks=[])


def test_nan_loss_with_min_scale_none_stops() -> None:
    m = mlp()
    nan_loss = lambda out, y: F.cross_entropy(out, y) * math.nan  # noqa: E731
    with pytest.raises(TrainingDiverged, match=r"step \d+") as info:
        fit(m, loader(64, 8), torch.optim.SGD(m.parameters(), lr=0.1), precision="fp16", loss_fn=nan_loss, callbacks=[DivergenceGuard(min_scale=None)])
    err = info.value
    assert err.reason == "loss" and err.step == 3 and "forward pass overflows" in str(err)
    # isolated non-finite losses are just skipped steps, also with min_scale=None
    m = mlp()
    h = fit(m, loader(64, 8), torch.optim.SGD(m.parameters(), lr=0.1), precision="fp16", loss_fn=_inf_on({2, 3, 5}), callbacks=[DivergenceGuard(min_scale=None)])
    assert h.n_skipped == 3 and len(h) == 8


class _InfGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, g):
        return g * math.inf


def test_non_finite_gradient_in_fp32_stops_and_scale_rule_is_called_a_heuristic() -> None:
    m = mlp()
    with pytest.raises(TrainingDiverged, match=r"step \d+") as info:
        fit(m, loader(64, 8), torch.optim.SGD(m.parameters(), lr=0.1), precision="fp32", loss_fn=lambda o, y: _InfGrad.apply(F.cross_entropy(o, y)), callbacks=[])
    assert info.value.reason == "grad_norm" and info.value.step == 1
    m = mlp()  # fp16: finite losses, overflowing gradients on every step -> the scale heuristic
    with pytest.raises(TrainingDiverged, match=r"step \d+") as info:
        fit(m, loader(64, 8), torch.optim.SGD(m.parameters(), lr=0.1), precision="fp16", scaler=torch.amp.GradScaler("cpu", init_scale=4.0), loss_fn=lambda o, y: _InfGrad.apply(F.cross_entropy(o, y)), callbacks=[])
    err = info.value
    assert err.reason == "scale" and err.step == 3 and "heuristic" in str(err) and "min_scale=None" in str(err)


# the one validation layer: wrong types and values are refused at the entry, naming the argument


@pytest.mark.parametrize("kw,match", [
    (lambda: dict(accum_steps=True), "accum_steps must be an int"),
    (lambda: dict(steps=True), "steps must be an int"),
    (lambda: dict(steps=0), "steps must be an int >= 1"),
    (lambda: dict(steps=2.0), "steps must be an int"),
    (lambda: dict(callbacks=[Evaluate(fn=lambda m: {}, every=True)]), "every must be an int"),
    (lambda: dict(callbacks=[Evaluate()]), "Evaluate needs something to evaluate"),
    (lambda: dict(callbacks=[Checkpoint("x.pt", every=0)]), "every must be an int"),
    (lambda: dict(clip_grad_norm=True), "clip_grad_norm must be a finite number"),
    (lambda: dict(clip_grad_norm=math.inf), "clip_grad_norm must be a finite number"),
    (lambda: dict(callbacks=[DivergenceGuard(min_scale=-1.0)]), "min_scale must be a finite number"),
    (lambda: dict(callbacks=[Checkpoint("x.pt", resume=1)]), "resume must be True or False"),
    (lambda: dict(callbacks=[ProgressBar(desc=3)]), "desc must be a str"),
    (lambda: dict(callbacks=[Evaluate(fn="accuracy")]), "fn must be a function"),
    (lambda: dict(callbacks=[Evaluate(loader=torch.zeros(3))]), "loader must be an iterable"),
    (lambda: dict(callbacks=[Schedule("cosine")]), "scheduler must be an LR scheduler"),
    (lambda: dict(scaler="fp16"), "scaler must be a torch.amp.GradScaler"),
    (lambda: dict(callbacks="ProgressBar"), "callbacks must be a list"),
    (lambda: dict(callbacks=[lambda run: None]), r"callbacks\[0\] must be an fp16lab.train.Callback"),
    (lambda: dict(callbacks=[ProgressBar(), ProgressBar()]), "at most one ProgressBar"),
])
def test_fit_refuses_bad_arguments_up_front(kw, match: str, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    m = mlp()
    ld = CountingLoader(loader(16, 8))
    with pytest.raises((ValueError, TypeError), match=match):
        fit(m, ld, torch.optim.SGD(m.parameters(), lr=0.1), precision="fp32", **{"callbacks": [], **kw()})
    assert ld.iterated == 0 and list(tmp_path.iterdir()) == []


def test_fit_refuses_wrong_objects() -> None:
    m = mlp()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="model must be a torch.nn.Module"):
        fit(lambda x: x, loader(), opt, callbacks=[])
    with pytest.raises(ValueError, match="optimizer must be a torch.optim.Optimizer"):
        fit(m, loader(), [opt], callbacks=[])
    with pytest.raises(ValueError, match="loader must be an iterable"):
        fit(m, torch.zeros(4, 12), opt, callbacks=[])
    with pytest.raises(ValueError, match="batches is empty: pass a list with at least one entry"):
        train_step(m, opt, make_scaler("fp32", "cpu"), [], precision="fp32")
    with pytest.raises(ValueError, match=r"batches must be a list, got tensor\(.*pass a list, e.g. \[\(x, y\)\]"):
        train_step(m, opt, make_scaler("fp32", "cpu"), torch.zeros(2, 12), precision="fp32")


def test_fit_never_asks_the_scaler_for_its_scale(monkeypatch: pytest.MonkeyPatch) -> None:
    # each step's scale (before and after) comes with its one read-back, through the public scaler.scale();
    # neither get_scale() (a host sync on a GPU) nor the private _get_scale_async runs
    calls = {"n": 0}

    def counting(self):
        calls["n"] += 1
        raise AssertionError("get_scale/_get_scale_async called")

    monkeypatch.setattr(torch.amp.GradScaler, "get_scale", counting)
    monkeypatch.setattr(torch.amp.GradScaler, "_get_scale_async", counting)
    m = mlp()
    h = fit(m, loader(64, 8), torch.optim.SGD(m.parameters(), lr=0.1), precision="fp16", loss_fn=_inf_on({2}), callbacks=[])
    assert calls["n"] == 0 and h["skipped"].tolist() == [i == 2 for i in range(1, 9)]
    assert h["scale"].tolist() == [2.0**16] + [2.0**15] * 7


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
@pytest.mark.parametrize("clip", [None, 0.5])
def test_amp_step_is_the_hand_written_step(precision: str, clip: float | None) -> None:
    # the public bare step, step after step, gives the oracle's weights bit for bit
    a, b = mlp(), mlp()
    oa = torch.optim.Adam(a.parameters(), lr=1e-2)
    ob = torch.optim.Adam(b.parameters(), lr=1e-2)
    batches = list(loader(64, 8))
    _, want_scaler = hand_written(a, batches, oa, precision, clip)
    scaler = make_scaler(precision, "cpu")
    for x, y in batches:
        norm = amp_step(lambda xy: F.cross_entropy(b(xy[0]), xy[1]), [(x, y)], ob, scaler, precision=precision,
                        device="cpu", clip_grad_norm=clip)
        assert (norm is None) == (clip is None)
    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(pa, pb)
        assert pb.grad is None
    assert scaler.get_scale() == want_scaler.get_scale()


def test_amp_step_measures_the_true_gradient_norm_and_refuses_a_loss_without_gradients() -> None:
    m = mlp()
    opt = torch.optim.SGD(m.parameters(), lr=0.0)
    x, y = data(16)[:]
    ref = mlp()
    F.cross_entropy(ref(x), y).backward()
    want = torch.linalg.vector_norm(torch.cat([p.grad.flatten() for p in ref.parameters()])).item()
    norm = amp_step(lambda xy: F.cross_entropy(m(xy[0]), xy[1]), [(x, y)], opt, make_scaler("fp16", "cpu"),
                    precision="fp16", device="cpu", grad_norm=True)
    assert norm is not None and norm.dim() == 0 and math.isclose(norm.item(), want, rel_tol=2e-2)
    other = mlp()
    with pytest.raises(ValueError, match="none of the optimizer's parameters got a gradient"):
        amp_step(lambda xy: F.cross_entropy(other(xy[0]), xy[1]), [(x, y)], opt, make_scaler("fp32", "cpu"),
                 precision="fp32", device="cpu")
    assert all(q.grad is None for q in m.parameters())


def test_resume_is_exact_with_left_over_micro_batches_and_evaluations(tmp_path: Path) -> None:
    # 5 micro-batches an epoch, accum_steps=2: steps of 2, 2, 1 per epoch; crash after a save at an epoch's end
    def setup():
        model = mlp(0, dropout=0.2)
        return model, torch.optim.Adam(model.parameters(), lr=1e-2), loader(40, 8, shuffle=True)

    kw = dict(precision="fp32", steps=9, accum_steps=2)
    ev = Evaluate(loader=loader(16, 8), every=3)
    m1, o1, l1 = setup()
    torch.manual_seed(5)
    full = fit(m1, l1, o1, callbacks=[ev], **kw)
    m2, o2, l2 = setup()
    torch.manual_seed(5)
    calls = {"n": 0}

    def crashing(out, y):
        calls["n"] += 1
        if calls["n"] == 15:  # in step 7: steps 1-6 used 10 micro-batches, their 2 evaluations 4 calls
            raise KeyboardInterrupt("simulated crash in step 7")
        return F.cross_entropy(out, y)

    with pytest.raises(KeyboardInterrupt, match="simulated crash in step 7"):
        fit(m2, l2, o2, loss_fn=crashing, callbacks=[ev, Checkpoint(tmp_path / "r.pt", every=3)], **kw)
    assert torch.load(tmp_path / "r.pt", weights_only=True)["step"] == 6
    m3, o3, l3 = setup()
    torch.manual_seed(77)
    resumed = fit(m3, l3, o3, callbacks=[ev, Checkpoint(tmp_path / "r.pt", resume=True)], **kw)
    assert resumed["samples"].tolist() == [16, 16, 8] * 3
    cols = ["step", "epoch", "loss", "samples", "grad_norm", "val_loss"]
    pd.testing.assert_frame_equal(pd.DataFrame(resumed[cols]), pd.DataFrame(full[cols]))
    for pa, pb in zip(m1.parameters(), m3.parameters(), strict=True):
        assert torch.equal(pa, pb)


# unlisted neighbours of issue 14: objects of the wrong kind, callbacks of the wrong shape, loaders
# that yield the wrong thing, objects that belong to another model


@pytest.mark.parametrize("kw,match", [
    (lambda: dict(loss_fn=nn.CrossEntropyLoss), "loss_fn .*the class CrossEntropyLoss: pass an instance"),
    (lambda: dict(loss_fn=lambda out: out.sum()), "loss_fn must be a function .*called with 2 argument"),
    (lambda: dict(loss_fn=lambda out, y, w: out.sum()), "loss_fn must be a function .*called with 2 argument"),
    (lambda: dict(callbacks=[Evaluate(fn=lambda: {})]), "fn must be a function .*called with 1 argument"),
    (lambda: dict(callbacks=[Evaluate(fn=dict)]), "fn .*the class dict"),
    (lambda: dict(callbacks=[Schedule(torch.optim.lr_scheduler.StepLR)]),
     "scheduler must be an LR scheduler .*pass an instance"),
    (lambda: dict(callbacks=[Evaluate(loader="val")]), "loader must be an iterable"),
    (lambda: dict(callbacks=[Evaluate(loader={"x": torch.zeros(2, 12)})]), "loader must be an iterable"),
    (lambda: dict(callbacks=[Evaluate(loader=[])]), "loader is empty"),
])
def test_fit_refuses_wrong_callbacks_and_eval_loaders_up_front(kw, match: str) -> None:
    m = mlp()
    before = copy.deepcopy(m.state_dict())
    ld = CountingLoader(loader(16, 8))
    with pytest.raises(ValueError, match=match):
        fit(m, ld, torch.optim.SGD(m.parameters(), lr=0.1), precision="fp32", **{"callbacks": [], **kw()})
    assert ld.iterated == 0
    assert all(torch.equal(v, m.state_dict()[k]) for k, v in before.items())


def test_a_scheduler_of_another_optimizer_is_refused_everywhere(tmp_path: Path) -> None:
    m = mlp()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    other = torch.optim.lr_scheduler.StepLR(torch.optim.SGD(mlp(1).parameters(), lr=0.1), 1)
    with pytest.raises(ValueError, match="scheduler: it was built on another optimizer"):
        fit(m, loader(), opt, precision="fp32", callbacks=[Schedule(other)])
    with pytest.raises(ValueError, match="scheduler: it was built on another optimizer"):
        train_step(m, opt, make_scaler("fp32", "cpu"), list(loader())[:1], precision="fp32", scheduler=other)
    with pytest.raises(ValueError, match="scheduler: it was built on another optimizer"):
        save_checkpoint(tmp_path / "c.pt", m, opt, scheduler=other)
    assert list(tmp_path.iterdir()) == []
    # one built on this optimizer is fine
    save_checkpoint(tmp_path / "c.pt", m, opt, scheduler=torch.optim.lr_scheduler.StepLR(opt, 1))


def test_checkpoints_refuse_an_optimizer_of_another_model(tmp_path: Path) -> None:
    m, stranger = mlp(), nn.Sequential(nn.Linear(3, 4), nn.Linear(4, 4))
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    save_checkpoint(tmp_path / "c.pt", m, opt)
    foreign = torch.optim.SGD(stranger.parameters(), lr=0.1)  # same number of parameters, another model
    with pytest.raises(ValueError, match="optimizer holds none of this model's parameters"):
        save_checkpoint(tmp_path / "d.pt", m, foreign)
    assert not (tmp_path / "d.pt").exists()
    m2 = mlp(3)
    before = copy.deepcopy(m2.state_dict())
    with pytest.raises(ValueError, match="optimizer holds none of this model's parameters"):
        load_checkpoint(tmp_path / "c.pt", m2, foreign)
    assert all(torch.equal(v, m2.state_dict()[k]) for k, v in before.items())
    # an optimizer that also holds parameters outside the model (e.g. a learnable loss weight) is fine
    extra = nn.Parameter(torch.ones(()))
    save_checkpoint(tmp_path / "e.pt", m, torch.optim.SGD([*m.parameters(), extra], lr=0.1))


@pytest.mark.parametrize("loss_fn,match", [
    (lambda out, y: torch.tensor(1.0), "does not depend on the model's outputs"),
    (lambda out, y: F.cross_entropy(out, y).detach(), "does not depend on the model's outputs"),
])
def test_a_loss_without_gradient_names_loss_fn(loss_fn, match: str) -> None:
    m = mlp()
    before = copy.deepcopy(m.state_dict())
    with pytest.raises(ValueError, match=match):
        fit(m, loader(), torch.optim.SGD(m.parameters(), lr=0.1), precision="fp32", loss_fn=loss_fn, callbacks=[])
    assert all(torch.equal(v, m.state_dict()[k]) for k, v in before.items())


@pytest.mark.parametrize("batches,match", [
    ([(torch.zeros(0, 12), torch.zeros(0, dtype=torch.long))], "micro-batch 1 of 1 holds no samples"),
    ([(torch.zeros(2, 12).numpy(), torch.zeros(2, dtype=torch.long).numpy())], r"\(ndarray, ndarray\).*from_numpy"),
    ([(torch.zeros(2, 12), [0, 1])], r"\(Tensor, list\)"),
])
def test_loaders_that_yield_wrong_batches(batches: list, match: str) -> None:
    m = mlp()
    before = copy.deepcopy(m.state_dict())
    with pytest.raises(ValueError, match=match):
        fit(m, batches, torch.optim.SGD(m.parameters(), lr=0.1), precision="fp32", steps=1, callbacks=[])
    assert all(torch.equal(v, m.state_dict()[k]) for k, v in before.items())


def test_a_wrong_entry_is_refused_naming_the_loader_and_its_index_before_anything_changes() -> None:
    # a list is checked entry by entry up front; a DataLoader or a generator batch by batch as drawn (never twice)
    m = mlp().eval()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    good = (torch.zeros(2, 12), torch.zeros(2, dtype=torch.long))
    m(good[0]).sum().backward()  # a gradient fit would clear
    grads = [q.grad.clone() for q in m.parameters()]
    before = copy.deepcopy(m.state_dict())
    drawn: list[int] = []

    def gen():
        for i, b in enumerate([7, good]):
            drawn.append(i)
            yield b

    dicts = DataLoader([{"x": torch.zeros(12)}] * 4, batch_size=2)
    for bad, match in (([good, good, 7], r"loader\[2\] must be a pair .*got 7 \(int\)"),
                       (gen(), r"loader\[0\] must be a pair .*got 7 \(int\)"),
                       (dicts, r"loader\[0\] must be a pair .*\(dict\)")):
        with pytest.raises(ValueError, match=match):
            fit(m, bad, opt, precision="fp32", steps=2, callbacks=[])
        assert not m.training and all(torch.equal(q.grad, g) for q, g in zip(m.parameters(), grads, strict=True))
        assert all(torch.equal(v, m.state_dict()[k]) for k, v in before.items())
    assert drawn == [0]  # the generator was drawn once, up to its wrong entry
    m.zero_grad(set_to_none=True)
    with pytest.raises(ValueError, match=r"batches\[1\] must be a pair"):
        train_step(m, opt, make_scaler("fp32", "cpu"), [good, (good[0],)], precision="fp32")
    with pytest.raises(ValueError, match=r"loader\[1\] must be a pair"):
        Evaluate([good, None])
    with pytest.raises(ValueError, match=r"loader\[1\] must be a pair"):
        evaluate(m, iter([good, None]))
    with pytest.raises(ValueError, match=r"Evaluate's loader\[0\] must be a pair"):
        fit(m, [good], opt, precision="fp32", steps=1, callbacks=[Evaluate(iter([None]))])


def test_a_used_up_iterator_says_so() -> None:
    m = mlp()
    with pytest.raises(ValueError, match="loader: an iterator, used up after epoch 1"):
        fit(m, iter(list(loader(16, 8))), torch.optim.SGD(m.parameters(), lr=0.1), precision="fp32", steps=3, callbacks=[])


@pytest.mark.parametrize("bad", ["val", {"a": 1}, []])
def test_evaluate_refuses_bad_loaders(bad: object) -> None:
    with pytest.raises(ValueError, match="loader"):
        evaluate(mlp(), bad)


def test_schedule_steps_its_scheduler_and_checkpoint_resumes_itself(tmp_path: Path) -> None:
    # the callbacks own their work: fit only fires events (issue 42)
    m = mlp()
    opt = torch.optim.SGD(m.parameters(), lr=1.0)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    cb = Schedule(sched)

    def result(skipped: bool) -> fp16lab.train.step.StepResult:
        return fp16lab.train.step.StepResult(loss=1.0, correct=None, samples=1, grad_norm=None, scale_before=2.0,
                                             scale=1.0 if skipped else 2.0, skipped=skipped, lr=1.0)

    cb.after_step(None, 1, result(skipped=True))  # type: ignore[arg-type]
    assert opt.param_groups[0]["lr"] == 1.0
    cb.after_step(None, 2, result(skipped=False))  # type: ignore[arg-type]
    assert opt.param_groups[0]["lr"] == 0.5
    # Checkpoint does the resume and the saving itself; the run only exposes what they need
    assert not any(hasattr(fp16lab.train.run.Run, name) for name in ("resume", "save", "history_file"))
    path = tmp_path / "c.pt"
    m = mlp()
    o = torch.optim.SGD(m.parameters(), lr=0.1)
    ck = Checkpoint(path, every=2)
    fit(m, loader(64, 8), o, precision="fp32", steps=4, callbacks=[ck])
    m2 = mlp()
    assert load_checkpoint(path, m2, torch.optim.SGD(m2.parameters(), lr=0.1))["step"] == 4
    h = fit(m2, loader(64, 8), torch.optim.SGD(m2.parameters(), lr=0.1), precision="fp32", steps=6,
            callbacks=[Checkpoint(path, resume=True)])
    assert h["step"].tolist() == list(range(1, 7))  # rows 1-4 from the checkpoint's history, 5-6 run now


# ---- issue 42 audit: fit is the hand-written loop bit for bit, every precision, with clipping, accumulation
# and a scheduler; train_step and fit run amp_step; amp_step never reads the device back


def hand_written_loop(model: nn.Module, micro_batches, opt, precision: str, *, clip: float | None, accum: int,
                      sched, inf_on: set[int] = frozenset()):
    """The oracle: torch.amp's documented recipe with accumulation, written out (micro-batch loss weighted by its
    share of the step's samples), the scheduler stepped only when the scaler did not skip the step."""
    scaler = torch.amp.GradScaler("cpu", enabled=precision == "fp16")
    dtype = DTYPE.get(precision, torch.float32)
    losses, n = [], 0
    for i in range(0, len(micro_batches), accum):
        group = micro_batches[i : i + accum]
        total = sum(len(y) for _, y in group)
        step_loss = 0.0
        for x, y in group:
            n += 1
            with torch.autocast("cpu", dtype=dtype, enabled=precision in DTYPE):
                loss = F.cross_entropy(model(x), y)
                loss = loss * math.inf if n in inf_on else loss
                loss = loss if len(group) == 1 else loss * (len(y) / total)
            scaler.scale(loss).backward()
            step_loss += loss.item()
        if clip is not None:
            scaler.unscale_(opt)
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
        before = scaler.get_scale()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)
        if sched is not None and not (scaler.is_enabled() and scaler.get_scale() < before):
            sched.step()
        losses.append(step_loss)
    return losses, scaler


@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
@pytest.mark.parametrize("clip", [None, 0.5])
@pytest.mark.parametrize("accum", [1, 2, 3])
def test_fit_is_the_hand_written_loop_bit_for_bit(precision: str, clip: float | None, accum: int) -> None:
    # 7 micro-batches of 8 and a last one of 4 (unequal sizes; with accum 3 the epoch's last step takes two), an
    # inf loss on micro-batch 2 (a skipped fp16 step; fp32/bf16 would stop: there it is left out), a StepLR
    inf_on = {2} if precision == "fp16" else set()
    ds = data(60)
    batches = [ds[i : i + 8] for i in range(0, 60, 8)]
    a, b = mlp(), mlp()
    oa, ob = torch.optim.Adam(a.parameters(), lr=1e-2), torch.optim.Adam(b.parameters(), lr=1e-2)
    sa = torch.optim.lr_scheduler.StepLR(oa, step_size=1, gamma=0.7)
    sb = torch.optim.lr_scheduler.StepLR(ob, step_size=1, gamma=0.7)
    want, scaler = hand_written_loop(a, batches, oa, precision, clip=clip, accum=accum, sched=sa, inf_on=inf_on)
    count = {"n": 0}

    def loss_fn(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        count["n"] += 1
        loss = F.cross_entropy(out, y)
        return loss * math.inf if count["n"] in inf_on else loss

    hist = fit(b, batches, ob, precision=precision, clip_grad_norm=clip, accum_steps=accum, loss_fn=loss_fn,
               callbacks=[Schedule(sb)])
    assert len(hist) == len(want) == math.ceil(len(batches) / accum)
    for pa, pb in zip(a.parameters(), b.parameters(), strict=True):
        assert torch.equal(pa, pb)  # bit for bit, also in fp16 and bf16
    assert hist["scale"].iloc[-1] == scaler.get_scale() and sa.get_last_lr() == sb.get_last_lr()
    assert hist["skipped"].sum() == (1 if inf_on else 0)
    finite = [(g, w) for g, w in zip(hist["loss"], want, strict=True) if math.isfinite(w)]
    assert all(math.isclose(g, w, rel_tol=1e-6) for g, w in finite)  # fit sums in fp32 on the device


def test_train_step_and_fit_run_amp_step_once_per_step(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = []
    real = fp16lab.train.step.amp_step

    def counting(*args, **kwargs):
        calls.append(kwargs.get("clip_grad_norm"))
        return real(*args, **kwargs)

    monkeypatch.setattr(fp16lab.train.step, "amp_step", counting)
    m = mlp()
    o = torch.optim.SGD(m.parameters(), lr=0.1)
    train_step(m, o, make_scaler("fp16", "cpu"), [data(8)[:], data(8, seed=3)[:]], clip_grad_norm=1.0)
    assert calls == [1.0]
    fit(m, loader(64, 8), o, precision="fp32", steps=3, callbacks=[])
    assert calls == [1.0, None, None, None]


@pytest.mark.parametrize("precision", ["fp16", "bf16"])
@pytest.mark.parametrize("clip,grad_norm", [(None, False), (0.5, False), (None, True)])
def test_amp_step_never_reads_a_tensor_back(monkeypatch: pytest.MonkeyPatch, precision: str, clip, grad_norm) -> None:
    # With a fused optimizer GradScaler needs no host read (torch's own .item() is in the unfused path): then
    # amp_step, clipping and measuring included, reads nothing back. On a GPU a read is a host sync.
    m = mlp()
    opt = torch.optim.Adam(m.parameters(), lr=1e-2, fused=True)
    scaler = make_scaler(precision, "cpu")
    x, y = data(8)[:]

    def loss_of(xy):
        return F.cross_entropy(m(xy[0]), xy[1])

    amp_step(loss_of, [(x, y)], opt, scaler, precision=precision, device="cpu")  # first step: lazy state

    def refuse(self, *a, **k):
        raise AssertionError("amp_step read a tensor back to the host")

    for name in ("item", "tolist", "__bool__", "__float__", "__int__", "numpy"):
        monkeypatch.setattr(torch.Tensor, name, refuse)
    norm = amp_step(loss_of, [(x, y), (x, y)], opt, scaler, precision=precision, device="cpu", clip_grad_norm=clip,
                    grad_norm=grad_norm)
    monkeypatch.undo()
    assert (norm is None) == (clip is None and not grad_norm) and all(q.grad is None for q in m.parameters())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
@pytest.mark.parametrize("precision", ["fp16", "bf16"])
def test_cuda_amp_step_is_sync_free(precision: str) -> None:
    torch.manual_seed(0)
    m = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)).cuda()
    opt = torch.optim.Adam(m.parameters(), lr=1e-2, fused=True)
    scaler = make_scaler(precision, "cuda")
    x, y = torch.randn(16, 32, device="cuda"), torch.randint(0, 4, (16,), device="cuda")

    def loss_of(xy):
        return F.cross_entropy(m(xy[0]), xy[1])

    amp_step(loss_of, [(x, y)], opt, scaler, precision=precision, device="cuda")  # the scaler's lazy state
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for clip, grad_norm in ((None, False), (1.0, False), (None, True)):
            amp_step(loss_of, [(x, y), (x, y)], opt, scaler, precision=precision, device="cuda",
                     clip_grad_norm=clip, grad_norm=grad_norm)
    finally:
        torch.cuda.set_sync_debug_mode("default")
