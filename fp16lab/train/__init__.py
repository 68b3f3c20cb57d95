"""Training with mixed precision done right: one step, the loop with its callbacks, and checkpoints.

- :mod:`fp16lab.train.step`: :func:`amp_step` (the bare AMP step, sync-free), :func:`train_step` (the checked
  step with its numbers), :func:`evaluate`,
  :func:`make_scaler`
- :mod:`fp16lab.train.loop`: :func:`fit` (checks the plan, fires the callbacks' events)
- :mod:`fp16lab.train.run`: fit's ``Plan`` and ``Run`` (what callbacks see) and its :class:`History`
- :mod:`fp16lab.train.callbacks`: fit's extras: ``Evaluate``, ``Checkpoint``, ``Schedule``,
  ``DivergenceGuard``, ``ProgressBar`` (or your own ``Callback``)
- :mod:`fp16lab.train.checkpoint`: atomic checkpoints that include the scaler, checked before loading
"""

from __future__ import annotations

from fp16lab.train.callbacks import (
    NONFINITE_LOSS_STREAK,
    Callback,
    Checkpoint,
    DivergenceGuard,
    Evaluate,
    ProgressBar,
    Schedule,
    TrainingDiverged,
)
from fp16lab.train.checkpoint import CHECKPOINT_FORMAT, load_checkpoint, save_checkpoint
from fp16lab.train.loop import History, fit
from fp16lab.train.step import StepResult, amp_step, evaluate, make_scaler, train_step

__all__ = [
    "fit", "History", "TrainingDiverged", "NONFINITE_LOSS_STREAK",
    "Callback", "Evaluate", "Checkpoint", "Schedule", "DivergenceGuard", "ProgressBar",
    "amp_step", "train_step", "evaluate", "make_scaler", "StepResult",
    "save_checkpoint", "load_checkpoint", "CHECKPOINT_FORMAT",
]
