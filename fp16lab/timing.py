"""Honest timing (warm-up, synchronisation, many runs, the median) and the one profiler.

Built on ``torch.utils.benchmark`` (it synchronises the accelerator around each timed
block) and, where single launches matter, CUDA events.
"""

from __future__ import annotations

import inspect
import logging
import math
import re
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from fp16lab.checks import non_negative_int, positive_float, positive_int
from fp16lab.device import mps_available, resolve_device, synchronize
from fp16lab.precision import Precision, parse_precision, precision_context

# Importing torch.utils.benchmark logs "No CUDA runtime is found" on CPU machines: noise.
logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
import torch.utils.benchmark as tbench  # noqa: E402

__all__ = ["Timing", "time_fn", "time_cuda_events", "time_windows", "matmul_tflops", "is_gpu_event", "gpu_kernels",
           "tensor_core_kind", "kernel_kind", "KINDS", "DTYPES"]

DTYPES: dict[Precision, torch.dtype] = {
    Precision.FP32: torch.float32,
    Precision.TF32: torch.float32,
    Precision.FP16: torch.float16,
    Precision.BF16: torch.bfloat16,
}


@dataclass(frozen=True)
class Timing:
    """Seconds per call: the median over timed runs, their interquartile range and count.

    With a single timed run there is no spread: ``iqr_s`` and :attr:`spread` are NaN and
    the text says so (never "IQR 0.0%").
    """

    median_s: float
    iqr_s: float
    runs: int
    method: str

    @property
    def spread(self) -> float:
        """IQR relative to the median: a noise estimate (NaN from fewer than two runs)."""
        if self.runs < 2 or not self.median_s:
            return math.nan
        return self.iqr_s / self.median_s

    def __str__(self) -> str:
        noise = f"IQR {self.spread:.1%}" if self.runs >= 2 else "a single run: no spread measured"
        return f"{self.median_s * 1e3:.3f} ms median ({noise}, {self.runs} run{'s' * (self.runs != 1)}, {self.method})"


def is_gpu_event(event: object) -> bool:
    """True for the GPU's own profiler events (kernels, copies, memsets).

    Not host events (``cudaLaunchKernel`` can carry its kernel's time) nor GPU user annotations
    (they span kernels): summing either with the kernels counts GPU time twice.
    """
    from torch.autograd import DeviceType

    return getattr(event, "device_type", None) == DeviceType.CUDA and not getattr(event, "is_user_annotation", False)


def _checked_fn(fn: object, name: str = "fn") -> Callable[[], object]:
    """``fn`` when it can be called with no arguments (checked from its signature, before any call)."""
    if not callable(fn):
        raise ValueError(f"{name} must be a function of no arguments to time, got {fn!r:.80}")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):  # some builtins have no signature: nothing to check
        return fn
    try:
        sig.bind()
    except TypeError:
        raise ValueError(
            f"{name} must be callable with no arguments, got {fn!r:.80} with signature {sig}; "
            "wrap it, e.g. lambda: f(x)"
        ) from None
    return fn


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
    fn = _checked_fn(fn)
    warmup = non_negative_int("warmup", warmup)
    warmup_s = positive_float("warmup_s", warmup_s, allow_zero=True)
    min_run_time = positive_float("min_run_time", min_run_time)
    return _time_fn(fn, warmup, warmup_s, min_run_time)


def _time_fn(fn: Callable[[], object], warmup: int, warmup_s: float, min_run_time: float) -> Timing:
    _warm_up(fn, warmup, warmup_s)
    m = tbench.Timer(stmt="fn()", globals={"fn": fn}).blocked_autorange(min_run_time=min_run_time)
    runs = len(m.times)
    return Timing(m.median, m.iqr if runs >= 2 else math.nan, runs, "torch.utils.benchmark")


def _sync_all() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    elif mps_available():
        torch.mps.synchronize()


def _warm_up(fn: Callable[[], object], calls: int, seconds: float) -> None:
    """Call ``fn`` at least ``calls`` times and for at least ``seconds`` (synchronised)."""
    t0, done = time.perf_counter(), 0
    while done < calls or time.perf_counter() - t0 < seconds:
        fn()
        done += 1
        if done % 8 == 0 or done >= calls:
            _sync_all()


def time_cuda_events(
    fn: Callable[[], object], *, warmup: int = 3, warmup_s: float = 0.05, repeats: int = 20
) -> Timing:
    """Time each of ``repeats`` calls of ``fn()`` with a pair of CUDA events; median of them.

    Warm-up as in :func:`time_fn` (``warmup=3`` calls, ``warmup_s=0.05`` s). Needs a CUDA
    GPU (``RuntimeError`` otherwise: use :func:`time_fn`).
    """
    fn = _checked_fn(fn)
    warmup = non_negative_int("warmup", warmup)
    warmup_s = positive_float("warmup_s", warmup_s, allow_zero=True)
    repeats = positive_int("repeats", repeats)
    if not torch.cuda.is_available():
        raise RuntimeError("time_cuda_events needs a CUDA GPU; use time_fn on other devices")
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
    iqr = math.nan
    if len(times) >= 2:
        q = statistics.quantiles(times, n=4)
        iqr = q[2] - q[0]
    return Timing(statistics.median(times), iqr, repeats, "CUDA events")


def time_windows(run: Callable[[], object], device: "torch.device | str", windows: int) -> list[float]:
    """Seconds taken by each of ``windows`` back-to-back calls of ``run()`` (a window of steps).

    On CUDA a pair of CUDA events is recorded around each call and the host waits once, at
    the end: the events time the GPU's own work, and the windows follow each other with no
    sync between them (as in training). Elsewhere the device is synchronised around each call
    and ``time.perf_counter`` measures it. No warm-up here: run untimed steps first (compile,
    autotuning, the caching allocator). :mod:`fp16lab.labs.benchmark` times every benchmark with this.
    """
    run = _checked_fn(run, "run")
    dev = resolve_device(device)
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
    device: "torch.device | str | None" = None,
    *,
    min_run_time: float = 0.5,
    seed: int = 0,
) -> dict[str, object]:
    """Achieved TFLOP/s of an (m×k) @ (k×n) product on fresh random (never zero) inputs.

    ``precision`` picks the dtype: fp32 (TF32 off), tf32 (fp32 storage, TF32 on), fp16, bf16.
    Defaults: ``precision="fp16"``, ``device=None`` (the best device here: cuda > mps > cpu;
    an explicit ``"cuda"`` on a machine without one is a clear ``ValueError``),
    ``min_run_time=0.5`` s, ``seed=0``. Returns a dict with m, n, k, precision, seconds,
    IQR and tflops.
    """
    m, n, k = positive_int("m", m), positive_int("n", n), positive_int("k", k)
    p = parse_precision(precision)
    dev = resolve_device(device)
    min_run_time = positive_float("min_run_time", min_run_time)
    seed = non_negative_int("seed", seed)
    return parsed_matmul_tflops(m, n, k, p, dev, min_run_time, seed)


def parsed_matmul_tflops(
    m: int, n: int, k: int, p: Precision, dev: torch.device, min_run_time: float, seed: int
) -> dict[str, object]:
    """:func:`matmul_tflops` on parsed arguments (callers have validated them)."""
    if dev.type == "mps" and p is Precision.TF32:
        raise ValueError("precision 'tf32' is an NVIDIA (Ampere or newer) matmul mode; on 'mps' use 'fp32', 'fp16' "
                         "or 'bf16'")
    gen_device = dev if dev.type != "mps" else torch.device("cpu")
    g = torch.Generator(device=gen_device).manual_seed(seed)
    a = torch.randn(m, k, device=gen_device, dtype=DTYPES[p], generator=g).to(dev)
    b = torch.randn(k, n, device=gen_device, dtype=DTYPES[p], generator=g).to(dev)

    def step() -> None:
        torch.matmul(a, b)
        if dev.type == "mps":  # torch.utils.benchmark synchronises CUDA only
            synchronize(dev)

    with precision_context(p):
        t = _time_fn(step, 3, 0.05, min_run_time)
    return {
        "m": m,
        "n": n,
        "k": k,
        "precision": p.value,
        "seconds": t.median_s,
        "iqr_s": t.iqr_s,
        "tflops": 2.0 * m * n * k / t.median_s / 1e12,
    }


# ---------------------------------------------------------------- the profiler (the one place fp16lab runs it)

_NOT_TC = re.compile(r"sgemm|dgemm|gemv|_sss_|ffma|gemmSN", re.I)
_TC = re.compile(r"nvjet|xmma|gmma|hmma|wmma|tensorop|h884|h1688|h16816|s1688|s16816|16832|s161616|tf32", re.I)
_GEMM = re.compile(r"gemm|nvjet|xmma|cutlass|matmul|conv|wgrad|dgrad|fprop", re.I)

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


def tensor_core_kind(kernel_name: str) -> str:
    """Guess from a CUDA kernel's name whether it is a Tensor Core GEMM/conv.

    Returns "tensor core", "CUDA cores" or "not a GEMM". It is a reading of NVIDIA's
    naming habits (nvjet/xmma/gmma/hmma/tensorop/h16816... mark Tensor Core kernels;
    sgemm/gemv mark CUDA-core ones), a heuristic rather than a measurement.
    """
    if not isinstance(kernel_name, str):
        raise TypeError(f"kernel_name must be a str, got {kernel_name!r} ({type(kernel_name).__name__})")
    if _NOT_TC.search(kernel_name):
        return "CUDA cores"
    if _TC.search(kernel_name):
        return "tensor core"
    if _GEMM.search(kernel_name):
        return "CUDA cores"
    return "not a GEMM"


def kernel_kind(name: str) -> str:
    """The kind of work a CUDA kernel does, from its name (see :data:`KINDS`), or ``'other'``."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {name!r} ({type(name).__name__})")
    low = name.lower()
    return next((kind for kind, pats in KINDS if any(p in low for p in pats)), "other")


def _event_us(event: Any) -> float:
    """A GPU event's own duration in microseconds."""
    return float(event.time_range.elapsed_us())


def gpu_kernels(fn: Callable[[], object], *, calls: int = 1, warmup: int = 1) -> Any:
    """The GPU's own kernels while ``fn()`` runs ``calls`` times under ``torch.profiler``: fp16lab's one profiler.

    ``warmup`` unprofiled calls come first (default 1, so autotuning is not what is seen).
    Returns a DataFrame sorted by time: ``kernel``, ``calls``, ``total_us`` (over all calls),
    ``tensor_core`` (:func:`tensor_core_kind`) and ``kind`` (:func:`kernel_kind`). Only the GPU's
    own events count (:func:`is_gpu_event`), so ``total_us.sum() / calls`` is kernel time per call.
    Needs a CUDA GPU.
    """
    import pandas as pd
    from torch.profiler import ProfilerActivity, profile

    fn = _checked_fn(fn)
    calls, warmup = positive_int("calls", calls), non_negative_int("warmup", warmup)
    if not torch.cuda.is_available():
        raise RuntimeError("gpu_kernels needs a CUDA GPU: on the CPU (or Apple MPS) no CUDA kernels run")
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    agg: dict[str, list[float]] = {}
    for e in prof.events():
        if is_gpu_event(e):
            a = agg.setdefault(e.name, [0, 0.0])
            a[0] += 1
            a[1] += _event_us(e)
    rows = [(k, int(c), float(us), tensor_core_kind(k), kernel_kind(k)) for k, (c, us) in agg.items()]
    frame = pd.DataFrame(rows, columns=["kernel", "calls", "total_us", "tensor_core", "kind"])
    return frame.sort_values("total_us", ascending=False, ignore_index=True)
