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
- ``cli``: ``python -m fp16lab.labs.multi_gpu bench --out results/`` for a multi-GPU machine.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names below, for type checkers; at run time they load on first use
    from fp16lab.labs.multi_gpu.experiments import (
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
    from fp16lab.labs.multi_gpu.launcher import (
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
    from fp16lab.labs.multi_gpu.model import HOOKS, model_numel
    from fp16lab.labs.multi_gpu.tasks import fail_on_rank, hang_on_rank, whoami

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
# fp16lab.labs.multi_gpu.launcher (torch only) to start, and the rest when a task needs it.
_WHERE = {
    "BACKENDS": "fp16lab.labs.multi_gpu.launcher",
    "FSDP2_MIN_TORCH": "fp16lab.labs.multi_gpu.experiments",
    "FSDP_POLICIES": "fp16lab.labs.multi_gpu.experiments",
    "HOOKS": "fp16lab.labs.multi_gpu.model",
    "PRELOAD": "fp16lab.labs.multi_gpu.launcher",
    "RankContext": "fp16lab.labs.multi_gpu.launcher",
    "WorkerError": "fp16lab.labs.multi_gpu.launcher",
    "WorkerTimeout": "fp16lab.labs.multi_gpu.launcher",
    "Workers": "fp16lab.labs.multi_gpu.launcher",
    "World": "fp16lab.labs.multi_gpu.launcher",
    "accumulation": "fp16lab.labs.multi_gpu.experiments",
    "check_world": "fp16lab.labs.multi_gpu.launcher",
    "checkpoint_resume": "fp16lab.labs.multi_gpu.experiments",
    "compress_hooks": "fp16lab.labs.multi_gpu.experiments",
    "ddp_vs_single": "fp16lab.labs.multi_gpu.experiments",
    "fail_on_rank": "fp16lab.labs.multi_gpu.tasks",
    "fsdp2_support": "fp16lab.labs.multi_gpu.experiments",
    "fsdp_policies": "fp16lab.labs.multi_gpu.experiments",
    "hang_on_rank": "fp16lab.labs.multi_gpu.tasks",
    "launch": "fp16lab.labs.multi_gpu.launcher",
    "lesson_world": "fp16lab.labs.multi_gpu.launcher",
    "measure_or_reference": "fp16lab.labs.multi_gpu.experiments",
    "model_numel": "fp16lab.labs.multi_gpu.model",
    "rank_table": "fp16lab.labs.multi_gpu.experiments",
    "skip_agreement": "fp16lab.labs.multi_gpu.experiments",
    "task_source": "fp16lab.labs.multi_gpu.experiments",
    "whoami": "fp16lab.labs.multi_gpu.tasks",
    "world_metadata": "fp16lab.labs.multi_gpu.experiments",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        value = getattr(importlib.import_module(_WHERE[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'fp16lab.labs.multi_gpu' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
