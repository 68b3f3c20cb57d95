"""Debugging mixed precision: what ran in which dtype, where inf/NaN first appeared, and memory.

- :func:`dtype_trace` runs a model once under autocast and lists, per module, the dtypes
  going in and coming out and the dtype of its parameters: what autocast put in fp16/bf16
  and what it kept in fp32.
- :func:`first_nonfinite` finds the first module whose output holds inf or NaN and shows
  the largest magnitude each layer produced on the way there.
- :func:`step_peak_memory` and :func:`memory_sweep` measure the peak CUDA memory of one
  training step by precision and batch size; :func:`max_batch_size` finds the largest
  batch that fits and recovers cleanly from out-of-memory errors.
"""

from __future__ import annotations

import contextlib
import html
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import torch
from torch import nn

from fp16lab.device import OOM_ERRORS, free_memory, model_device, parse_device
from fp16lab.precision import (
    Precision,
    autocast,
    check_precision_supported,
    parse_precision,
    precision_context,
)
from fp16lab.train import make_scaler, train_step

__all__ = [
    "dtype_trace",
    "first_nonfinite",
    "NonFiniteReport",
    "step_peak_memory",
    "StepMemory",
    "memory_sweep",
    "max_batch_size",
    "BatchSearch",
    "FP16_MAX",
]

FP16_MAX = float(torch.finfo(torch.float16).max)  # 65504



# ---------------------------------------------------------------------------- validation


def _check_module(model: object) -> nn.Module:
    if not isinstance(model, nn.Module):
        raise TypeError(
            f"model must be a torch.nn.Module, got {type(model).__name__} ({model!r:.80}); "
            "wrap a function in a Module or pass the model itself"
        )
    return model


def _tensors(obj: object) -> Iterator[torch.Tensor]:
    """Every tensor inside ``obj`` (tensors, tuples, lists, dicts, nested)."""
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (tuple, list)):
        for item in obj:
            yield from _tensors(item)
    elif isinstance(obj, dict):
        for item in obj.values():
            yield from _tensors(item)


def _to_device(obj: Any, device: torch.device) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, tuple):
        return tuple(_to_device(o, device) for o in obj)
    if isinstance(obj, list):
        return [_to_device(o, device) for o in obj]
    if isinstance(obj, dict):
        return {k: _to_device(v, device) for k, v in obj.items()}
    return obj


def _check_batch(example: object, what: str = "example_input") -> None:
    tensors = list(_tensors(example))
    if not tensors:
        raise ValueError(
            f"{what} holds no tensor (got {type(example).__name__}: {example!r:.80}); "
            "pass a tensor, a tuple/list of positional inputs, or a dict of keyword inputs"
        )
    for t in tensors:
        if t.numel() == 0 or (t.dim() > 0 and t.shape[0] == 0):
            raise ValueError(f"{what} is empty (a tensor of shape {tuple(t.shape)}); pass at least one sample")


def _resolve_device(model: nn.Module, device: "torch.device | str | None") -> torch.device:
    here = model_device(model, default=torch.device("cpu"))
    if device is None:
        return here
    dev = parse_device(device)
    has_state = any(True for _ in model.parameters()) or any(True for _ in model.buffers())
    if has_state and (here.type != dev.type or (dev.index is not None and here.index != dev.index)):
        raise ValueError(
            f"the model's parameters are on {str(here)!r} but device={str(dev)!r}; "
            f"move the model first (model.to({str(dev)!r})) or leave device=None"
        )
    return dev


def _check_precision(precision: "Precision | str", device: torch.device) -> Precision:
    p = parse_precision(precision)
    if device.type == "cuda":
        check_precision_supported(p, device)  # bf16/tf32 need sm_80+
    return p


def _call(model: nn.Module, example: Any) -> Any:
    if isinstance(example, dict):
        return model(**example)
    if isinstance(example, (tuple, list)):
        return model(*example)
    return model(example)


def _dtype_names(obj: object) -> str:
    seen: list[str] = []
    for t in _tensors(obj):
        name = str(t.dtype).replace("torch.", "")
        if name not in seen:
            seen.append(name)
    return ", ".join(seen)


@contextlib.contextmanager
def _eval_mode(model: nn.Module) -> Iterator[None]:
    """Eval mode for the block (no BatchNorm statistics updated, no dropout), then restored."""
    modes = {m: m.training for m in model.modules()}
    model.eval()
    try:
        yield
    finally:
        for m, training in modes.items():
            m.train(training)


def _names(model: nn.Module) -> dict[nn.Module, str]:
    names: dict[nn.Module, str] = {}
    for name, mod in model.named_modules(remove_duplicate=False):
        names.setdefault(mod, name or "(model)")
    return names


def _is_leaf(mod: nn.Module) -> bool:
    return next(iter(mod.children()), None) is None


# ---------------------------------------------------------------------------- dtype trace


def dtype_trace(
    model: nn.Module,
    example_input: Any,
    precision: "Precision | str" = "fp16",
    device: "torch.device | str | None" = None,
    *,
    leaves_only: bool = True,
) -> pd.DataFrame:
    """Run ``model`` once on ``example_input`` under autocast and list each module's dtypes.

    Shows what autocast actually did (which layers ran in fp16/bf16, which stayed fp32)
    instead of what one assumes. ``example_input`` is a tensor, a tuple/list of positional
    inputs or a dict of keyword inputs; it is moved to ``device`` (default ``None``: the
    model's device). ``precision`` defaults to ``"fp16"``; ``"fp32"``/``"tf32"`` trace with
    autocast off. ``leaves_only=True`` (default) lists modules without children; ``False``
    lists containers too. The model runs in eval mode under ``torch.no_grad()`` (no
    BatchNorm statistics change) and its mode is restored afterwards.

    Returns a DataFrame, one row per module call in execution order, with columns
    ``module``, ``type``, ``input_dtypes``, ``output_dtypes``, ``param_dtypes`` and
    ``low_precision`` (the output is in the autocast dtype); ``frame.attrs`` holds
    precision, device and autocast dtype.
    """
    model = _check_module(model)
    dev = _resolve_device(model, device)
    p = _check_precision(precision, dev)
    _check_batch(example_input)
    example = _to_device(example_input, dev)
    low = p.autocast_dtype
    names = _names(model)
    rows: list[dict[str, Any]] = []

    def hook(mod: nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
        if leaves_only and not _is_leaf(mod):
            return
        params = _dtype_names(list(mod.parameters(recurse=False)))
        out_dtypes = [t.dtype for t in _tensors(output) if t.is_floating_point()]
        rows.append(
            {
                "module": names.get(mod, "?"),
                "type": type(mod).__name__,
                "input_dtypes": _dtype_names((args, kwargs)),
                "output_dtypes": _dtype_names(output),
                "param_dtypes": params or "-",
                "low_precision": bool(low is not None and out_dtypes and all(d == low for d in out_dtypes)),
            }
        )

    handles = [m.register_forward_hook(hook, with_kwargs=True) for m in model.modules()]
    try:
        with _eval_mode(model), torch.no_grad(), precision_context(p), autocast(p, dev):
            _call(model, example)
    finally:
        for h in handles:
            h.remove()
    frame = pd.DataFrame(
        rows, columns=["module", "type", "input_dtypes", "output_dtypes", "param_dtypes", "low_precision"]
    )
    frame.attrs.update(
        {"precision": p.value, "device": str(dev), "autocast_dtype": str(low).replace("torch.", "") if low else None}
    )
    return frame


# ---------------------------------------------------------------------------- non-finite


@dataclass
class NonFiniteReport:
    """Where inf/NaN first appeared in a forward pass, and each layer's largest magnitude.

    ``first`` is the qualified name of the first module (in the order modules finished
    their forward) whose output holds inf or NaN, ``"(input)"`` when the input already
    did, or ``None`` when every output was finite. ``table`` has one row per module call.
    """

    first: str | None
    table: pd.DataFrame
    precision: str
    device: str

    @property
    def found(self) -> bool:
        """True when some output (or the input) held inf or NaN."""
        return self.first is not None

    @property
    def first_row(self) -> pd.Series | None:
        """The table row of the first non-finite output (None when all finite)."""
        bad = self.table[~self.table["finite"]]
        return None if bad.empty else bad.iloc[0]

    def __str__(self) -> str:
        if self.first is None:
            peak = self.table["max_abs"].max() if len(self.table) else float("nan")
            return f"all outputs finite under {self.precision} (largest |value| {peak:.4g})"
        row = self.first_row
        assert row is not None
        return (
            f"first non-finite output under {self.precision}: {self.first} ({row['type']}, "
            f"{row['dtype']}): {row['n_inf']} inf, {row['n_nan']} NaN"
        )

    def __repr__(self) -> str:
        return f"NonFiniteReport({self})"

    def _repr_html_(self) -> str:
        colour = "#1a7f37" if self.first is None else "#cf222e"
        styled = self.table.style.apply(
            lambda r: ["background-color:#ffd7d5" if not r["finite"] else "" for _ in r], axis=1
        ).format({"max_abs": "{:.4g}", "vs_fp16_max": "{:.3g}"})
        return (
            f'<div style="border-left:4px solid {colour};padding:4px 8px">{html.escape(str(self))}</div>'
            + styled.to_html()
        )


def _stats(mod_name: str, mod: nn.Module, output: Any) -> dict[str, Any] | None:
    tensors = [t.detach() for t in _tensors(output) if t.is_floating_point() or t.is_complex()]
    if not tensors:
        return None
    n_inf = n_nan = 0
    max_abs = 0.0
    for t in tensors:
        a = t.abs()
        finite = torch.isfinite(a)
        n_inf += int(torch.isinf(a).sum())
        n_nan += int(torch.isnan(a).sum())
        if bool(finite.any()):
            max_abs = max(max_abs, float(a[finite].max().float()))
    return {
        "module": mod_name,
        "type": type(mod).__name__,
        "dtype": _dtype_names(tensors),
        "max_abs": max_abs,
        "vs_fp16_max": max_abs / FP16_MAX,
        "n_inf": n_inf,
        "n_nan": n_nan,
        "finite": n_inf == 0 and n_nan == 0,
    }


def first_nonfinite(
    model: nn.Module,
    example_input: Any,
    precision: "Precision | str" = "fp16",
    device: "torch.device | str | None" = None,
) -> NonFiniteReport:
    """Run ``model`` once under autocast and report the first module whose output has inf/NaN.

    Forward hooks on every module (containers too: a custom module whose own code, e.g. a
    hand-written ``exp``, overflows is found even when its children are finite) record,
    in the order modules finish, the output dtype, the largest finite magnitude
    (``max_abs``, and as a fraction of fp16's maximum 65504) and the inf/NaN counts.
    Defaults: ``precision="fp16"``, ``device=None`` (the model's device). Runs in eval
    mode under ``torch.no_grad()``; the model's mode is restored.
    """
    model = _check_module(model)
    dev = _resolve_device(model, device)
    p = _check_precision(precision, dev)
    _check_batch(example_input)
    example = _to_device(example_input, dev)
    names = _names(model)
    rows: list[dict[str, Any]] = []
    first_in = _stats("(input)", model, example)
    if first_in is not None:
        first_in["type"] = "input"
        rows.append(first_in)

    def hook(mod: nn.Module, args: tuple, output: Any) -> None:
        row = _stats(names.get(mod, "?"), mod, output)
        if row is not None:
            rows.append(row)

    handles = [m.register_forward_hook(hook) for m in model.modules()]
    try:
        with _eval_mode(model), torch.no_grad(), precision_context(p), autocast(p, dev):
            _call(model, example)
    finally:
        for h in handles:
            h.remove()
    cols = ["module", "type", "dtype", "max_abs", "vs_fp16_max", "n_inf", "n_nan", "finite"]
    table = pd.DataFrame(rows, columns=cols)
    bad = table[~table["finite"].astype(bool)]
    first = None if bad.empty else str(bad.iloc[0]["module"])
    return NonFiniteReport(first=first, table=table, precision=p.value, device=str(dev))


# ---------------------------------------------------------------------------- memory


LossFn = Callable[[Any, Any], torch.Tensor]
OptimizerFactory = Callable[[Any], torch.optim.Optimizer]


def _default_optimizer(params: Any) -> torch.optim.Optimizer:
    return torch.optim.Adam(params, lr=1e-3)


def _split_batch(batch: Any) -> tuple[Any, Any]:
    if isinstance(batch, (tuple, list)) and len(batch) == 2:
        return batch[0], batch[1]
    raise ValueError(
        f"batch must be a pair (inputs, targets), got {type(batch).__name__} "
        f"of length {len(batch) if hasattr(batch, '__len__') else '?'}"
    )


def _batch_size(x: Any) -> int:
    t = next(_tensors(x))
    return int(t.shape[0]) if t.dim() else 1


@contextlib.contextmanager
def _restored(model: nn.Module, restore: bool) -> Iterator[None]:
    """Put the model's weights, buffers and modes back after the block (when ``restore``)."""
    if not restore:
        yield
        return
    state = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
    modes = {m: m.training for m in model.modules()}
    try:
        yield
    finally:
        model.load_state_dict(state)
        for m, training in modes.items():
            m.train(training)
        for prm in model.parameters():
            prm.grad = None


MIB = 2**20


@dataclass(frozen=True)
class StepMemory:
    """Peak CUDA memory of one training step (bytes), and what was resident before it.

    ``before_bytes``: allocated when the step starts (weights, optimizer state; gradients
    freed). ``peak_bytes``: the most allocated during the step. ``step_bytes`` = peak -
    before: activations kept for backward, gradients, temporaries.
    """

    precision: str
    batch_size: int
    before_bytes: int
    peak_bytes: int
    peak_reserved_bytes: int
    device: str

    @property
    def step_bytes(self) -> int:
        return self.peak_bytes - self.before_bytes

    def as_row(self) -> dict[str, Any]:
        """A flat dict (MiB) for a results table."""
        return {
            "precision": self.precision,
            "batch_size": self.batch_size,
            "before_mib": self.before_bytes / MIB,
            "peak_mib": self.peak_bytes / MIB,
            "step_mib": self.step_bytes / MIB,
            "peak_reserved_mib": self.peak_reserved_bytes / MIB,
        }

    def __str__(self) -> str:
        return (
            f"{self.precision}, batch {self.batch_size}: peak {self.peak_bytes / MIB:.1f} MiB "
            f"({self.before_bytes / MIB:.1f} MiB resident + {self.step_bytes / MIB:.1f} MiB for the step)"
        )

    def _repr_html_(self) -> str:
        return pd.DataFrame([self.as_row()]).to_html(index=False, float_format="{:.1f}".format)


def _cuda_device(model: nn.Module, device: "torch.device | str | None", what: str) -> torch.device:
    dev = _resolve_device(model, device)
    if dev.type != "cuda":
        raise ValueError(
            f"{what} measures CUDA memory (torch.cuda.max_memory_allocated); the model is on "
            f"{str(dev)!r}. Run it on a CUDA GPU (model.to('cuda')); on a CPU use the committed "
            "GPU reference results instead"
        )
    if not torch.cuda.is_available():
        raise ValueError(f"{what}: device {str(dev)!r} requested but no CUDA GPU is visible")
    return dev


_MAX_SKIPPED_WARMUP = 24  # GradScaler halves per skip: 2**16 → 2**-8, far below any sane scale


def step_peak_memory(
    model: nn.Module,
    batch: Any,
    precision: "Precision | str" = "fp16",
    *,
    loss_fn: LossFn | None = None,
    optimizer: OptimizerFactory | None = None,
    device: "torch.device | str | None" = None,
    warmup_steps: int = 1,
    restore: bool = True,
) -> StepMemory:
    """Peak CUDA memory of one training step of ``model`` on ``batch`` = (inputs, targets).

    Why: AMP saves activation memory, not weight memory; this number shows how much.
    Defaults: ``precision="fp16"`` (with a GradScaler), ``loss_fn`` cross-entropy,
    ``optimizer`` a factory called with the parameters (default Adam, lr 1e-3; its state
    counts as resident), ``device=None`` (the model's device, which must be CUDA),
    ``warmup_steps=1`` unmeasured steps first that the GradScaler did not skip (they create
    the optimizer state and cuDNN workspaces; fp16's first steps are often skipped at the
    initial scale 2**16, and a skipped step creates no optimizer state), ``restore=True`` puts
    the weights back afterwards. Raises ``ValueError`` on a CPU model, ``RuntimeError`` when
    the gradients stay non-finite at every scale, and lets a CUDA out-of-memory error
    propagate (see :func:`max_batch_size`).
    """
    model = _check_module(model)
    dev = _cuda_device(model, device, "step_peak_memory")
    p = _check_precision(precision, dev)
    x, y = _split_batch(batch)
    _check_batch(x, "batch inputs")
    if warmup_steps < 0:
        raise ValueError(f"warmup_steps must be >= 0, got {warmup_steps!r}")
    x, y = _to_device(x, dev), _to_device(y, dev)
    loss = loss_fn or nn.functional.cross_entropy
    with _restored(model, restore), precision_context(p):
        model.train()
        opt = (optimizer or _default_optimizer)(model.parameters())
        scaler = make_scaler(p, dev)

        def step(opt: torch.optim.Optimizer, scaler: torch.amp.GradScaler) -> bool:
            # fp16lab.train.train_step, the training step the series teaches; True if it was skipped
            return train_step(model, opt, scaler, [(x, y)], precision=p, device=dev, loss_fn=loss,
                              track_grad_norm=False).skipped

        try:
            done = tries = 0
            while done < warmup_steps:  # count only real updates: a skipped one leaves no Adam state
                tries += 1
                if not step(opt, scaler):
                    done += 1
                elif tries > warmup_steps + _MAX_SKIPPED_WARMUP:
                    raise RuntimeError(
                        f"step_peak_memory: {tries - done} of {tries} warm-up steps in {p.value} skipped by the "
                        f"GradScaler (scale now {scaler.get_scale():g}): the gradients are inf/NaN at any "
                        "scale; find the overflow with fp16lab.debug.first_nonfinite"
                    )
            opt.zero_grad(set_to_none=True)
            free_memory(dev)
            before = torch.cuda.memory_allocated(dev)
            torch.cuda.reset_peak_memory_stats(dev)
            step(opt, scaler)
            torch.cuda.synchronize(dev)
            peak = torch.cuda.max_memory_allocated(dev)
            peak_reserved = torch.cuda.max_memory_reserved(dev)
        finally:
            del opt, scaler
            free_memory(dev)
    return StepMemory(p.value, _batch_size(x), before, peak, peak_reserved, str(dev))


def _oom_message(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0][:160] if text else ''}"


def memory_sweep(
    model: nn.Module,
    make_batch: Callable[[int], Any],
    batch_sizes: Sequence[int],
    precisions: Sequence["Precision | str"] = ("fp32", "fp16"),
    **kwargs: Any,
) -> pd.DataFrame:
    """:func:`step_peak_memory` for every (precision, batch size): a table for a plot.

    ``make_batch(n)`` returns an (inputs, targets) pair of ``n`` samples; extra keyword
    arguments go to :func:`step_peak_memory`. A point that runs out of memory is a row
    with ``oom=True`` (memory freed, the sweep goes on). Defaults: fp32 and fp16.
    """
    model = _check_module(model)
    if not batch_sizes:
        raise ValueError("batch_sizes is empty; pass e.g. [8, 16, 32]")
    for n in batch_sizes:
        if not isinstance(n, int) or n < 1:
            raise ValueError(f"batch sizes must be positive ints, got {n!r}")
    ps = [parse_precision(p) for p in precisions]
    if not ps:
        raise ValueError("precisions is empty; pass e.g. ('fp32', 'fp16')")
    rows: list[dict[str, Any]] = []
    dev = _cuda_device(model, kwargs.get("device"), "memory_sweep")
    for p in ps:
        for n in batch_sizes:
            err: str | None = None
            try:
                row = step_peak_memory(model, make_batch(n), p, **kwargs).as_row()
            except OOM_ERRORS as e:  # noqa: PERF203 - one try per point is the point
                err = _oom_message(e)
            if err is not None:
                free_memory(dev)
                row = {"precision": p.value, "batch_size": n}
            row["oom"] = err is not None
            rows.append(row)
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------- batch search


@dataclass
class BatchSearch:
    """Result of :func:`max_batch_size`: the largest batch that ran, and every trial."""

    max_batch: int
    trials: pd.DataFrame
    limit: int
    precision: str
    device: str
    hit_limit: bool = field(default=False)

    def __str__(self) -> str:
        if self.max_batch == 0:
            return f"no batch size fits ({self.precision} on {self.device}): even the first trial ran out of memory"
        more = f" (the search limit {self.limit} was reached: more may fit)" if self.hit_limit else ""
        return (
            f"largest batch that fits ({self.precision} on {self.device}): {self.max_batch}"
            f"{more}; {len(self.trials)} trials, {int((~self.trials['ok']).sum())} out of memory"
        )

    def __repr__(self) -> str:
        return f"BatchSearch({self})"

    def _repr_html_(self) -> str:
        return f"<p><b>{html.escape(str(self))}</b></p>" + self.trials.to_html(index=False)


def max_batch_size(
    model: nn.Module,
    make_batch: Callable[[int], Any],
    precision: "Precision | str" = "fp16",
    *,
    start: int = 1,
    limit: int = 4096,
    multiple: int = 1,
    loss_fn: LossFn | None = None,
    optimizer: OptimizerFactory | None = None,
    device: "torch.device | str | None" = None,
) -> BatchSearch:
    """Largest batch size for which one training step runs, found without crashing.

    Doubles the batch from ``start`` (default 1) until a step runs out of memory or the
    next size would pass ``limit`` (default 4096), then bisects between the last size that
    ran and the first that did not, to a multiple of ``multiple`` (default 1; use 8 for
    Tensor Cores). ``make_batch(n)`` returns an (inputs, targets) pair of ``n`` samples;
    allocation failures inside it count as out of memory too. Each trial runs a real step
    (autocast, GradScaler for fp16, a fresh optimizer from ``optimizer``, default Adam)
    and an out-of-memory error (``torch.cuda.OutOfMemoryError``, ``MemoryError``) is
    caught: references dropped, ``gc.collect()``, ``torch.cuda.empty_cache()``; the
    model's weights, buffers and mode are restored at the end, so the process stays usable.
    Works on any device; on the CPU nothing runs out of memory before ``limit`` in practice.
    """
    model = _check_module(model)
    if not callable(make_batch):
        raise TypeError(f"make_batch must be a callable n -> (inputs, targets), got {make_batch!r:.80}")
    for name, v in (("start", start), ("limit", limit), ("multiple", multiple)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{name} must be a positive int, got {v!r}")
    if start > limit:
        raise ValueError(f"start ({start}) must be <= limit ({limit})")
    if start % multiple:
        raise ValueError(f"start ({start}) must be a multiple of multiple ({multiple})")
    dev = _resolve_device(model, device)
    p = _check_precision(precision, dev)
    loss = loss_fn or nn.functional.cross_entropy
    factory = optimizer or _default_optimizer
    trials: list[dict[str, Any]] = []

    def run_one(n: int) -> float | None:
        # Everything a trial allocates lives in this frame, so an exception frees it all.
        if dev.type == "cuda":
            free_memory(dev)
            torch.cuda.reset_peak_memory_stats(dev)
        x, y = _split_batch(make_batch(n))
        _check_batch(x, f"make_batch({n}) inputs")
        x, y = _to_device(x, dev), _to_device(y, dev)
        opt = factory(model.parameters())
        train_step(model, opt, make_scaler(p, dev), [(x, y)], precision=p, device=dev, loss_fn=loss,
                   track_grad_norm=False)
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
            return torch.cuda.max_memory_allocated(dev) / MIB
        return None

    def attempt(n: int) -> bool:
        err: str | None = None
        peak: float | None = None
        try:
            peak = run_one(n)
        except OOM_ERRORS as e:
            err = _oom_message(e)  # keep only the text: the traceback holds the trial's tensors
        for prm in model.parameters():
            prm.grad = None
        free_memory(dev)
        trials.append({"batch_size": n, "ok": err is None, "peak_mib": peak, "error": err or ""})
        return err is None

    top = limit // multiple * multiple  # the largest size the search may try
    good, bad = 0, None
    with _restored(model, True), precision_context(p):
        model.train()
        n = start
        while True:  # grow: double until a step fails or the limit is reached
            if not attempt(n):
                bad = n
                break
            good = n
            if n >= top:
                break
            n = min(2 * n, top)
        while good and bad is not None and bad - good > multiple:  # bisect (good ran, bad did not)
            mid = (good + bad) // 2 // multiple * multiple
            if mid <= good:
                break
            if attempt(mid):
                good = mid
            else:
                bad = mid
    table = pd.DataFrame(trials, columns=["batch_size", "ok", "peak_mib", "error"])
    return BatchSearch(good, table, limit, p.value, str(dev), hit_limit=bad is None)

