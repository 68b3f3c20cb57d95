"""Which CUDA kernels ran, and whether their names mark them as Tensor Core kernels."""

from __future__ import annotations

import re
from collections.abc import Callable

import pandas as pd
import torch

from fp16lab.checks import non_negative_int
from fp16lab.timing import is_gpu_event

__all__ = ["tensor_core_kind", "cuda_kernels"]

_NOT_TC = re.compile(r"sgemm|dgemm|gemv|_sss_|ffma|gemmSN", re.I)
_TC = re.compile(r"nvjet|xmma|gmma|hmma|wmma|tensorop|h884|h1688|h16816|s1688|s16816|16832|s161616|tf32", re.I)
_GEMM = re.compile(r"gemm|nvjet|xmma|cutlass|matmul|conv|wgrad|dgrad|fprop", re.I)


def tensor_core_kind(kernel_name: str) -> str:
    """Guess from a CUDA kernel's name whether it is a Tensor Core GEMM/conv.

    Returns "tensor core", "CUDA cores" or "not a GEMM". It is a reading of NVIDIA's
    naming habits (nvjet/xmma/gmma/hmma/tensorop/h16816... mark Tensor Core kernels;
    sgemm/gemv mark CUDA-core ones), a heuristic rather than a measurement.
    """
    if not isinstance(kernel_name, str):
        raise ValueError(f"kernel_name must be a str, got {kernel_name!r} ({type(kernel_name).__name__})")
    if _NOT_TC.search(kernel_name):
        return "CUDA cores"
    if _TC.search(kernel_name):
        return "tensor core"
    if _GEMM.search(kernel_name):
        return "CUDA cores"
    return "not a GEMM"


def cuda_kernels(fn: Callable[[], object], *, warmup: int = 2) -> pd.DataFrame:
    """Run ``fn()`` once under ``torch.profiler`` and list the CUDA kernels it launched.

    Default ``warmup=2`` unprofiled calls first (so autotuning is not what is seen).
    Columns: kernel, calls, total_us, kind (:func:`tensor_core_kind`). Needs a CUDA GPU.
    """
    if not callable(fn):
        raise ValueError(f"fn must be a function of no arguments to profile, got {fn!r:.80}")
    warmup = non_negative_int("warmup", warmup)
    if not torch.cuda.is_available():
        raise RuntimeError("cuda_kernels needs a CUDA GPU: on the CPU (or Apple MPS) no CUDA kernels run")
    from torch.profiler import ProfilerActivity, profile

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    agg: dict[str, list[float]] = {}
    for e in prof.events():
        if is_gpu_event(e):
            a = agg.setdefault(e.name, [0, 0.0])
            a[0] += 1
            a[1] += e.time_range.elapsed_us()
    rows = [(k, int(c), float(t), tensor_core_kind(k)) for k, (c, t) in agg.items()]
    df = pd.DataFrame(rows, columns=["kernel", "calls", "total_us", "kind"])
    return df.sort_values("total_us", ascending=False, ignore_index=True)
