"""Honest timing: warm-up, synchronisation, many runs, the median.

Built on ``torch.utils.benchmark`` (it synchronises the accelerator around each timed
block) and, where single launches matter, CUDA events.
"""

from __future__ import annotations

import logging
import statistics
from collections.abc import Callable
from dataclasses import dataclass

import torch

from fp16lab.checks import positive_int
from fp16lab.device import parse_device, synchronize
from fp16lab.precision import Precision, parse_precision, precision_context

# Importing torch.utils.benchmark logs "No CUDA runtime is found" on CPU machines: noise.
logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
import torch.utils.benchmark as tbench  # noqa: E402

__all__ = ["Timing", "time_fn", "time_cuda_events", "time_windows", "matmul_tflops", "DTYPES"]

DTYPES: dict[Precision, torch.dtype] = {
    Precision.FP32: torch.float32,
    Precision.TF32: torch.float32,
    Precision.FP16: torch.float16,
    Precision.BF16: torch.bfloat16,
}


@dataclass(frozen=True)
class Timing:
    """Seconds per call: the median over timed runs, their interquartile range and count."""

    median_s: float
    iqr_s: float
    runs: int
    method: str

    @property
    def spread(self) -> float:
        """IQR relative to the median: a noise estimate."""
        return self.iqr_s / self.median_s if self.median_s else float("nan")

    def __str__(self) -> str:
        return f"{self.median_s * 1e3:.3f} ms median (IQR {self.spread:.1%}, {self.runs} runs, {self.method})"


def time_fn(
    fn: Callable[[], object],
    *,
    warmup: int = 3,
    warmup_s: float = 0.05,
    min_run_time: float = 0.5,
) -> Timing:
    """Time ``fn()`` with ``torch.utils.benchmark.Timer.blocked_autorange``.

    Defaults: untimed warm-up calls first (at least ``warmup=3`` calls and ``warmup_s=0.05``
    seconds: module load, autotuning, allocator, GPU clocks ramping up from idle), then
    blocks of calls for at least ``min_run_time=0.5`` seconds; the accelerator is
    synchronised around every block.
    """
    if warmup < 0:
        raise ValueError(f"warmup must be >= 0, got {warmup!r}")
    if min_run_time <= 0:
        raise ValueError(f"min_run_time must be > 0, got {min_run_time!r}")
    _warm_up(fn, warmup, warmup_s)
    m = tbench.Timer(stmt="fn()", globals={"fn": fn}).blocked_autorange(min_run_time=min_run_time)
    return Timing(m.median, m.iqr, len(m.times), "torch.utils.benchmark")


def _warm_up(fn: Callable[[], object], calls: int, seconds: float) -> None:
    """Call ``fn`` at least ``calls`` times and for at least ``seconds`` (synchronised)."""
    import time

    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    t0, done = time.perf_counter(), 0
    while done < calls or time.perf_counter() - t0 < seconds:
        fn()
        done += 1
        if done % 8 == 0 or done >= calls:
            sync()


def time_cuda_events(
    fn: Callable[[], object], *, warmup: int = 3, warmup_s: float = 0.05, repeats: int = 20
) -> Timing:
    """Time each of ``repeats`` calls of ``fn()`` with a pair of CUDA events; median of them.

    Warm-up as in :func:`time_fn` (``warmup=3`` calls, ``warmup_s=0.05`` s).
    """
    if not torch.cuda.is_available():
        raise RuntimeError("time_cuda_events needs a CUDA GPU; use time_fn on other devices")
    if repeats < 1:
        raise ValueError(f"repeats must be >= 1, got {repeats!r}")
    _warm_up(fn, warmup, warmup_s)
    torch.cuda.synchronize()
    pairs = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        pairs.append((start, end))
    torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) / 1e3 for s, e in pairs)
    q = statistics.quantiles(times, n=4) if len(times) >= 2 else [times[0]] * 3
    return Timing(statistics.median(times), q[2] - q[0], repeats, "CUDA events")


def time_windows(run: Callable[[], object], device: "torch.device | str", windows: int) -> list[float]:
    """Seconds taken by each of ``windows`` back-to-back calls of ``run()`` (a window of steps).

    On CUDA a pair of CUDA events is recorded around each call and the host waits once, at
    the end: the events time the GPU's own work, and the windows follow each other with no
    sync between them (as in training). Elsewhere the device is synchronised around each call
    and ``time.perf_counter`` measures it. No warm-up here: run untimed steps first (compile,
    autotuning, the caching allocator). :mod:`fp16lab.bench` times every benchmark with this.
    """
    import time

    dev = parse_device(device)
    windows = positive_int("windows", windows)
    if dev.type == "cuda":
        pairs = []
        for _ in range(windows):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            run()
            end.record()
            pairs.append((start, end))
        torch.cuda.synchronize(dev)
        return [s.elapsed_time(e) / 1e3 for s, e in pairs]
    out = []
    for _ in range(windows):
        synchronize(dev)
        t0 = time.perf_counter()
        run()
        synchronize(dev)
        out.append(time.perf_counter() - t0)
    return out


def matmul_tflops(
    m: int,
    n: int,
    k: int,
    precision: "Precision | str" = "fp16",
    device: "torch.device | str" = "cuda",
    *,
    min_run_time: float = 0.5,
    seed: int = 0,
) -> dict[str, object]:
    """Achieved TFLOP/s of an (m×k) @ (k×n) product on fresh random (never zero) inputs.

    ``precision`` picks the dtype: fp32 (TF32 off), tf32 (fp32 storage, TF32 on), fp16, bf16.
    Returns a dict with m, n, k, precision, seconds, IQR and tflops.
    """
    for name, v in (("m", m), ("n", n), ("k", k)):
        if not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    p = parse_precision(precision)
    dev = parse_device(device)
    g = torch.Generator(device=dev).manual_seed(seed)
    a = torch.randn(m, k, device=dev, dtype=DTYPES[p], generator=g)
    b = torch.randn(k, n, device=dev, dtype=DTYPES[p], generator=g)
    with precision_context(p):
        t = time_fn(lambda: torch.matmul(a, b), min_run_time=min_run_time)
    flops = 2.0 * m * n * k
    return {
        "m": m,
        "n": n,
        "k": k,
        "precision": p.value,
        "seconds": t.median_s,
        "iqr_s": t.iqr_s,
        "tflops": flops / t.median_s / 1e12,
    }
