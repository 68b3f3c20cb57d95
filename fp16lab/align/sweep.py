"""The matmul sweep: achieved TFLOP/s against matrix size, the sawtooth of misaligned sizes."""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Iterable, Sequence

import pandas as pd
import torch

from fp16lab.align.sizes import ELEMENT_BYTES, parsed_alignment
from fp16lab.checks import boolean, non_negative_int, positive_float, positive_int, sequence_of
from fp16lab.precision import HalfMatmulOnCPUWarning, Precision, check_precision_supported, parse_precision
from fp16lab.timing import parsed_matmul_tflops

__all__ = ["matmul_sweep"]


def _as_shape(name: str, s: object) -> tuple[int, int, int]:
    if isinstance(s, numbers.Integral) and not isinstance(s, bool):  # numpy ints too
        s = (s, s, s)
    if not isinstance(s, Sequence) or isinstance(s, str) or len(s) != 3:
        raise ValueError(f"{name}: a shape is an int n (for n×n×n) or a tuple (m, n, k); got {s!r}")
    m, n, k = s
    return (positive_int(f"{name} m", m), positive_int(f"{name} n", n), positive_int(f"{name} k", k))


def _precisions(precisions: object) -> list[Precision]:
    """A precision name (or Precision) or a list of them: documented, a single name is a list of one."""
    return sequence_of("precisions", precisions, example="['fp16', 'bf16']", single=True,
                       item=lambda name, p: parse_precision(p, name=name))


def matmul_sweep(
    shapes: Iterable["int | tuple[int, int, int]"],
    precisions: "Iterable[Precision | str] | Precision | str" = ("fp16",),
    device: "torch.device | str | None" = None,
    *,
    min_run_time: float = 0.1,
    seed: int = 0,
    progress: bool = True,
) -> pd.DataFrame:
    """Achieved TFLOP/s of (m×k)@(k×n) for every shape × precision, as a DataFrame.

    Each point is timed like :func:`fp16lab.timing.matmul_tflops` (fresh random inputs,
    warm-up, synchronised blocks, the median). ``shapes`` are ints n (n×n×n) or (m, n, k)
    tuples. Defaults: ``precisions=("fp16",)``, ``device=None`` (cuda > mps > cpu),
    ``min_run_time=0.1`` s per point, ``seed=0``, a tqdm progress bar. Columns: m, n, k,
    precision, seconds, iqr_s, tflops, aligned (all of m, n, k multiples of the
    precision's Tensor Core alignment; NA for fp32), peak_tflops and pct_of_peak (NaN when
    the chip is not in :data:`fp16lab.hardware.PEAK_TFLOPS` or not a CUDA GPU; the peak is
    the real chip's, also under a hardware profile, since the speed is), device
    (:attr:`fp16lab.hardware.GPUFacts.label`: under a hardware profile it names the chip
    that really ran).
    """
    from tqdm.auto import tqdm

    from fp16lab.device import resolve_device
    from fp16lab.hardware import gpu_facts, peak_for

    shape_list = sequence_of("shapes", shapes, example="[4096, (4096, 4096, 4104)]", item=_as_shape)
    prec_list = _precisions(precisions)
    dev = resolve_device(device)
    min_run_time = positive_float("min_run_time", min_run_time)
    seed = non_negative_int("seed", seed)
    progress = boolean("progress", progress)
    facts = gpu_facts(dev) if dev.type == "cuda" else None
    # speed is the real chip's, also under a hardware profile: compare it with that chip's peak
    name, peak = (facts.label, peak_for(facts.real_name)) if facts is not None else (dev.type.upper(), None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # CPU half-precision warning: said once below
        for p in prec_list:
            check_precision_supported(p, dev)
    if dev.type == "cpu" and any(p in (Precision.FP16, Precision.BF16) for p in prec_list):
        warnings.warn(
            HalfMatmulOnCPUWarning("fp16/bf16 matmuls on the CPU are slow and use no Tensor Cores; these are not "
                                   "FP16 speed figures"),
            stacklevel=2,
        )
    rows = []
    jobs = [(p, s) for p in prec_list for s in shape_list]
    for p, (m, n, k) in tqdm(jobs, desc="matmul sweep", disable=not progress, leave=False):
        r = parsed_matmul_tflops(m, n, k, p, dev, min_run_time, seed)
        if p in ELEMENT_BYTES:
            a = parsed_alignment(p)
            r["aligned"] = all(x % a == 0 for x in (m, n, k))
        else:
            r["aligned"] = pd.NA
        pk = getattr(peak, p.value, None) if peak is not None else None
        r["peak_tflops"] = float(pk) if pk else math.nan
        r["pct_of_peak"] = 100.0 * r["tflops"] / pk if pk else math.nan  # type: ignore[operator]
        r["device"] = name
        rows.append(r)
    return pd.DataFrame(rows)
