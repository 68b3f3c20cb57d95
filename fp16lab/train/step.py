"""One mixed-precision optimizer step, in the right order, and evaluation under autocast.

:func:`amp_step` is the recipe, the one place fp16lab drives a ``GradScaler``; for every
micro-batch of the step::

    with autocast(precision, device):            # forward and loss in fp16/bf16 where safe
        loss = loss_of(batch)
    scaler.scale(loss).backward()                 # backward outside autocast

and then, once, at the accumulation boundary::

    scaler.unscale_(optimizer)                 # true gradients (only to clip / measure them)
    clip_grad_norm_(params, max_norm)          # optional; must follow unscale_
    scaler.step(optimizer)                     # skipped when a gradient is inf/NaN
    scaler.update()                            # halve the scale after a skip, grow it later
    optimizer.zero_grad(set_to_none=True)

It never waits for the device, so a benchmark or a lab can run it step after step.
:func:`train_step` checks its arguments once, weights each micro-batch loss by its share of the
samples (the accumulated gradient is that of one big batch, also when the micro-batches differ in
size), runs :func:`amp_step`, steps a scheduler only when the step was not skipped, and reads
its numbers back to the host once. The scaler (:func:`make_scaler`, the one place one is built)
is enabled only for fp16; bf16 has fp32's range. The loop around it (history, checkpoints,
divergence) is :func:`fp16lab.train.fit`.
"""

from __future__ import annotations

import math
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from fp16lab.checks import boolean, function, instance, module, optimizer_holds, positive_float, sequence_of
from fp16lab.device import model_device, parse_device, resolve_device, resolve_model_device
from fp16lab.precision import Precision, parse_precision, parsed_autocast

__all__ = ["StepResult", "amp_step", "make_scaler", "train_step", "evaluate"]

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
Batch = Sequence[torch.Tensor]


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


# ---------------------------------------------------------------- argument checks (one place)


def checked_loss_fn(value: object) -> LossFn:
    """``loss_fn`` checked (a function of (outputs, targets); None: cross-entropy)."""
    fn: LossFn | None = function("loss_fn", value, "a function (outputs, targets) -> loss", n_args=2, optional=True)
    return fn or F.cross_entropy


def check_scheduler(scheduler: object, optimizer: object) -> None:
    """An LR scheduler instance (not its class) that drives ``optimizer`` (None passes)."""
    if scheduler is None:
        return
    if isinstance(scheduler, type) or not callable(getattr(scheduler, "step", None)):
        raise ValueError(f"scheduler must be an LR scheduler (with .step()) or None, got {scheduler!r:.80}"
                         + (": pass an instance built on the optimizer" if isinstance(scheduler, type) else ""))
    check_scheduler_drives(scheduler, optimizer)


def check_scheduler_drives(scheduler: object, optimizer: object) -> None:
    """Refuse a scheduler built on another optimizer (it would never change this one's learning rate)."""
    driven = getattr(scheduler, "optimizer", None)
    if optimizer is not None and isinstance(driven, torch.optim.Optimizer) and driven is not optimizer:
        raise ValueError("scheduler: it was built on another optimizer than the one given, so it would not change "
                         "this optimizer's learning rate; build it on this optimizer (e.g. "
                         f"{type(scheduler).__name__}(optimizer, ...))")


def check_core(model: object, optimizer: object, scaler: object) -> list[torch.nn.Parameter]:
    module("model", model)
    instance("optimizer", optimizer, torch.optim.Optimizer, "a torch.optim.Optimizer")
    if scaler is not None:
        instance("scaler", scaler, torch.amp.GradScaler, "a torch.amp.GradScaler or None")
    return optimizer_holds(model, optimizer)  # the one check, shared with every helper that takes both


# optimizer -> {id(model): (model, the optimizer's parameter ids then, the trainable parameters it holds,
#                           every trainable parameter)}
_SCANS: "weakref.WeakKeyDictionary[torch.optim.Optimizer, dict[int, tuple[Any, tuple[int, ...], list[Any], list[Any]]]]" \
    = weakref.WeakKeyDictionary()


def _walk(model: nn.Module, optimizer: torch.optim.Optimizer) -> tuple[list[torch.nn.Parameter],
                                                                       list[torch.nn.Parameter]]:
    """One walk of the model: (the trainable parameters the optimizer holds, every trainable parameter)."""
    held = {id(q) for g in optimizer.param_groups for q in g["params"]}
    every = [q for q in model.parameters() if q.requires_grad]
    mine = [q for q in every if id(q) in held]
    if not mine:
        optimizer_holds(model, optimizer, every=False)  # raises, naming what is wrong
    return mine, every


def _scan(model: nn.Module, optimizer: torch.optim.Optimizer) -> tuple[list[torch.nn.Parameter],
                                                                       list[torch.nn.Parameter]]:
    """:func:`_walk`, once per (model, optimizer): a walk of a large model's modules is a measurable share of
    a fast step (ResNet-50 on an H200). The optimizer must be rebuilt after the model changes (documented), so
    a new optimizer walks the model again; a parameter frozen later only has no gradient to clear."""
    per_model = _SCANS.setdefault(optimizer, {})
    ids = tuple(id(q) for g in optimizer.param_groups for q in g["params"])  # re-pointed (pad_layers): walk again
    hit = per_model.get(id(model))
    if hit is None or hit[0] is not model or hit[1] != ids:
        hit = (model, ids, *_walk(model, optimizer))
        per_model[id(model)] = hit
    _, _, mine, every = hit
    if any(q.grad is not None for q in every):
        _refuse_stale_grads(model)
    return mine, every


def _refuse_stale_grads(model: nn.Module) -> None:
    """Refuse gradients train_step did not write: backward() would add this step's to them."""
    stale = [n for n, q in model.named_parameters() if q.requires_grad and q.grad is not None]
    if stale:
        raise ValueError(
            f"model: {len(stale)} trainable parameter(s) already hold a gradient ({', '.join(stale[:3])}"
            f"{' ...' if len(stale) > 3 else ''}) from a backward() before this step; train_step would add this "
            "step's gradients to them. Clear them first: model.zero_grad(set_to_none=True)")


def _resolve_run_device(model: nn.Module, device: "torch.device | str | None") -> torch.device:
    return resolve_model_device(model, device)


def check_loader(name: str, loader: object) -> int | None:
    """``loader`` is an iterable of batches (not a tensor, string or dict), not empty; its len() or None.

    A list or tuple of batches has each entry checked here (nothing is consumed); any other iterable
    (a DataLoader, a generator) is never iterated here: its batches are checked as they are drawn.
    """
    if not isinstance(loader, Iterable) or isinstance(loader, (torch.Tensor, str, bytes, Mapping)):
        raise ValueError(f"{name} must be an iterable of (inputs, targets) batches (a DataLoader or a list of "
                         f"pairs), got {type(loader).__name__}")
    try:
        n_batches: int | None = len(loader)  # type: ignore[arg-type]
    except TypeError:
        n_batches = None
    if n_batches == 0:
        raise ValueError(f"{name} is empty (len({name}) == 0): it holds no batches")
    if isinstance(loader, (list, tuple)):
        for i, batch in enumerate(loader):
            split_batch(batch, f"{name}[{i}]")
    return n_batches


def check_scaler_fits(scaler: torch.amp.GradScaler | None, p: Precision) -> None:
    if scaler is not None and scaler.is_enabled() != p.uses_scaler:
        raise ValueError(
            f"a GradScaler that is {'enabled' if scaler.is_enabled() else 'disabled'} does not fit "
            f"precision {p.value!r}: only fp16 uses one (make_scaler(precision, device) builds the right one)"
        )


def make_scaler(precision: "Precision | str", device: "torch.device | str") -> torch.amp.GradScaler:
    """``torch.amp.GradScaler(device.type, enabled=(precision is fp16))`` with its defaults
    (initial scale 2**16, growth 2x every 2000 good steps, backoff 0.5). A device this
    machine does not have is refused (torch would disable the scaler with only a warning)."""
    p = parse_precision(precision)
    dev = resolve_device(device)
    return torch.amp.GradScaler(dev.type, enabled=p.uses_scaler)


# ---------------------------------------------------------------- one step


def _total_norm(grads: list[torch.Tensor]) -> torch.Tensor:
    """The 2-norm of all gradients together (``get_total_norm`` exists from torch 2.6 on)."""
    if hasattr(torch.nn.utils, "get_total_norm"):
        return torch.nn.utils.get_total_norm(grads)
    return torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g) for g in grads]))


def split_batch(batch: object, name: str = "each batch") -> tuple[torch.Tensor, torch.Tensor]:
    """``batch`` as (inputs, targets) when it is a pair of tensors; the error names ``name`` (e.g. ``loader[3]``)."""
    if isinstance(batch, (list, tuple)) and len(batch) == 2 and all(isinstance(t, torch.Tensor) for t in batch):
        return batch[0], batch[1]
    parts = ""
    if isinstance(batch, (list, tuple)):
        parts = f" of length {len(batch)}" + (f" ({', '.join(type(t).__name__ for t in batch)})" if len(batch) <= 4 else "")
    shown = " ".join(repr(batch).split())
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    raise ValueError(f"{name} must be a pair (inputs, targets) of tensors, got {shown} ({type(batch).__name__}{parts})"
                     + ("; convert numpy arrays with torch.from_numpy" if "ndarray" in parts else ""))


def _n_samples(y: torch.Tensor) -> int:
    return int(y.shape[0]) if y.dim() else 1


def _to_device(x: torch.Tensor, device: torch.device, channels_last: bool) -> torch.Tensor:
    if channels_last and x.dim() == 4:
        return x.to(device, non_blocking=True, memory_format=torch.channels_last)
    return x.to(device, non_blocking=True)


def _check_loss(loss: object) -> torch.Tensor:
    if not isinstance(loss, torch.Tensor) or not loss.is_floating_point():
        raise ValueError(f"loss_fn must return a floating-point torch.Tensor, got {type(loss).__name__}"
                         + (f" of dtype {loss.dtype}" if isinstance(loss, torch.Tensor) else ""))
    if loss.dim() != 0:
        raise ValueError(
            f"loss_fn must return one number (a 0-d tensor), got a tensor of shape {tuple(loss.shape)}: use the "
            "batch mean, e.g. nn.CrossEntropyLoss(reduction='mean') instead of reduction='none'"
        )
    if torch.is_grad_enabled() and not loss.requires_grad:
        raise ValueError("loss_fn returned a tensor that does not depend on the model's outputs (no grad_fn), so "
                         "there is nothing to backpropagate: compute the loss from the outputs it is given "
                         "(not with .item(), .detach() or torch.tensor(...))")
    return loss


def _reached(optimizer: torch.optim.Optimizer,
             params: Sequence[torch.nn.Parameter] | None) -> Sequence[torch.nn.Parameter]:
    """``params`` (default: the optimizer's), refused when the backward gave none of them a gradient."""
    params = params if params is not None else [q for g in optimizer.param_groups for q in g["params"]]
    if not any(q.grad is not None for q in params):
        optimizer.zero_grad(set_to_none=True)
        raise ValueError("none of the optimizer's parameters got a gradient from this loss: build the optimizer "
                         "from model.parameters() of this model, after any change to the model")
    return params


def amp_step(
    loss_of: Callable[[Any], torch.Tensor],
    micro: Iterable[Any],
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler,
    *,
    precision: "Precision | str",
    device: "torch.device | str",
    clip_grad_norm: float | None = None,
    grad_norm: bool = False,
    params: Sequence[torch.nn.Parameter] | None = None,
    cache_enabled: bool | None = None,
) -> torch.Tensor | None:
    """One AMP optimizer step over the micro-batches ``micro``, in the right order, without a host sync.

    ``loss_of(batch)`` runs under autocast and returns the loss to backpropagate (weight it
    yourself when micro-batches should count by size). Defaults: no clipping, no gradient norm,
    ``params`` = the optimizer's (what is clipped and measured), torch's weight-cast cache
    (``cache_enabled=False`` inside a CUDA-graph capture). The gradients are unscaled only to
    clip or measure them (``grad_norm=True``); then the returned 0-d device tensor is their
    norm before clipping, else None. The arguments are not checked (this is the bare step a
    benchmark times): :func:`train_step` is the checked one.
    """
    p, dev = parse_precision(precision), parse_device(device)  # parsed, not checked: no device query per step
    for batch in micro:
        with parsed_autocast(p, dev, cache_enabled):
            loss = loss_of(batch)
        scaler.scale(loss).backward()
    params = _reached(optimizer, params)  # what is clipped and measured; a loss that reached none is refused
    norm = None
    if clip_grad_norm is not None or grad_norm:
        scaler.unscale_(optimizer)  # the true gradients, before clipping or measuring them
        norm = (torch.nn.utils.clip_grad_norm_(params, clip_grad_norm) if clip_grad_norm is not None
                else _total_norm([q.grad for q in params if q.grad is not None]))
    scaler.step(optimizer)  # skipped when a gradient is inf/NaN
    scaler.update()
    optimizer.zero_grad(set_to_none=True)
    return norm


def _scale_tensor(scaler: torch.amp.GradScaler, device: torch.device) -> torch.Tensor:
    """The scaler's scale as a 0-d device tensor, without a host sync (1.0 when it is disabled)."""
    return scaler.scale(torch.ones((), device=device))


def parsed_step(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scaler: torch.amp.GradScaler,
    batches: Sequence[Batch],
    *,
    p: Precision,
    dev: torch.device,
    params: list[torch.nn.Parameter],
    loss_fn: LossFn,
    clip: float | None,
    channels_last: bool,
    track_grad_norm: bool,
    trainable: list[torch.nn.Parameter] | None = None,
) -> StepResult:
    """:func:`train_step` on parsed arguments, without a scheduler (fit's run calls this: nothing is
    re-validated per step): the step's bookkeeping around :func:`amp_step`, read back to the host once.

    ``trainable``: every trainable parameter, whose gradients the step clears (default ``params``:
    fit's optimizer holds them all).
    """
    pairs = [(x, y) for x, y in batches]  # checked once already: by train_step, or by fit as drawn
    sizes = [_n_samples(y) for _, y in pairs]
    if 0 in sizes:
        raise ValueError(f"micro-batch {sizes.index(0) + 1} of {len(sizes)} holds no samples (targets of shape "
                         f"{tuple(pairs[sizes.index(0)][1].shape)}): the loader yielded an empty batch")
    samples = sum(sizes)
    lr = float(optimizer.param_groups[0]["lr"])
    before = _scale_tensor(scaler, dev)
    loss_sum = torch.zeros((), device=dev)
    correct = torch.zeros((), device=dev, dtype=torch.int64)
    classify = [True]

    def loss_of(pair_size: tuple[tuple[torch.Tensor, torch.Tensor], int]) -> torch.Tensor:
        nonlocal loss_sum, correct
        (x, y), n_i = pair_size
        x, y = _to_device(x, dev, channels_last), y.to(dev, non_blocking=True)
        out = model(x)
        loss = _check_loss(loss_fn(out, y))
        weighted = loss if len(pairs) == 1 else loss * (n_i / samples)  # one big batch, also for unequal sizes
        loss_sum += weighted.detach().float()
        if classify[0] and out.dim() == 2 and y.dim() == 1 and not y.is_floating_point():
            correct += (out.detach().argmax(1) == y).sum()
        else:
            classify[0] = False
        return weighted

    try:
        grad_norm = amp_step(loss_of, zip(pairs, sizes, strict=True), optimizer, scaler, precision=p, device=dev,
                             clip_grad_norm=clip, grad_norm=track_grad_norm, params=params)
    finally:
        for q in trainable if trainable is not None else params:  # every gradient this step's backward wrote,
            q.grad = None                                             # not only the optimizer's (as model.zero_grad)
    stats = [loss_sum, correct.float(), before, _scale_tensor(scaler, dev),
             *([] if grad_norm is None else [grad_norm.float().to(dev)])]
    values = torch.stack(stats).tolist()  # the one host-device sync of the step
    scale_before, scale = values[2], values[3]
    skipped = scaler.is_enabled() and scale < scale_before
    return StepResult(
        loss=values[0],
        correct=int(values[1]) if classify[0] else None,
        samples=samples,
        grad_norm=values[4] if grad_norm is not None else None,
        scale_before=float(scale_before),
        scale=float(scale),
        skipped=bool(skipped),
        lr=lr,
    )


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
    """One optimizer step over ``batches`` (its micro-batches: ``len(batches)`` = accumulation), each an
    (inputs, targets) pair of tensors (a wrong entry is refused, ``batches[i]`` named, before the step).

    Defaults: ``precision="fp16"``, ``device`` = the model's, ``loss_fn`` = cross-entropy (it
    must return the batch mean, a 0-d tensor), no clipping, no scheduler, NCHW inputs, the
    gradient norm measured. Each micro-batch loss is weighted by its share of the step's
    samples, so the accumulated gradient equals that of one big batch, also for unequal
    micro-batches. Clipping and the gradient norm cover the optimizer's parameters; it must
    hold at least one of the model's trainable parameters (two optimizers may share a model:
    call train_step once with each; :func:`fit` requires one optimizer that holds them all).

    Gradients: train_step owns every ``.grad`` of the model during the step. It refuses to
    start when a trainable parameter of the model already has a gradient (an earlier
    ``backward()`` that was not cleared would silently be added in: call
    ``model.zero_grad(set_to_none=True)`` first), and it leaves every gradient of the model
    ``None`` at the end (``model.zero_grad``, not only the optimizer's), so the next step,
    also one with another optimizer of the same model, starts clean.
    The inputs are moved with ``non_blocking=True`` (fast from pinned memory). The host waits
    for the device once, at the end, to read the numbers it returns (the scale before and after
    included). The step itself is :func:`amp_step`, which never waits for the device (a fused
    optimizer, ``Adam(fused=True)``, takes GradScaler's path without a host sync).
    """
    module("model", model)
    instance("optimizer", optimizer, torch.optim.Optimizer, "a torch.optim.Optimizer")
    params, trainable = _scan(model, optimizer)
    instance("scaler", scaler, torch.amp.GradScaler, "a torch.amp.GradScaler (make_scaler(precision, device))")
    batches = sequence_of("batches", batches, example="[(x, y)] (one (inputs, targets) pair per micro-batch)",
                          item=lambda name, batch: split_batch(batch, name))
    p = parse_precision(precision)
    check_scaler_fits(scaler, p)
    check_scheduler(scheduler, optimizer)
    r = parsed_step(
        model, optimizer, scaler, batches, p=p, dev=_resolve_run_device(model, device), params=params,
        loss_fn=checked_loss_fn(loss_fn),
        clip=positive_float("clip_grad_norm", clip_grad_norm) if clip_grad_norm is not None else None,
        channels_last=boolean("channels_last", channels_last),
        track_grad_norm=boolean("track_grad_norm", track_grad_norm),
        trainable=trainable,
    )
    if scheduler is not None and not r.skipped:
        scheduler.step()  # only when the step was not skipped
    return r


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
    (it must average over the batch). Each batch must be an (inputs, targets) pair of tensors:
    a list's entries are checked first, a DataLoader's as they come (``loader[i]`` named). Returns ``{"val_loss", "val_accuracy"}`` (accuracy
    NaN when not classification); restores the model's train/eval mode afterwards.
    """
    module("model", model)
    check_loader("loader", loader)
    dev = resolve_device(device) if device is not None else model_device(model, default=torch.device("cpu"))
    return evaluate_parsed(model, loader, parse_precision(precision), dev,
                     checked_loss_fn(loss_fn),
                     boolean("channels_last", channels_last))


@torch.no_grad()
def evaluate_parsed(model: nn.Module, loader: Iterable[Batch], p: Precision, dev: torch.device, loss_fn: LossFn,
              channels_last: bool, name: str = "loader") -> dict[str, float]:
    """:func:`evaluate` on parsed arguments; each batch is checked as it is drawn (``name[i]`` in the message)."""
    was_training = model.training
    model.eval()
    total = torch.zeros((), device=dev, dtype=torch.float64)
    correct = torch.zeros((), device=dev, dtype=torch.int64)
    count, classify = 0, True
    try:
        for i, batch in enumerate(loader):
            x, y = split_batch(batch, f"{name}[{i}]")
            x, y = _to_device(x, dev, channels_last), y.to(dev, non_blocking=True)
            with parsed_autocast(p, dev):
                out = model(x)
                loss = _check_loss(loss_fn(out, y))
            b = _n_samples(y)
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
