"""fp16lab.train: the loop against a hand-written torch.amp loop, accumulation, skipped steps,
scheduler, checkpoint/resume, the divergence guard and bad input. CPU half precision is
slow on the CI machine, so the models here are tiny MLPs."""

from __future__ import annotations

import copy
import math
import warnings
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import fp16lab.env
from fp16lab.train import (
    History,
    TrainingDiverged,
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
    hist = fit(b, ld, ob, precision=precision, epochs=1, clip_grad_norm=clip, progress=False)
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
    h = fit(m, loader(64, 8), torch.optim.SGD(m.parameters(), lr=0.1), precision="fp32",
            accum_steps=4, epochs=1, progress=False)
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
    h = fit(model, loader(64, 8), opt, precision="fp16", epochs=1, loss_fn=_inf_on(bad),
            scheduler=sched, progress=False)
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
    full = fit(m1, l1, o1, precision=precision, steps=steps, scheduler=s1, progress=False,
               loss_fn=_inf_on(bad) if precision == "fp16" else None)

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

    with pytest.raises(KeyboardInterrupt):
        fit(m2, l2, o2, precision=precision, steps=steps, scheduler=s2, loss_fn=crashing,
            checkpoint=ckpt, checkpoint_every=4, progress=False)
    assert ckpt.exists() and not list(tmp_path.glob("*.tmp"))

    m3, o3, s3, l3 = setup()  # a fresh process would build everything again
    torch.manual_seed(999)  # and its RNG would be elsewhere
    resumed = fit(m3, l3, o3, precision=precision, steps=steps, scheduler=s3, checkpoint=ckpt,
                  resume=True, progress=False)
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
    fit(model, loader(16, 8), opt, precision="fp16", scaler=scaler, epochs=1, progress=False)
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
    with pytest.raises(FileNotFoundError):
        load_checkpoint(tmp_path / "missing.pt", mlp())


def test_guard_non_finite_loss_fp32() -> None:
    with pytest.raises(TrainingDiverged) as info:
        m = mlp()
        fit(m, loader(64, 8), torch.optim.SGD(m.parameters(), lr=0.1), precision="fp32",
            epochs=1, loss_fn=_inf_on({3}), progress=False)
    err = info.value
    assert err.step == 3 and err.reason == "loss" and math.isinf(err.value)
    msg = str(err)
    assert "step 3" in msg and "inf" in msg and "lower learning rate" in msg and "FP32 island" in msg
    assert len(err.history) == 3 and err.history["step"].tolist() == [1, 2, 3]


def test_guard_scale_collapse_fp16() -> None:
    scaler = torch.amp.GradScaler("cpu", init_scale=8.0)
    with pytest.raises(TrainingDiverged) as info:
        m = mlp()
        fit(m, loader(64, 8), torch.optim.SGD(m.parameters(), lr=0.1), precision="fp16",
            scaler=scaler, epochs=1, loss_fn=_inf_on(set(range(1, 100))), progress=False)
    err = info.value
    assert err.reason == "scale" and err.step == 4 and err.value == 0.5  # 8 -> 4 -> 2 -> 1 -> 0.5
    assert "bf16" in str(err) and "min_scale" in str(err) and "clip" in str(err)
    assert err.history.n_skipped == 4
    # an fp16 inf loss with a healthy scale is just a skipped step, not an error
    m = mlp()
    h = fit(m, loader(64, 8), torch.optim.SGD(m.parameters(), lr=0.1), precision="fp16",
            epochs=1, loss_fn=_inf_on({1}), progress=False)
    assert h.n_skipped == 1


@pytest.mark.parametrize("bad", ["fp8", "half", 16, None])
def test_unknown_precision(bad: object) -> None:
    with pytest.raises(ValueError, match="allowed: 'fp32', 'tf32', 'fp16', 'bf16'"):
        fit(mlp(), loader(), torch.optim.SGD(mlp().parameters(), lr=0.1), precision=bad, progress=False)


def test_bf16_on_pre_ampere_gpu_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fp16lab.env, "cuda_capability", lambda device=0: (7, 5))
    with pytest.raises(ValueError, match="bf16 needs native support.*sm_75"):
        fit(mlp(), loader(), torch.optim.SGD(mlp().parameters(), lr=0.1), precision="bf16",
            device="cuda", progress=False)


def test_fp16_on_cpu_warns() -> None:
    with warnings.catch_warnings():
        warnings.resetwarnings()
        m = mlp()
        with pytest.warns(UserWarning, match="slow"):
            fit(m, loader(16, 8), torch.optim.SGD(m.parameters(), lr=0.1), precision="fp16",
                epochs=1, progress=False)


def test_bad_inputs() -> None:
    opt = lambda m: torch.optim.SGD(m.parameters(), lr=0.1)  # noqa: E731
    m = mlp()
    empty = DataLoader(TensorDataset(torch.zeros(0, 12), torch.zeros(0, dtype=torch.long)), batch_size=4)
    with pytest.raises(ValueError, match="empty"):
        fit(m, empty, opt(m), precision="fp32", progress=False)
    with pytest.raises(ValueError, match="empty"):
        fit(m, [], opt(m), precision="fp32", steps=1, progress=False)

    class Empty:
        def __iter__(self):
            return iter(())

    with pytest.raises(ValueError, match="no batches"):
        fit(m, Empty(), opt(m), precision="fp32", steps=1, progress=False)
    frozen = mlp()
    for q in frozen.parameters():
        q.requires_grad_(False)
    with pytest.raises(ValueError, match="no trainable parameters"):
        fit(frozen, loader(), opt(mlp()), precision="fp32", progress=False)
    for bad in (0, -1, 1.5):
        with pytest.raises(ValueError, match="accum_steps must be an int >= 1"):
            fit(m, loader(), opt(m), precision="fp32", accum_steps=bad, progress=False)
    with pytest.raises(ValueError, match="steps or epochs"):
        fit(m, loader(), opt(m), precision="fp32", steps=2, epochs=1, progress=False)
    with pytest.raises(ValueError, match="checkpoint"):
        fit(m, loader(), opt(m), precision="fp32", resume=True, progress=False)
    with pytest.raises(ValueError, match="clip_grad_norm"):
        fit(m, loader(), opt(m), precision="fp32", clip_grad_norm=0, progress=False)
    with pytest.raises(ValueError, match="GradScaler"):
        fit(m, loader(), opt(m), precision="fp32", scaler=make_scaler("fp16", "cpu"), progress=False)
    with pytest.raises(ValueError, match="optimizer does not hold"):
        fit(m, loader(), opt(mlp()), precision="fp32", progress=False)
    with pytest.raises(ValueError, match="pair"):
        fit(m, [torch.zeros(4, 12)], opt(m), precision="fp32", steps=1, progress=False)


def test_evaluate_and_eval_columns() -> None:
    model = mlp()
    ld = loader(64, 8)
    h = fit(model, ld, torch.optim.Adam(model.parameters(), lr=1e-2), precision="fp32", epochs=2,
            eval_loader=ld, eval_every=4, eval_fn=lambda m: {"probe": 1.0}, progress=False)
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
    h = fit(model, DataLoader(ds, batch_size=16, pin_memory=True), torch.optim.Adam(model.parameters()),
            precision=precision, device="cuda", channels_last=True, epochs=2, progress=False)
    assert h["loss"].map(math.isfinite).all() and len(h) == 8
    assert next(model.parameters()).dtype == torch.float32  # weights stay fp32


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
    full = fit(m1, l1, o1, precision="fp16", device="cuda", steps=8, progress=False)
    ckpt = tmp_path / "run.pt"
    m2, o2, l2 = setup()
    n = {"n": 0}

    def crashing(out, y):
        n["n"] += 1
        if n["n"] == 6:
            raise KeyboardInterrupt("simulated crash at step 6")
        return F.cross_entropy(out, y)

    with pytest.raises(KeyboardInterrupt):
        fit(m2, l2, o2, precision="fp16", device="cuda", steps=8, loss_fn=crashing, checkpoint=ckpt,
            checkpoint_every=4, progress=False)
    m3, o3, l3 = setup()
    resumed = fit(m3, l3, o3, precision="fp16", device="cuda", steps=8, checkpoint=ckpt, resume=True,
                  progress=False)
    assert resumed["loss"].tolist()[-4:] == full["loss"].tolist()[-4:]
