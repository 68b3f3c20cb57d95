"""Lesson 03's lab: model variants timed in interleaved rounds, verdicts with their spread, chip floors, 4090D figures.

The lesson keeps its subject (which sizes, layouts and flags to compare) in the notebook; this module
holds the machinery: one FP16-autocast training step as a function (:func:`fp16_step`), the
round-robin timing of several :class:`Case` s with kernel time and wall time (:func:`time_interleaved`),
the per-variant medians and spreads (:func:`summarize`), a faster/slower/tie verdict that respects the
spread (:func:`compare`), the chip-dependent floors the lesson's asserts use (:func:`floors_for`), and
what the cited peaks say an RTX 4090D should reach (:func:`expected_tflops`, :func:`peak_ratio`).
"""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import pandas as pd
import torch

from fp16lab.checks import function, non_negative_int, one_of, positive_float, positive_int, text
from fp16lab.device import free_memory, is_oom, resolve_device
from fp16lab.hardware import PEAK_TFLOPS, Peak, peak_for
from fp16lab.labs.inference.decode import datasheet_bandwidth
from fp16lab.labs.inference.infer import gpu_kernel_time
from fp16lab.precision import autocast
from fp16lab.timing import time_fn

__all__ = [
    "Case", "fp16_step", "quiet_profiler", "time_interleaved", "summarize", "compare", "TIE_FLOOR",
    "Floors", "floors_for", "single_verdict", "peak_ratio", "bandwidth_ratio", "expected_tflops", "LEARNER_CARD",
]

TIE_FLOOR = 0.02  # a difference under 2 % is a tie even where the rounds agree more closely than that
LEARNER_CARD = "RTX 4090D"  # the article's card: the "On your card" figures speak of it
_PROFILER_WARNING = "Warning: Profiler clears events at the end of each cycle"


@contextlib.contextmanager
def quiet_profiler() -> Iterator[None]:
    """Silence torch.profiler's one-cycle notice (fp16lab profiles one cycle at a time, so it says nothing here)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=_PROFILER_WARNING, category=UserWarning)
        yield


def fp16_step(model: torch.nn.Module, *inputs: torch.Tensor, loss_fn: Callable[[torch.Tensor], torch.Tensor],
              device: torch.device | str | None = None) -> Callable[[], None]:
    """One FP16-autocast forward + backward of ``model`` on ``inputs``, as a function of no arguments to time.

    No optimizer step: the variants compared differ in their matmuls and convolutions, which the
    forward and backward hold. ``device`` (default None: the best available) is where autocast runs.
    """
    if not isinstance(model, torch.nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    function("loss_fn", loss_fn, "a function logits -> scalar loss", n_args=1)
    bad = [type(x).__name__ for x in inputs if not isinstance(x, torch.Tensor)]
    if bad:
        raise ValueError(f"inputs must be tensors, got {bad}")
    dev = resolve_device(device)

    def step() -> None:
        with autocast("fp16", dev):
            loss = loss_fn(model(*inputs))
        loss.backward()

    return step


@dataclass(frozen=True)
class Case:
    """One variant to time: a table row per round.

    ``work`` is what one ``step()`` does in ``unit`` (images, tokens, TFLOP) so that ``per_s`` is a
    rate; ``kernels=True`` adds the profiler's GPU kernel time; ``cudnn_benchmark`` (None: leave it)
    is set before each timing and restored afterwards.
    """

    section: str
    variant: str
    batch: int
    unit: str
    work: float
    step: Callable[[], object]
    kernels: bool = False
    cudnn_benchmark: bool | None = None

    def __post_init__(self) -> None:
        """Refuse a bad case before any timing starts."""
        text("section", self.section)
        text("variant", self.variant)
        text("unit", self.unit)
        positive_int("batch", self.batch)
        positive_float("work", self.work)
        function("step", self.step, "a function of no arguments (one training step)", n_args=0)
        if not isinstance(self.kernels, bool):
            raise ValueError(f"kernels must be True or False, got {self.kernels!r}")
        if self.cudnn_benchmark is not None and not isinstance(self.cudnn_benchmark, bool):
            raise ValueError(f"cudnn_benchmark must be None, True or False, got {self.cudnn_benchmark!r}")


def _time_once(case: Case, warmup: int, min_run_time: float, kernel_calls: int) -> dict[str, object]:
    """One round of one case: median wall ms, rate, and (kernels=True) GPU kernel ms and busy share."""
    ms = 1e3 * time_fn(case.step, warmup=warmup, min_run_time=min_run_time).median_s
    row: dict[str, object] = {"ms": ms, "per_s": case.work / ms * 1e3, "status": "ok"}
    if case.kernels:
        with quiet_profiler():
            kernel_ms = 1e3 * gpu_kernel_time(case.step, calls=kernel_calls)
        row.update(gpu_kernel_ms=kernel_ms, gpu_busy=kernel_ms / ms)
    return row


def time_interleaved(cases: Sequence[Case], *, rounds: int = 3, warmup: int = 1, min_run_time: float = 0.5,
                     kernel_calls: int = 3, device: torch.device | str | None = None) -> pd.DataFrame:
    """Time every case once per round, the cases in turn (round-robin), so drift hits all of them alike.

    Defaults: ``rounds=3``, ``warmup=1`` untimed call, ``min_run_time=0.5`` s per timing,
    ``kernel_calls=3`` profiled calls, ``device=None`` (the best available; CUDA for ``kernels=True``). One row per (case, round): section, variant, round, batch,
    unit, ms, per_s, status, gpu_kernel_ms, gpu_busy. A case that runs out of memory becomes one row
    with status ``"OOM"`` and is not tried again; any other error propagates.
    """
    if isinstance(cases, (str, bytes)) or not isinstance(cases, Sequence) or not cases:
        raise ValueError(f"cases must be a non-empty list of Case, got {cases!r}")
    bad = [c for c in cases if not isinstance(c, Case)]
    if bad:
        raise ValueError(f"cases must hold Case objects only, got {bad[0]!r}")
    names = [(c.section, c.variant) for c in cases]
    if len(set(names)) != len(names):
        raise ValueError(f"each (section, variant) must be unique, got {names}")
    rounds = positive_int("rounds", rounds)
    warmup = non_negative_int("warmup", warmup)
    min_run_time = positive_float("min_run_time", min_run_time)
    kernel_calls = positive_int("kernel_calls", kernel_calls)
    device = resolve_device(device)
    if any(c.kernels for c in cases) and device.type != "cuda":
        raise ValueError(f"a case with kernels=True needs the CUDA profiler: device must be a CUDA device, got {str(device)!r}")
    old = torch.backends.cudnn.benchmark
    rows: list[dict[str, object]] = []
    failed: set[tuple[str, str]] = set()
    try:
        for r in range(rounds):
            for case in cases:
                key = (case.section, case.variant)
                if key in failed:
                    continue
                base = {"section": case.section, "variant": case.variant, "round": r, "batch": case.batch,
                        "unit": case.unit}
                if case.cudnn_benchmark is not None:
                    torch.backends.cudnn.benchmark = case.cudnn_benchmark
                try:
                    rows.append({**base, **_time_once(case, warmup, min_run_time, kernel_calls)})
                except Exception as err:  # noqa: BLE001 - only out-of-memory becomes a row
                    if not is_oom(err):
                        raise
                    free_memory(device)
                    failed.add(key)
                    rows.append({**base, "ms": math.nan, "per_s": math.nan, "status": "OOM"})
                finally:
                    torch.backends.cudnn.benchmark = old
    finally:
        torch.backends.cudnn.benchmark = old
    frame = pd.DataFrame(rows)
    for col in ("gpu_kernel_ms", "gpu_busy"):
        if col not in frame:
            frame[col] = math.nan
    return frame


def _spread(values: pd.Series) -> float:
    """(max - min) / median over the rounds: 0 for a single round."""
    v = values.dropna().astype(float)
    if len(v) < 2 or v.median() == 0:
        return 0.0
    return float((v.max() - v.min()) / v.median())


def summarize(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per (section, variant): medians over the rounds and their spread ((max - min) / median).

    Columns: section, variant, rounds, batch, unit, status, ms, ms_spread, per_s, gpu_kernel_ms,
    kernel_spread, gpu_busy. A table without a ``round`` column (one measurement per variant) gives
    ``rounds`` 1 and spreads 0: the verdicts then rest on :data:`TIE_FLOOR` alone.
    """
    if not isinstance(frame, pd.DataFrame):
        raise ValueError(f"frame must be a pandas DataFrame from time_interleaved, got {type(frame).__name__}")
    missing = {"section", "variant", "ms", "per_s"} - set(frame.columns)
    if missing:
        raise ValueError(f"frame lacks the columns {sorted(missing)}; it has {list(frame.columns)}")
    f = frame.copy()
    if "status" not in f:
        f["status"] = "ok"
    f["status"] = f["status"].fillna("ok")
    for col in ("gpu_kernel_ms", "gpu_busy", "batch", "unit"):
        if col not in f:
            f[col] = math.nan
    out = []
    for (section, variant), g in f.groupby(["section", "variant"], sort=False):
        ok = g[g.status == "ok"]
        out.append({
            "section": section, "variant": variant, "rounds": len(ok), "batch": g.batch.iloc[0], "unit": g.unit.iloc[0],
            "status": "ok" if len(ok) else str(g.status.iloc[0]),
            "ms": ok.ms.median(), "ms_spread": _spread(ok.ms), "per_s": ok.per_s.median(),
            "gpu_kernel_ms": ok.gpu_kernel_ms.median(), "kernel_spread": _spread(ok.gpu_kernel_ms),
            "gpu_busy": ok.gpu_busy.median(),
        })
    return pd.DataFrame(out, columns=["section", "variant", "rounds", "batch", "unit", "status", "ms", "ms_spread",
                                      "per_s", "gpu_kernel_ms", "kernel_spread", "gpu_busy"])


_COLUMNS = {"gpu_kernel_ms": ("kernel_spread", "time"), "ms": ("ms_spread", "time"), "per_s": ("ms_spread", "rate")}


def compare(summary: pd.DataFrame, base: str, other: str, column: str = "gpu_kernel_ms") -> dict[str, object]:
    """How much faster ``other`` is than ``base`` by ``column``, and whether that is more than the spread.

    ``summary`` comes from :func:`summarize`; ``column`` is ``"gpu_kernel_ms"`` (default: what the GPU
    does), ``"ms"`` (the step's wall time) or ``"per_s"`` (its rate). ``speedup`` > 1 means ``other`` is
    faster. ``margin`` is the larger spread of the two rows, at least :data:`TIE_FLOOR`; the verdict is
    ``"faster"``, ``"slower"`` or ``"tie"`` (the difference within the margin).
    """
    column = one_of("column", column, tuple(_COLUMNS))
    spread_col, kind = _COLUMNS[column]
    need = {"variant", "rounds", column, spread_col}
    if not isinstance(summary, pd.DataFrame) or not need <= set(summary.columns):
        raise ValueError(f"summary must be the DataFrame summarize() returns (columns {sorted(need)} at least), "
                         f"got {type(summary).__name__}")
    rows = summary.set_index("variant")
    for name, value in (("base", base), ("other", other)):
        text(name, value)
        if value not in rows.index:
            raise ValueError(f"{name} must be a variant of the summary, got {value!r}; it has {list(rows.index)}")
    a, b = float(rows.loc[base, column]), float(rows.loc[other, column])
    if not (math.isfinite(a) and math.isfinite(b)) or a <= 0 or b <= 0:
        return {"base": base, "other": other, "by": column, "speedup": math.nan, "margin": math.nan,
                "rounds": 0, "verdict": "not measured"}
    speedup = a / b if kind == "time" else b / a
    margin = max(float(rows.loc[base, spread_col]), float(rows.loc[other, spread_col]), TIE_FLOOR)
    verdict = "tie" if abs(speedup - 1) <= margin else ("faster" if speedup > 1 else "slower")
    rounds = int(min(rows.loc[base, "rounds"], rows.loc[other, "rounds"]))
    return {"base": base, "other": other, "by": column, "speedup": speedup, "margin": margin, "rounds": rounds,
            "verdict": verdict}


def single_verdict(ratio: float, spread: float) -> str:
    """``"ahead"``/``"behind"`` where ``ratio`` (one timing over another) lies beyond the noise, else ``"tie"``.

    For points timed once each (a sweep): ``spread`` is a run-to-run spread measured elsewhere (the
    timer check's rounds, as a fraction), never taken as less than :data:`TIE_FLOOR`.
    """
    ratio = positive_float("ratio", ratio)
    spread = positive_float("spread", spread, allow_zero=True)
    margin = max(spread, TIE_FLOOR)
    return "tie" if abs(ratio - 1) <= margin else ("ahead" if ratio > 1 else "behind")


@dataclass(frozen=True)
class Floors:
    """What the lesson's speed asserts demand of the chip that ran, and why (one place, not flags in the lesson).

    Hopper loses its TMA kernels on misaligned operands, and the reference H200 run shows steep
    cliffs (aligned over odd about 4.4x, padded head about 5.4x), so its matmul floors are high. The
    whole-step floors (``gpt_step``, ``channels_last``) are lower: those steps also hold memory-bound
    kernels (cross-entropy over the logits, batch norm), which an H100 runs slower than an H200 (less
    memory bandwidth), and that shrinks the ratio; a regression (padding or the layout not applied)
    gives about 1. For other Tensor Core chips (Ampere, Ada) no datasheet says how much the
    narrower-load fallback costs, so their floors ask only for a clear loss. GeForce parts run
    FP16 accumulation at twice the FP32-accumulate rate (cited: Ada whitepaper).
    """

    chip: str | None
    peak: Peak | None
    cliff: float           # aligned / misaligned FP16 matmul rate, at least
    head: float            # padded vocabulary head over the 50257 one, at least
    gpt_step: float        # a GPT step with the padded head over the unpadded one, at least
    channels_last: float   # NCHW kernel time over channels_last kernel time, at least
    rows_share: float      # misaligned row counts keep at least this share of the aligned rate
    m_ratio_max: float | None  # aligned / odd m with k aligned, at most (None: half the k cliff)
    fp16_acc_adds_error: bool  # True where cuBLAS really accumulates in FP16 with the flag: the error grows
    fp16_acc_speedup: float | None  # FP16-accumulate rate over FP32-accumulate, at least (None: no claim)

    def _repr_html_(self) -> str:
        """Render as a table in Jupyter."""
        rows = {k: v for k, v in self.__dict__.items() if k != "peak"}
        rows["cited peak source"] = self.peak.source if self.peak else None
        return pd.Series(rows, name="floor").to_frame()._repr_html_()


def floors_for(gpu_name: str | None) -> Floors:
    """The :class:`Floors` for a device name (``gpu_facts().real_name``), or the generic ones for None/unknown."""
    if gpu_name is not None:
        text("gpu_name", gpu_name)
    peak = peak_for(gpu_name) if gpu_name else None
    hopper = peak is not None and peak.gpu.startswith(("H100", "H200"))
    geforce = gpu_name is not None and "geforce" in gpu_name.lower()
    acc_gain = (peak.fp16_acc16 / peak.fp16) if peak is not None and peak.fp16 and peak.fp16_acc16 else None
    return Floors(
        chip=peak.gpu if peak else gpu_name, peak=peak,
        cliff=3.0 if hopper else 1.5, head=4.0 if hopper else 1.5, gpt_step=1.4 if hopper else 1.2,
        channels_last=1.4 if hopper else 1.2, rows_share=0.95 if hopper else 0.8,
        m_ratio_max=1.1 if hopper else None,
        fp16_acc_adds_error=hopper or geforce,
        fp16_acc_speedup=1.5 if (geforce or (acc_gain is not None and acc_gain >= 1.5)) else None,
    )


def _cited(name: str, gpu: object) -> Peak:
    """The cited :class:`Peak` row for argument ``name``, or a ValueError that names it."""
    gpu = text(name, gpu)
    peak = PEAK_TFLOPS.get(gpu) or peak_for(gpu)
    if peak is None:
        raise ValueError(f"{name} must be a GPU with cited peaks in fp16lab.hardware.PEAK_TFLOPS (e.g. 'NVIDIA H200', "
                         f"{LEARNER_CARD!r}); got {gpu!r}; known: {sorted(PEAK_TFLOPS)}")
    return peak


def peak_ratio(from_gpu: str, to_gpu: str = LEARNER_CARD, precision: str = "fp16") -> float:
    """Cited peak of ``from_gpu`` over that of ``to_gpu`` (default the RTX 4090D) for ``precision``.

    Multiply a compute-bound kernel time measured on ``from_gpu`` by it to get the time expected on
    ``to_gpu`` (a floor: memory-bound kernels scale with bandwidth instead).
    """
    a, b = _cited("from_gpu", from_gpu), _cited("to_gpu", to_gpu)
    precision = one_of("precision", precision, ("fp32", "tf32", "fp16", "bf16", "fp16_acc16", "fp8"))
    pa, pb = a.for_precision(precision), b.for_precision(precision)
    if not pa or not pb:
        raise ValueError(f"precision {precision!r} has no cited peak on {a.gpu if not pa else b.gpu}")
    return float(pa / pb)


def bandwidth_ratio(from_gpu: str, to_gpu: str = LEARNER_CARD) -> float:
    """Cited memory bandwidth of ``from_gpu`` over that of ``to_gpu`` (default the RTX 4090D).

    The factor by which a memory-bound kernel (batch norm, ReLU, the optimizer) is expected to take
    longer on ``to_gpu``; compute-bound kernels scale with :func:`peak_ratio` instead.
    """
    values = []
    for name, gpu in (("from_gpu", from_gpu), ("to_gpu", to_gpu)):
        text(name, gpu)
        bw = datasheet_bandwidth(gpu) if gpu.strip() else None
        if bw is None:
            raise ValueError(f"{name} must be a GPU with a cited memory bandwidth (e.g. 'NVIDIA H200', {LEARNER_CARD!r}); "
                             f"got {gpu!r}")
        values.append(bw)
    return float(values[0] / values[1])


def expected_tflops(reference: pd.DataFrame, card: str = LEARNER_CARD) -> pd.DataFrame:
    """Expected TFLOP/s per precision on ``card``: its cited peak times the share of peak the reference reached.

    ``reference`` has columns precision and pct_of_peak (the dtype rows of ``matmul_sweep``). The
    result is labelled expected: it assumes the card reaches the same share of its own peak.
    """
    if not isinstance(reference, pd.DataFrame) or not {"precision", "pct_of_peak"} <= set(reference.columns) \
            or reference.empty:
        raise ValueError("reference must be a non-empty DataFrame with the columns precision and pct_of_peak "
                         f"(matmul_sweep rows), got {type(reference).__name__}")
    peak = _cited("card", card)
    rows = []
    for _, r in reference.iterrows():
        cited = peak.for_precision(str(r.precision))
        share = float(r.pct_of_peak) / 100
        rows.append({"precision": r.precision, f"{peak.gpu} cited peak": cited, "share reached (reference)": share,
                     f"{peak.gpu} expected TFLOP/s": cited * share if cited else math.nan})
    out = pd.DataFrame(rows).set_index("precision")
    fp32 = out[f"{peak.gpu} cited peak"].get("fp32")
    if fp32:
        out["cited ratio over fp32"] = out[f"{peak.gpu} cited peak"] / fp32
    return out
