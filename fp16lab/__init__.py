"""fp16lab: helpers for learning FP16 mixed-precision training in PyTorch.

The names a learner reuses are importable from here (``from fp16lab import fit, train_step``);
each lives in one submodule, which is importable too (``fp16lab.train``, loaded on first use):

- ``device``: parse/choose a device (cuda > mps > cpu), synchronise, free memory
- ``checks``: the argument validators every public function uses
- ``hardware``: GPU facts: capability, memory, dense peaks (cited), what the chip supports
- ``precision``: fp32 / tf32 / fp16 / bf16 as a validated choice; the one place autocast is built
- ``numerics``: storage formats (fp32, fp16, bf16, FP8): facts, exact rounding, bit views, spacing
- ``timing``: honest timing (warm-up, synchronisation, medians) and the one profiler
- ``train``: ``amp_step`` (the bare AMP step), ``train_step`` (one checked step), ``fit`` (the loop, with callbacks), checkpoints
- ``debug``: dtype trace under autocast, first non-finite layer, the largest batch that fits
- ``align``: Tensor Core alignment: audit a model, pad its sizes, matmul sweeps
- ``data``: learnable data generated locally (images, a synthetic language); ``gpt``: a small GPT

Apart from the library: ``fp16lab.labs`` holds each lesson's experiments (benchmark, memory,
transformers, inference, fp8, multi_gpu) and ``fp16lab.course`` the course's tooling and run-time.
The command line for everything is ``python -m fp16lab --help``.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# name -> the submodule that owns it (imported on first use, so ``import fp16lab`` stays light)
_HOMES = {
    "fit": "train", "amp_step": "train", "train_step": "train", "evaluate": "train", "make_scaler": "train",
    "History": "train", "TrainingDiverged": "train", "save_checkpoint": "train", "load_checkpoint": "train",
    "Evaluate": "train", "Checkpoint": "train", "Schedule": "train", "DivergenceGuard": "train",
    "ProgressBar": "train",
    "Precision": "precision", "autocast": "precision", "precision_context": "precision",
    "check_precision_supported": "precision",
    "choose_device": "device", "synchronize": "device",
    "gpu_facts": "hardware", "peak_for": "hardware",
    "time_fn": "timing", "time_cuda_events": "timing",
    "dtype_trace": "debug", "first_nonfinite": "debug", "max_batch_size": "debug",
    "audit": "align", "pad_layers": "align",
    "format_info": "numerics", "formats_table": "numerics",
    "ShapesDataset": "data", "make_loaders": "data", "SyntheticLanguage": "data",
    "GPT": "gpt", "GPTConfig": "gpt",
}
_SUBMODULES = ("device", "checks", "hardware", "precision", "numerics", "timing", "train", "debug", "align",
               "data", "gpt", "labs", "course")

__all__ = ["__version__", *_HOMES]


def __getattr__(name: str) -> Any:
    """Load a curated name or a submodule on first use (PEP 562)."""
    if name in _HOMES:
        value = getattr(importlib.import_module(f"fp16lab.{_HOMES[name]}"), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f"fp16lab.{name}")
    else:
        raise AttributeError(f"module 'fp16lab' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*__all__, *_SUBMODULES])
