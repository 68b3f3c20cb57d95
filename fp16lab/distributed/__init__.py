"""Mixed precision across several processes: launch ranks, and the lesson's DDP/FSDP measurements.

Spawned workers need importable code, so everything a rank runs lives in this package:

- ``launcher``: :class:`Workers` (spawned ranks in one process group: gloo on CPUs, NCCL with one
  GPU per rank; a rendezvous on 127.0.0.1 on a port the OS picks; hard timeouts that name the
  failing rank), :func:`launch` (one-shot), :func:`check_world` / :func:`lesson_world`;
- ``tasks``: what each rank runs (:func:`whoami`, the demonstration tasks
  :func:`fail_on_rank` / :func:`hang_on_rank`, and one ``task_*`` per experiment);
- ``model``: the lesson's MLP, generated data, and the measuring tools (the bytes handed to
  ``all_reduce``, the spread between replicas);
- ``experiments``: each measurement as a table (:func:`ddp_vs_single`, :func:`skip_agreement`,
  :func:`accumulation`, :func:`compress_hooks`, :func:`checkpoint_resume`, :func:`fsdp_policies`),
  :func:`task_source` (the code the ranks ran), :func:`world_metadata`,
  :func:`measure_or_reference` (live on 2+ GPUs, else the committed reference);
- ``cli``: ``python -m fp16lab.distributed bench --out results/`` for a multi-GPU machine.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names below, for type checkers; at run time they load on first use
    from fp16lab.distributed.experiments import (
        FSDP2_MIN_TORCH,
        FSDP_POLICIES,
        accumulation,
        checkpoint_resume,
        compress_hooks,
        ddp_vs_single,
        fsdp2_support,
        fsdp_policies,
        measure_or_reference,
        rank_table,
        skip_agreement,
        task_source,
        world_metadata,
    )
    from fp16lab.distributed.launcher import (
        BACKENDS,
        PRELOAD,
        RankContext,
        WorkerError,
        Workers,
        WorkerTimeout,
        World,
        check_world,
        launch,
        lesson_world,
    )
    from fp16lab.distributed.model import HOOKS, model_numel
    from fp16lab.distributed.tasks import fail_on_rank, hang_on_rank, whoami

__all__ = [
    "BACKENDS",
    "FSDP2_MIN_TORCH",
    "FSDP_POLICIES",
    "HOOKS",
    "PRELOAD",
    "RankContext",
    "WorkerError",
    "WorkerTimeout",
    "Workers",
    "World",
    "accumulation",
    "check_world",
    "checkpoint_resume",
    "compress_hooks",
    "ddp_vs_single",
    "fail_on_rank",
    "fsdp2_support",
    "fsdp_policies",
    "hang_on_rank",
    "launch",
    "lesson_world",
    "measure_or_reference",
    "model_numel",
    "rank_table",
    "skip_agreement",
    "task_source",
    "whoami",
    "world_metadata",
]

# Where each name lives. Loading on first use keeps a spawned rank light: it imports
# fp16lab.distributed.launcher (torch only) to start, and the rest when a task needs it.
_WHERE = {
    "BACKENDS": "fp16lab.distributed.launcher",
    "FSDP2_MIN_TORCH": "fp16lab.distributed.experiments",
    "FSDP_POLICIES": "fp16lab.distributed.experiments",
    "HOOKS": "fp16lab.distributed.model",
    "PRELOAD": "fp16lab.distributed.launcher",
    "RankContext": "fp16lab.distributed.launcher",
    "WorkerError": "fp16lab.distributed.launcher",
    "WorkerTimeout": "fp16lab.distributed.launcher",
    "Workers": "fp16lab.distributed.launcher",
    "World": "fp16lab.distributed.launcher",
    "accumulation": "fp16lab.distributed.experiments",
    "check_world": "fp16lab.distributed.launcher",
    "checkpoint_resume": "fp16lab.distributed.experiments",
    "compress_hooks": "fp16lab.distributed.experiments",
    "ddp_vs_single": "fp16lab.distributed.experiments",
    "fail_on_rank": "fp16lab.distributed.tasks",
    "fsdp2_support": "fp16lab.distributed.experiments",
    "fsdp_policies": "fp16lab.distributed.experiments",
    "hang_on_rank": "fp16lab.distributed.tasks",
    "launch": "fp16lab.distributed.launcher",
    "lesson_world": "fp16lab.distributed.launcher",
    "measure_or_reference": "fp16lab.distributed.experiments",
    "model_numel": "fp16lab.distributed.model",
    "rank_table": "fp16lab.distributed.experiments",
    "skip_agreement": "fp16lab.distributed.experiments",
    "task_source": "fp16lab.distributed.experiments",
    "whoami": "fp16lab.distributed.tasks",
    "world_metadata": "fp16lab.distributed.experiments",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        value = getattr(importlib.import_module(_WHERE[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'fp16lab.distributed' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
