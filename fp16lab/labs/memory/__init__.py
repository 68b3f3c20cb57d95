"""Lesson 05's lab: where the memory of a mixed-precision step goes.

- :mod:`~fp16lab.labs.memory.allocator`: tensor-level accounting (in-place ops), allocator caps, OOM rows,
  fragmentation and ``expandable_segments`` (in a child process), memory snapshots as tables
- :mod:`~fp16lab.labs.memory.sweep`: the peak memory of one training step by precision and batch size
- :mod:`~fp16lab.labs.memory.pitfalls`: lesson 05's harness: step time against GPU kernel time, input-pipeline
  feed rates, interleaved rounds with their spread, which aten ops (Adam implementation) ran, the RTX 4090D budget
"""

from __future__ import annotations

from fp16lab.labs.memory.sweep import StepMemory, memory_sweep, step_peak_memory

__all__ = ["StepMemory", "memory_sweep", "step_peak_memory"]
