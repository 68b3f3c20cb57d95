"""Lesson 10's exercise checks accept the right answer and reject at least two plausible wrong ones."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from fp16lab.course.answers import l10


def _ex1():
    torch.manual_seed(1)
    model = nn.Sequential(nn.Linear(12, 16), nn.Tanh(), nn.Linear(16, 3))
    return model, torch.randn(10, 12), torch.randint(0, 3, (10,))


def _halves(model, x, y, zero=True):
    grads = []
    for xs, ys in zip(x.chunk(2), y.chunk(2), strict=True):
        if zero:
            model.zero_grad()
        F.cross_entropy(model(xs), ys).backward()
        grads.append(model[0].weight.grad.clone())
    return grads


def test_ddp_by_hand(capsys):
    model, x, y = _ex1()
    g = _halves(model, x, y)
    l10.check_ddp_by_hand(g, (g[0] + g[1]) / 2, model, x, y)
    assert capsys.readouterr().out == "✓ correct\n"
    with pytest.raises(AssertionError, match="average the halves"):
        l10.check_ddp_by_hand(g, g[0] + g[1], model, x, y)  # the sum, not the mean
    bad = _halves(model, x, y, zero=False)  # gradients accumulate across the halves
    with pytest.raises(AssertionError, match="one half's mean loss"):
        l10.check_ddp_by_hand(bad, (bad[0] + bad[1]) / 2, model, x, y)
    model.zero_grad()
    F.cross_entropy(model(x.chunk(2)[0]), y.chunk(2)[0]).backward()
    other = [model[2].weight.grad.clone()] * 2  # the wrong layer's gradient
    with pytest.raises(AssertionError, match="same shape and dtype"):
        l10.check_ddp_by_hand(other, other[0], model, x, y)
    with pytest.raises(AssertionError, match="same shape and dtype"):  # gradients kept in FP16
        l10.check_ddp_by_hand([t.half() for t in g], ((g[0] + g[1]) / 2).half(), model, x, y)
    with pytest.raises(AssertionError, match="in FP32"):
        l10.check_ddp_by_hand(g, ((g[0] + g[1]) / 2).half(), model, x, y)
    for mean in (torch.stack(g).mean(0), g[0] / 2 + g[1] / 2, 0.5 * sum(g)):  # any way of averaging the halves
        l10.check_ddp_by_hand(g, mean, model, x, y)
        assert capsys.readouterr().out == "✓ correct\n"


def test_ddp_by_hand_wants_the_mean_of_the_halves_not_the_whole_batch():
    model, x, y = _ex1()
    g = _halves(model, x, y)
    model.zero_grad()
    F.cross_entropy(model(x), y).backward()
    full = model[0].weight.grad.clone()  # the whole batch's gradient: the halves' mean only up to rounding
    assert not torch.equal(full, (g[0] + g[1]) / 2) and torch.allclose(full, (g[0] + g[1]) / 2, rtol=1e-5, atol=1e-7)
    with pytest.raises(AssertionError, match="whole batch's gradient computed again"):
        l10.check_ddp_by_hand(g, full, model, x, y)
    with pytest.raises(AssertionError, match="whole batch's gradient computed again"):  # in FP64, cast back: the same
        l10.check_ddp_by_hand(g, _whole_batch_fp64(model, x, y), model, x, y)
    with pytest.raises(AssertionError, match="average the halves"):  # one half only
        l10.check_ddp_by_hand(g, g[0], model, x, y)


def _whole_batch_fp64(model, x, y):
    import copy

    m = copy.deepcopy(model).double()
    F.cross_entropy(m(x.double()), y).backward()
    return m[0].weight.grad.float()


P = 150e6


def test_wire_dtype(capsys):
    l10.check_wire_dtype("bf16", P * 2 / 1.25e9, params=P, bf16_measured=True)
    assert capsys.readouterr().out == "✓ correct\n"
    with pytest.raises(AssertionError, match="twice the bytes"):
        l10.check_wire_dtype("fp32", P * 4 / 1.25e9, params=P, bf16_measured=True)
    with pytest.raises(AssertionError, match="no loss scale"):
        l10.check_wire_dtype("fp16", P * 2 / 1.25e9, params=P, bf16_measured=True)
    with pytest.raises(AssertionError, match="an eighth of that"):
        l10.check_wire_dtype("bf16", P * 2 / 10e9, params=P, bf16_measured=True)  # bits taken for bytes
    with pytest.raises(AssertionError, match="2 bytes on the wire, not 4"):
        l10.check_wire_dtype("bf16", P * 4 / 1.25e9, params=P, bf16_measured=True)  # FP32's bytes
    with pytest.raises(AssertionError, match="section 8's ring all-reduce time"):
        l10.check_wire_dtype("bf16", 2 * P * 2 / 1.25e9 * 3, params=P, bf16_measured=True)  # some other formula
    with pytest.raises(AssertionError, match="you gave milliseconds"):
        l10.check_wire_dtype("bf16", P * 2 / 1.25e9 * 1e3, params=P, bf16_measured=True)
    with pytest.raises(AssertionError, match="not 1.25 GiB/s"):
        l10.check_wire_dtype("bf16", P * 2 / (1.25 * 2**30), params=P, bf16_measured=True)
    l10.check_wire_dtype("bf16", torch.tensor(P * 2 / 1.25e9), params=P, bf16_measured=True)  # a 0-d tensor counts
    with pytest.raises(AssertionError, match="a number of seconds"):
        l10.check_wire_dtype("bf16", "0.24", params=P, bf16_measured=True)


def test_flushed():
    g = torch.logspace(-10, -1, 4096) * torch.where(torch.arange(4096) % 2 == 0, 1.0, -1.0)
    right = float(((g.to(torch.float16) / 8) == 0).float().mean())
    scaled = float((((g * 2.0**16).to(torch.float16) / 8) == 0).float().mean())
    l10.check_flushed(right, scaled, g)
    with pytest.raises(AssertionError, match="cast g_ex to float16, then divide"):
        l10.check_flushed(float(((g / 8).to(torch.float16) == 0).float().mean()), scaled, g)  # divided first
    with pytest.raises(AssertionError, match="multiply by the scale"):
        l10.check_flushed(right, right, g)
    with pytest.raises(AssertionError, match="divided in FP32 after the cast"):
        l10.check_flushed(float((g.to(torch.float16).float() / 8 == 0).float().mean()), scaled, g)
    l10.check_flushed(torch.tensor(right), torch.tensor(scaled), g)  # 0-d tensors count


RATIO = (1 / 2 * (2 * 2 + 4)) / (2 * 1 / 2 * 4)  # FSDP2 (two BF16 all-gathers + FP32 reduce-scatter) / DDP FP32


def test_fsdp_choice(capsys):
    ddp, fsdp = 12.0, 6.0
    kw = {"ddp_bytes_per_param": ddp, "fsdp_bytes_per_param": fsdp}
    l10.check_fsdp_choice(True, fsdp * 1.3e9 / 2**30, RATIO, **kw)
    assert capsys.readouterr().out == "✓ correct\n"
    with pytest.raises(AssertionError, match="compare DDP's bytes per GPU"):
        l10.check_fsdp_choice(False, ddp * 1.3e9 / 2**30, RATIO, **kw)
    with pytest.raises(AssertionError, match="of the setup you chose"):
        l10.check_fsdp_choice(True, ddp * 1.3e9 / 2**30, RATIO, **kw)
    with pytest.raises(AssertionError, match="of the setup you chose"):
        l10.check_fsdp_choice(True, fsdp * 1.3e9 / 2**31, RATIO, **kw)
    with pytest.raises(AssertionError, match="ZeRO's ratio"):
        l10.check_fsdp_choice(True, fsdp * 1.3e9 / 2**30, 1.5, **kw)  # the textbook figure, one dtype
    with pytest.raises(AssertionError, match="twice per step"):
        l10.check_fsdp_choice(True, fsdp * 1.3e9 / 2**30, (2 + 4) / 8, **kw)  # the backward all-gather forgotten
    with pytest.raises(AssertionError, match="sends its payload twice"):
        l10.check_fsdp_choice(True, fsdp * 1.3e9 / 2**30, (2 * 2 + 4) / 4, **kw)  # all-reduce counted once
    with pytest.raises(AssertionError, match="all three collectives in BF16"):
        l10.check_fsdp_choice(True, fsdp * 1.3e9 / 2**30, (2 * 2 + 2) / 8, **kw)  # BF16 reduction too
    with pytest.raises(AssertionError, match="is a number"):
        l10.check_fsdp_choice(True, fsdp * 1.3e9 / 2**30, None, **kw)
    import numpy as np

    l10.check_fsdp_choice(np.bool_(ddp * 1.3e9 / 2**30 > 12), np.float64(fsdp * 1.3e9 / 2**30), torch.tensor(RATIO), **kw)


def _exercise5():
    """Exercise 5's solution and wrong answers, from the lesson itself (its solution cell and metadata)."""
    import json
    from pathlib import Path

    nb = json.loads((Path(__file__).resolve().parents[1] / "notebooks" / "10_multi_gpu.ipynb").read_text())
    cell = next(c for c in nb["cells"] if "solution" in c["metadata"].get("tags", []) and "job_run" in "".join(c["source"]))
    return "".join(cell["source"]), cell["metadata"]["wrong_answers"]


def _run_job(source, tmp_path):
    import subprocess
    import sys

    job_dir = tmp_path / "job"
    job_dir.mkdir()
    scope = {"job_dir": job_dir, "subprocess": subprocess, "sys": sys}
    exec(source, scope)  # noqa: S102 - the lesson's own exercise code
    return scope["job_run"], job_dir


@pytest.mark.parametrize("case, hint", [
    ("solution", None),
    (0, "mp_policy=MixedPrecisionPolicy"),  # fully_shard without a policy: FP32 compute
    (1, "keep the FP32 weights"),  # model.half() instead of the policy
    (2, "put scaler.state_dict"),  # the scaler left out of the checkpoint
    (3, "torch.distributed.checkpoint"),  # torch.save on rank 0
    (4, "two ranks on gloo"),  # --nproc_per_node=1
    (5, "start the script with torchrun"),  # plain python
    (6, "load the checkpoint back"),  # dcp.load forgotten
    (7, "no torch.autocast here"),  # autocast instead of MixedPrecisionPolicy
    (8, "call fully_shard on each Linear"),  # only the whole model sharded
    (9, "reduce_dtype=torch.float32"),  # FP16 reduction
    (10, "load the checkpoint back"),  # never reloaded
])
def test_fsdp_job(case, hint, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    solution, wrong = _exercise5()
    job_run, job_dir = _run_job(solution if case == "solution" else wrong[case], tmp_path)
    if hint is None:
        l10.check_fsdp_job(job_run, job_dir)
        assert capsys.readouterr().out.endswith("✓ correct\n")
    else:
        with pytest.raises(AssertionError, match=hint):
            l10.check_fsdp_job(job_run, job_dir)


@pytest.mark.parametrize("policy, hint", [
    ("MixedPrecisionPolicy(param_dtype=torch.float16, reduce_dtype=torch.float)", None),  # torch.float is float32
    ("MixedPrecisionPolicy(torch.float16, torch.float32)", None),  # positional: (param_dtype, reduce_dtype)
    ("MixedPrecisionPolicy(param_dtype=torch.float16, reduce_dtype=REDUCE)", None),  # a variable holding float32
    ("MixedPrecisionPolicy(**dict(param_dtype=torch.float16, reduce_dtype=torch.float32))", None),  # not provable
    ("MixedPrecisionPolicy(param_dtype=torch.float16, reduce_dtype=None)", "left out, it falls back"),
    ("MixedPrecisionPolicy(torch.float16)", "left out, it falls back"),
    ("MixedPrecisionPolicy(param_dtype=torch.float16, reduce_dtype=torch.float16)", r"reduce_dtype=torch.float16 sums"),
    ("MixedPrecisionPolicy(torch.half, torch.bfloat16)", r"reduce_dtype=torch.bfloat16 sums"),
    ("MixedPrecisionPolicy(param_dtype=torch.float16, reduce_dtype=HALF)", r"reduce_dtype=torch.half sums"),
])
def test_fsdp_job_reads_reduce_dtype_as_written(policy, hint, fsdp_solution_run, capsys):
    """However the script spells reduce_dtype, FP32 (or anything the source does not prove 16-bit) passes, and a
    missing or 16-bit one is named. The run is the solution's; only the script the check reads changes."""
    job_run, job_dir, source = fsdp_solution_run
    line = "policy = MixedPrecisionPolicy(param_dtype=torch.float16, reduce_dtype=torch.float32)"
    assert line in source
    script = next(Path(a) for a in job_run.args if str(a).endswith(".py"))
    script.write_text(source.replace(line, f"REDUCE, HALF = torch.float32, torch.half\npolicy = {policy}"))
    if hint is None:
        l10.check_fsdp_job(job_run, job_dir)
        assert capsys.readouterr().out.endswith("✓ correct\n")
    else:
        with pytest.raises(AssertionError, match=hint):
            l10.check_fsdp_job(job_run, job_dir)


def test_policy_reduce_dtypes_aliases():
    head = "import torch\nfrom torch.distributed.fsdp import MixedPrecisionPolicy as MPP\nfrom torch import float16 as f16\n"
    assert l10._policy_reduce_dtypes(head + "MPP(f16, torch.float32)") == ["float32"]
    assert l10._policy_reduce_dtypes(head + "MPP(f16, f16)") == ["float16"]
    assert l10._policy_reduce_dtypes(head + "r = torch.float16\nr = torch.float32\nMPP(f16, r)") == ["?"]  # not provable
    assert l10._policy_reduce_dtypes(head + "MPP(*args)") == ["?"]
    assert l10._policy_reduce_dtypes(head) == []


@pytest.fixture(scope="module")
def fsdp_solution_run(tmp_path_factory):
    import os

    old = os.environ.get("OMP_NUM_THREADS")
    os.environ["OMP_NUM_THREADS"] = "1"
    try:
        solution, _ = _exercise5()
        job_run, job_dir = _run_job(solution, tmp_path_factory.mktemp("fsdp_solution"))
    finally:
        if old is None:
            os.environ.pop("OMP_NUM_THREADS")
        else:
            os.environ["OMP_NUM_THREADS"] = old
    assert (job_dir / "result.json").exists(), job_run.stderr[-2000:]
    script = next(Path(a) for a in job_run.args if str(a).endswith(".py"))
    return job_run, job_dir, script.read_text()


def test_fsdp_job_needs_its_folder(tmp_path):
    with pytest.raises(AssertionError, match="cannot run here"):
        l10.check_fsdp_job(None, tmp_path / "missing")
    with pytest.raises(AssertionError, match="what subprocess.run returned"):
        l10.check_fsdp_job(None, tmp_path)


def test_fsdp_job_a_rank_aborted_at_exit_after_the_results(tmp_path, capsys, monkeypatch):
    """gloo's teardown can SIGABRT a finished rank: the check judges what the run wrote, unless the script erred."""
    import subprocess

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    solution, _ = _exercise5()
    job_run, job_dir = _run_job(solution, tmp_path)
    # the real run only has to write its results: the teardown abort this test is about can hit it too
    assert (job_dir / "result.json").exists(), job_run.stderr[-2000:]
    abort = "terminate called without an active exception\ntraceback : Signal 6 (SIGABRT) received by PID 1\n"
    crashed = subprocess.CompletedProcess(job_run.args, -6, job_run.stdout, job_run.stderr + abort)
    l10.check_fsdp_job(crashed, job_dir)
    assert capsys.readouterr().out.endswith("✓ correct\n")
    script = job_dir / "fsdp_job.py"
    erred = subprocess.CompletedProcess(job_run.args, -6, "", f'  File "{script}", line 3, in <module>\n' + abort)
    with pytest.raises(AssertionError, match="failed under torchrun"):
        l10.check_fsdp_job(erred, job_dir)  # the script's own traceback: a real failure
    (job_dir / "result.json").unlink()
    with pytest.raises(AssertionError, match="failed under torchrun"):
        l10.check_fsdp_job(crashed, job_dir)  # aborted before rank 0 wrote its results
