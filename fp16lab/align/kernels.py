"""Which CUDA kernels ran, and whether their names mark them as Tensor Core kernels (lesson 03)."""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from fp16lab.checks import non_negative_int
from fp16lab.timing import gpu_kernels, tensor_core_kind

__all__ = ["tensor_core_kind", "cuda_kernels"]


def cuda_kernels(fn: Callable[[], object], *, warmup: int = 2) -> pd.DataFrame:
    """Run ``fn()`` once under the profiler (:func:`fp16lab.timing.gpu_kernels`) and list the CUDA kernels it launched.

    Default ``warmup=2`` unprofiled calls first (so autotuning is not what is seen).
    Columns: kernel, calls, total_us, kind (:func:`tensor_core_kind`). Needs a CUDA GPU.
    """
    warmup = non_negative_int("warmup", warmup)
    frame = gpu_kernels(fn, calls=1, warmup=warmup)
    return frame[["kernel", "calls", "total_us", "tensor_core"]].rename(columns={"tensor_core": "kind"})
