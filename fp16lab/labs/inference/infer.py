"""Inference in FP16 and BF16: cast the weights or autocast, and latency against throughput.

Why: inference keeps no master weights and needs no GradScaler, so a model can simply be *cast*
(``model.half()``, ``model.to(torch.bfloat16)``: half the weight memory, no per-call weight casts)
instead of running under ``torch.autocast`` (FP32 weights, every matmul casts its weight again on
every call). Which is faster, by how much and from which batch size on, is measured here:

- :func:`variants` / :func:`prepare_model`: a model in one precision (``fp32`` = true FP32 with
  TF32 off, ``tf32``, ``fp16``, ``bf16``), mode (``"cast"`` or ``"autocast"``) and memory format;
- :func:`latency_sweep`: milliseconds per batch and items per second across batch sizes, under
  ``torch.inference_mode``, timed with :mod:`fp16lab.timing` (warm-up, synchronised, median), with
  the profiler's GPU-busy fraction (:func:`gpu_kernel_time`) on request;
- :func:`precision_agreement`: how far each variant's outputs are from FP32's (errors, argmax
  agreement, accuracy and loss when targets are given).

CUDA graphs and ``torch.compile`` are in :mod:`fp16lab.labs.inference.graphs`, FP32 islands in
:mod:`fp16lab.labs.inference.islands`, the decode benchmark of a language model in :mod:`fp16lab.labs.inference.decode`.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import torch
from torch import nn

from fp16lab.checks import (
    boolean,
    distinct,
    function,
    instance,
    non_negative_int,
    one_of,
    positive_float,
    positive_int,
    sequence_of,
    values_readable,
)
from fp16lab.device import free_memory, is_oom, resolve_device
from fp16lab.precision import Precision, autocast, parse_precision, precision_context
from fp16lab.timing import DTYPES, Timing, gpu_kernels, time_cuda_events, time_fn

__all__ = [
    "INFER_MODES",
    "TIMERS",
    "Variant",
    "variants",
    "supports",
    "weight_bytes",
    "prepare_model",
    "prepare_input",
    "inference_fn",
    "latency_sweep",
    "gpu_kernel_time",
    "precision_agreement",
]

INFER_MODES = ("cast", "autocast")
TIMERS = ("benchmark", "cuda_events")
_LOW = (Precision.FP16, Precision.BF16)


@dataclass(frozen=True)
class Variant:
    """One way to run a model for inference: precision, how it is applied, memory format.

    ``mode`` is ``"cast"`` (weights and inputs stored in the 16-bit dtype) or ``"autocast"``
    (FP32 weights, ``torch.autocast`` picks the dtype per op) for fp16/bf16, and ``"none"``
    for fp32/tf32. Build them with :func:`variants`.
    """

    precision: Precision
    mode: str
    channels_last: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "precision", parse_precision(self.precision))
        object.__setattr__(self, "channels_last", boolean("channels_last", self.channels_last))
        allowed = INFER_MODES if self.precision in _LOW else ("none",)
        if not isinstance(self.mode, str) or self.mode not in allowed:
            raise ValueError(f"mode for {self.precision.value} must be one of {allowed}, got {self.mode!r}")

    @property
    def weights_dtype(self) -> torch.dtype:
        """The dtype the weights are stored in."""
        return DTYPES[self.precision] if self.mode == "cast" else torch.float32

    @property
    def autocast_dtype(self) -> torch.dtype | None:
        """The dtype autocast runs eligible ops in, or None (no autocast)."""
        return self.precision.autocast_dtype if self.mode == "autocast" else None

    @property
    def label(self) -> str:
        """A short name such as ``'fp16 cast + channels_last'``."""
        base = self.precision.value if self.mode == "none" else f"{self.precision.value} {self.mode}"
        return base + (" + channels_last" if self.channels_last else "")


def _bools(name: str, values: object) -> list[bool]:
    return sequence_of(name, values, example="[False, True]", item=boolean)


def variants(
    precisions: Sequence[str] = ("fp32", "fp16", "bf16"),
    modes: Sequence[str] = ("cast",),
    channels_last: Sequence[bool] = (False,),
) -> list[Variant]:
    """Every combination of ``precisions`` × ``modes`` × ``channels_last``, as :class:`Variant` s.

    Defaults: fp32, fp16, bf16; cast; NCHW. fp32 and tf32 have no half-precision mode, so they
    give one variant per memory format whatever ``modes`` says.
    """
    precs = sequence_of("precisions", precisions, example="['fp32', 'fp16']",
                        item=lambda name, p: parse_precision(p, name=name))
    mode_list = sequence_of("modes", modes, example="['cast']", item=lambda name, m: one_of(name, m, INFER_MODES))
    layouts = _bools("channels_last", channels_last)
    out: list[Variant] = []
    for p in precs:
        for cl in layouts:
            for m in mode_list if p in _LOW else ["none"]:
                v = Variant(p, m, cl)
                if v not in out:
                    out.append(v)
    return out


def supports(precision: "Precision | str", device: "torch.device | str") -> bool:
    """Whether ``device`` runs ``precision`` natively (bf16/tf32 need sm_80+ on CUDA; tf32 is CUDA-only)."""
    p = parse_precision(precision)
    dev = resolve_device(device)
    if dev.type == "cuda":
        from fp16lab.hardware import gpu_facts

        facts = gpu_facts(dev)
        return facts is not None and facts.supports(p.value)
    return p is not Precision.TF32


def weight_bytes(model: nn.Module) -> int:
    """Bytes of a model's parameters and buffers (shared tensors counted once)."""
    instance("model", model, nn.Module, "a torch.nn.Module")
    seen: dict[object, int] = {}
    for t in list(model.parameters()) + list(model.buffers()):
        storage = t.untyped_storage()
        ptr = storage.data_ptr()  # 0 on the meta device and for empty storages: not an identity
        key: object = (t.device, ptr) if ptr else ("object", id(t))
        seen[key] = storage.nbytes()
    return sum(seen.values())


# --------------------------------------------------------------------------- preparing


def _prepare(model: nn.Module, v: Variant, dev: torch.device) -> nn.Module:
    m = copy.deepcopy(model).to(dev).eval().requires_grad_(False)
    if v.mode == "cast":
        m = m.to(v.weights_dtype)
    if v.channels_last:
        m = m.to(memory_format=torch.channels_last)
    return m


def _prepare_x(x: torch.Tensor, v: Variant, dev: torch.device) -> torch.Tensor:
    x = x.to(dev)
    if v.mode == "cast" and x.is_floating_point():
        x = x.to(v.weights_dtype)
    if v.channels_last and x.dim() == 4:
        x = x.contiguous(memory_format=torch.channels_last)
    return x


def prepare_model(
    model: nn.Module,
    precision: "Precision | str" = "fp16",
    mode: str = "cast",
    *,
    channels_last: bool = False,
    device: "torch.device | str | None" = None,
) -> nn.Module:
    """A copy of ``model`` ready for inference: on ``device``, eval mode, no gradients, cast or not.

    Defaults: ``precision="fp16"``, ``mode="cast"`` (ignored for fp32/tf32), NCHW, ``device``
    = the best available. ``model`` itself is left unchanged. Run it with :func:`inference_fn`.
    """
    instance("model", model, nn.Module, "a torch.nn.Module")
    p = parse_precision(precision)
    m = one_of("mode", mode, INFER_MODES)  # checked for fp32/tf32 too, where it is then ignored
    v = Variant(p, m if p in _LOW else "none", boolean("channels_last", channels_last))
    return _prepare(model, v, resolve_device(device))


def prepare_input(x: torch.Tensor, variant: Variant, device: "torch.device | str | None" = None) -> torch.Tensor:
    """``x`` on ``device`` in the variant's input dtype (cast mode) and memory format (4-D only)."""
    instance("x", x, torch.Tensor, "a tensor")
    instance("variant", variant, Variant, "a Variant (see variants())")
    return _prepare_x(x, variant, resolve_device(device))


def inference_fn(model: nn.Module, x: torch.Tensor, variant: Variant) -> Callable[[], Any]:
    """A no-argument function running ``model(x)`` under ``torch.inference_mode`` (and autocast if asked).

    ``model`` and ``x`` come from :func:`prepare_model` / :func:`prepare_input` for ``variant``.
    """
    instance("model", model, nn.Module, "a torch.nn.Module")
    instance("x", x, torch.Tensor, "a tensor")
    instance("variant", variant, Variant, "a Variant (see variants())")
    return _runner(model, x, variant)


def _runner(model: nn.Module, x: torch.Tensor, v: Variant) -> Callable[[], Any]:
    # autocast only in autocast mode; otherwise an FP32 island (any autocast around the call is off)
    precision = v.precision if v.mode == "autocast" else Precision.FP32
    dev_type = x.device.type

    def run() -> Any:
        with torch.inference_mode(), autocast(precision, dev_type):
            return model(x)

    return run


# --------------------------------------------------------------------------- the sweep


def gpu_kernel_time(fn: Callable[[], Any], *, calls: int = 5) -> float:
    """Seconds of GPU kernel time per call of ``fn`` (CUDA profiler, sum of kernel self times).

    Divide by the wall time per call to get the GPU-busy fraction: near 1 the GPU is the
    bottleneck; far below 1 it waits for the CPU to launch kernels. Default ``calls=5``
    (after one untimed call).
    """
    from fp16lab.labs.inference.graphs import check_no_arg_fn

    check_no_arg_fn(fn)
    calls = positive_int("calls", calls)
    if not torch.cuda.is_available():
        raise ValueError("gpu_kernel_time needs a CUDA GPU (it reads the CUDA profiler); none is visible here")
    frame = gpu_kernels(fn, calls=calls, warmup=1)
    return float(frame["total_us"].sum()) / 1e6 / calls


@dataclass(frozen=True)
class _SweepPlan:
    batch_sizes: list[int]
    variants: list[Variant]
    device: torch.device
    min_run_time: float
    warmup: int
    timer: str
    gpu_busy: bool
    rounds: int = 1


def _check_input(make_input: Callable[[int], torch.Tensor], batch: int, layouts: set[bool]) -> None:
    try:
        x = make_input(batch)
    except Exception as exc:
        if is_oom(exc):  # too large for this device: the sweep records it as a row
            return
        raise ValueError(f"make_input must be a function batch_size -> input tensor; make_input({batch}) raised "
                         f"{type(exc).__name__}: {exc}") from exc
    if not isinstance(x, torch.Tensor) or x.dim() == 0 or x.shape[0] != batch:
        got = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
        raise ValueError(f"make_input({batch}) must return a tensor whose first dimension is {batch}, got {got}")
    if True in layouts and x.dim() != 4:
        raise ValueError(f"channels_last needs 4-D (N, C, H, W) inputs; make_input gives {x.dim()}-D {tuple(x.shape)}")
    del x


def _plan(model: object, make_input: object, batch_sizes: object, precisions: Sequence[str], modes: Sequence[str],
          channels_last: Sequence[bool], device: object, min_run_time: object, warmup: object, timer: object,
          gpu_busy: object, rounds: object = 1) -> _SweepPlan:
    instance("model", model, nn.Module, "a torch.nn.Module")
    maker = function("make_input", make_input, "a function batch_size -> input tensor", n_args=1)
    batches = distinct("batch_sizes", sequence_of("batch_sizes", batch_sizes, example="[1, 8, 64]", item=positive_int))
    vs = variants(precisions, modes, channels_last)
    dev = resolve_device(device)  # type: ignore[arg-type]
    timer = one_of("timer", timer, TIMERS)
    busy = boolean("gpu_busy", gpu_busy)
    if (busy or timer == "cuda_events") and dev.type != "cuda":
        raise ValueError(f"gpu_busy=True and timer='cuda_events' need a CUDA device, got device {str(dev)!r}")
    plan = _SweepPlan(batches, vs, dev, positive_float("min_run_time", min_run_time), non_negative_int("warmup", warmup),
                      timer, busy, positive_int("rounds", rounds))
    for b in batches:  # every size: a wrong batch would make items/s silently wrong
        _check_input(maker, b, {v.channels_last for v in vs})
    return plan


def _time(fn: Callable[[], Any], plan: _SweepPlan) -> Timing:
    if plan.timer == "cuda_events":
        return time_cuda_events(fn, warmup=plan.warmup, repeats=max(5, int(plan.min_run_time * 50)))
    return time_fn(fn, warmup=plan.warmup, min_run_time=plan.min_run_time)


def _row(v: Variant, batch: int, dev: torch.device, status: str, **values: Any) -> dict[str, Any]:
    row: dict[str, Any] = {"variant": v.label, "precision": v.precision.value, "mode": v.mode,
                           "channels_last": v.channels_last, "batch": batch, "device": str(dev), "status": status,
                           "input_shape": None, "ms_per_batch": math.nan, "iqr_ms": math.nan, "items_per_s": math.nan,
                           "gpu_kernel_ms": math.nan, "gpu_busy": math.nan}
    row.update(values)
    return row


def _measure(model: nn.Module, make_input: Callable[[int], torch.Tensor], v: Variant, batch: int,
             plan: _SweepPlan) -> dict[str, Any]:
    x = _prepare_x(make_input(batch), v, plan.device)
    t = _time(_runner(model, x, v), plan)
    values = {"input_shape": "x".join(map(str, x.shape[1:])),  # one item's shape: what the sweep fed the model
              "ms_per_batch": t.median_s * 1e3, "iqr_ms": t.iqr_s * 1e3, "items_per_s": batch / t.median_s}
    return _row(v, batch, plan.device, "ok", **values)


def _sweep_variant(model: nn.Module, make_input: Callable[[int], torch.Tensor], v: Variant,
                   plan: _SweepPlan, batches: Sequence[int] | None = None,
                   each: Callable[[nn.Module, Callable[[int], torch.Tensor], Variant, int, _SweepPlan],
                                  dict[str, Any]] = _measure) -> list[dict[str, Any]]:
    """Rows of ``each`` (default: a timing) for ``batches`` (default: the plan's) on one prepared copy of ``model``."""
    dev = plan.device
    todo = list(plan.batch_sizes if batches is None else batches)
    if not supports(v.precision, dev):
        why = f"unsupported: {v.precision.value} is not native on this device"
        return [_row(v, b, dev, why) for b in todo]
    rows: list[dict[str, Any]] = []
    prepared: nn.Module | None = None
    try:
        prepared = _prepare(model, v, dev)
        with precision_context(v.precision):
            for i, b in enumerate(todo):
                try:
                    rows.append(each(prepared, make_input, v, b, plan))
                except Exception as exc:  # an OOM is a row; anything else is a real error
                    if not is_oom(exc):
                        if hasattr(exc, "add_note"):  # Python 3.11+: say where, keep the model's own error
                            exc.add_note(f"(latency_sweep: model(make_input({b})) failed for variant {v.label!r}: "
                                         "check that make_input gives what the model takes)")
                        raise
                    free_memory(dev)
                    rows.append(_row(v, b, dev, "out of memory"))
                    rows += [_row(v, later, dev, f"skipped: out of memory at batch {b}") for later in todo[i + 1:]]
                    break
    except Exception as exc:
        if not is_oom(exc):
            raise
        rows = [_row(v, b, dev, "out of memory (model)") for b in todo]
    finally:
        del prepared
        free_memory(dev)
    return rows


def _kernel_time(model: nn.Module, make_input: Callable[[int], torch.Tensor], v: Variant, batch: int,
                 plan: _SweepPlan) -> dict[str, Any]:
    x = _prepare_x(make_input(batch), v, plan.device)
    return {"batch": batch, "gpu_kernel_ms": gpu_kernel_time(_runner(model, x, v)) * 1e3}


def _merge_rounds(per_round: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """One row per variant and batch: the median over the rounds that measured it, with every round's time."""
    merged = []
    for cells in zip(*per_round, strict=True):
        ok = [c for c in cells if c["status"] == "ok"]
        if len(ok) < len(cells):  # a round that ran out of memory: the row says so, not a median of the others
            merged.append(next(c for c in cells if c["status"] != "ok"))
            continue
        times = [c["ms_per_batch"] for c in ok]
        row = dict(ok[0])
        ms = float(pd.Series(times).median())
        row.update(ms_per_batch=ms, items_per_s=row["batch"] / ms * 1e3,
                   iqr_ms=float(pd.Series([c["iqr_ms"] for c in ok]).median()),
                   ms_min=min(times), ms_max=max(times), ms_rounds=times)
        merged.append(row)
    return merged


def latency_sweep(
    model: nn.Module,
    make_input: Callable[[int], torch.Tensor],
    batch_sizes: Sequence[int],
    *,
    precisions: Sequence[str] = ("fp32", "fp16", "bf16"),
    modes: Sequence[str] = ("cast",),
    channels_last: Sequence[bool] = (False,),
    device: "torch.device | str | None" = None,
    min_run_time: float = 0.2,
    warmup: int = 3,
    timer: str = "benchmark",
    gpu_busy: bool = False,
    rounds: int = 1,
    progress: bool = False,
) -> pd.DataFrame:
    """Milliseconds per batch and items per second of ``model`` for every variant and batch size.

    ``make_input(batch)`` returns an FP32 input batch (it is moved, cast and laid out per
    variant). Each variant runs on a copy of ``model`` (:func:`prepare_model`) under
    ``torch.inference_mode``; ``fp32`` is true FP32 (TF32 off). Timing: :func:`fp16lab.timing.time_fn`
    (``timer="benchmark"``, torch.utils.benchmark) or :func:`fp16lab.timing.time_cuda_events`
    (``"cuda_events"``), after ``warmup`` calls. ``rounds`` > 1 interleaves: every variant is timed
    once per round, round after round, so slow drift (clocks, other work on the host) reaches every
    variant alike; each row then holds the median over rounds (``ms_per_batch``), every round's time
    (``ms_rounds``) and their range (``ms_min``, ``ms_max``): ratios between two variants taken
    round by round give the spread a difference must beat. ``gpu_busy=True`` adds the profiler's
    kernel time and the GPU-busy fraction (CUDA only), in a pass *after* all the timing: the
    profiler (CUPTI) can stay attached once used and slow later kernel launches (pytorch#144455), so
    no timing here runs after it. An out-of-memory error or a precision the device does not run
    natively becomes a row with its ``status``, never an exception.

    Defaults: fp32/fp16/bf16, cast, NCHW, the best device, ``min_run_time=0.2`` s, ``warmup=3``,
    no profiling, ``rounds=1`` (no range columns), no progress bar. One row per variant and batch
    size; ``input_shape`` is one item's shape as measured (``"3x224x224"``; missing where nothing
    was measured).
    """
    plan = _plan(model, make_input, batch_sizes, precisions, modes, channels_last, device, min_run_time, warmup,
                 timer, gpu_busy, rounds)
    boolean("progress", progress)
    items: Any = [(r, v) for r in range(plan.rounds) for v in plan.variants]  # interleaved: round by round
    if progress:
        from tqdm.auto import tqdm

        items = tqdm(items, desc="rounds x variants")
    per_round: list[list[dict[str, Any]]] = [[] for _ in range(plan.rounds)]
    for r, v in items:
        per_round[r] += _sweep_variant(model, make_input, v, plan)
    rows = per_round[0] if plan.rounds == 1 else _merge_rounds(per_round)
    if plan.gpu_busy:  # the profiler last: nothing is timed after it (CUPTI can stay attached)
        for v in plan.variants:
            done = [row["batch"] for row in rows if row["variant"] == v.label and row["status"] == "ok"]
            if not done:
                continue
            kernel = {k["batch"]: k["gpu_kernel_ms"] for k in _sweep_variant(model, make_input, v, plan, done,
                                                                              each=_kernel_time) if "gpu_kernel_ms" in k
                      and k.get("status", "ok") == "ok"}
            for row in rows:
                if row["variant"] == v.label and row["batch"] in kernel:
                    row["gpu_kernel_ms"] = kernel[row["batch"]]
                    row["gpu_busy"] = kernel[row["batch"]] / row["ms_per_batch"]
    frame = pd.DataFrame(rows)
    frame["ms_per_item"] = frame["ms_per_batch"] / frame["batch"]
    return frame


# --------------------------------------------------------------------------- accuracy


def _outputs(model: nn.Module, inputs: torch.Tensor, v: Variant, dev: torch.device, batch_size: int) -> torch.Tensor:
    parts = []
    with precision_context(v.precision):
        for start in range(0, inputs.shape[0], batch_size):
            x = _prepare_x(inputs[start:start + batch_size], v, dev)
            parts.append(_runner(model, x, v)().float())
    return torch.cat(parts)


def _compare(out: torch.Tensor, ref: torch.Tensor, targets: torch.Tensor | None,
             loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None) -> dict[str, float]:
    finite = torch.isfinite(out)
    err = (out - ref).abs()
    row = {"nonfinite": int((~finite).sum()),
           "max_abs_err": float(err.max()) if bool(finite.all()) else math.inf,
           "mean_abs_err": float(err.mean()) if bool(finite.all()) else math.inf,
           "rel_err": float(err.max() / ref.abs().max().clamp_min(1e-30)) if bool(finite.all()) else math.inf,
           "agreement": float((out.argmax(-1) == ref.argmax(-1)).float().mean()),
           "accuracy": math.nan, "loss": math.nan}
    if targets is not None:
        t = targets.to(out.device)
        if t.shape == out.shape[:-1]:
            row["accuracy"] = float((out.argmax(-1) == t).float().mean())
        if loss_fn is not None:
            loss = loss_fn(out, t)
            if not isinstance(loss, (torch.Tensor, float, int)) or (isinstance(loss, torch.Tensor) and loss.numel() != 1):
                what = f"shape {tuple(loss.shape)}" if isinstance(loss, torch.Tensor) else type(loss).__name__
                raise ValueError(f"loss_fn must return one number (e.g. reduction='mean'), it returned {what}")
            row["loss"] = float(loss)
    return row


def precision_agreement(
    model: nn.Module,
    inputs: torch.Tensor,
    targets: torch.Tensor | None = None,
    *,
    precisions: Sequence[str] = ("fp16", "bf16"),
    modes: Sequence[str] = ("autocast", "cast"),
    device: "torch.device | str | None" = None,
    loss_fn: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
    batch_size: int = 256,
) -> pd.DataFrame:
    """How far each inference variant's outputs are from true FP32's, on the same inputs.

    One row for the FP32 reference, then one per variant of ``precisions`` × ``modes``:
    weight dtype and MiB, ``max_abs_err`` / ``mean_abs_err`` / ``rel_err`` (max error over the
    largest |FP32 output|), ``agreement`` (share of argmax over the last dimension equal to
    FP32's), ``nonfinite`` outputs, and with ``targets`` the ``accuracy`` (when targets have the
    outputs' shape without the last dimension) and ``loss_fn(outputs, targets)`` (outputs in FP32).
    Defaults: fp16 and bf16, autocast and cast, the best device, no loss, chunks of 256.
    Unsupported precisions become rows saying so.
    """
    instance("model", model, nn.Module, "a torch.nn.Module")
    instance("inputs", inputs, torch.Tensor, "a tensor of input samples")
    if inputs.dim() == 0 or inputs.shape[0] == 0:
        raise ValueError(f"inputs must hold at least one sample, got shape {tuple(inputs.shape)}")
    if values_readable(inputs) and inputs.is_floating_point() and not bool(torch.isfinite(inputs).all()):
        raise ValueError(f"inputs holds {int((~torch.isfinite(inputs)).sum())} inf/NaN values: the FP32 reference "
                         "would not be finite either, so nothing could be compared")
    if targets is not None and (not isinstance(targets, torch.Tensor) or targets.shape[:1] != inputs.shape[:1]):
        raise ValueError(f"targets must be a tensor with one entry per input sample, got {targets!r:.80}")
    function("loss_fn", loss_fn, "a function (outputs, targets) -> loss", n_args=2, optional=True)
    if loss_fn is not None and targets is None:
        raise ValueError("loss_fn needs targets (the loss is loss_fn(outputs, targets)); pass targets or drop loss_fn")
    vs = [v for v in variants(precisions, modes) if v.precision in _LOW]
    if not vs:
        raise ValueError(f"precisions must include fp16 or bf16, got {list(precisions)!r}")
    dev, bs = resolve_device(device), positive_int("batch_size", batch_size)
    rows: list[dict[str, Any]] = []
    ref: torch.Tensor | None = None
    for v in [Variant(Precision.FP32, "none"), *vs]:
        base: dict[str, Any] = {"variant": v.label, "precision": v.precision.value, "mode": v.mode,
                "weights_dtype": str(v.weights_dtype).replace("torch.", "")}
        if not supports(v.precision, dev):
            rows.append({**base, "status": "unsupported on this device"})
            continue
        m = _prepare(model, v, dev)
        try:
            out = _outputs(m, inputs, v, dev, bs)
        except Exception as exc:
            if ref is not None or is_oom(exc):
                raise
            raise ValueError(f"inputs: the model fails on them in true FP32 ({type(exc).__name__}: "
                             f"{str(exc).splitlines()[0][:160] if str(exc) else ''}); pass inputs of the shape and "
                             f"dtype the model takes, got {inputs.dtype} {tuple(inputs.shape)}") from exc
        ref = out if ref is None else ref  # the FP32 reference comes first
        rows.append({**base, "status": "ok", "weight_mib": weight_bytes(m) / 2**20,
                     **_compare(out, ref, targets, loss_fn)})
        del m
    return pd.DataFrame(rows)
