"""fp16lab.labs.multi_gpu: real 2-process runs on gloo (CPU), failures and hangs, refused arguments.

Each pool of processes costs seconds to start (every rank imports torch), so the equality tests share
one module-scoped pool, and the failure tests start processes that import nothing extra.
"""

from __future__ import annotations

import math
import multiprocessing
import time

import pytest
import torch

from fp16lab.labs import multi_gpu as fd
from fp16lab.labs.multi_gpu import (
    WorkerError,
    Workers,
    WorkerTimeout,
    check_world,
    fail_on_rank,
    hang_on_rank,
    launch,
    whoami,
)


def _ranks_alive() -> set[int]:
    """Process ids of the rank processes alive now (the module's shared pool included)."""
    return {p.pid for p in multiprocessing.active_children() if p.name.startswith("fp16lab-rank")}


# --------------------------------------------------------------- refused before anything starts


@pytest.mark.parametrize("world_size", [0, -1, True, 2.0, "2", None])
def test_bad_world_sizes_are_refused(world_size):
    before = _ranks_alive()
    with pytest.raises(ValueError, match="world_size must be an int >= 1"):
        Workers(world_size, "gloo")
    assert _ranks_alive() == before


@pytest.mark.parametrize("backend", ["mpi", "NCCL", "", None, 1])
def test_bad_backends_are_refused(backend):
    with pytest.raises(ValueError, match=r"backend must be one of 'gloo', 'nccl'"):
        check_world(2, backend)


def test_too_many_gloo_processes_are_refused():
    before = _ranks_alive()
    with pytest.raises(ValueError, match="more gloo processes than this machine has CPU cores"):
        launch(whoami, 10_000, "gloo")
    assert _ranks_alive() <= before  # nothing started, or everything started was stopped


def test_nccl_needs_one_gpu_per_rank(monkeypatch):
    if torch.cuda.is_available():
        with pytest.raises(ValueError, match="needs 1000 GPUs"):
            check_world(1000, "nccl")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="needs CUDA GPUs"):
        Workers(2, "nccl")


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"timeout": 0}, "timeout must be a finite number"),
        ({"timeout": True}, "timeout must be a finite number"),
        ({"timeout": math.inf}, "timeout must be a finite number"),
    ],
)
def test_bad_worker_options_are_refused(kwargs, message):
    before = _ranks_alive()
    with pytest.raises(ValueError, match=message):
        Workers(2, "gloo", **kwargs)
    assert _ranks_alive() <= before  # nothing started, or everything started was stopped


def _in_main(ctx):
    return ctx.rank


_in_main.__module__ = "__main__"  # as if typed into a notebook: a spawned worker cannot import it


def test_tasks_that_a_spawned_worker_cannot_import_are_refused():
    before = _ranks_alive()
    def local(ctx):
        return ctx.rank

    for bad, why in [(lambda ctx: 0, "cannot be imported"), (local, "cannot be imported"),
                     (_in_main, "cannot be imported"), (3, "task must be a function")]:
        with pytest.raises(ValueError, match=why):
            launch(bad)
    with pytest.raises(ValueError, match="cannot be pickled"):
        launch(whoami, unpicklable=lambda: 0)
    assert _ranks_alive() <= before  # nothing started, or everything started was stopped


def test_lesson_world_is_two_gloo_processes_in_quick_mode(monkeypatch):
    monkeypatch.setenv("FP16LAB_QUICK", "1")
    world = fd.lesson_world()
    assert (world.backend, world.world_size, world.device_type, world.multi_gpu) == ("gloo", 2, "cpu", False)
    assert world.pick(quick=1, full=2) == 1
    assert str(world) == "2 CPU processes on gloo"


def test_task_source_shows_what_the_ranks_run():
    assert "def task_skip_agreement" in fd.task_source(fd.skip_agreement)
    assert "no_sync" in fd.task_source(fd.accumulation)
    with pytest.raises(ValueError, match="experiment must be one of"):
        fd.task_source(whoami)


def test_model_numel_counts_the_mlp():
    assert fd.model_numel(64, 2) == 2 * (64 * 64 + 64) + 64 * 8 + 8


# ----------------------------------------------------------------------- real processes


@pytest.fixture(scope="module")
def workers():
    with Workers(2, "gloo", timeout=120) as w:
        yield w


def test_two_ranks_talk(workers):
    rows = workers.run(whoami)
    assert [r["rank"] for r in rows] == [0, 1]
    assert len({r["pid"] for r in rows}) == 2 and all(r["sum_of_ranks"] == 1.0 for r in rows)
    assert all(r["backend"] == "gloo" for r in rows)


def test_no_sync_all_reduces_once_per_step(workers):
    acc = fd.accumulation(workers, micro_batches=3, steps=2, batch=4, width=16, depth=1)
    once, every = acc.iloc[0], acc.iloc[1]
    assert every["all_reduce_calls_per_step"] == 3 * once["all_reduce_calls_per_step"]
    assert once["bytes_per_step"] == fd.model_numel(16, 1) * 4
    assert once["clip_norm_rank0"] == once["clip_norm_rank1"]
    assert once["own_norm_rank0"] != once["own_norm_rank1"]


def test_fsdp2_ranks_skip_together_on_one_ranks_inf_shard(workers):
    skips = fd.skip_agreement(workers, bad_rank=0, batch=4, width=16, depth=1, fsdp=True)
    assert skips.set_index("rank")["own_shard_finite"].to_dict() == {0: False, 1: True}  # only rank 0 saw it...
    assert skips["skipped"].all() and not skips["params_changed"].any()  # ...and both skipped
    assert (skips["scale_after"] == skips["scale_before"] / 2).all()


def test_experiments_refuse_bad_arguments_without_running(workers):
    with pytest.raises(ValueError, match="bad_rank must be a rank of this world"):
        fd.skip_agreement(workers, bad_rank=2)
    with pytest.raises(ValueError, match="fsdp must be"):
        fd.skip_agreement(workers, fsdp="yes")
    with pytest.raises(ValueError, match="micro_batches must be an int >= 2"):
        fd.accumulation(workers, micro_batches=1)
    assert workers.alive


def test_a_failing_worker_ends_the_launch_with_its_rank_and_traceback():
    before = _ranks_alive()
    t0 = time.perf_counter()
    with pytest.raises(WorkerError, match=r"rank 1 failed in task 'fp16lab.labs.multi_gpu.tasks.fail_on_rank'") as info:
        launch(fail_on_rank, rank=1, timeout=120)
    assert info.value.rank == 1 and "rank 1 was told to fail" in info.value.details
    assert not isinstance(info.value, WorkerTimeout)
    assert time.perf_counter() - t0 < 120  # ended by the error, not by the timeout
    assert _ranks_alive() <= before  # nothing started, or everything started was stopped


def test_a_hanging_worker_ends_with_a_timeout_that_names_it():
    before = _ranks_alive()
    with Workers(2, "gloo", timeout=180) as w:
        t0 = time.perf_counter()
        with pytest.raises(WorkerTimeout, match=r"within the timeout of 2 s") as info:
            w.run(hang_on_rank, rank=1, seconds=600, timeout=2)
        assert time.perf_counter() - t0 < 2 + 20
        assert 1 in info.value.ranks and info.value.timeout == 2
        assert not w.alive
        with pytest.raises(RuntimeError, match="these Workers are stopped"):
            w.run(whoami)
    assert _ranks_alive() <= before  # nothing started, or everything started was stopped


def test_a_worker_that_dies_is_reported_by_rank():
    before = _ranks_alive()
    with Workers(2, "gloo", timeout=180) as w:
        w._procs[0].kill()  # as the OOM killer or a segfault would
        w._procs[0].join(10)
        with pytest.raises(WorkerError, match=r"rank 0 exited \(exit code"):
            w.run(whoami, timeout=30)
    assert _ranks_alive() <= before  # nothing started, or everything started was stopped


# ------------------------------------------------------------------------------ GPUs


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA GPUs (NCCL)")
def test_nccl_ranks_talk_and_skip_together():
    with Workers(2, "nccl", timeout=300) as w:
        assert {r["backend"] for r in w.run(whoami)} == {"nccl"}
        skips = fd.skip_agreement(w, bad_rank=1)
        assert skips["skipped"].all() and not skips["params_changed"].any()


# --------------------------------------------------------------- bad-input audit (issue 14), nothing started


@pytest.mark.parametrize("backend, world_size, message", [("mpi", 2, "backend must be one of"),
                                                          ("gloo", 0, "world_size must be an int >= 1"),
                                                          ("gloo", True, "world_size must be an int >= 1")])
def test_a_world_built_by_hand_is_checked_too(backend, world_size, message):
    with pytest.raises(ValueError, match=message):
        fd.World(backend, world_size)


def _two_args(ctx, *, size):
    return size


@pytest.mark.parametrize(
    "task, kwargs",
    [
        (whoami, {"bogus": 1}),  # an argument the task does not take
        (_two_args, {}),  # a required one missing
        (__import__("os").getpid, {}),  # takes no ctx
        (torch.nn.Linear, {}),  # a class, not a task
    ],
)
def test_a_task_that_cannot_take_its_arguments_is_refused_before_spawning(task, kwargs):
    before = _ranks_alive()
    with pytest.raises(ValueError, match=r"cannot be called as task\(ctx, \*\*kwargs\)"):
        launch(task, timeout=5, **kwargs)
    assert _ranks_alive() <= before


@pytest.mark.parametrize("rank", [2, -1, "1", True])
def test_demo_tasks_refuse_a_rank_outside_the_world(rank):
    ctx = fd.RankContext(0, 2, "gloo", torch.device("cpu"))  # every rank refuses alike: no barrier is reached
    with pytest.raises(ValueError, match="rank must be"):
        fail_on_rank(ctx, rank=rank)
    with pytest.raises(ValueError, match="rank must be"):
        hang_on_rank(ctx, rank=rank, seconds=0.01)
    with pytest.raises(ValueError, match="seconds"):
        hang_on_rank(ctx, rank=1, seconds=0)


@pytest.mark.parametrize("width, depth, message", [(-1, 2, "width"), (0, 2, "width"), ("64", 2, "width"),
                                                   (2.0, 2, "width"), (64, 0, "depth"), (64, True, "depth")])
def test_model_numel_refuses_bad_sizes(width, depth, message):
    with pytest.raises(ValueError, match=message):
        fd.model_numel(width, depth)


# ------------------------------------------------- the ranks' building blocks, checked at their entry


def test_building_blocks_agree_with_plain_pytorch():
    from fp16lab.labs.multi_gpu import model as mm

    net = mm.mlp(4, 2)
    assert fd.model_numel(4, 2) == sum(p.numel() for p in net.parameters())
    x, y = mm.global_batch(3, 12, 4, 0, "cpu")
    assert x.shape == (12, 4) and y.shape == (12,) and torch.equal(x, mm.global_batch(3, 12, 4, 0, torch.device("cpu"))[0])
    assert torch.equal(mm.micro(x, 2, 3, 1), x[6:12]) and torch.equal(mm.micro(y, 2, 3, 0), y[:6])
    assert torch.equal(mm.flat(net), torch.cat([p.detach().reshape(-1) for p in net.parameters()]))
    a, b = torch.tensor([3.0, 4.0]), torch.tensor([0.0, 4.0])
    assert mm.rel(a, b) == pytest.approx(float((a - b).norm() / b.norm()))
    opt = mm.sgd(net.parameters(), 0.1)
    assert opt.param_groups[0]["momentum"] == 0.9 and len(opt.param_groups[0]["params"]) == 6
    assert mm.comm_hook("fp16").__name__ == "fp16_compress_hook"


@pytest.mark.parametrize(("call", "match"), [
    (lambda mm: mm.mlp(0, 2), "width must be an int >= 1, got 0"),
    (lambda mm: mm.mlp(4, 2.0), "depth must be an int >= 1, got 2.0"),
    (lambda mm: mm.global_batch(-1, 8, 4, 0, "cpu"), "step must be an int >= 0, got -1"),
    (lambda mm: mm.global_batch(0, 8, 4, 0, "gpu"), "device 'gpu' is not a device"),
    (lambda mm: mm.micro(torch.zeros(8, 4), 2, 2, 2), r"x has shape \(8, 4\): micro-batch part=2 .* at least 12 rows"),
    (lambda mm: mm.micro([1, 2], 2, 2, 0), r"x must be a tensor of a global batch's rows"),
    (lambda mm: mm.sgd(torch.nn.Linear(2, 2), 0.1), r"params must be a list, got Linear"),
    (lambda mm: mm.sgd("weights", 0.1), r"params must be a list, got 'weights' \(str\): pass a list"),
    (lambda mm: mm.sgd([1.0], 0.1), r"params\[0\] must be a parameter"),
    (lambda mm: mm.sgd(torch.nn.Linear(2, 2).parameters(), 0), "lr must be a finite number > 0, got 0"),
    (lambda mm: mm.flat(torch.zeros(3)), "model must be a torch.nn.Module"),
    (lambda mm: mm.rel(torch.zeros(3), torch.zeros(1)), r"a and b must have the same shape, got \(3,\) and \(1,\)"),
    (lambda mm: mm.rel(1.0, torch.zeros(1)), "a must be a tensor"),
    (lambda mm: mm.replica_spread([1.0]), "weights must be a tensor"),
    (lambda mm: mm.comm_hook("fp8"), "name must be one of 'allreduce', 'fp16', 'bf16'; got 'fp8'"),
])
def test_building_blocks_refuse_bad_input_naming_it(call, match):
    from fp16lab.labs.multi_gpu import model as mm

    with pytest.raises(ValueError, match=match):
        call(mm)
