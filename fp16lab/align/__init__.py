"""Tensor Core alignment: round sizes up, measure the matmul sawtooth, audit and pad models.

Tensor Cores read their operands in 16-byte pieces. A matrix whose leading dimension is
not a multiple of 16 bytes (8 fp16/bf16 elements, 4 tf32 elements) forces cuBLAS/cuDNN
onto slower kernels, or on older stacks off Tensor Cores entirely. This package finds
such sizes in a model (:func:`audit`), measures what they cost (:func:`matmul_sweep`) and
pads output heads and vocabularies without changing what the model computes
(:func:`pad_layers`). What :func:`audit` marks as paddable, :func:`pad_layers` accepts
(:meth:`AuditReport.pad_names` gives the call); every other finding says what to change
instead.

- :mod:`fp16lab.align.sizes`: the alignment rule and size arithmetic;
- :mod:`fp16lab.align.sweep`: the TFLOP/s-vs-size sweep;
- :mod:`fp16lab.align.audit`: the model audit;
- :mod:`fp16lab.align.pad`: padding layers (and re-pointing an optimizer at them);
- :mod:`fp16lab.align.kernels`: which CUDA kernels ran, on Tensor Cores or not.
"""

from __future__ import annotations

from fp16lab.align.audit import AuditReport, Finding, Skipped, audit
from fp16lab.align.kernels import cuda_kernels, tensor_core_kind
from fp16lab.align.pad import PaddedLinear, pad_embedding, pad_layers, pad_linear
from fp16lab.align.sizes import (
    ALIGNMENT_BYTES,
    alignment_for,
    check_multiple,
    is_aligned,
    pad_to_multiple,
    wave_quantization,
)
from fp16lab.align.sweep import matmul_sweep

__all__ = [
    "ALIGNMENT_BYTES",
    "alignment_for",
    "check_multiple",
    "pad_to_multiple",
    "is_aligned",
    "wave_quantization",
    "matmul_sweep",
    "Finding",
    "Skipped",
    "AuditReport",
    "audit",
    "PaddedLinear",
    "pad_linear",
    "pad_embedding",
    "pad_layers",
    "tensor_core_kind",
    "cuda_kernels",
]
