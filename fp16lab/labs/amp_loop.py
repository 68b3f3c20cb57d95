"""Lesson 02's lab: the packaged loop's per-step cost against a hand-written AMP step, and what it means on a 4090D.

The lesson keeps its subject (the loop, and which ratio it reads) in the notebook; this module holds the
machinery: the interleaved timing of the two steps on ResNet-50 with each step's host syncs counted
(:func:`measure_train_overhead`, with the fast-kernel switch and the out-of-memory row of
:func:`measure_overhead`), the verdict on the timing against its own spread (:func:`overhead_summary`), the
expected ratio on another card from cited figures (:func:`expected_overhead_ratio`), and the paired
comparison of precisions over seeds (:func:`paired_gap`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pandas as pd
import torch
import torch.nn.functional as F

from fp16lab.checks import boolean, function, positive_float, positive_int, text
from fp16lab.device import OOM_ERRORS, free_memory
from fp16lab.labs.memory.pitfalls import host_syncs
from fp16lab.timing import time_fn
from fp16lab.train import train_step

__all__ = ["RESNET50_GMACS", "batch_for", "expected_overhead_ratio", "host_syncs_per_step", "measure_overhead",
           "measure_train_overhead", "overhead_summary", "paired_gap"]

# cited: torchvision ResNet50_Weights documentation, "4.09 GFLOPS" at 224x224, which counts multiply-adds
RESNET50_GMACS = 4.09
LOOPS = ("hand-written", "fp16lab.train_step")
# Two-sided 95 % quantiles of Student's t distribution by degrees of freedom (any statistics table)
T95 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228}


def host_syncs_per_step(step: Callable[[], None], device: torch.device, *, steps: int = 3, warmup: int = 2) -> float:
    """How often one call of ``step`` makes the host wait for the GPU, counted over ``steps`` calls after ``warmup``.

    Why: a read-back (``.item()``, ``.tolist()``) stops the CPU from queueing the next step while the GPU works;
    its cost hides inside the timing's spread, its count does not. Defaults: 3 counted calls after 2 warm-up calls
    (the first calls create the scaler's and the optimizer's state and let cuDNN choose its kernels). NaN where
    the device is not a CUDA GPU (there is nothing to wait for).
    """
    step = function("step", step, "a function of no arguments (one training step)", n_args=0)
    if not isinstance(device, torch.device):
        raise ValueError(f"device must be a torch.device, got {device!r}")
    steps, warmup = positive_int("steps", steps), positive_int("warmup", warmup, minimum=0)
    if device.type != "cuda":
        return math.nan
    for _ in range(warmup):
        step()
    torch.cuda.synchronize(device)

    def counted() -> None:
        for _ in range(steps):
            step()

    return host_syncs(counted, device) / steps


def measure_train_overhead(device: torch.device, batch: int, *, fused: bool, label: str, image_size: int = 224,
                           rounds: int = 3, min_run_time: float = 2.0, window: int = 5) -> pd.DataFrame:
    """samples/s of a hand-written AMP step and of fp16lab.train_step, same model, alternating rounds: the loop's price."""
    import torchvision

    if not isinstance(device, torch.device):
        raise ValueError(f"device must be a torch.device, got {device!r}")
    batch, image_size = positive_int("batch", batch), positive_int("image_size", image_size)
    rounds, window = positive_int("rounds", rounds), positive_int("window", window)
    min_run_time, fused, label = positive_float("min_run_time", min_run_time), boolean("fused", fused), text("label", label)
    torch.manual_seed(0)
    model = torchvision.models.resnet50(weights=None).to(device, memory_format=torch.channels_last)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, fused=fused)
    x = torch.randn(batch, 3, image_size, image_size, device=device).to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (batch,), device=device)
    scaler = torch.amp.GradScaler(device.type)

    def hand_step() -> None:
        with torch.autocast(device_type=device.type, dtype=torch.float16):
            loss = F.cross_entropy(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
        opt.zero_grad(set_to_none=True)

    def fit_step() -> None:
        train_step(model, opt, scaler, [(x, y)], precision="fp16", device=device, channels_last=True)

    def steps_of(step: Callable[[], None]) -> Callable[[], None]:
        def run() -> None:
            for _ in range(window):
                step()
        return run

    syncs = {name: host_syncs_per_step(step, device) for name, step in zip(LOOPS, (hand_step, fit_step), strict=True)}
    rows = []
    for r in range(rounds):
        for name, step in zip(LOOPS, (hand_step, fit_step), strict=True):
            t = time_fn(steps_of(step), warmup=1, min_run_time=min_run_time)
            rows.append({"loop": name, "round": r, "samples_per_s": batch * window / t.median_s,
                         "spread": t.spread, "batch": batch, "image_size": image_size, "precision": "fp16",
                         "memory_format": "channels_last", "optimizer": f"Adam(fused={fused})", "gpu": label,
                         "host_syncs_per_step": syncs[name]})
    return pd.DataFrame(rows)


def measure_overhead(device: torch.device, batch: int, *, fused: bool, label: str) -> pd.DataFrame:
    """measure_train_overhead with the fastest (non-deterministic) kernels, as in real training; an OOM becomes a row."""
    saved = torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = False, True
    try:
        return measure_train_overhead(device, batch, fused=fused, label=label)
    except OOM_ERRORS as err:
        return pd.DataFrame([{"loop": "out of memory", "batch": batch, "error": str(err)[:200]}])
    finally:
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = saved
        free_memory(device)


def expected_overhead_ratio(frame: pd.DataFrame, *, batch: int, peak_tflops: float) -> dict[str, float]:
    """The ratio to expect on another card: this run's bookkeeping ms (assumed the same there) over a step at its peak.

    The bookkeeping's milliseconds are bounded from above by the larger of its measured cost and the rounds'
    spread (``cost_bound_ms``): a cost inside the spread (a tie) is not a measured cost, but it cannot exceed the
    spread. ``expected_ratio_floor`` uses that bound and the fastest possible step on the other card (three
    forwards of ResNet-50, two FLOPs per multiply-add, at ``peak_tflops``), so the ratio there is expected at or
    above it. Also returns ``measured_batch``, ``cost_ms`` (the measured difference of the medians), ``batch`` and
    ``fastest_step_ms``.
    """
    if not isinstance(frame, pd.DataFrame) or not {"loop", "samples_per_s", "batch", "image_size"} <= set(frame):
        raise ValueError(f"frame must be measure_train_overhead's table (loop, samples_per_s, batch, image_size), "
                         f"got {type(frame).__name__}")
    batch, peak_tflops = positive_int("batch", batch), positive_float("peak_tflops", peak_tflops)
    measured_batch = int(frame["batch"].iloc[0])
    per_step = {loop: measured_batch / frame.loc[frame["loop"] == loop, "samples_per_s"].median() for loop in LOOPS}
    cost = per_step["fp16lab.train_step"] - per_step["hand-written"]          # seconds of bookkeeping per step
    by = frame.groupby("loop")["samples_per_s"]
    spread = float(by.agg(lambda s: s.max() / s.min() - 1).max())
    bound = max(cost, spread * per_step["hand-written"])
    macs = RESNET50_GMACS * 1e9 * (float(frame["image_size"].iloc[0]) / 224) ** 2
    fastest = 3 * 2 * macs * batch / (peak_tflops * 1e12)   # 2 FLOPs per multiply-add; a step = 3 forwards
    return {"measured_batch": measured_batch, "cost_ms": cost * 1e3, "cost_bound_ms": bound * 1e3, "batch": batch,
            "fastest_step_ms": fastest * 1e3, "expected_ratio_floor": fastest / (fastest + bound)}


def batch_for(batches: Mapping[float, int], gib: float) -> int:
    """The batch a GiB -> batch table picks for a card of gib GiB (the largest key that fits), as pick_for_memory does."""
    if not isinstance(batches, Mapping) or not batches:
        raise ValueError(f"batches must be a non-empty mapping of GiB -> batch, got {batches!r}")
    gib = positive_float("gib", gib)
    fits = [k for k in batches if k <= gib]
    if not fits:
        raise ValueError(f"no key of batches {dict(batches)!r} is <= gib={gib!r}: allowed gib >= {min(batches)}")
    return batches[max(fits)]


def overhead_summary(frame: pd.DataFrame) -> dict[str, Any]:
    """The packaged loop's price from :func:`measure_train_overhead`'s table, judged against the table's own spread.

    Returns ``ratio`` (median samples/s of ``fp16lab.train_step`` over the hand-written step's), ``spread``
    (the larger of the two loops' round-to-round spreads, max/min - 1), ``cost`` (``1 - ratio``, the share of a
    step), ``verdict``: ``"tie"`` when the cost lies inside the spread, else ``"slower"`` or ``"faster"``
    (beyond it), and ``host_syncs`` (loop -> host syncs per step; ``None`` where the table has no count, as in
    results recorded before the count existed).
    """
    if not isinstance(frame, pd.DataFrame) or not {"loop", "round", "samples_per_s"} <= set(frame):
        raise ValueError(f"frame must be measure_train_overhead's table (loop, round, samples_per_s), "
                         f"got {type(frame).__name__}")
    if set(frame["loop"]) != set(LOOPS) or frame["samples_per_s"].isna().any():
        raise ValueError(f"frame must hold samples_per_s of both loops {LOOPS}, got loops {sorted(set(frame['loop']))}")
    by = frame.groupby("loop")["samples_per_s"]
    medians = by.median()
    ratio = float(medians["fp16lab.train_step"] / medians["hand-written"])
    spread = float(by.agg(lambda s: s.max() / s.min() - 1).max())
    cost = 1 - ratio
    verdict = "tie" if abs(cost) <= spread else "slower" if cost > 0 else "faster"
    syncs = None
    if "host_syncs_per_step" in frame and frame["host_syncs_per_step"].notna().all():
        syncs = {loop: float(frame.loc[frame["loop"] == loop, "host_syncs_per_step"].iloc[0]) for loop in LOOPS}
    return {"ratio": ratio, "spread": spread, "cost": cost, "verdict": verdict, "host_syncs": syncs}


def paired_gap(base: Sequence[float], other: Sequence[float]) -> dict[str, Any]:
    """``other - base`` pair by pair (runs that share a seed: the same weights and batches), judged by its spread.

    Why: a pair differs only by the precision, so the spread of the per-pair differences, not the spread of
    each precision over seeds, is the yardstick for a quality gap. Returns ``gaps`` (per pair), ``mean``,
    ``half_width`` (95 % interval of the mean: Student's t with n - 1 degrees of freedom times the standard
    error) and ``verdict``: ``"tie"`` when the interval holds 0, else ``"higher"`` or ``"lower"``. Needs 2 to 11
    pairs of finite numbers.
    """
    if not isinstance(base, Sequence) or not isinstance(other, Sequence) or isinstance(base, str) or isinstance(other, str):
        raise ValueError(f"base and other must be sequences of numbers, got {type(base).__name__} and "
                         f"{type(other).__name__}")
    if len(base) != len(other) or not 2 <= len(base) <= len(T95) + 1:
        raise ValueError(f"base and other must pair up, 2 to {len(T95) + 1} values each; got {len(base)} and {len(other)}")
    gaps = [float(o) - float(b) for b, o in zip(base, other, strict=True)]
    if not all(math.isfinite(g) for g in gaps):
        raise ValueError(f"base and other must be finite numbers, got {list(base)!r} and {list(other)!r}")
    n = len(gaps)
    mean = sum(gaps) / n
    sd = math.sqrt(sum((g - mean) ** 2 for g in gaps) / (n - 1))
    half_width = T95[n - 1] * sd / math.sqrt(n)
    verdict = "tie" if abs(mean) <= half_width else "higher" if mean > 0 else "lower"
    return {"gaps": gaps, "mean": mean, "half_width": half_width, "verdict": verdict}
