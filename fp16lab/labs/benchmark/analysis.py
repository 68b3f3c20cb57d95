"""What the measurements mean: FLOPs per image, model FLOP utilisation, and the project's targets.

Model FLOP utilisation (MFU) is achieved FLOP/s over the chip's dense FP16 peak (with FP32
accumulate, what autocast uses), from :mod:`fp16lab.hardware`, for every row alike: one yardstick,
so a true-FP32 row shows how little of the chip's Tensor Core math it reaches. FLOPs are counted
once per run by :func:`model_flops`.

A target's ratio is the median over interleaved rounds (article, recipe, compiled, article, ...)
of the per-round ratio; its spread is the largest distance of any round's ratio from that
median. A target missed by no more than the spread is reported as "within noise".
"""

from __future__ import annotations

import functools
import math
import numbers
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import torch

from fp16lab.checks import instance, one_of, positive_float, positive_int, sequence_of, text
from fp16lab.labs.benchmark.configs import COMPILED, RECOMMENDED, TRAIN_STEP, ModelArg, ModelSpec, parse_model

__all__ = [
    "FLOP_METHOD",
    "model_flops",
    "add_mfu",
    "Target",
    "TARGETS",
    "QUANTITIES",
    "ratio_values",
    "summarise",
    "targets_table",
]

FLOP_METHOD = (
    "torch.utils.flop_counter.FlopCounterMode over one forward (and, for training, backward) pass "
    "of 2 images on the meta device, halved; counts matmul and convolution FLOPs (1 multiply-add = "
    "2 FLOPs), not elementwise ops (batch norm, ReLU, adds) or the optimizer"
)


def model_flops(model: ModelArg = "resnet50", image_size: int = 224, num_classes: int = 1000) -> dict[str, float]:
    """FLOPs per image of a forward pass and of a training step (forward + backward).

    Defaults: ``model='resnet50'`` (a torchvision name or a model factory), ``image_size=224``,
    ``num_classes=1000``. Method: :data:`FLOP_METHOD`. torchvision's "GFLOPS" (4.09 for ResNet50)
    count multiply-adds, half of these numbers. Counted on the meta device (no memory, no math);
    a factory whose model cannot be built there is counted on the CPU instead (slower, same count).
    """
    spec = parse_model(model)
    size = positive_int("image_size", image_size)
    classes = positive_int("num_classes", num_classes)
    if spec.factory is None:
        return dict(_named_flops(spec.name, size, classes))
    try:
        return _count(spec.build, size, classes, torch.device("meta"))
    except Exception:
        return _count(spec.build, size, classes, torch.device("cpu"))


@functools.lru_cache(maxsize=32)
def _named_flops(name: str, size: int, classes: int) -> dict[str, float]:
    """A torchvision model's count, once per process (the same model, size and classes count the same)."""
    return _count(ModelSpec(name).build, size, classes, torch.device("meta"))


def _count(build: Any, size: int, classes: int, dev: torch.device) -> dict[str, float]:
    from torch.utils.flop_counter import FlopCounterMode

    with dev:
        net = build(classes)
        x = torch.randn(2, 3, size, size)  # batch norm in training mode needs more than one value
    with FlopCounterMode(display=False) as counter:
        out = net(x)
        forward = counter.get_total_flops()  # the running count after the forward pass
        out.sum().backward()
    return {"forward": forward / 2.0, "train": counter.get_total_flops() / 2.0}


def add_mfu(frame: pd.DataFrame, flops_per_image: float, peak_tflops: float | None) -> pd.DataFrame:
    """Add ``tflops`` (achieved) and ``mfu`` (over ``peak_tflops``, the chip's dense FP16 peak) columns.

    ``flops_per_image`` is per image per step (``model_flops(...)['train']`` for training).
    ``peak_tflops=None`` (a CPU, or a GPU not in the peak table) gives NaN MFU.
    """
    check_frame("frame", frame, ("img_per_s",))
    flops = positive_float("flops_per_image", flops_per_image)
    peak = math.nan if peak_tflops is None else positive_float("peak_tflops", peak_tflops)
    out = frame.copy()
    if out.empty:
        return out
    out["tflops"] = pd.to_numeric(out["img_per_s"], errors="coerce") * flops / 1e12
    out["mfu"] = out["tflops"] / peak
    return out


# ---------------------------------------------------------------- targets


QUANTITIES = ("img_per_s", "img_per_s_min", "img_per_s_max", "step_ms", "peak_mem_gb", "peak_reserved_gb",
              "first_step_s", "warmup_s", "tflops", "mfu")
"""The measured columns of benchmark rows a ratio (and a :class:`Target`) can be taken of."""

OPS = (">=", "<=")


@dataclass(frozen=True)
class Target:
    """A project target: ``numerator``'s ``quantity`` over ``denominator``'s, ``op`` ``goal``.

    ``quantity`` is one of :data:`QUANTITIES`, ``op`` ``'>='`` or ``'<='``, ``goal`` a finite ratio
    > 0; ``stretch`` (default None) a harder goal on the same side (>= goal for ``'>='``).
    Checked when built: a target that could never be measured is refused, not reported.
    """

    name: str
    numerator: str
    denominator: str
    quantity: str
    op: str
    goal: float
    stretch: float | None = None

    def __post_init__(self) -> None:
        for field in ("name", "numerator", "denominator"):
            if not text(field, getattr(self, field)).strip():
                raise ValueError(f"{field} must be a non-empty str, got {getattr(self, field)!r}")
        if self.numerator == self.denominator:
            raise ValueError(f"numerator and denominator are the same config {self.numerator!r}: a ratio of a "
                             "config to itself is 1 by definition; name two configs")
        one_of("quantity", self.quantity, QUANTITIES)
        one_of("op", self.op, OPS)
        goal = positive_float("goal", self.goal)
        if self.stretch is not None:
            stretch = positive_float("stretch", self.stretch)
            if (stretch < goal) if self.op == ">=" else (stretch > goal):
                raise ValueError(f"stretch must be a harder goal than goal={goal:g} ({self.op} side), "
                                 f"got {self.stretch!r}")


TARGETS: tuple[Target, ...] = (
    Target("recommended / article's loop", RECOMMENDED, "article", "img_per_s", ">=", 2.0),
    Target("recommended / PyTorch default FP32", RECOMMENDED, "fp32_default", "img_per_s", ">=", 2.7),
    Target("compiled / article's loop", COMPILED, "article", "img_per_s", ">=", 2.4, stretch=2.6),
    Target("FP16 peak memory / true FP32", RECOMMENDED, "fp32_true", "peak_mem_gb", "<=", 0.45),
    Target("fp16lab train_step / hand-written step", TRAIN_STEP, RECOMMENDED, "img_per_s", ">=", 0.97),
)
"""The targets on the H200 (ResNet-50 training at batch 256, Adam, synthetic data)."""


def check_frame(name: str, frame: object, columns: Sequence[str]) -> pd.DataFrame:
    """``frame`` when it is a DataFrame of benchmark rows: empty, or with every one of ``columns``.

    The tables' own check of their ``frame`` argument (``name`` and ``columns`` are theirs, not a user's)."""
    if not isinstance(frame, pd.DataFrame):
        raise ValueError(f"{name} must be a pandas DataFrame of benchmark rows (BenchResult.frame), "
                         f"got {type(frame).__name__}")
    missing = [c for c in columns if c not in frame.columns]
    if len(frame) and missing:
        raise ValueError(f"{name} lacks the column(s) {missing!r} of benchmark rows (run_benchmark(...).frame); "
                         f"it has {list(frame.columns)[:12]!r}")
    return frame


def _ok(frame: pd.DataFrame, batch: int | None) -> pd.DataFrame:
    if frame.empty or "status" not in frame:
        return frame.iloc[0:0]
    f = frame[frame["status"] == "ok"]
    return f if batch is None else f[f["batch_size"] == batch]


def ratio_values(
    frame: pd.DataFrame, numerator: str, denominator: str, quantity: str = "img_per_s", batch: int | None = None
) -> tuple[list[float], str]:
    """The ratio per interleaved round (when both were repeated), else the single-run ratio.

    Returns ``(values, source)``: ``source`` is ``'interleaved rounds'``, ``'single runs'`` or
    ``''`` (no value: a configuration failed or was skipped at that batch size). ``quantity`` is a
    column of ``frame`` (``'img_per_s'``, ``'peak_mem_gb'``, ...; see :data:`QUANTITIES`);
    ``batch=None`` takes every batch size. An empty frame, a config or batch size the run does not
    have, or a quantity it did not measure is refused: it is a typo or the wrong run, never "no value".
    """
    f, num, den, q, b = _ratio_args(frame, numerator, denominator, quantity, batch)
    return _Ratios(f, b).values(num, den, q)


def _ratio_args(frame: object, numerator: object, denominator: object, quantity: object,
                batch: object) -> tuple[pd.DataFrame, str, str, str, int | None]:
    """:func:`ratio_values`' arguments, checked once: names are strings, ``quantity`` a column of the rows."""
    num, den, q = text("numerator", numerator), text("denominator", denominator), text("quantity", quantity)
    b = None if batch is None else positive_int("batch", batch)
    f = check_frame("frame", frame, _RATIO_COLUMNS)
    if f.empty:
        raise ValueError("frame has no rows: pass the rows of a benchmark run (run_benchmark(...).frame)")
    one_of("quantity", q, QUANTITIES)
    if q not in f.columns:
        have = [c for c in QUANTITIES if c in f.columns]
        raise ValueError(f"quantity {q!r}: frame lacks the column(s) [{q!r}]; it measured {', '.join(map(repr, have))}")
    configs = sorted(map(str, f["config"].unique()))
    for label, name in (("numerator", num), ("denominator", den)):
        if name not in configs:
            raise ValueError(f"{label} {name!r} is not a config of this run; its configs: {', '.join(configs)}")
    if b is not None and b not in set(f["batch_size"]):
        sizes = sorted(int(x) for x in f["batch_size"].unique())
        raise ValueError(f"batch {b} is not a batch size of this run; its batch sizes: {sizes}")
    return f, num, den, q, b


_RATIO_COLUMNS = ("config", "status", "batch_size", "img_per_s")  # what a ratio reads besides its quantity


class _Ratios:
    """The ok rows of one batch size, split once into per-round and comparison tables."""

    def __init__(self, frame: pd.DataFrame, batch: int | None) -> None:
        f = _ok(frame, batch)
        part = f["part"] if "part" in f else pd.Series("comparison", index=f.index)
        rep = f[part == "repeat"]
        self.rounds = rep.pivot_table(index="round", columns="config", values="img_per_s", aggfunc="first") \
            if not rep.empty else pd.DataFrame()
        self.comp = f[part == "comparison"].set_index("config") if "config" in f else pd.DataFrame()

    def values(self, num: str, den: str, quantity: str) -> tuple[list[float], str]:
        t = self.rounds
        if quantity == "img_per_s" and num in t and den in t:
            both = t[[num, den]].dropna()
            if len(both):
                return [float(a / b) for a, b in zip(both[num], both[den], strict=True)], "interleaved rounds"
        comp = self.comp
        if num in comp.index and den in comp.index:
            a, b = float(comp.loc[num, quantity]), float(comp.loc[den, quantity])
            if a == a and b == b and b:
                return [a / b], "single runs"
        return [], ""


def summarise(values: Sequence[float]) -> tuple[float, float, int]:
    """``(median, spread, n)``: spread is the largest distance of any value from the median.

    ``values`` is a list of finite numbers (a NaN or inf is refused: it would sort in anywhere);
    an empty list, what :func:`ratio_values` returns for a config that failed, gives
    ``(nan, nan, 0)``: not measured.
    """
    values = sequence_of("values", values, example="[2.1, 1.9, 2.05]", allow_empty=True, item=_finite)
    if not values:
        return math.nan, math.nan, 0
    med = float(statistics.median(values))
    return med, max(abs(v - med) for v in values), len(values)


def _finite(label: str, value: object) -> float:
    """One entry of :func:`summarise`'s ``values``: a finite number (any sign: a ratio, a difference)."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(float(value))
    if not ok:
        raise ValueError(f"{label} must be a finite number, got {value!r} ({type(value).__name__})")
    return float(value)  # type: ignore[arg-type]


def _verdict(median: float, spread: float, op: str, goal: float) -> str:
    """``'met'``, ``'within noise'`` (missed by no more than the spread), ``'missed'`` or ``'not measured'``."""
    if median != median:
        return "not measured"
    gap = goal - median if op == ">=" else median - goal
    if gap <= 0:
        return "met"
    return "within noise" if spread == spread and gap <= spread + 1e-12 else "missed"


def targets_table(
    frame: pd.DataFrame, targets: Sequence[Target] = TARGETS, batch: int | None = None
) -> pd.DataFrame:
    """Every target with its median, spread, number of values, source and verdict (and stretch).

    ``batch=None`` uses the first comparison batch size in ``frame`` (the targets are at 256).
    """
    check_frame("frame", frame, ("config", "status", "batch_size"))
    targets = sequence_of("targets", targets, example="[TARGETS[0]] (default TARGETS)",
                          item=lambda name, t: instance(name, t, Target, "a Target (see TARGETS)"))
    if batch is not None:
        batch = positive_int("batch", batch)
        if not frame.empty and batch not in set(frame["batch_size"]):
            sizes = sorted(int(x) for x in frame["batch_size"].unique())
            raise ValueError(f"batch {batch} is not a batch size of this run; its batch sizes: {sizes}")
    for i, t in enumerate(targets):
        if not frame.empty and t.quantity not in frame.columns:
            raise ValueError(f"targets[{i}] ({t.name!r}) needs the column {t.quantity!r}, which frame lacks "
                             "(tflops and mfu come from add_mfu)")
    if batch is None and not frame.empty and "batch_size" in frame:
        comp = frame[frame["part"] == "comparison"] if "part" in frame else frame
        batch = int(comp["batch_size"].iloc[0]) if len(comp) else None
    ratios = _Ratios(frame, batch)
    rows = []
    for t in targets:
        values, source = ratios.values(t.numerator, t.denominator, t.quantity)
        med, spread, n = summarise(values)
        rows.append({
            "target": t.name, "goal": f"{t.op} {t.goal:g}", "median": med, "spread": spread, "n": n,
            "source": source, "verdict": _verdict(med, spread, t.op, t.goal),
            "stretch": "" if t.stretch is None else f"{t.op} {t.stretch:g}",
            "stretch verdict": "" if t.stretch is None else _verdict(med, spread, t.op, t.stretch),
            "values": [round(v, 4) for v in values], "batch": batch,
        })
    return pd.DataFrame(rows)
