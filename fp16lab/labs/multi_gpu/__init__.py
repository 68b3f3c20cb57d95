"""Mixed precision across several processes: lesson 10's torchrun script, and its interactive demonstrations.

- ``train``: the training script, ``torchrun ... -m fp16lab.labs.multi_gpu.train`` (DDP or FSDP2,
  FP32/FP16/BF16, checkpoints); ``cli``: ``python -m fp16lab distributed``, the multi-GPU reference
  run, and :func:`~fp16lab.labs.multi_gpu.cli.run_script` for the lesson.

The in-notebook demonstrations run on spawned workers, which need importable code:

- ``launcher``: :class:`Workers` (spawned ranks in one process group: gloo on CPUs, NCCL with one
  GPU per rank; a rendezvous on 127.0.0.1 on a port the OS picks; hard timeouts that name the
  failing rank), :func:`launch` (one-shot), :func:`check_world` / :func:`lesson_world`;
- ``tasks``: what each rank runs (:func:`whoami`, the demonstration tasks
  :func:`fail_on_rank` / :func:`hang_on_rank`, and one ``task_*`` per demonstration);
- ``model``: the demonstrations' MLP, generated data, and the measuring tools (the bytes handed to
  ``all_reduce``, the spread between replicas);
- ``experiments``: each demonstration as a table (:func:`rank_table`, :func:`skip_agreement`,
  :func:`accumulation`) and :func:`task_source` (the code the ranks ran).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names below, for type checkers; at run time they load on first use
    from fp16lab.labs.multi_gpu.experiments import (
        accumulation,
        rank_table,
        skip_agreement,
        task_source,
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
    "HOOKS",
    "PRELOAD",
    "RankContext",
    "WorkerError",
    "WorkerTimeout",
    "Workers",
    "World",
    "accumulation",
    "check_world",
    "fail_on_rank",
    "hang_on_rank",
    "launch",
    "lesson_world",
    "model_numel",
    "rank_table",
    "skip_agreement",
    "task_source",
    "whoami",
]

# Where each name lives. Loading on first use keeps a spawned rank light: it imports
# fp16lab.labs.multi_gpu.launcher (torch only) to start, and the rest when a task needs it.
_WHERE = {
    "BACKENDS": "fp16lab.labs.multi_gpu.launcher",
    "HOOKS": "fp16lab.labs.multi_gpu.model",
    "PRELOAD": "fp16lab.labs.multi_gpu.launcher",
    "RankContext": "fp16lab.labs.multi_gpu.launcher",
    "WorkerError": "fp16lab.labs.multi_gpu.launcher",
    "WorkerTimeout": "fp16lab.labs.multi_gpu.launcher",
    "Workers": "fp16lab.labs.multi_gpu.launcher",
    "World": "fp16lab.labs.multi_gpu.launcher",
    "accumulation": "fp16lab.labs.multi_gpu.experiments",
    "check_world": "fp16lab.labs.multi_gpu.launcher",
    "fail_on_rank": "fp16lab.labs.multi_gpu.tasks",
    "hang_on_rank": "fp16lab.labs.multi_gpu.tasks",
    "launch": "fp16lab.labs.multi_gpu.launcher",
    "lesson_world": "fp16lab.labs.multi_gpu.launcher",
    "model_numel": "fp16lab.labs.multi_gpu.model",
    "rank_table": "fp16lab.labs.multi_gpu.experiments",
    "skip_agreement": "fp16lab.labs.multi_gpu.experiments",
    "task_source": "fp16lab.labs.multi_gpu.experiments",
    "whoami": "fp16lab.labs.multi_gpu.tasks",
}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        value = getattr(importlib.import_module(_WHERE[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'fp16lab.labs.multi_gpu' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
