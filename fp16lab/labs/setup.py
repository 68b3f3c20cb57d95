"""Lesson 00's lab: matmul throughput per dtype in interleaved rounds, the verdict on paired ratios, the RTX 4090D
forecast from cited peaks, and the probes the lesson prints (TF32 settings in a fresh process, FP16 accumulation's
error, the loaded cuDNN version)."""

from __future__ import annotations

import contextlib
import json
import math
import subprocess
import sys

import pandas as pd
import torch

from fp16lab import checks
from fp16lab.device import parse_device, resolve_device
from fp16lab.hardware import PEAK_TFLOPS, PROFILES, Peak
from fp16lab.labs.runtime.i18n import tr
from fp16lab.precision import fp16_accumulation
from fp16lab.timing import matmul_tflops

__all__ = ["FORECAST_EFFICIENCY", "FORECAST_N", "acc16_cited", "card_forecast", "compare_with_forecast",
           "cudnn_version", "doctor_summary", "forecast_memory_line", "fp16_accumulation_error", "fresh_tf32_probe",
           "interleaved_matmul_rounds"]

_PRECISIONS = ("fp32", "tf32", "fp16", "bf16")


def interleaved_matmul_rounds(configs: list[tuple[str, str]], size: int, device: torch.device, *, rounds: int,
                              min_run_time: float) -> pd.DataFrame:
    """One row per (round, config): every config timed once per round, so clock drift hits all alike, in the
    given order in even rounds and reversed in odd ones, so that no config always follows the same one (heat or
    clocks left by the previous timing average out over an even number of rounds).

    ``configs`` holds (precision, accumulate) pairs; accumulate ``"fp16"`` (fp16 only) sets
    ``allow_fp16_accumulation`` for that timing.
    """
    pairs = configs if isinstance(configs, list) and configs else [("?", "?")]
    for pair in pairs:
        p, acc = pair if isinstance(pair, tuple) and len(pair) == 2 else ("?", "?")
        if p not in _PRECISIONS or acc not in ("fp32", "fp16") or (acc == "fp16" and p != "fp16"):
            raise ValueError(f"configs must be a list of (precision, accumulate) pairs, precision one of "
                             f"{_PRECISIONS}, accumulate 'fp32' or 'fp16' (fp16 only); got {configs!r}")
    if not isinstance(size, int) or size < 1:
        raise ValueError(f"size must be a positive int (the matmul's n); got {size!r}")
    if not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"rounds must be a positive int; got {rounds!r}")
    if not (isinstance(min_run_time, (int, float)) and min_run_time > 0):
        raise ValueError(f"min_run_time must be a positive number of seconds; got {min_run_time!r}")
    rows = []
    for r in range(rounds):
        for p, acc in (configs if r % 2 == 0 else configs[::-1]):
            with fp16_accumulation(True) if acc == "fp16" else contextlib.nullcontext():
                rows.append(matmul_tflops(size, size, size, p, device, min_run_time=min_run_time)
                            | {"accumulate": acc, "round": r})
    return pd.DataFrame(rows)


def doctor_summary(stdout: str, returncode: int) -> str:
    """The doctor command's exit status and its rows that are not OK: the full report is already shown once."""
    if not isinstance(stdout, str):
        raise ValueError(f"stdout must be the doctor's output as a str; got {type(stdout).__name__}: {stdout!r:.80}")
    if not isinstance(returncode, int) or isinstance(returncode, bool):
        raise ValueError(f"returncode must be the doctor's exit status, an int; got {returncode!r}")
    lines = stdout.splitlines()
    head = tr("python -m fp16lab doctor: exit status {rc}, {n} lines; the rows that are not OK (the full report is "
              "the one above):", rc=returncode, n=len(lines))
    return head + "\n" + ("\n".join(line for line in lines if not line.startswith("[OK")) or tr("every row OK"))


# Assumed (not cited) shares of the cited peak that a large matmul reaches on a GeForce Ada card: CUDA-core FP32 falls
# well short of its peak, Tensor Core matmuls come near theirs (boost clocks above the rated one can pass it: one
# cited RTX 4090 report reaches 104 % of the TF32 peak at n = 8192). The lesson cites the reports these bands were set from.
FORECAST_EFFICIENCY = {"CUDA cores": (0.55, 0.75), "Tensor Cores": (0.80, 1.15)}
FORECAST_N = 8192   # the full-mode matmul size of the lesson's throughput table
_FORECAST_ROWS = (("fp32", "fp32", "CUDA cores"), ("tf32", "fp32", "Tensor Cores"), ("fp16", "fp32", "Tensor Cores"),
                  ("bf16", "fp32", "Tensor Cores"), ("fp16", "fp16", "Tensor Cores"))


def card_forecast(card: str = "RTX 4090D") -> pd.DataFrame:
    """What the throughput table should show on ``card``, from its cited peaks (PEAK_TFLOPS) and FORECAST_EFFICIENCY.

    All five rows whatever machine runs it (the forecast needs no GPU): precision, accumulate, the units that run it,
    the cited peak, its ratio to true FP32, the assumed efficiency band, and the expected TFLOP/s and ratio ranges
    (the ratio's low end pairs the row's low share with FP32's high share, and the reverse).
    """
    if card not in PEAK_TFLOPS:
        raise ValueError(f"card must be a name in fp16lab.hardware.PEAK_TFLOPS; got {card!r}")
    peak = PEAK_TFLOPS[card]
    fp32_lo, fp32_hi = FORECAST_EFFICIENCY["CUDA cores"]
    rows = []
    for p, acc, units in _FORECAST_ROWS:
        cited = peak.fp16_acc16 if acc == "fp16" else peak.for_precision(p)
        if cited is None:
            continue
        lo, hi = FORECAST_EFFICIENCY[units]
        rows.append({"precision": p, "accumulate": acc, "units": units, "cited peak TFLOP/s": cited,
                     "cited x true FP32": cited / peak.fp32, "assumed share": f"{lo:.0%}-{hi:.0%}",
                     "expected TFLOP/s": f"{lo * cited:.0f}-{hi * cited:.0f}",
                     "expected x true FP32": "1" if p == "fp32" else
                     f"{lo * cited / (fp32_hi * peak.fp32):.1f}-{hi * cited / (fp32_lo * peak.fp32):.1f}"})
    return pd.DataFrame(rows)


def acc16_cited(peak: Peak) -> str:
    """``"faster"`` where the cited peaks give FP16 accumulation a wider path than FP32 accumulation, else ``"same"``."""
    if not isinstance(peak, Peak):
        raise ValueError(f"peak must be a fp16lab.hardware.Peak (e.g. PEAK_TFLOPS['H200']); got {peak!r:.80}")
    return "faster" if (peak.fp16_acc16 or 0) >= 1.5 * (peak.fp16 or math.inf) else "same"


def compare_with_forecast(measured: pd.DataFrame, forecast: pd.DataFrame) -> pd.DataFrame:
    """The measured TFLOP/s of each (precision, accumulate) row beside the forecast's expected range, inside or not.

    ``measured`` has columns precision, accumulate, tflops (lesson 00's throughput table); ``forecast`` is
    :func:`card_forecast`'s table. Rows the machine did not measure are left out.
    """
    for name, frame, cols in (("measured", measured, ("precision", "accumulate", "tflops")),
                              ("forecast", forecast, ("precision", "accumulate", "expected TFLOP/s"))):
        if not isinstance(frame, pd.DataFrame) or not set(cols) <= set(frame.columns):
            raise ValueError(f"{name} must be a DataFrame with columns {', '.join(cols)}; got {frame!r:.80}")
    got = measured.set_index(["precision", "accumulate"]).tflops
    rows = []   # "above": the card boosts past its rated clock; "below": its power limit, cooling or other load
    for _, row in forecast.iterrows():
        key = (row.precision, row.accumulate)
        if key not in got.index:
            continue
        lo, hi = (float(v) for v in str(row["expected TFLOP/s"]).split("-"))
        v = float(got[key])
        rows.append({"precision": key[0], "accumulate": key[1], "measured TFLOP/s": v, "expected TFLOP/s":
                     row["expected TFLOP/s"], "inside": "yes" if lo <= v <= hi else "below" if v < lo else "above"})
    return pd.DataFrame(rows)


def forecast_memory_line() -> str:
    """The memory a FORECAST_N-sized FP32 matmul's operands and result take, against what an RTX 4090D reports."""
    profile, n = PROFILES["rtx4090d"], FORECAST_N
    mib = 3 * n * n * 4 / 2**20
    return tr("memory: an {n}x{n} matmul's FP32 operands and result take {mib:,.0f} MiB of the {total:,} MiB the {card} "
              "reports ({pct:.0%})", n=n, mib=mib, total=profile.memory_mib, card=profile.name,
              pct=mib / profile.memory_mib)


def fp16_accumulation_error(device: "torch.device | str", k: int = 4096) -> dict[bool, float]:
    """Relative error of a 256 x k @ k x 256 FP16 product against FP64, with FP16 accumulation off (False) and on.

    Proof that the flag took effect, independent of speed: with FP16 accumulation the running sum keeps 11 bits.
    """
    device = resolve_device(parse_device(device))
    k = checks.positive_int("k", k)
    g = torch.Generator(device=device).manual_seed(3)
    a16 = torch.randn(256, k, device=device, generator=g).half()
    b16 = torch.randn(k, 256, device=device, generator=g).half()
    exact = a16.double() @ b16.double()
    err = {}
    for flag in (False, True):
        with fp16_accumulation(flag):
            err[flag] = ((a16 @ b16).double() - exact).norm().item() / exact.norm().item()
    return err


def cudnn_version() -> tuple[int, int] | None:
    """(major, minor) of the cuDNN torch loaded, or None: cuDNN 9 reports MMmmpp (91900), cuDNN 8 Mmpp (8902)."""
    loaded = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    if not loaded:
        return None
    return (loaded // 10000, loaded % 10000 // 100) if loaded >= 90000 else (loaded // 1000, loaded % 1000 // 100)


_TF32_PROBE = r"""
import json, torch
from fp16lab.precision import tf32_state
b = torch.backends
raw = {"cuda.matmul.fp32_precision": b.cuda.matmul.fp32_precision,
       "cudnn.conv.fp32_precision": b.cudnn.conv.fp32_precision,
       "cuda.matmul.allow_tf32 (legacy)": b.cuda.matmul.allow_tf32,
       "cudnn.allow_tf32 (legacy)": b.cudnn.allow_tf32}
state = tf32_state()
levels = {}
for level in ("high", "highest"):
    torch.set_float32_matmul_precision(level)
    levels[level] = tf32_state()
b.cuda.matmul.fp32_precision = "tf32"      # the new API ...
try:
    b.cuda.matmul.allow_tf32               # ... then the legacy flag, in the same process
    mixing = "no error on this torch version"
except RuntimeError as err:
    mixing = "RuntimeError: " + str(err).split(",")[0]
print(json.dumps({"raw": raw, "state": state, "levels": levels, "mixing": mixing}))
"""


def fresh_tf32_probe() -> dict[str, object]:
    """TF32 settings as a fresh Python process sees them: raw values, effective state, after each
    ``set_float32_matmul_precision`` level, and what reading a legacy flag after a new setting does."""
    done = subprocess.run([sys.executable, "-c", _TF32_PROBE], capture_output=True, text=True, check=True)
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result
