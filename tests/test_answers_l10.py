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
RING4 = 2 * 3 / 4  # a ring all-reduce over 4 ranks: each sends 2(N-1)/N of the payload


def test_wire_dtype(capsys):
    right = RING4 * P * 2 / 1.25e9
    l10.check_wire_dtype("bf16", right, params=P, bf16_measured=True)
    assert capsys.readouterr().out == "✓ correct\n"
    with pytest.raises(AssertionError, match="twice the bytes"):
        l10.check_wire_dtype("fp32", RING4 * P * 4 / 1.25e9, params=P, bf16_measured=True)
    with pytest.raises(AssertionError, match="no loss scale"):
        l10.check_wire_dtype("fp16", right, params=P, bf16_measured=True)
    with pytest.raises(AssertionError, match="an eighth of that"):
        l10.check_wire_dtype("bf16", RING4 * P * 2 / 10e9, params=P, bf16_measured=True)  # bits taken for bytes
    with pytest.raises(AssertionError, match="2 bytes on the wire, not 4"):
        l10.check_wire_dtype("bf16", RING4 * P * 4 / 1.25e9, params=P, bf16_measured=True)  # FP32's bytes
    with pytest.raises(AssertionError, match="count the GPUs, not the boxes"):
        l10.check_wire_dtype("bf16", P * 2 / 1.25e9, params=P, bf16_measured=True)  # ring factor left out, or N = 2
    with pytest.raises(AssertionError, match="count the GPUs, not the boxes"):
        l10.check_wire_dtype("bf16", 2 * (2 - 1) / 2 * P * 2 / 1.25e9, params=P, bf16_measured=True)
    with pytest.raises(AssertionError, match="around the ring twice"):
        l10.check_wire_dtype("bf16", 3 / 4 * P * 2 / 1.25e9, params=P, bf16_measured=True)  # (N-1)/N only
    with pytest.raises(AssertionError, match="ring all-reduce time for every rank"):
        l10.check_wire_dtype("bf16", right * 3, params=P, bf16_measured=True)  # some other formula
    with pytest.raises(AssertionError, match="you gave milliseconds"):
        l10.check_wire_dtype("bf16", right * 1e3, params=P, bf16_measured=True)
    with pytest.raises(AssertionError, match="not 1.25 GiB/s"):
        l10.check_wire_dtype("bf16", RING4 * P * 2 / (1.25 * 2**30), params=P, bf16_measured=True)
    l10.check_wire_dtype("bf16", torch.tensor(right), params=P, bf16_measured=True)  # a 0-d tensor counts
    with pytest.raises(AssertionError, match="a number of seconds"):
        l10.check_wire_dtype("bf16", "0.36", params=P, bf16_measured=True)


def _g_ex():
    return torch.logspace(-14, -1, 4096) * torch.where(torch.arange(4096) % 2 == 0, 1.0, -1.0)


def _frac(t):
    return float((t == 0).float().mean())


def test_flushed_right_answers(capsys):
    g = _g_ex()
    right, scaled = _frac(g.to(torch.float16) / 8), _frac((g * 2.0**16).to(torch.float16) / 8)
    assert 0 < scaled < right < 1  # the exercise's data: the scale saves some values, not all
    l10.check_flushed(right, scaled, g)
    assert capsys.readouterr().out == "✓ correct\n"
    l10.check_flushed(torch.tensor(right), torch.tensor(scaled), g)  # 0-d tensors count
    l10.check_flushed(_frac(g.half().div(8)), _frac((g * 65536).half().div_(8)), g)  # other spellings


@pytest.mark.parametrize("wrong, hint", [
    (lambda g: (_frac((g / 8).half()), _frac((g * 2.0**16 / 8).half())), "casts first and divides after"),
    (lambda g: (_frac(g.half().float() / 8), _frac((g * 2.0**16).half().float() / 8)), "divide by 8 in float16"),
    (lambda g: (_frac(g.half()), _frac((g * 2.0**16).half())), "divide by 8 in float16"),  # no division
    (lambda g: (_frac(g.half() / 8), 0.0), "or a guess"),  # a guessed 0 for the scaled bucket
    (lambda g: (_frac(g.bfloat16() / 8), _frac((g * 2.0**16).bfloat16() / 8)), "bfloat16 cast"),
    (lambda g: (_frac(g.half() / 8), _frac(g.half() / 8)), "multiply by the scale 2\\*\\*16 before the cast"),
    (lambda g: (_frac(g.half() / 8), _frac(g.half() * 2.0**16 / 8)), "already scaled"),  # scale after the cast
    (lambda g: (_frac(g.half() / 8), _frac((g * 2.0**16).half() / 8 / 2.0**16)), "count the zeros on the wire"),
    (lambda g: (_frac((g * 2.0**16).half() / 8), _frac((g * 2.0**16).half() / 8)), "cast g_ex to float16"),
    (lambda g: (100 * _frac(g.half() / 8), _frac((g * 2.0**16).half() / 8)), "fraction between 0 and 1"),  # percent
    (lambda g: (_frac(g.half() / 2), _frac((g * 2.0**16).half() / 2)), "cast g_ex to float16, then divide by 8"),
])
def test_flushed_wrong_answers(wrong, hint):
    g = _g_ex()
    with pytest.raises(AssertionError, match=hint):
        l10.check_flushed(*wrong(g), g)


RATIO = (1 / 2 * (2 * 2 + 4)) / (2 * 1 / 2 * 2)  # FSDP2 (two BF16 all-gathers + FP32 reduce-scatter) / DDP BF16 hook


def test_fsdp_choice(capsys):
    ddp, fsdp = 12.0, 6.0
    kw = {"ddp_bytes_per_param": ddp, "fsdp_bytes_per_param": fsdp}
    gib = fsdp * 1.3e9 / 2**30
    assert RATIO == 2.0
    l10.check_fsdp_choice(True, gib, RATIO, **kw)
    assert capsys.readouterr().out == "✓ correct\n"
    with pytest.raises(AssertionError, match="compare DDP's bytes per GPU"):
        l10.check_fsdp_choice(False, ddp * 1.3e9 / 2**30, RATIO, **kw)
    with pytest.raises(AssertionError, match="the other setup's held bytes"):
        l10.check_fsdp_choice(True, ddp * 1.3e9 / 2**30, RATIO, **kw)
    with pytest.raises(AssertionError, match="already per rank"):
        l10.check_fsdp_choice(True, gib / 2, RATIO, **kw)
    with pytest.raises(AssertionError, match="not 1e9"):
        l10.check_fsdp_choice(True, fsdp * 1.3e9 / 1e9, RATIO, **kw)
    with pytest.raises(AssertionError, match="gradients come on top"):
        l10.check_fsdp_choice(True, (fsdp + 2) * 1.3e9 / 2**30, RATIO, **kw)
    with pytest.raises(AssertionError, match="of the setup you chose"):
        l10.check_fsdp_choice(True, gib * 3, RATIO, **kw)
    with pytest.raises(AssertionError, match="a number of GiB"):
        l10.check_fsdp_choice(True, "7.3", RATIO, **kw)
    for ratio, hint in [
        (1.5, "ZeRO's 1.5x"),  # the textbook figure, one dtype
        ((2 + 4) / 2 / 2, "counts one all-gather"),  # the backward all-gather forgotten
        ((2 * 2 + 2) / 2 / 2, "every collective in one dtype"),  # BF16 reduction too
        ((2 * 2 + 4) / 2 / 4, "not ddp_fp32's 4"),  # compared with FP32 DDP: exactly 1
        (1.0, "not ddp_fp32's 4"),  # a guessed "the same"
        (2 / 4, "not the reverse"),  # DDP / FSDP2
        ((2 * 2 + 4) / 2 / 1, "sends its payload twice"),  # the all-reduce counted once
        (3.0, "section 8's rule for each collective"),  # the gathers in FP32
    ]:
        with pytest.raises(AssertionError, match=hint):
            l10.check_fsdp_choice(True, gib, ratio, **kw)
    with pytest.raises(AssertionError, match="is a number"):
        l10.check_fsdp_choice(True, gib, None, **kw)
    import numpy as np

    l10.check_fsdp_choice(np.bool_(ddp * 1.3e9 / 2**30 > 12), np.float64(gib), torch.tensor(RATIO), **kw)


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
