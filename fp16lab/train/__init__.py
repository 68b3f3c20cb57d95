"""Training with mixed precision done right: one step, the loop, and checkpoints.

- :mod:`fp16lab.train.step`: :func:`train_step` (one optimizer step in the right order), :func:`evaluate`,
  :func:`make_scaler`
- :mod:`fp16lab.train.loop`: :func:`fit` (the loop with its history, callbacks and divergence guard)
- :mod:`fp16lab.train.checkpoint`: atomic checkpoints that include the scaler, checked before loading
"""

from __future__ import annotations

from fp16lab.train.checkpoint import CHECKPOINT_FORMAT, load_checkpoint, save_checkpoint
from fp16lab.train.loop import NONFINITE_LOSS_STREAK, History, TrainingDiverged, fit
from fp16lab.train.step import StepResult, evaluate, make_scaler, train_step

__all__ = [
    "fit", "History", "TrainingDiverged", "NONFINITE_LOSS_STREAK",
    "train_step", "evaluate", "make_scaler", "StepResult",
    "save_checkpoint", "load_checkpoint", "CHECKPOINT_FORMAT",
]
