"""Lesson 00's lab: matmul throughput per dtype in interleaved rounds, and the tie verdict on paired ratios."""

from __future__ import annotations

import contextlib
import math

import pandas as pd
import torch

from fp16lab.labs.runtime.i18n import tr
from fp16lab.precision import fp16_accumulation
from fp16lab.timing import matmul_tflops

__all__ = ["doctor_summary", "interleaved_matmul_rounds", "tie_verdict"]

_PRECISIONS = ("fp32", "tf32", "fp16", "bf16")


def interleaved_matmul_rounds(configs: list[tuple[str, str]], size: int, device: torch.device, *, rounds: int,
                              min_run_time: float) -> pd.DataFrame:
    """One row per (round, config): every config timed once per round, so clock drift hits all alike.

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
        for p, acc in configs:
            with fp16_accumulation(True) if acc == "fp16" else contextlib.nullcontext():
                rows.append(matmul_tflops(size, size, size, p, device, min_run_time=min_run_time)
                            | {"accumulate": acc, "round": r})
    return pd.DataFrame(rows)


def tie_verdict(ratios: pd.Series, tie: float) -> str:
    """'faster' or 'slower' only where every paired ratio lies outside 1/tie..tie, else 'a tie'."""
    if not (isinstance(tie, (int, float)) and tie > 1 and math.isfinite(tie)):
        raise ValueError(f"tie must be a finite number above 1 (the band is 1/tie..tie); got {tie!r}")
    if not isinstance(ratios, pd.Series) or ratios.empty or not ratios.gt(0).all():
        raise ValueError(f"ratios must be a non-empty pandas Series of positive ratios; got {ratios!r}")
    return "faster" if ratios.min() > tie else "slower" if ratios.max() < 1 / tie else "a tie"


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
