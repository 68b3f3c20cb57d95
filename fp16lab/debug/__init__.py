"""Debugging mixed precision: what ran in which dtype, where inf/NaN first appeared, the largest batch.

- :func:`dtype_trace` runs a model once under autocast and lists, per module, the dtypes
  going in and coming out and the dtype of its parameters: what autocast put in fp16/bf16
  and what it kept in fp32.
- :func:`first_nonfinite` finds the first module whose output holds inf or NaN and shows
  the largest magnitude each layer produced on the way there.
- :func:`max_batch_size` finds the largest batch that fits and recovers cleanly from
  out-of-memory errors (peak memory by precision and batch: :mod:`fp16lab.labs.memory`).

Modules: :mod:`fp16lab.debug.trace` (dtypes, non-finite values), :mod:`fp16lab.debug.batch`
(the batch-size search).
"""

from __future__ import annotations

from fp16lab.debug.batch import BatchSearch, max_batch_size
from fp16lab.debug.trace import FP16_MAX, NonFiniteReport, dtype_trace, first_nonfinite

__all__ = [
    "dtype_trace",
    "first_nonfinite",
    "NonFiniteReport",
    "max_batch_size",
    "BatchSearch",
    "FP16_MAX",
]
