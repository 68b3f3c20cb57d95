"""The mixed-precision training loop, in the right order, with a history you can plot.

One optimizer step (:func:`train_step`) is, for every micro-batch of the step::

    with autocast(precision, device):          # forward and loss in fp16/bf16 where safe
        loss = loss_fn(model(x), y)
    scaler.scale(loss / accum_steps).backward()  # backward outside autocast

and then, once, at the accumulation boundary::

    scaler.unscale_(optimizer)                 # true gradients (needed to clip / measure)
    clip_grad_norm_(params, max_norm)          # optional; must follow unscale_
    scaler.step(optimizer)                     # skipped when a gradient is inf/NaN
    scaler.update()                            # halve the scale after a skip, grow it later
    scheduler.step()                           # only when the step was not skipped
    optimizer.zero_grad(set_to_none=True)

The scaler (``torch.amp.GradScaler``) is enabled only for fp16; bf16 has fp32's range.
:func:`fit` runs steps, keeps a :class:`History` (a pandas DataFrame), guards against
divergence with :class:`TrainingDiverged`, evaluates, and checkpoints atomically with
:func:`save_checkpoint` / :func:`load_checkpoint` so that a resumed run continues exactly
as an uninterrupted one would.
"""

from __future__ import annotations

import itertools
import math
import os
import pickle
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn

from fp16lab.device import parse_device
from fp16lab.precision import (
    Precision,
    autocast,
    check_precision_supported,
    parse_precision,
    precision_context,
)

__all__ = [
    "History",
    "StepResult",
    "TrainingDiverged",
    "make_scaler",
    "train_step",
    "evaluate",
    "fit",
    "save_checkpoint",
    "load_checkpoint",
    "CHECKPOINT_FORMAT",
]

CHECKPOINT_FORMAT = "fp16lab-checkpoint-1"

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
Batch = Sequence[torch.Tensor]

_COLUMNS = (
    "step",
    "epoch",
    "loss",
    "accuracy",
    "scale",
    "skipped",
    "grad_norm",
    "lr",
    "samples",
    "samples_per_s",
    "time_s",
)


class History(pd.DataFrame):
    """One row per optimizer step: step, epoch, loss, accuracy, scale, skipped, grad_norm, lr,
    samples, samples_per_s, time_s (and val_* columns where an evaluation ran).

    ``loss`` is the mean of the micro-batch losses of the step (the true loss, not scaled);
    ``accuracy`` the training-batch accuracy (NaN when the task is not classification);
    ``scale`` the GradScaler scale *after* the step's ``update()`` (1.0 without a scaler);
    ``grad_norm`` the total L2 norm of the unscaled gradients before clipping;
    ``samples_per_s`` the step's samples over its wall time (data loading included).
    ``history.attrs`` records precision, device, accum_steps and clip_grad_norm.
    """

    @property
    def _constructor(self) -> type[History]:
        return History

    @property
    def n_skipped(self) -> int:
        """How many optimizer steps the GradScaler skipped (inf/NaN gradients)."""
        return int(self["skipped"].sum()) if "skipped" in self else 0

    @classmethod
    def from_rows(cls, rows: Sequence[Mapping[str, Any]], **attrs: Any) -> History:
        """Build a History from row dicts (the columns of :class:`History`, in order)."""
        frame = pd.DataFrame(list(rows))
        if frame.empty:
            frame = pd.DataFrame(columns=list(_COLUMNS))
        cols = [c for c in _COLUMNS if c in frame] + [c for c in frame if c not in _COLUMNS]
        h = cls(frame[cols])
        h.attrs.update(attrs)
        return h


class TrainingDiverged(RuntimeError):
    """Raised by :func:`fit` when the loss is not finite (fp32/tf32/bf16) or the fp16 scale
    collapses below ``min_scale``. Attributes: ``step``, ``value``, ``reason`` and ``history``
    (the :class:`History` up to and including the failing step)."""

    def __init__(self, message: str, *, step: int, value: float, reason: str, history: History) -> None:
        super().__init__(message)
        self.step = step
        self.value = value
        self.reason = reason
        self.history = history


@dataclass(frozen=True)
class StepResult:
    """What one optimizer step did (python numbers, read after the step finished)."""

    loss: float
    correct: int | None
    samples: int
    grad_norm: float | None
    scale_before: float
    scale: float
    skipped: bool
    lr: float

    @property
    def accuracy(self) -> float:
        """Training-batch accuracy, NaN when it is not a classification batch."""
        return self.correct / self.samples if self.correct is not None and self.samples else math.nan


def make_scaler(precision: "Precision | str", device: "torch.device | str") -> torch.amp.GradScaler:
    """``torch.amp.GradScaler(device.type, enabled=(precision is fp16))`` with its defaults
    (initial scale 2**16, growth 2x every 2000 good steps, backoff 0.5)."""
    p = parse_precision(precision)
    dev = parse_device(device)
    return torch.amp.GradScaler(dev.type, enabled=p.uses_scaler)


def _total_norm(grads: list[torch.Tensor]) -> torch.Tensor:
    """The 2-norm of all gradients together (``get_total_norm`` exists from torch 2.6 on)."""
    if hasattr(torch.nn.utils, "get_total_norm"):
        return torch.nn.utils.get_total_norm(grads)
    return torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))


def _trainable(model: nn.Module) -> list[torch.nn.Parameter]:
    return [p for p in model.parameters() if p.requires_grad]


def _split(batch: object) -> tuple[torch.Tensor, torch.Tensor]:
    if isinstance(batch, (list, tuple)) and len(batch) == 2:
        return batch[0], batch[1]
    raise ValueError(
        f"each batch must be a pair (inputs, targets), got {type(batch).__name__}"
        + (f" of length {len(batch)}" if isinstance(batch, (list, tuple)) else "")
    )


def _to_device(x: torch.Tensor, device: torch.device, channels_last: bool) -> torch.Tensor:
    if channels_last and x.dim() == 4:
        return x.to(device, non_blocking=True, memory_format=torch.channels_last)
    return x.to(device, non_blocking=True)


def train_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler,
    batches: Sequence[Batch],
    *,
    precision: "Precision | str" = "fp16",
    device: "torch.device | str | None" = None,
    loss_fn: LossFn | None = None,
    clip_grad_norm: float | None = None,
    scheduler: Any | None = None,
    channels_last: bool = False,
    track_grad_norm: bool = True,
) -> StepResult:
    """One optimizer step over ``batches`` (its micro-batches: ``len(batches)`` = accumulation).

    Defaults: ``precision="fp16"``, ``device`` = the model's, ``loss_fn`` = cross-entropy, no
    clipping, no scheduler, NCHW inputs, the gradient norm measured. Each micro-batch loss
    is divided by ``len(batches)`` so the accumulated gradient equals that of one big batch.
    Expects the gradients to be cleared (``None``) on entry and leaves them so. The inputs
    are moved with ``non_blocking=True`` (fast from pinned memory). The host waits for the
    device once, at the end, to read the numbers it returns.
    """
    if len(batches) == 0:
        raise ValueError("train_step needs at least one (inputs, targets) micro-batch, got none")
    p = parse_precision(precision)
    params = _trainable(model)
    if not params:
        raise ValueError("the model has no trainable parameters (all have requires_grad=False)")
    dev = parse_device(device) if device is not None else params[0].device
    loss_fn = loss_fn or F.cross_entropy
    n = len(batches)
    scale_before = scaler.get_scale()
    lr = float(optimizer.param_groups[0]["lr"])
    loss_sum = torch.zeros((), device=dev)
    correct = torch.zeros((), device=dev, dtype=torch.int64)
    classify = True
    samples = 0
    for batch in batches:
        x, y = _split(batch)
        x, y = _to_device(x, dev, channels_last), y.to(dev, non_blocking=True)
        with autocast(p, dev):
            out = model(x)
            loss = loss_fn(out, y)
        scaler.scale(loss / n).backward()
        loss_sum += loss.detach().float()
        samples += int(y.shape[0]) if y.dim() else 1
        if classify and out.dim() == 2 and y.dim() == 1 and not y.is_floating_point():
            correct += (out.detach().argmax(1) == y).sum()
        else:
            classify = False
    grad_norm = None
    if clip_grad_norm is not None or track_grad_norm:
        scaler.unscale_(optimizer)  # no-op when the scaler is disabled
        if clip_grad_norm is not None:
            grad_norm = torch.nn.utils.clip_grad_norm_(params, clip_grad_norm)
        else:
            grad_norm = _total_norm([q.grad for q in params if q.grad is not None])
    scaler.step(optimizer)
    scaler.update()
    scale = scaler.get_scale()
    skipped = scaler.is_enabled() and scale < scale_before
    if scheduler is not None and not skipped:
        scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    stats = [loss_sum / n, correct.float()]
    if grad_norm is not None:
        stats.append(grad_norm.float().to(dev))
    values = torch.stack(stats).tolist()  # the one host-device sync of the step
    return StepResult(
        loss=values[0],
        correct=int(values[1]) if classify else None,
        samples=samples,
        grad_norm=values[2] if grad_norm is not None else None,
        scale_before=float(scale_before),
        scale=float(scale),
        skipped=bool(skipped),
        lr=lr,
    )


@torch.no_grad()
def evaluate(
    model: nn.Module,
    loader: Iterable[Batch],
    *,
    precision: "Precision | str" = "fp32",
    device: "torch.device | str | None" = None,
    loss_fn: LossFn | None = None,
    channels_last: bool = False,
) -> dict[str, float]:
    """Mean loss and accuracy of ``model`` over ``loader`` in eval mode, under autocast.

    Defaults: ``precision="fp32"``, ``device`` = the model's, ``loss_fn`` = cross-entropy
    (it must average over the batch). Returns ``{"val_loss", "val_accuracy"}`` (accuracy
    NaN when not classification); restores the model's train/eval mode afterwards.
    """
    p = parse_precision(precision)
    first = next(model.parameters(), None)
    dev = parse_device(device) if device is not None else (first.device if first is not None else torch.device("cpu"))
    loss_fn = loss_fn or F.cross_entropy
    was_training = model.training
    model.eval()
    total = torch.zeros((), device=dev, dtype=torch.float64)
    correct = torch.zeros((), device=dev, dtype=torch.int64)
    count, classify = 0, True
    try:
        for batch in loader:
            x, y = _split(batch)
            x, y = _to_device(x, dev, channels_last), y.to(dev, non_blocking=True)
            with autocast(p, dev):
                out = model(x)
                loss = loss_fn(out, y)
            b = int(y.shape[0]) if y.dim() else 1
            total += loss.double() * b
            count += b
            if classify and out.dim() == 2 and y.dim() == 1 and not y.is_floating_point():
                correct += (out.argmax(1) == y).sum()
            else:
                classify = False
    finally:
        model.train(was_training)
    if count == 0:
        raise ValueError("the evaluation loader yielded no batches")
    return {
        "val_loss": float(total) / count,
        "val_accuracy": float(correct) / count if classify else math.nan,
    }


# ---------------------------------------------------------------- checkpoints


def _rng_state(device: torch.device) -> dict[str, Any]:
    state: dict[str, Any] = {"cpu": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def _set_rng_state(state: Mapping[str, Any], device: torch.device) -> None:
    # RNG states must be CPU ByteTensors, also when the checkpoint was loaded onto the GPU.
    torch.set_rng_state(state["cpu"].cpu())
    if device.type == "cuda" and state.get("cuda") is not None:
        torch.cuda.set_rng_state(state["cuda"].cpu(), device)


def save_checkpoint(
    path: "str | os.PathLike[str]",
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    *,
    scaler: torch.amp.GradScaler | None = None,
    scheduler: Any | None = None,
    step: int = 0,
    extra: Mapping[str, Any] | None = None,
) -> Path:
    """Write model, optimizer, scaler, scheduler, ``step`` and the torch RNG state to ``path``.

    Atomic: written to a temporary file in the same folder, flushed, then ``os.replace``d
    over ``path``, so a crash mid-save leaves the previous checkpoint intact. ``extra`` (plain
    python data and tensors) is stored as is. Defaults: no optimizer/scaler/scheduler, step 0.
    The scaler state matters: without it a resumed fp16 run restarts at scale 2**16 and
    skips steps again.
    """
    out = Path(path)
    if not out.parent.exists():
        raise ValueError(f"folder {str(out.parent)!r} does not exist; create it first")
    if not isinstance(step, int) or step < 0:
        raise ValueError(f"step must be an int >= 0, got {step!r}")
    first = next(model.parameters(), None)
    device = first.device if first is not None else torch.device("cpu")
    payload = {
        "format": CHECKPOINT_FORMAT,
        "step": step,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict() if optimizer is not None else None,
        "scaler": scaler.state_dict() if scaler is not None else None,
        "scheduler": scheduler.state_dict() if scheduler is not None else None,
        "rng": _rng_state(device),
        "torch": str(torch.__version__),
        "extra": dict(extra or {}),
    }
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            torch.save(payload, fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return out


def load_checkpoint(
    path: "str | os.PathLike[str]",
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    *,
    scaler: torch.amp.GradScaler | None = None,
    scheduler: Any | None = None,
    map_location: "str | torch.device" = "cpu",
    restore_rng: bool = True,
    weights_only: bool = True,
) -> dict[str, Any]:
    """Load a :func:`save_checkpoint` file into the given objects; return the payload.

    Defaults: ``map_location="cpu"`` (state is copied onto the model's device by
    ``load_state_dict``), the RNG state restored, ``torch.load(weights_only=True)`` (no
    arbitrary code from the file; pass False only for files you trust whose scheduler state
    holds python objects). The returned dict has ``step`` and ``extra``.
    """
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"no checkpoint at {str(p)!r}")
    try:
        payload = torch.load(p, map_location=map_location, weights_only=weights_only)
    except pickle.UnpicklingError as exc:
        raise ValueError(
            f"{str(p)!r} could not be loaded with weights_only={weights_only}: {exc}. If you trust "
            "the file, pass weights_only=False."
        ) from exc
    if not isinstance(payload, dict) or payload.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{str(p)!r} is not an fp16lab checkpoint (format {CHECKPOINT_FORMAT!r})")
    model.load_state_dict(payload["model"])
    for name, obj in (("optimizer", optimizer), ("scheduler", scheduler)):
        if obj is not None:
            if payload[name] is None:
                raise ValueError(f"the checkpoint {str(p)!r} has no {name} state")
            obj.load_state_dict(payload[name])
    if scaler is not None:
        saved = payload["scaler"] or {}
        if bool(saved) != scaler.is_enabled():
            raise ValueError(
                f"scaler mismatch: the checkpoint's GradScaler was {'enabled' if saved else 'disabled or absent'}, "
                f"the one given is {'enabled' if scaler.is_enabled() else 'disabled'} "
                "(resume with the precision the checkpoint was trained in)"
            )
        if saved:
            scaler.load_state_dict(saved)
    if restore_rng:
        first = next(model.parameters(), None)
        _set_rng_state(payload["rng"], first.device if first is not None else torch.device("cpu"))
    return payload


# ---------------------------------------------------------------- the loop


def _loader_generators(loader: object) -> list[torch.Generator]:
    gens: list[torch.Generator] = []
    for g in (getattr(loader, "generator", None), getattr(getattr(loader, "sampler", None), "generator", None)):
        if isinstance(g, torch.Generator) and all(g is not h for h in gens):
            gens.append(g)
    return gens


class _Stream:
    """Micro-batches across epochs, with the position and RNG needed to replay it exactly."""

    def __init__(self, loader: Iterable[Batch], device: torch.device) -> None:
        self.loader = loader
        self.device = device
        self.epoch = 0
        self.pos = 0  # micro-batches consumed in the current epoch
        self.epoch_rng: dict[str, Any] | None = None
        self._it: Iterator[Batch] | None = None

    def _capture(self) -> dict[str, Any]:
        state = _rng_state(self.device)
        state["loader"] = [g.get_state() for g in _loader_generators(self.loader)]
        return state

    def _restore(self, state: Mapping[str, Any]) -> None:
        _set_rng_state(state, self.device)
        for g, s in zip(_loader_generators(self.loader), state.get("loader", []), strict=False):
            g.set_state(s.cpu())

    def position(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "pos": self.pos, "epoch_rng": self.epoch_rng, "now_rng": self._capture()}

    def seek(self, position: Mapping[str, Any]) -> None:
        """Re-create the epoch's iterator with its RNG and skip what was already consumed."""
        self.epoch, self.pos = int(position["epoch"]), int(position["pos"])
        self.epoch_rng = position["epoch_rng"]
        self._restore(self.epoch_rng)
        self._it = iter(self.loader)
        for _ in itertools.islice(self._it, self.pos):
            pass
        self._restore(position["now_rng"])

    def next(self) -> Batch:
        for _ in range(2):
            if self._it is None:
                self.epoch_rng = self._capture()
                self._it = iter(self.loader)
            try:
                batch = next(self._it)
            except StopIteration:
                empty = self.pos == 0
                self._it = None
                if empty:
                    break
                self.epoch += 1
                self.pos = 0
                continue
            self.pos += 1
            return batch
        raise ValueError("the loader yielded no batches (is the dataset empty, or drop_last with too few items?)")


def _check_positive_int(name: str, value: object, low: int = 1) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise ValueError(f"{name} must be an int >= {low}, got {value!r}")
    return value


def _advice(precision: Precision) -> str:
    tips = ["a lower learning rate", "gradient clipping (clip_grad_norm=1.0)"]
    tips.append("keeping the unstable op in an FP32 island (torch.autocast(device_type, enabled=False))")
    if precision is Precision.FP16:
        tips.append("bf16 instead of fp16 (fp32's range, no scaler needed)")
    elif precision is Precision.BF16:
        tips.append("fp32 for the layers that overflow")
    return "Try: " + "; ".join(tips) + "."


def fit(
    model: nn.Module,
    loader: Iterable[Batch],
    optimizer: torch.optim.Optimizer,
    *,
    precision: "Precision | str" = "fp16",
    device: "torch.device | str | None" = None,
    steps: int | None = None,
    epochs: int | None = None,
    loss_fn: LossFn | None = None,
    accum_steps: int = 1,
    clip_grad_norm: float | None = None,
    scheduler: Any | None = None,
    scaler: torch.amp.GradScaler | None = None,
    channels_last: bool = False,
    eval_loader: Iterable[Batch] | None = None,
    eval_fn: Callable[[nn.Module], Mapping[str, float]] | None = None,
    eval_every: int | None = None,
    checkpoint: "str | os.PathLike[str] | None" = None,
    checkpoint_every: int | None = None,
    resume: bool = False,
    min_scale: float | None = 1.0,
    track_grad_norm: bool = True,
    progress: bool = True,
    desc: str | None = None,
) -> History:
    """Train ``model`` with mixed precision done right; return a :class:`History`.

    Defaults: ``precision="fp16"`` (validated: fp32, tf32, fp16, bf16; TF32 flags set for the
    run by ``precision_context``), ``device`` = the model's (the model is moved when given),
    ``epochs=1`` when neither ``steps`` nor ``epochs`` is given (``steps`` counts optimizer
    steps, in total, across a resume), cross-entropy loss, ``accum_steps=1``, no clipping,
    a new ``GradScaler`` (enabled for fp16 only) unless ``scaler`` is given, NCHW,
    evaluation (``eval_loader`` and/or ``eval_fn(model) -> dict``) every ``eval_every``
    steps and at the end, a checkpoint every ``checkpoint_every`` steps and at the end when
    ``checkpoint`` names a file; ``resume=True`` continues from that file if it exists.
    ``min_scale=1.0``: an fp16 scale below it raises :class:`TrainingDiverged` (None turns the
    check off); a non-finite loss in fp32/tf32/bf16 always does. The scheduler is stepped
    once per optimizer step that was not skipped.
    """
    p = check_precision_supported(precision, device if device is not None else _model_device(model))
    accum_steps = _check_positive_int("accum_steps", accum_steps)
    if steps is not None and epochs is not None:
        raise ValueError(f"give steps or epochs, not both (got steps={steps!r}, epochs={epochs!r})")
    if steps is not None:
        _check_positive_int("steps", steps)
    if epochs is not None:
        _check_positive_int("epochs", epochs)
    for name, v in (("eval_every", eval_every), ("checkpoint_every", checkpoint_every)):
        if v is not None:
            _check_positive_int(name, v)
    if clip_grad_norm is not None and not (isinstance(clip_grad_norm, (int, float)) and clip_grad_norm > 0):
        raise ValueError(f"clip_grad_norm must be a number > 0 or None, got {clip_grad_norm!r}")
    if min_scale is not None and not (isinstance(min_scale, (int, float)) and min_scale > 0):
        raise ValueError(f"min_scale must be a number > 0 or None, got {min_scale!r}")
    if (resume or checkpoint_every is not None) and checkpoint is None:
        raise ValueError("resume/checkpoint_every need checkpoint=<path of the checkpoint file>")
    trainable = _trainable(model)
    if not trainable:
        raise ValueError("the model has no trainable parameters (all have requires_grad=False)")
    mine = {id(q) for q in trainable}
    if not any(id(q) in mine for g in optimizer.param_groups for q in g["params"]):
        raise ValueError("the optimizer does not hold any of the model's trainable parameters "
                         "(build it from model.parameters() of this model)")
    try:
        n_batches = len(loader)  # type: ignore[arg-type]
    except TypeError:
        n_batches = None
    if n_batches == 0:
        raise ValueError("the loader is empty (len(loader) == 0): nothing to train on")
    if steps is None:
        if n_batches is None:
            raise ValueError("the loader has no len(); give steps= instead of epochs=")
        steps = (epochs or 1) * n_batches // accum_steps
        if steps < 1:
            raise ValueError(
                f"{epochs or 1} epoch(s) of {n_batches} batches make no full step of accum_steps={accum_steps}"
            )

    dev = parse_device(device) if device is not None else _model_device(model)
    if device is not None:
        model.to(dev)
    if channels_last:
        model.to(memory_format=torch.channels_last)
    if scaler is None:
        scaler = make_scaler(p, dev)
    elif scaler.is_enabled() != p.uses_scaler:
        raise ValueError(
            f"a GradScaler that is {'enabled' if scaler.is_enabled() else 'disabled'} does not fit "
            f"precision {p.value!r}: only fp16 uses one"
        )
    stream = _Stream(loader, dev)
    rows: list[dict[str, Any]] = []
    start_step = 0
    ckpt = Path(checkpoint) if checkpoint is not None else None
    if resume and ckpt is not None and ckpt.exists():
        payload = load_checkpoint(
            ckpt, model, optimizer, scaler=scaler, scheduler=scheduler, map_location=dev, restore_rng=False
        )
        extra = payload["extra"]
        if extra.get("precision") != p.value or extra.get("accum_steps") != accum_steps:
            raise ValueError(
                f"the checkpoint was trained with precision={extra.get('precision')!r}, "
                f"accum_steps={extra.get('accum_steps')!r}; this run asks for {p.value!r}, {accum_steps!r}"
            )
        start_step = int(payload["step"])
        rows = list(extra.get("history", []))
        stream.seek(extra["stream"])
    attrs = dict(precision=p.value, device=str(dev), accum_steps=accum_steps, clip_grad_norm=clip_grad_norm)

    def save(step: int) -> None:
        assert ckpt is not None
        save_checkpoint(
            ckpt, model, optimizer, scaler=scaler, scheduler=scheduler, step=step,
            extra={"precision": p.value, "accum_steps": accum_steps, "history": rows, "stream": stream.position()},
        )

    from tqdm.auto import tqdm

    model.train()
    optimizer.zero_grad(set_to_none=True)
    elapsed = float(rows[-1]["time_s"]) if rows else 0.0
    bar = tqdm(total=steps, initial=start_step, disable=not progress, desc=desc or f"fit {p.value}", leave=False)
    try:
        with precision_context(p):
            t_prev = time.perf_counter()
            for step in range(start_step + 1, steps + 1):
                micro = [stream.next() for _ in range(accum_steps)]
                r = train_step(
                    model, optimizer, scaler, micro, precision=p, device=dev, loss_fn=loss_fn,
                    clip_grad_norm=clip_grad_norm, scheduler=scheduler, channels_last=channels_last,
                    track_grad_norm=track_grad_norm,
                )
                t_now = time.perf_counter()
                dt, t_prev = t_now - t_prev, t_now
                elapsed += dt
                row: dict[str, Any] = {
                    "step": step,
                    "epoch": stream.epoch,
                    "loss": r.loss,
                    "accuracy": r.accuracy,
                    "scale": r.scale,
                    "skipped": r.skipped,
                    "grad_norm": r.grad_norm if r.grad_norm is not None else math.nan,
                    "lr": r.lr,
                    "samples": r.samples,
                    "samples_per_s": r.samples / dt if dt > 0 else math.nan,
                    "time_s": elapsed,
                }
                rows.append(row)
                bad = None
                if not p.uses_scaler and not math.isfinite(r.loss):
                    bad = (
                        "loss",
                        r.loss,
                        f"step {step}: the loss is {r.loss} (not finite) training in {p.value}. " + _advice(p),
                    )
                elif p.uses_scaler and min_scale is not None and r.scale < min_scale:
                    recent = sum(bool(x["skipped"]) for x in rows[-50:])
                    bad = (
                        "scale",
                        r.scale,
                        f"step {step}: the fp16 loss scale fell to {r.scale:g}, below min_scale={min_scale:g} "
                        f"({recent} of the last {min(len(rows), 50)} steps were skipped for inf/NaN gradients; "
                        f"last loss {r.loss:g}). " + _advice(p),
                    )
                if bad is not None:
                    raise TrainingDiverged(
                        bad[2], step=step, value=bad[1], reason=bad[0], history=History.from_rows(rows, **attrs)
                    )
                final = step == steps
                if (eval_loader is not None or eval_fn is not None) and (
                    final or (eval_every is not None and step % eval_every == 0)
                ):
                    if eval_loader is not None:
                        row.update(evaluate(model, eval_loader, precision=p, device=dev, loss_fn=loss_fn,
                                            channels_last=channels_last))
                    if eval_fn is not None:
                        row.update(dict(eval_fn(model)))
                    t_prev = time.perf_counter()  # evaluation time is not training time
                if ckpt is not None and (final or (checkpoint_every is not None and step % checkpoint_every == 0)):
                    save(step)
                    t_prev = time.perf_counter()
                bar.update(1)
                if step % 10 == 0 or final:
                    bar.set_postfix(loss=f"{r.loss:.4g}", scale=f"{r.scale:g}", refresh=False)
    finally:
        bar.close()
    return History.from_rows(rows, **attrs)


def _model_device(model: nn.Module) -> torch.device:
    first = next(model.parameters(), None)
    if first is None:
        raise ValueError("the model has no parameters")
    return first.device
