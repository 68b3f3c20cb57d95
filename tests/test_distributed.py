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
        ({"threads": 0}, "threads must be an int >= 1"),
        ({"wait": "yes"}, "wait must be True or False"),
        ({"preload": "torch"}, "preload must be a sequence of module names"),
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
    assert "def task_ddp_vs_single" in fd.task_source(fd.ddp_vs_single)
    assert "no_sync" in fd.task_source(fd.accumulation)
    with pytest.raises(ValueError, match="experiment must be one of"):
        fd.task_source(whoami)


def test_model_numel_counts_the_mlp():
    assert fd.model_numel(64, 2) == 2 * (64 * 64 + 64) + 64 * 8 + 8


def test_bench_refuses_a_missing_folder(tmp_path):
    from fp16lab.labs.multi_gpu.cli import main

    with pytest.raises(SystemExit, match="out must be an existing folder"):
        main(["bench", "--out", str(tmp_path / "absent")])


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


def test_ddp_on_two_processes_equals_one_process_on_the_combined_batch(workers):
    frame = fd.ddp_vs_single(workers, precisions=("fp32", "fp16"), steps=4, batch=8, width=32, depth=1)
    final = frame.groupby("precision").last()
    assert final.loc["fp32", "rel_param_diff"] <= 1e-5
    assert final.loc["fp16", "rel_param_diff"] <= 1e-2
    assert math.isclose(final.loc["fp32", "ddp_loss"], final.loc["fp32", "single_loss"], rel_tol=1e-5)
    assert frame.attrs["replica_spread"] == {"fp32": 0.0, "fp16": 0.0}
    assert (frame["scale_rank0"] == frame["scale_rank1"]).all()
    # ...and training did something: the weights moved away from one another's runs only by rounding
    assert frame["ddp_loss"].iloc[-1] != frame["ddp_loss"].iloc[0]


def test_no_sync_all_reduces_once_per_step_and_hooks_halve_the_bytes(workers):
    acc = fd.accumulation(workers, micro_batches=3, steps=2, batch=4, width=16, depth=1)
    once, every = acc.iloc[0], acc.iloc[1]
    assert every["all_reduce_calls_per_step"] == 3 * once["all_reduce_calls_per_step"]
    assert once["bytes_per_step"] == fd.model_numel(16, 1) * 4
    assert once["clip_norm_rank0"] == once["clip_norm_rank1"]
    assert once["own_norm_rank0"] != once["own_norm_rank1"]
    hooks = fd.compress_hooks(workers, steps=2, warmup=1, batch=4, width=16, depth=1).set_index("hook")
    assert (hooks["bytes_per_step"] == hooks["expected_bytes_per_step"]).all()
    assert list(hooks["wire_dtype"]) == ["float32", "float16", "bfloat16"]


def test_experiments_refuse_bad_arguments_without_running(workers):
    with pytest.raises(ValueError, match="unknown precision 'fp8'"):
        fd.ddp_vs_single(workers, precisions=("fp8",))
    with pytest.raises(ValueError, match="hooks must be one of"):
        fd.compress_hooks(workers, hooks=("int8",))
    with pytest.raises(ValueError, match="bad_rank must be a rank of this world"):
        fd.skip_agreement(workers, bad_rank=2)
    with pytest.raises(ValueError, match="micro_batches must be an int >= 2"):
        fd.accumulation(workers, micro_batches=1)
    with pytest.raises(ValueError, match="save_at must be between 1 and steps - 1"):
        fd.checkpoint_resume(workers, ".", steps=4, save_at=4)
    with pytest.raises(ValueError, match="each policy must be 'param_dtype/reduce_dtype'"):
        fd.fsdp_policies(workers, policies=("fp16/fp32",))
    assert workers.alive


def test_fsdp2_runs_on_gloo_and_shards_the_state(workers):
    if fd.fsdp2_support() is not None:
        pytest.skip(fd.fsdp2_support())
    frame = fd.fsdp_policies(workers, policies=("fp32/fp32", "bf16/bf16"), steps=2, batch=4, width=16, depth=1)
    held = frame.groupby("setup")["held_bytes"].max()
    assert held["fp32/fp32"] <= 0.55 * held["ddp"]
    errors = frame.groupby("setup")["rel_grad_error"].first()
    assert errors["fp32/fp32"] <= 1e-5 < errors["bf16/bf16"]


def test_a_failing_worker_ends_the_launch_with_its_rank_and_traceback():
    before = _ranks_alive()
    t0 = time.perf_counter()
    with pytest.raises(WorkerError, match=r"rank 1 failed in task 'fp16lab.labs.multi_gpu.tasks.fail_on_rank'") as info:
        launch(fail_on_rank, rank=1, timeout=60, preload=())
    assert info.value.rank == 1 and "rank 1 was told to fail" in info.value.details
    assert not isinstance(info.value, WorkerTimeout)
    assert time.perf_counter() - t0 < 60  # ended by the error, not by the timeout
    assert _ranks_alive() <= before  # nothing started, or everything started was stopped


def test_a_hanging_worker_ends_with_a_timeout_that_names_it():
    before = _ranks_alive()
    with Workers(2, "gloo", timeout=60, preload=()) as w:
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
    with Workers(2, "gloo", timeout=60, preload=()) as w:
        w._procs[0].kill()  # as the OOM killer or a segfault would
        w._procs[0].join(10)
        with pytest.raises(WorkerError, match=r"rank 0 exited \(exit code"):
            w.run(whoami, timeout=30)
    assert _ranks_alive() <= before  # nothing started, or everything started was stopped


# ------------------------------------------------------------------------------ GPUs


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 CUDA GPUs (NCCL)")
def test_nccl_ddp_equals_one_process_and_hooks_halve_the_bytes():
    with Workers(2, "nccl", timeout=300) as w:
        assert {r["backend"] for r in w.run(whoami)} == {"nccl"}
        frame = fd.ddp_vs_single(w, precisions=("fp32", "fp16", "bf16"), steps=6, batch=32, width=512, depth=2)
        final = frame.groupby("precision").last()
        assert final.loc["fp32", "rel_param_diff"] <= 1e-5
        assert (final.loc[["fp16", "bf16"], "rel_param_diff"] <= 1e-2).all()
        hooks = fd.compress_hooks(w, steps=4, warmup=1, batch=32, width=512, depth=2).set_index("hook")
        assert (hooks["bytes_per_step"] == hooks["expected_bytes_per_step"]).all()
        assert (hooks["step_ms"] > 0).all() and (hooks["peak_memory_gib"] > 0).all()
        if fd.fsdp2_support() is None:
            fsdp = fd.fsdp_policies(w, steps=3, batch=32, width=512, depth=2)
            assert fsdp.groupby("setup")["rel_grad_error"].first()["fp32/fp32"] <= 1e-5


# --------------------------------------------------------------- bad-input audit (issue 14), nothing started


@pytest.mark.parametrize("backend, world_size, message", [("mpi", 2, "backend must be one of"),
                                                          ("gloo", 0, "world_size must be an int >= 1"),
                                                          ("gloo", True, "world_size must be an int >= 1")])
def test_a_world_built_by_hand_is_checked_too(backend, world_size, message):
    with pytest.raises(ValueError, match=message):
        fd.World(backend, world_size)
    with pytest.raises(ValueError, match=message):
        fd.world_metadata(fd.World(backend, world_size))


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


@pytest.mark.parametrize("preload", [["no_such_module_xyz"], ["fp16lab.no_such_module"], [""], [3]])
def test_preload_modules_are_checked_before_spawning(preload):
    before = _ranks_alive()
    with pytest.raises(ValueError, match="preload"):
        Workers(2, "gloo", preload=preload)
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


@pytest.mark.parametrize("out", [None, 3, ["results"]])
def test_bench_refuses_an_out_that_is_not_a_path(out):
    from fp16lab.labs.multi_gpu.cli import bench

    with pytest.raises(ValueError, match="out must be an existing folder"):
        bench(out)


def test_bench_checks_the_timeout_before_printing_the_world(tmp_path, capsys):
    from fp16lab.labs.multi_gpu.cli import bench

    with pytest.raises(ValueError, match="timeout must be a finite number"):
        bench(tmp_path, world_size=2, backend="gloo", timeout=0)
    assert capsys.readouterr().out == ""


def test_measure_or_reference_checks_extra_and_the_measured_table(monkeypatch):
    world = check_world(2, "gloo")
    with pytest.raises(ValueError, match="extra must be a dict"):
        fd.measure_or_reference(world, "multi_gpu_hooks", lambda: None, extra="x")
    monkeypatch.setattr(fd.World, "multi_gpu", property(lambda self: True))
    with pytest.raises(ValueError, match="measure must return a pandas DataFrame"):
        fd.measure_or_reference(world, "multi_gpu_hooks", lambda: None)
