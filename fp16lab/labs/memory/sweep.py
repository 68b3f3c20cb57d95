"""Peak CUDA memory of one training step, by precision and batch size: AMP saves activations."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import torch
from torch import nn

from fp16lab.checks import boolean, non_negative_int, positive_int, sequence_of
from fp16lab.debug.common import (
    MIB,
    LossFn,
    OptimizerFactory,
    batch_size,
    check_batch,
    check_loss_fn,
    check_make_batch,
    check_module,
    check_optimizer_factory,
    check_precision,
    check_trainable,
    oom_message,
    restored,
    split_batch,
    to_device,
)
from fp16lab.device import free_memory, is_oom, resolve_model_device
from fp16lab.precision import Precision, parse_precision, precision_context
from fp16lab.train import make_scaler, train_step

__all__ = ["StepMemory", "step_peak_memory", "memory_sweep"]


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
    dev = resolve_model_device(model, device)
    if dev.type != "cuda":
        raise ValueError(
            f"{what} measures CUDA memory (torch.cuda.max_memory_allocated); the model is on "
            f"{str(dev)!r}. Run it on a CUDA GPU (model.to('cuda')); on a CPU or Apple MPS use the "
            "committed GPU reference results instead"
        )
    if not torch.cuda.is_available():
        raise ValueError(f"{what}: device {str(dev)!r} requested but no CUDA GPU is visible")
    return dev


_MAX_SKIPPED_WARMUP = 24  # GradScaler halves per skip: 2**16 → 2**-8, far below any sane scale


@dataclass(frozen=True)
class _Step:
    """One measured configuration, parsed: what :func:`_measure` needs."""

    model: nn.Module
    precision: Precision
    device: torch.device
    loss_fn: LossFn
    optimizer: OptimizerFactory
    warmup_steps: int
    restore: bool


def _warm(s: _Step, step: Callable[[torch.optim.Optimizer, torch.amp.GradScaler], bool],
          opt: torch.optim.Optimizer, scaler: torch.amp.GradScaler) -> None:
    """Run ``warmup_steps`` steps the GradScaler did not skip (a skipped one leaves no Adam state)."""
    done = tries = 0
    while done < s.warmup_steps:
        tries += 1
        if not step(opt, scaler):
            done += 1
        elif tries > s.warmup_steps + _MAX_SKIPPED_WARMUP:
            raise RuntimeError(
                f"step_peak_memory: {tries - done} of {tries} warm-up steps in {s.precision.value} skipped by the "
                f"GradScaler (scale now {scaler.get_scale():g}): the gradients are inf/NaN at any "
                "scale; find the overflow with fp16lab.debug.first_nonfinite"
            )


def _measure(s: _Step, x: Any, y: Any) -> StepMemory:
    """Peak memory of one step of ``s.model`` on (x, y), already on ``s.device``."""
    dev = s.device
    with precision_context(s.precision):
        s.model.train()
        opt = s.optimizer(s.model.parameters())
        scaler = make_scaler(s.precision, dev)

        def step(opt: torch.optim.Optimizer, scaler: torch.amp.GradScaler) -> bool:
            # fp16lab.train.train_step, the training step the series teaches; True if it was skipped
            return train_step(s.model, opt, scaler, [(x, y)], precision=s.precision, device=dev,
                              loss_fn=s.loss_fn, track_grad_norm=False).skipped

        try:
            _warm(s, step, opt, scaler)
            opt.zero_grad(set_to_none=True)
            free_memory(dev)
            before = torch.cuda.memory_allocated(dev)
            torch.cuda.reset_peak_memory_stats(dev)
            step(opt, scaler)
            torch.cuda.synchronize(dev)
            peak, reserved = torch.cuda.max_memory_allocated(dev), torch.cuda.max_memory_reserved(dev)
        finally:
            del opt, scaler
            free_memory(dev)
    return StepMemory(s.precision.value, batch_size(x), before, peak, reserved, str(dev))


def _parse(model: object, precision: object, loss_fn: object, optimizer: object, device: object,
           warmup_steps: object, restore: object, what: str) -> _Step:
    m = check_module(model)
    check_trainable(m)
    p = parse_precision(precision)  # type: ignore[arg-type]  # every argument first, then the device
    loss, opt = check_loss_fn(loss_fn), check_optimizer_factory(optimizer)
    warm, keep = non_negative_int("warmup_steps", warmup_steps), boolean("restore", restore)
    dev = _cuda_device(m, device, what)  # type: ignore[arg-type]
    return _Step(model=m, precision=check_precision(p, dev), device=dev, loss_fn=loss, optimizer=opt,
                 warmup_steps=warm, restore=keep)


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
    the weights back afterwards. Raises ``ValueError`` on a CPU or MPS model, ``RuntimeError``
    when the gradients stay non-finite at every scale, and lets a CUDA out-of-memory error
    propagate (see :func:`fp16lab.debug.max_batch_size`).
    """
    x, y = split_batch(batch)
    check_batch(x, "batch inputs")
    s = _parse(model, precision, loss_fn, optimizer, device, warmup_steps, restore, "step_peak_memory")
    x, y = to_device(x, s.device), to_device(y, s.device)
    with restored(s.model, s.restore):
        return _measure(s, x, y)


def memory_sweep(
    model: nn.Module,
    make_batch: Callable[[int], Any],
    batch_sizes: Sequence[int],
    precisions: Sequence["Precision | str"] = ("fp32", "fp16"),
    *,
    loss_fn: LossFn | None = None,
    optimizer: OptimizerFactory | None = None,
    device: "torch.device | str | None" = None,
    warmup_steps: int = 1,
    restore: bool = True,
) -> pd.DataFrame:
    """:func:`step_peak_memory` for every (precision, batch size): a table for a plot.

    ``make_batch(n)`` returns an (inputs, targets) pair of ``n`` samples; the keyword
    arguments are :func:`step_peak_memory`'s. A point that runs out of memory is a row
    with ``oom=True`` (memory freed, the sweep goes on). Defaults: fp32 and fp16.
    """
    check_make_batch(make_batch)
    sizes = sequence_of("batch_sizes", batch_sizes, example="[8, 16, 32]", item=positive_int)
    names = sequence_of("precisions", precisions, example="['fp32', 'fp16']",
                        item=lambda name, p: parse_precision(p, name=name))
    base = _parse(model, "fp32", loss_fn, optimizer, device, warmup_steps, restore, "memory_sweep")
    precs = [check_precision(p, base.device) for p in names]
    steps = [_Step(base.model, p, base.device, base.loss_fn, base.optimizer, base.warmup_steps, base.restore)
             for p in precs]
    rows: list[dict[str, Any]] = []
    for s in steps:
        for n in sizes:
            row: dict[str, Any] = {"precision": s.precision.value, "batch_size": n}
            try:
                x, y = split_batch(make_batch(n), f"make_batch({n})")
                with restored(s.model, s.restore):
                    row = _measure(s, to_device(x, s.device), to_device(y, s.device)).as_row()
                row["oom"] = False
            except Exception as e:  # noqa: BLE001 - an OOM is a row; anything else propagates
                if not is_oom(e):
                    raise
                row["oom"], row["error"] = True, oom_message(e)
                free_memory(s.device)
            rows.append(row)
    return pd.DataFrame(rows)
