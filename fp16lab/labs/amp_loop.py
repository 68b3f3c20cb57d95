"""Lesson 02's lab: the packaged loop's per-step cost against a hand-written AMP step, and what it means on a 4090D.

The lesson keeps its subject (the loop, and which ratio it reads) in the notebook; this module holds the
machinery: the interleaved timing of the two steps on ResNet-50 (:func:`measure_train_overhead`, with the
fast-kernel switch and the out-of-memory row of :func:`measure_overhead`), and the expected ratio on another
card from cited figures (:func:`expected_overhead_ratio`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import pandas as pd
import torch
import torch.nn.functional as F

from fp16lab.checks import boolean, positive_float, positive_int, text
from fp16lab.device import OOM_ERRORS, free_memory
from fp16lab.timing import time_fn
from fp16lab.train import train_step

__all__ = ["RESNET50_GMACS", "batch_for", "expected_overhead_ratio", "measure_overhead", "measure_train_overhead"]

# cited: torchvision ResNet50_Weights documentation, "4.09 GFLOPS" at 224x224, which counts multiply-adds
RESNET50_GMACS = 4.09
LOOPS = ("hand-written", "fp16lab.train_step")


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

    rows = []
    for r in range(rounds):
        for name, step in zip(LOOPS, (hand_step, fit_step), strict=True):
            t = time_fn(steps_of(step), warmup=1, min_run_time=min_run_time)
            rows.append({"loop": name, "round": r, "samples_per_s": batch * window / t.median_s,
                         "spread": t.spread, "batch": batch, "image_size": image_size, "precision": "fp16",
                         "memory_format": "channels_last", "optimizer": f"Adam(fused={fused})", "gpu": label})
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
    """The ratio to expect on another card: this run's bookkeeping ms (assumed the same there) over a step at its peak."""
    if not isinstance(frame, pd.DataFrame) or not {"loop", "samples_per_s", "batch", "image_size"} <= set(frame):
        raise ValueError(f"frame must be measure_train_overhead's table (loop, samples_per_s, batch, image_size), "
                         f"got {type(frame).__name__}")
    batch, peak_tflops = positive_int("batch", batch), positive_float("peak_tflops", peak_tflops)
    measured_batch = int(frame["batch"].iloc[0])
    per_step = {loop: measured_batch / frame.loc[frame["loop"] == loop, "samples_per_s"].median() for loop in LOOPS}
    cost = per_step["fp16lab.train_step"] - per_step["hand-written"]          # seconds of bookkeeping per step
    macs = RESNET50_GMACS * 1e9 * (float(frame["image_size"].iloc[0]) / 224) ** 2
    fastest = 3 * 2 * macs * batch / (peak_tflops * 1e12)   # 2 FLOPs per multiply-add; a step = 3 forwards
    return {"measured_batch": measured_batch, "cost_ms": cost * 1e3, "batch": batch, "fastest_step_ms": fastest * 1e3,
            "expected_ratio_floor": fastest / (fastest + cost)}


def batch_for(batches: Mapping[float, int], gib: float) -> int:
    """The batch a GiB -> batch table picks for a card of gib GiB (the largest key that fits), as pick_for_memory does."""
    if not isinstance(batches, Mapping) or not batches:
        raise ValueError(f"batches must be a non-empty mapping of GiB -> batch, got {batches!r}")
    gib = positive_float("gib", gib)
    fits = [k for k in batches if k <= gib]
    if not fits:
        raise ValueError(f"no key of batches {dict(batches)!r} is <= gib={gib!r}: allowed gib >= {min(batches)}")
    return batches[max(fits)]
