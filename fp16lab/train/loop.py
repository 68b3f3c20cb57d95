"""The mixed-precision training loop with a history you can plot, checkpoints and a guard.

:func:`fit` checks every argument first (the plan: every callback's ``check`` too), then runs
:func:`fp16lab.train.step.amp_step` step after step through :class:`fp16lab.train.run.Run`, which keeps a
:class:`History` (a pandas DataFrame) and fires the callbacks' events. The callbacks own their work:
:class:`DivergenceGuard` stops a run that cannot go on with :class:`TrainingDiverged`, ``Evaluate``
evaluates, ``Schedule`` steps the scheduler, ``Checkpoint`` saves atomically
(:mod:`fp16lab.train.checkpoint`, the history once, in a sidecar file) and resumes, checking the
whole checkpoint before it changes anything, so that a resumed run continues exactly as an
uninterrupted one would.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import torch
from torch import nn

from fp16lab.checks import positive_float, positive_int
from fp16lab.device import model_device
from fp16lab.precision import Precision, check_precision_supported
from fp16lab.train.callbacks import Callback, fit_callbacks
from fp16lab.train.run import History, Plan, Run
from fp16lab.train.step import (
    Batch,
    LossFn,
    check_core,
    check_loader,
    check_scaler_fits,
    checked_loss_fn,
    make_scaler,
)

__all__ = ["History", "fit"]


# ---------------------------------------------------------------- fit: the plan (all checks)


def _loader_facts(loader: object) -> dict[str, int | None]:
    """What a resume must find unchanged: the loader's batch size and batches per epoch."""
    n_batches = check_loader("loader", loader)
    size = getattr(loader, "batch_size", None)
    return {"batch_size": size if isinstance(size, int) else None, "batches_per_epoch": n_batches}


def _plan_steps(steps: object, accum: int, n_batches: int | None) -> int:
    if steps is not None:
        return positive_int("steps", steps)
    if n_batches is None:
        raise ValueError("steps=None means one epoch, but the loader has no len(); give steps=")
    return math.ceil(n_batches / accum)  # the last step of the epoch takes what is left


def _check_model_real(model: nn.Module) -> None:
    meta = next((n for n, q in model.named_parameters() if q.is_meta), None)
    if meta is not None:
        raise ValueError(f"model: parameter {meta!r} is on the 'meta' device (shapes only, no data); "
                         "materialise the model first, e.g. model.to_empty(device=...) and initialise it")


def _plan_fit(model: nn.Module, loader: object, optimizer: torch.optim.Optimizer, scaler: object, *,
              precision: object, steps: object, loss_fn: object, accum_steps: object, clip_grad_norm: object,
              callbacks: object) -> Plan:
    """Check every argument of :func:`fit`; change nothing."""
    check_core(model, optimizer, scaler)
    _check_model_real(model)
    dev = model_device(model)
    p = check_precision_supported(precision, dev)  # type: ignore[arg-type]
    check_scaler_fits(scaler, p)  # type: ignore[arg-type]
    accum = positive_int("accum_steps", accum_steps)
    facts = _loader_facts(loader)
    plan = Plan(
        precision=p, device=dev, optimizer=optimizer, steps=_plan_steps(steps, accum, facts["batches_per_epoch"]),
        accum_steps=accum, loss_fn=checked_loss_fn(loss_fn),
        clip=positive_float("clip_grad_norm", clip_grad_norm) if clip_grad_norm is not None else None,
        callbacks=fit_callbacks(callbacks), loader_facts=facts,
    )
    for cb in plan.callbacks:
        cb.check(plan)  # a Schedule registers its scheduler here
    return plan


# ---------------------------------------------------------------- fit


def fit(
    model: nn.Module,
    loader: Iterable[Batch],
    optimizer: torch.optim.Optimizer,
    *,
    precision: "Precision | str" = "fp16",
    steps: int | None = None,
    loss_fn: LossFn | None = None,
    accum_steps: int = 1,
    clip_grad_norm: float | None = None,
    scaler: torch.amp.GradScaler | None = None,
    callbacks: Sequence[Callback] | None = None,
) -> History:
    """Train ``model`` with mixed precision done right; return a :class:`History`.

    Every argument is checked before anything changes (a resume's whole checkpoint too); a list
    of batches entry by entry, a DataLoader's or an iterator's batches as they are drawn (the
    first step's before the model or its gradients change), never by iterating it up front.
    ``model`` trains on its own device (move it first; fit never moves it) and its batches are
    moved there. Defaults: ``precision="fp16"`` (fp32, tf32, fp16 or bf16; TF32 set for the
    run by ``precision_context``), ``steps=None`` = one epoch (``steps`` counts optimizer steps
    in total, across a resume; a step never spans two epochs, so an epoch's last step takes the
    micro-batches left), cross-entropy loss (``loss_fn`` must return the batch mean, a 0-d
    tensor), ``accum_steps=1`` (micro-batches weighted by size: one big batch), no clipping, a
    new ``GradScaler`` (enabled for fp16 only) unless ``scaler`` is given.

    ``optimizer`` is yours; it must hold every trainable parameter of the model, so build it
    after changing the model (e.g. after ``pad_layers``). On a GPU pass
    ``torch.optim.Adam(model.parameters(), fused=True)``: one kernel for the whole update.

    ``callbacks`` (:mod:`fp16lab.train.callbacks`): ``Evaluate``, ``Checkpoint``, ``Schedule``,
    ``DivergenceGuard``, ``ProgressBar`` or your own. None means ``[ProgressBar()]``; a list
    means exactly those (``[]`` runs quietly). The divergence guard always runs: a
    ``DivergenceGuard`` in the list replaces the default one (``fit_callbacks``). The loop only
    fires events; the callbacks own their work (a ``Schedule`` steps its scheduler, a
    ``Checkpoint`` saves and resumes).
    """
    plan = _plan_fit(model, loader, optimizer, scaler, precision=precision, steps=steps, loss_fn=loss_fn,
                     accum_steps=accum_steps, clip_grad_norm=clip_grad_norm, callbacks=callbacks)
    return Run(plan, model, loader, scaler or make_scaler(plan.precision, plan.device)).train()
