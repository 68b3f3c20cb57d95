"""The lesson's interactive demonstrations as tables: each runs one task on every rank of a :class:`Workers`.

(The measurements of DDP, the gradient hooks, FSDP2 and checkpoints are the torchrun script's:
:mod:`fp16lab.labs.multi_gpu.train`.)

Arguments are validated here, once, before anything is sent to the ranks; the ranks run the
code in :mod:`fp16lab.labs.multi_gpu.tasks`; the answers come back as pandas DataFrames (what the
ranks agree on as columns, per-rank values as ``..._rank{r}`` columns or rows).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pandas as pd

import fp16lab.labs.multi_gpu.tasks as tasks
from fp16lab.checks import boolean, non_negative_int, positive_float, positive_int
from fp16lab.labs.multi_gpu.launcher import Workers

__all__ = ["rank_table", "skip_agreement", "accumulation", "task_source"]


@dataclass(frozen=True)
class _Model:
    batch: int
    width: int
    depth: int
    lr: float
    seed: int

    def kwargs(self) -> dict[str, Any]:
        return {"batch": self.batch, "width": self.width, "depth": self.depth, "lr": self.lr, "seed": self.seed}


def _model(batch: object, width: object, depth: object, lr: object, seed: object) -> _Model:
    return _Model(positive_int("batch", batch), positive_int("width", width), positive_int("depth", depth),
                  positive_float("lr", lr), non_negative_int("seed", seed))


def _running(workers: object) -> Workers:
    if not isinstance(workers, Workers):
        raise ValueError(f"workers must be a fp16lab.labs.multi_gpu.Workers, got {workers!r}")
    w = workers
    if not w.alive:
        raise ValueError("workers are stopped (closed, or a task failed or timed out); start new Workers")
    return w


def rank_table(workers: Workers) -> pd.DataFrame:
    """One row per rank (:func:`~fp16lab.labs.multi_gpu.tasks.whoami`): rank, world size, backend,
    device, process id, and the sum of all ranks from one all-reduce."""
    return pd.DataFrame(_running(workers).run(tasks.whoami))


def skip_agreement(workers: Workers, *, bad_rank: int = 1, batch: int = 16, width: int = 64, depth: int = 2,
                   lr: float = 0.05, seed: int = 0, fsdp: bool = False) -> pd.DataFrame:
    """One FP16-AMP DDP step where only ``bad_rank``'s loss is inf: one row per rank (its own
    loss finite?, scale before/after, skipped, weights changed). Default: rank 1 goes bad.

    ``fsdp=True``: an FP16 FSDP2 step instead, where only ``bad_rank``'s own gradient *shard* gets an inf
    (after the reduce-scatter, so no other rank holds it); the column is then ``own_shard_finite``."""
    w = _running(workers)
    boolean("fsdp", fsdp)
    bad = non_negative_int("bad_rank", bad_rank)
    if bad >= w.world.world_size:
        raise ValueError(f"bad_rank must be a rank of this world (0..{w.world.world_size - 1}), got {bad_rank!r}")
    m = _model(batch, width, depth, lr, seed)
    task = tasks.task_fsdp_skip_agreement if fsdp else tasks.task_skip_agreement
    return pd.DataFrame(w.run(task, bad_rank=bad, **m.kwargs()))


def accumulation(
    workers: Workers, *, micro_batches: int = 4, steps: int = 3, batch: int = 8, width: int = 64, depth: int = 2,
    lr: float = 0.05, seed: int = 0, max_norm: float = 1.0,
) -> pd.DataFrame:
    """Gradient accumulation (FP16-AMP, clipping at ``max_norm``) with and without ``no_sync``.

    One row per variant: all-reduce calls and bytes per optimizer step (tapped), the relative
    weight difference to one process on the combined batch, the largest weight difference
    between ranks, the clipped norm (after ``unscale_``) on every rank and in the single process,
    and each rank's own gradient norm before the all-reduce (``own_norm_rank{r}``, with no_sync).
    Defaults: 4 micro-batches of 8 rows per rank, 3 steps, ``max_norm=1.0``.
    """
    w = _running(workers)
    k = positive_int("micro_batches", micro_batches, minimum=2)
    st = positive_int("steps", steps)
    m = _model(batch, width, depth, lr, seed)
    res = w.run(tasks.task_accumulation, micro_batches=k, steps=st, max_norm=positive_float("max_norm", max_norm),
                **m.kwargs())
    rows = []
    for i, v0 in enumerate(res[0]["variants"]):
        row = {
            "variant": "no_sync on the first micro-batches" if v0["no_sync"] else "all-reduce every micro-batch",
            "micro_batches": k,
            "all_reduce_calls_per_step": v0["all_reduce_calls"] / st,
            "bytes_per_step": v0["all_reduce_bytes"] / st,
            "rel_param_diff_vs_single": v0["rel_param_diff"],
            "replica_spread": v0["replica_spread"],
            "single_clip_norm": v0["single_norms"][-1],
        }
        for r in res:
            v = r["variants"][i]
            row[f"clip_norm_rank{r['rank']}"] = v["synced_norms"][-1]
            row[f"own_norm_rank{r['rank']}"] = v["own_norms"][-1]
        rows.append(row)
    frame = pd.DataFrame(rows)
    frame.attrs["world"] = str(w.world)
    return frame


_TASKS: dict[str, Callable[..., Any]] = {
    "skip_agreement": tasks.task_skip_agreement,
    "accumulation": tasks.task_accumulation,
}


def task_source(experiment: Callable[..., Any]) -> str:
    """The source of the code every rank runs for ``experiment`` (e.g. ``accumulation``)."""
    name = getattr(experiment, "__name__", None)
    if name not in _TASKS or getattr(experiment, "__module__", None) != __name__:
        raise ValueError(f"experiment must be one of {', '.join(_TASKS)}, got {experiment!r}")
    return inspect.getsource(_TASKS[name])
