"""Where a training step's time goes on the GPU: kernel time by kind, and the time no kernel ran.

:func:`profile_steps` runs a few steps of an open :class:`~fp16lab.labs.benchmark.measure.Session` under
``torch.profiler`` (CUDA activity only) and :func:`breakdown` sorts the kernels' time per step
into kinds by kernel name (convolution/matmul, batch norm, elementwise, layout transposes,
loss, optimizer and scaler, other). The rest of the measured step time is *GPU idle*: launch
gaps and host work (a GradScaler's sync, Python), which torch.compile and CUDA graphs attack.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pandas as pd
import torch

from fp16lab.timing import is_gpu_event

__all__ = ["IDLE", "KINDS", "kernel_kind", "breakdown", "profile_steps"]

IDLE = "GPU idle (launch gaps, host)"
"""The breakdown's last row: the part of a measured step in which no kernel ran."""

# Checked in order: the first kind whose pattern occurs in the lower-cased kernel name wins
# (an Inductor kernel fusing batch norm and ReLU counts as batch norm; cuDNN's layout
# transposes before its convolutions).
KINDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("layout transposes", ("nchwtonhwc", "nhwctonchw", "transpose")),
    ("optimizer and scaler", ("adam", "multi_tensor", "foreach", "amp_update_scale", "non_finite", "unscale")),
    ("loss", ("softmax", "nll_loss", "cross_entropy")),
    ("batch norm", ("batch_norm", "batchnorm", "bn_fw", "bn_bw", "bn_")),
    ("convolution / matmul", ("conv", "gemm", "xmma", "cutlass", "cudnn", "wgrad", "dgrad", "fprop")),
    ("elementwise", ("elementwise", "relu", "threshold", "triton_poi", "add", "mul", "copy", "fill")),
)


def kernel_kind(name: str) -> str:
    """The kind of a CUDA kernel from its name (see :data:`KINDS`), or ``'other'``."""
    low = name.lower()
    return next((kind for kind, pats in KINDS if any(p in low for p in pats)), "other")


def breakdown(kernels: Iterable[tuple[str, float]], steps: int, step_ms: float) -> pd.DataFrame:
    """Kernel milliseconds per step by kind, and the share of the measured step each takes.

    ``kernels`` are ``(name, total microseconds)`` over ``steps`` steps; ``step_ms`` is the step
    time measured without the profiler. The last row, :data:`IDLE`, is what the kernels leave of
    the step (never below zero).
    """
    per: dict[str, float] = {}
    for name, us in kernels:
        kind = kernel_kind(name)
        per[kind] = per.get(kind, 0.0) + us / 1e3 / steps
    rows = [{"kind": k, "ms_per_step": v} for k, v in sorted(per.items(), key=lambda kv: -kv[1])]
    busy = sum(per.values())
    rows.append({"kind": IDLE, "ms_per_step": max(step_ms - busy, 0.0)})
    out = pd.DataFrame(rows)
    out["share_of_step"] = out["ms_per_step"] / step_ms
    return out


def _self_device_us(entry: Any) -> float:
    for attr in ("self_device_time_total", "self_cuda_time_total"):  # the name changed in torch 2.x
        if hasattr(entry, attr):
            return float(getattr(entry, attr))
    return 0.0


def profile_steps(session: Any, steps: int = 5) -> list[tuple[str, float]]:
    """``(kernel name, microseconds)`` of ``steps`` steps of an open session on a CUDA GPU.

    Only the GPU's own events count (:func:`fp16lab.timing.is_gpu_event`).
    """
    from torch.profiler import ProfilerActivity, profile

    if session.dev.type != "cuda":
        raise ValueError(f"kernel profiles need a CUDA GPU; this session runs on {session.dev.type}")
    session.warm(1)
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        session.warm(steps)
    torch.cuda.synchronize(session.dev)
    return [(e.key, _self_device_us(e)) for e in prof.key_averages()
            if is_gpu_event(e) and _self_device_us(e) > 0]
