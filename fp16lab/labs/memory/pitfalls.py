"""Lesson 05's measurement harness: the machinery behind its speed and memory pitfalls.

- :func:`step_profile`: a step's wall time (median and spread) beside the GPU's kernel time: how busy the GPU is;
- :func:`feed_rate`: samples/s of a training step fed by an iterable of batches (an input pipeline);
- :func:`interleaved`: close contenders measured in turns, each with its median and run-to-run spread;
- :func:`window_rates`: items/s over windows of steps (CUDA events), after a warm-up, and the cudaMalloc calls;
- :func:`ratio_verdict`: one row against another: faster, slower, or a tie inside the two rows' spreads;
- :func:`aten_ops` and :func:`host_syncs`: which aten ops a call dispatches, and how often it waits for the GPU;
- :func:`rtx4090d_budget_mib`: what a 24 GB RTX 4090D leaves the caching allocator.

The lesson keeps the subject in sight (the models, the ``empty_cache()`` call, the Adam flags); this
module only times and counts.
"""

from __future__ import annotations

import math
import statistics
import time
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from fp16lab.checks import function, non_negative_int, positive_float, positive_int
from fp16lab.device import resolve_device, synchronize
from fp16lab.hardware import PROFILES
from fp16lab.timing import gpu_kernels, time_fn, time_windows

__all__ = ["CONTEXT_MIB", "DESKTOP_MIB", "rtx4090d_budget_mib", "step_profile", "feed_rate", "interleaved",
           "window_rates", "RatioVerdict", "ratio_verdict", "aten_ops", "host_syncs"]

MIB = 2**20
CONTEXT_MIB = 768  # an estimate, not a datasheet figure: a CUDA context once torch has used the GPU (cuBLAS, cuDNN)
DESKTOP_MIB = 1024  # an assumption: a desktop (display server, browser) drawing on the same card


def _fn(name: str, value: object, n_args: int = 0) -> Callable[..., Any]:
    """A function of ``n_args`` arguments, or a ValueError that names it (checked before any work)."""
    return function(name, value, f"a function of {n_args} argument{'s' if n_args != 1 else ''}", n_args=n_args)


def _cuda(device: "torch.device | str | None", what: str) -> torch.device:
    """The CUDA device ``device`` names, or a ValueError saying ``what`` needs one."""
    dev = resolve_device(device)
    if dev.type != "cuda":
        raise ValueError(f"device {str(device)!r}: {what} needs a CUDA GPU (allowed: 'cuda', 'cuda:N')")
    return dev


def rtx4090d_budget_mib(context_mib: int = CONTEXT_MIB, desktop_mib: int = DESKTOP_MIB) -> int:
    """MiB a 24 GB RTX 4090D leaves PyTorch's allocator: the card's reported total less context and desktop.

    Why: "24 GB" is the label; the card reports 24,564 MiB (``fp16lab.hardware.PROFILES``), and the CUDA
    context (default :data:`CONTEXT_MIB`, an estimate) and a desktop (default :data:`DESKTOP_MIB`, an
    assumption; pass 0 for a headless card) take their share before any tensor. On the card itself,
    the free memory after a first CUDA call (``nvidia-smi``) says what is left instead.
    """
    for name, value in (("context_mib", context_mib), ("desktop_mib", desktop_mib)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{name} must be an int >= 0 (MiB), got {value!r}")
    total = PROFILES["rtx4090d"].memory_mib
    if context_mib + desktop_mib >= total:
        raise ValueError(f"context_mib + desktop_mib = {context_mib + desktop_mib} leaves nothing of the card's "
                         f"{total} MiB; allowed: less than {total}")
    return total - context_mib - desktop_mib


def step_profile(step: Callable[[], object], device: "torch.device | str", *, min_run_time: float = 0.3,
                 calls: int = 10) -> tuple[dict[str, float], pd.DataFrame]:
    """``step``'s wall time (median and IQR spread) and the GPU's kernel time per call, with the kernels.

    Why: a step the GPU spends little of its time on (``gpu_busy`` well below 1) is launch-bound, and
    faster arithmetic (FP16) cannot shorten it. Wall time: :func:`fp16lab.timing.time_fn` (warm-up 5,
    ``min_run_time`` seconds, default 0.3); kernel time: :func:`fp16lab.timing.gpu_kernels` over ``calls``
    calls (default 10). Returns a row (``step_ms``, ``step_spread``, ``gpu_kernel_ms``, ``gpu_busy``,
    ``kernels_per_step``) and
    the kernels with ``launches_per_step``, ``gpu_us_per_step`` and ``us_per_launch``. Needs a CUDA GPU.
    """
    step = _fn("step", step)
    min_run_time, calls = positive_float("min_run_time", min_run_time), positive_int("calls", calls)
    _cuda(device, "step_profile")
    t = time_fn(step, warmup=5, min_run_time=min_run_time)
    with warnings.catch_warnings():  # the profiler's notes on its own cycles are not the lesson's business
        warnings.filterwarnings("ignore", message=".*Profiler clears events", category=UserWarning)
        kernels = gpu_kernels(step, calls=calls, warmup=0)
    gpu_ms = kernels["total_us"].sum() / 1e3 / calls
    row = {"step_ms": t.median_s * 1e3, "step_spread": t.spread, "gpu_kernel_ms": gpu_ms,
           "gpu_busy": gpu_ms / (t.median_s * 1e3), "kernels_per_step": kernels["calls"].sum() / calls}
    per_step = pd.DataFrame({"kernel": kernels["kernel"].str.slice(0, 80),
                             "launches_per_step": kernels["calls"] / calls,
                             "gpu_us_per_step": kernels["total_us"] / calls,
                             "us_per_launch": kernels["total_us"] / kernels["calls"]})
    return row, per_step


def feed_rate(step: Callable[[Any, Any], object], batches: Callable[[], Iterable[tuple[Any, Any]]],
              device: "torch.device | str", *, steps: int = 30, warmup: int = 5) -> dict[str, float]:
    """Samples/s of ``step(x, y)`` fed from ``batches()`` (restarted when it runs out), and the step's peak memory.

    Why: an input pipeline that cannot keep up caps the training speed whatever the precision. The
    first ``warmup`` steps (default 5: workers start, cuDNN picks kernels) are not timed; then
    ``steps`` (default 30) are, with the device synchronised at both ends. Needs a CUDA GPU.
    """
    step, batches = _fn("step", step, 2), _fn("batches", batches)
    steps, warmup = positive_int("steps", steps), non_negative_int("warmup", warmup)
    dev = _cuda(device, "feed_rate")
    it, done, t0, n = iter(batches()), 0, 0.0, 0
    while done < steps + warmup:
        try:
            x, y = next(it)
        except StopIteration:
            it = iter(batches())
            continue
        if done == warmup:
            synchronize(dev)
            torch.cuda.reset_peak_memory_stats(dev)
            t0 = time.perf_counter()
        step(x, y)
        n = len(y)
        done += 1
    synchronize(dev)
    return {"samples_per_s": steps * n / (time.perf_counter() - t0),
            "peak_allocated_mib": torch.cuda.max_memory_allocated(dev) / MIB}


def interleaved(cases: Mapping[str, Callable[[], Mapping[str, Any]]], key: str, rounds: int = 3) -> pd.DataFrame:
    """Each case's row with ``key`` the median over ``rounds`` runs taken in turns (a, b, a, b, ...), and its spread.

    Why: run in turns, drift (clocks, heat, other processes) hits every contender alike; ``spread`` =
    (max - min) / median of ``key`` is the noise a difference must beat to count. Other numeric
    columns are medians too, text columns the first run's. ``rounds`` defaults to 3. One row per case, named in ``case``.
    """
    if not isinstance(cases, Mapping) or not cases:
        raise ValueError(f"cases must be a non-empty dict of name -> function, got {cases!r}")
    for name, fn in cases.items():
        _fn(f"cases[{name!r}]", fn)
    rounds = positive_int("rounds", rounds)
    runs: dict[str, list[Mapping[str, Any]]] = {name: [] for name in cases}
    for _ in range(rounds):
        for name, fn in cases.items():
            row = fn()
            if key not in row and not row.get("oom"):  # an out-of-memory row (run_or_oom) has no measurement
                raise ValueError(f"key {key!r} is not in the row cases[{name!r}] returned; columns: {list(row)}")
            runs[name].append(row)
    out: list[dict[str, Any]] = []
    for name, rows in runs.items():
        frame = pd.DataFrame(rows)
        labels = {k: v for k, v in rows[0].items() if isinstance(v, str)}  # text columns: the first run's
        agg: dict[str, Any] = {"case": name, **labels,
                               **frame.drop(columns=["oom"], errors="ignore").median(numeric_only=True).to_dict()}
        if "oom" in frame:
            agg["oom"] = bool(frame["oom"].any())
        values = frame[key].dropna() if key in frame else pd.Series(dtype=float)
        agg[key] = values.median() if len(values) else float("nan")
        agg["spread"] = (values.max() - values.min()) / values.median() if len(values) > 1 else float("nan")
        agg["runs"] = len(values)
        out.append(agg)
    return pd.DataFrame(out)


def window_rates(run_window: Callable[[], object], items_per_window: int, device: "torch.device | str", *,
                 windows: int = 3, warmup_windows: int = 1) -> dict[str, float]:
    """Items/s of ``run_window()`` (a window of steps): the median over ``windows`` windows and its spread.

    Why: a loop's cost (an ``empty_cache()`` every step) shows only over many steps; CUDA events
    around each window (:func:`fp16lab.timing.time_windows`) time it without a sync inside. ``warmup_windows``
    untimed windows first (default 1); ``windows`` defaults to 3. Peak reserved memory of the timed
    windows is returned too (``peak_reserved_gib``), and on CUDA the segments the allocator obtained with
    cudaMalloc per timed window (``cuda_mallocs_per_window``: 0 once a steady loop reuses its cache).
    """
    run_window = _fn("run_window", run_window)
    dev = resolve_device(device)
    items, windows = positive_int("items_per_window", items_per_window), positive_int("windows", windows)
    if isinstance(warmup_windows, bool) or not isinstance(warmup_windows, int) or warmup_windows < 0:
        raise ValueError(f"warmup_windows must be an int >= 0, got {warmup_windows!r}")
    for _ in range(warmup_windows):
        run_window()
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
        mallocs_before = _segments_allocated(dev)
    rates = [items / s for s in time_windows(run_window, dev, windows)]  # ends with a sync on CUDA
    median = statistics.median(rates)
    cuda = dev.type == "cuda"
    return {"img_per_s": median, "spread": (max(rates) - min(rates)) / median if windows > 1 else float("nan"),
            "peak_reserved_gib": torch.cuda.max_memory_reserved(dev) / 2**30 if cuda else float("nan"),
            "cuda_mallocs_per_window": (_segments_allocated(dev) - mallocs_before) / windows if cuda else float("nan")}


def _segments_allocated(dev: torch.device) -> int:
    """Segments the caching allocator has obtained with cudaMalloc so far (``segment.all.allocated``)."""
    return int(torch.cuda.memory_stats(dev).get("segment.all.allocated", 0))


@dataclass(frozen=True)
class RatioVerdict:
    """One row's value over another's, the two rows' summed spreads, and the verdict they allow."""

    ratio: float
    noise: float
    verdict: str

    def __str__(self) -> str:
        noise = "no spread recorded" if math.isnan(self.noise) else f"spread of the two rows {self.noise:.0%}"
        return f"{self.ratio:.2f}x ({noise}): {self.verdict}"


def ratio_verdict(value: float, baseline: float, value_spread: float, baseline_spread: float, *,
                  above: str, below: str) -> RatioVerdict:
    """``value / baseline`` and its verdict: ``above``/``below`` beyond the two rows' spreads, else a tie.

    Why: two medians from :func:`interleaved` differ by some amount in every run; only a ratio farther
    from 1 than the sum of the rows' run-to-run spreads (``(max - min) / median``) is a difference,
    anything closer is ``"a tie (inside the spread)"``. A NaN spread (one run) gives no verdict.
    ``above``/``below`` name the two directions (e.g. "faster"/"slower" for images/s).
    """
    nums = {"value": value, "baseline": baseline}
    for name, v in nums.items():
        if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or v <= 0:
            raise ValueError(f"{name} must be a positive finite number, got {v!r}")
    for name, v in (("value_spread", value_spread), ("baseline_spread", baseline_spread)):
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0 or math.isinf(v):
            raise ValueError(f"{name} must be a finite number >= 0 (NaN for one run), got {v!r}")
    for name, word in (("above", above), ("below", below)):
        if not isinstance(word, str) or not word.strip():
            raise ValueError(f"{name} must be a non-empty word such as 'faster', got {word!r}")
    ratio, noise = float(value) / float(baseline), float(value_spread) + float(baseline_spread)
    if math.isnan(noise):
        word = "one run: no spread, no verdict"
    elif abs(ratio - 1) <= noise:
        word = "a tie (inside the spread)"
    else:
        word = f"{above if ratio > 1 else below}, beyond the spread"
    return RatioVerdict(ratio, noise, word)


class _OpNames(TorchDispatchMode):
    """Records the name of every aten op dispatched inside it."""

    def __init__(self) -> None:
        super().__init__()
        self.names: list[str] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        self.names.append(func.overloadpacket.__name__)
        return func(*args, **(kwargs or {}))


def aten_ops(fn: Callable[[], object]) -> list[str]:
    """The aten ops ``fn()`` dispatches, in order (``_fused_adam_``, ``_foreach_mul_``, ``add_``, ...).

    Why: which implementation an optimizer really ran is visible in the ops it called, on any device,
    without the profiler. Each call of ``fn`` runs it once.
    """
    fn = _fn("fn", fn)
    with _OpNames() as mode:
        fn()
    return mode.names


def host_syncs(fn: Callable[[], object], device: "torch.device | str") -> int:
    """How many times ``fn()`` made the host wait for the GPU (``torch.cuda.set_sync_debug_mode("warn")``).

    Why: a read-back such as ``.item()`` in every step stops the CPU from queueing the next step
    ahead of the GPU. Needs a CUDA GPU (there is no such wait elsewhere).
    """
    fn = _fn("fn", fn)
    _cuda(device, "host_syncs")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        try:
            fn()
        finally:
            torch.cuda.set_sync_debug_mode("default")
    return sum("called a synchronizing" in str(w.message) for w in caught)
