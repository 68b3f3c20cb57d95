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

from fp16lab.checks import instance, positive_float, positive_int, sequence_of, text
from fp16lab.labs.benchmark.measure import Session
from fp16lab.timing import KINDS, gpu_kernels, kernel_kind

__all__ = ["IDLE", "KINDS", "kernel_kind", "breakdown", "profile_steps"]  # KINDS, kernel_kind: from fp16lab.timing

IDLE = "GPU idle (launch gaps, host)"
"""The breakdown's last row: the part of a measured step in which no kernel ran."""


def breakdown(kernels: Iterable[tuple[str, float]], steps: int, step_ms: float) -> pd.DataFrame:
    """Kernel milliseconds per step by kind, and the share of the measured step each takes.

    ``kernels`` are ``(name, total microseconds)`` over ``steps`` steps; ``step_ms`` is the step
    time measured without the profiler. The last row, :data:`IDLE`, is what the kernels leave of
    the step (never below zero). An empty ``kernels`` is refused: a profiled step always runs
    kernels, so none means the profile recorded nothing (it would read as a step all idle).
    """
    rows_in = sequence_of("kernels", kernels, example="[('sm90_xmma_gemm_f16f16', 120.0)]", item=_kernel)
    steps = positive_int("steps", steps)
    step_ms = positive_float("step_ms", step_ms)
    per: dict[str, float] = {}
    for name, us in rows_in:
        kind = kernel_kind(name)
        per[kind] = per.get(kind, 0.0) + us / 1e3 / steps
    rows = [{"kind": k, "ms_per_step": v} for k, v in sorted(per.items(), key=lambda kv: -kv[1])]
    busy = sum(per.values())
    rows.append({"kind": IDLE, "ms_per_step": max(step_ms - busy, 0.0)})
    out = pd.DataFrame(rows)
    out["share_of_step"] = out["ms_per_step"] / step_ms
    return out


def _kernel(label: str, entry: object) -> tuple[str, float]:
    """One ``(kernel name, microseconds)`` pair of :func:`breakdown`'s ``kernels``."""
    pair: Any = instance(label, entry, (tuple, list), "a (kernel name, microseconds) pair")
    if len(pair) != 2:
        raise ValueError(f"{label} must be a (kernel name, microseconds) pair, got {len(pair)} entries: {pair!r:.80}")
    return text(f"{label}[0]", pair[0]), positive_float(f"{label}[1]", pair[1], allow_zero=True)


def profile_steps(session: Any, steps: int = 5) -> list[tuple[str, float]]:
    """``(kernel name, microseconds)`` of ``steps`` steps of an open session on a CUDA GPU.

    One warm-up step, then the steps under :func:`fp16lab.timing.gpu_kernels` (the GPU's own events only).
    Default ``steps=5``.
    """
    if not isinstance(session, Session) and not (isinstance(getattr(session, "dev", None), torch.device)
                                                 and callable(getattr(session, "warm", None))):
        raise ValueError(f"session must be an open benchmark Session (fp16lab.labs.benchmark.measure.Session: "
                         f"its dev and warm(steps)), got {type(session).__name__}")
    steps = positive_int("steps", steps)
    if session.dev.type != "cuda":
        raise ValueError(f"kernel profiles need a CUDA GPU; this session runs on {session.dev.type}")
    session.warm(1)
    frame = gpu_kernels(lambda: session.warm(steps), calls=1, warmup=0)
    return [(str(k), float(us)) for k, us in zip(frame["kernel"], frame["total_us"], strict=True) if us > 0]
