"""The mixed-precision training loop with a history you can plot, checkpoints and a guard.

:func:`fit` checks every argument first (and, for a resume, the whole checkpoint), then runs
:func:`fp16lab.train.step.train_step`'s recipe step after step, keeps a :class:`History` (a pandas
DataFrame), stops a run that cannot go on with :class:`TrainingDiverged`, evaluates, and
checkpoints atomically (:mod:`fp16lab.train.checkpoint`, the history once, in a sidecar file) so that
a resumed run continues exactly as an uninterrupted one would. Its parts: the plan (argument
checks), the resume (checked before it is applied), one step's record, the divergence check
and the evaluation/checkpoint cadence.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pandas as pd
import torch
from torch import nn

from fp16lab.checks import positive_float, positive_int, sequence_of
from fp16lab.device import model_device
from fp16lab.precision import Precision, check_precision_supported, precision_context
from fp16lab.train.callbacks import (
    HISTORY_COLUMNS,
    NONFINITE_LOSS_STREAK,
    Callback,
    Checkpoint,
    DivergenceGuard,
    Evaluate,
    ProgressBar,
    Schedule,
    TrainingDiverged,
    save_fit_checkpoint,
)
from fp16lab.train.checkpoint import (
    HistoryFile,
    apply_checkpoint,
    check_checkpoint_fits,
    read_checkpoint,
    rng_state,
    set_rng_state,
)
from fp16lab.train.step import (
    Batch,
    LossFn,
    StepResult,
    _check_core,
    _check_loader,
    _check_scaler_fits,
    _loss_fn,
    _step,
    _trainable,
    make_scaler,
)

C = TypeVar("C", bound=Callback)

__all__ = ["History", "TrainingDiverged", "fit", "NONFINITE_LOSS_STREAK", "Callback", "Evaluate", "Checkpoint",
           "Schedule", "DivergenceGuard", "ProgressBar"]

_COLUMNS = HISTORY_COLUMNS


class History(pd.DataFrame):
    """One row per optimizer step: step, epoch, loss, accuracy, scale, skipped, grad_norm, lr,
    samples, samples_per_s, time_s (and val_* / eval_fn columns where an evaluation ran).

    ``loss`` is the step's loss over all its samples (micro-batch losses weighted by their
    size; the true loss, not scaled); ``accuracy`` the training-batch accuracy (NaN when the
    task is not classification); ``scale`` the GradScaler scale *after* the step's
    ``update()`` (1.0 without a scaler); ``grad_norm`` the total L2 norm of the unscaled
    gradients before clipping; ``samples_per_s`` the step's samples over its wall time (data
    loading included). ``history.attrs`` records precision, device, accum_steps and
    clip_grad_norm.
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


# ---------------------------------------------------------------- the data stream


def _loader_generators(loader: object) -> list[torch.Generator]:
    gens: list[torch.Generator] = []
    for g in (getattr(loader, "generator", None), getattr(getattr(loader, "sampler", None), "generator", None)):
        if isinstance(g, torch.Generator) and all(g is not h for h in gens):
            gens.append(g)
    return gens


class _Stream:
    """Steps of micro-batches, epoch by epoch, with the position and RNG to replay it exactly.

    A step never spans two epochs: the last step of an epoch takes the micro-batches left
    (fewer than ``accum_steps`` when they do not divide the epoch), so none is dropped.
    """

    def __init__(self, loader: Iterable[Batch], device: torch.device) -> None:
        self.loader = loader
        self.device = device
        self.epoch = 0
        self.pos = 0  # micro-batches consumed in the current epoch
        self.epoch_rng: dict[str, Any] | None = None
        self._it: Iterator[Batch] | None = None

    def _capture(self) -> dict[str, Any]:
        state = rng_state(self.device)
        state["loader"] = [g.get_state() for g in _loader_generators(self.loader)]
        return state

    def _restore(self, state: Mapping[str, Any]) -> None:
        set_rng_state(state, self.device)
        for g, s in zip(_loader_generators(self.loader), state.get("loader", []), strict=False):
            g.set_state(s.cpu())

    def position(self) -> dict[str, Any]:
        return {"epoch": self.epoch, "pos": self.pos, "epoch_rng": self.epoch_rng, "now_rng": self._capture()}

    def seek(self, position: Mapping[str, Any]) -> None:
        """Re-create the epoch's iterator with its RNG and skip what was already consumed."""
        self.epoch, self.pos = int(position["epoch"]), int(position["pos"])
        self.epoch_rng = position["epoch_rng"]
        self._it = None
        if self.pos > 0 and self.epoch_rng is not None:
            self._restore(self.epoch_rng)
            self._it = iter(self.loader)
            for _ in itertools.islice(self._it, self.pos):
                pass
        self._restore(position["now_rng"])

    def take(self, n: int) -> tuple[list[Batch], int]:
        """Up to ``n`` micro-batches of one epoch, and that epoch's number."""
        micro: list[Batch] = []
        epoch = self.epoch
        while len(micro) < n:
            if self._it is None:
                self.epoch_rng = self._capture()
                self._it = iter(self.loader)
            try:
                batch = next(self._it)
            except StopIteration:
                empty = self.pos == 0
                self._it, self.pos = None, 0
                if empty and self.epoch > 0 and isinstance(self.loader, Iterator):
                    raise ValueError(
                        f"loader: an iterator, used up after epoch {self.epoch}: it can be iterated only once. Pass "
                        "a DataLoader or a list of batches (they start over each epoch), or ask for fewer steps"
                    ) from None
                if empty:
                    raise ValueError(
                        "the loader yielded no batches (is the dataset empty, or drop_last with too few items?)"
                    ) from None
                self.epoch += 1
                if micro:
                    break  # the epoch's last, shorter step
                epoch = self.epoch
                continue
            self.pos += 1
            micro.append(batch)
        return micro, epoch


# ---------------------------------------------------------------- fit: the plan (all checks)


@dataclass
class _Plan:
    """fit's arguments, parsed and checked; nothing has been changed yet."""

    precision: Precision
    device: torch.device
    optimizer: torch.optim.Optimizer
    steps: int
    accum_steps: int
    loss_fn: LossFn
    clip: float | None
    callbacks: list[Callback]
    scheduler: Any = None
    loader_facts: dict[str, int | None] = field(default_factory=dict)

    def find(self, kind: type[C]) -> C | None:
        """The callback of this kind, if fit was given one."""
        return next((cb for cb in self.callbacks if isinstance(cb, kind)), None)


def _loader_facts(loader: object) -> dict[str, int | None]:
    """What a resume must find unchanged: the loader's batch size and batches per epoch."""
    n_batches = _check_loader("loader", loader)
    size = getattr(loader, "batch_size", None)
    return {"batch_size": size if isinstance(size, int) else None, "batches_per_epoch": n_batches}


def _plan_steps(steps: object, accum: int, n_batches: int | None) -> int:
    if steps is not None:
        return positive_int("steps", steps)
    if n_batches is None:
        raise ValueError("steps=None means one epoch, but the loader has no len(); give steps=")
    return math.ceil(n_batches / accum)  # the last step of the epoch takes what is left


def _check_callbacks(callbacks: object) -> list[Callback]:
    """The callbacks, sorted by ``order``; fit's own guard unless a DivergenceGuard is given; None: a bar."""
    if callbacks is None:
        given: list[Callback] = [ProgressBar()]
    else:
        given = sequence_of("callbacks", callbacks, example="[Evaluate(loader)] (or None)", allow_empty=True)
    for i, cb in enumerate(given):
        if not isinstance(cb, Callback):
            raise TypeError(f"callbacks[{i}] must be an fp16lab.train.Callback (Evaluate, Checkpoint, Schedule, "
                            f"DivergenceGuard, ProgressBar or your subclass), got {cb!r:.80}")
    for kind in (Checkpoint, Schedule, DivergenceGuard, ProgressBar):
        if sum(isinstance(cb, kind) for cb in given) > 1:
            raise ValueError(f"callbacks: give at most one {kind.__name__}, got {sum(isinstance(c, kind) for c in given)}")
    if not any(isinstance(cb, DivergenceGuard) for cb in given):
        given.append(DivergenceGuard())
    return sorted(given, key=lambda cb: cb.order)


def _check_model_real(model: nn.Module) -> None:
    meta = next((n for n, q in model.named_parameters() if q.is_meta), None)
    if meta is not None:
        raise ValueError(f"model: parameter {meta!r} is on the 'meta' device (shapes only, no data); "
                         "materialise the model first, e.g. model.to_empty(device=...) and initialise it")


def _plan_fit(model: nn.Module, loader: object, optimizer: torch.optim.Optimizer, scaler: object, *,
              precision: object, steps: object, loss_fn: object, accum_steps: object, clip_grad_norm: object,
              callbacks: object) -> _Plan:
    """Check every argument of :func:`fit`; change nothing."""
    _check_core(model, optimizer, scaler)
    _check_model_real(model)
    dev = model_device(model)
    p = check_precision_supported(precision, dev)  # type: ignore[arg-type]
    _check_scaler_fits(scaler, p)  # type: ignore[arg-type]
    accum = positive_int("accum_steps", accum_steps)
    facts = _loader_facts(loader)
    plan = _Plan(
        precision=p, device=dev, optimizer=optimizer, steps=_plan_steps(steps, accum, facts["batches_per_epoch"]),
        accum_steps=accum, loss_fn=_loss_fn(loss_fn),
        clip=positive_float("clip_grad_norm", clip_grad_norm) if clip_grad_norm is not None else None,
        callbacks=_check_callbacks(callbacks), loader_facts=facts,
    )
    schedule = plan.find(Schedule)
    plan.scheduler = schedule.scheduler if schedule is not None else None
    for cb in plan.callbacks:
        cb.check(plan)
    return plan


# ---------------------------------------------------------------- fit: resume (checked before applied)


@dataclass(frozen=True)
class _Resume:
    payload: dict[str, Any]
    rows: list[dict[str, Any]]
    mark: Mapping[str, Any]


def _run_settings(plan: _Plan) -> dict[str, Any]:
    """What a resumed run must share with the run that wrote the checkpoint."""
    return {"precision": plan.precision.value, "accum_steps": plan.accum_steps, **plan.loader_facts}


def _read_resume(plan: _Plan, path: Path, model: nn.Module) -> _Resume:
    """Read and check the checkpoint completely; raise before anything is changed."""
    if not path.exists():
        raise FileNotFoundError(
            f"Checkpoint(resume=True), but there is no checkpoint at path={str(path)!r}. To start a new run pass "
            "resume=False; to resume only when the file exists, pass resume=Path(path).exists()"
        )
    payload = read_checkpoint(path, map_location=plan.device, weights_only=True)
    fit_extra = payload["extra"].get("fit")
    if not isinstance(fit_extra, Mapping):
        raise ValueError(f"{str(path)!r} was not written by fit (no run settings in it), so fit cannot resume it; "
                         "load it with load_checkpoint and start fit with resume=False")
    saved, now = fit_extra.get("settings", {}), _run_settings(plan)
    diff = [f"{k}: checkpoint {saved.get(k)!r}, now {v!r}" for k, v in now.items()
            if v is not None and saved.get(k) is not None and saved.get(k) != v]
    if diff:
        raise ValueError(f"cannot resume {str(path)!r} exactly: this run differs from the one that wrote it "
                         f"({'; '.join(diff)}). Resume with the same settings and data, or start a new run")
    check_checkpoint_fits(payload, path, model, plan.optimizer, scheduler=plan.scheduler,
                          scaler_enabled=plan.precision.uses_scaler)
    step = int(payload["step"])
    if step > plan.steps:
        raise ValueError(f"the checkpoint {str(path)!r} is at step {step}, past the steps={plan.steps} asked for; "
                         f"ask for steps >= {step} to continue it")
    rows = HistoryFile(path).read(fit_extra["history"], step)
    return _Resume(payload=payload, rows=rows, mark=fit_extra["history"])


# ---------------------------------------------------------------- fit: the run


class _Run:
    """One fit run: the objects, the plan, the rows so far and the timing (what callbacks see)."""

    def __init__(self, plan: _Plan, model: nn.Module, loader: Iterable[Batch],
                 scaler: torch.amp.GradScaler) -> None:
        self.plan, self.model, self.optimizer, self.scaler = plan, model, plan.optimizer, scaler
        self.stream = _Stream(loader, plan.device)
        self.params = _trainable(model)
        self.rows: list[dict[str, Any]] = []
        self.micro: list[Batch] = []  # the last step's micro-batches
        self.start_step = 0
        self.t_prev = self.elapsed = 0.0  # set when the run starts
        self.history_file: HistoryFile | None = None
        self.attrs = dict(precision=plan.precision.value, device=str(plan.device), accum_steps=plan.accum_steps,
                          clip_grad_norm=plan.clip)

    def restore(self, path: Path, resume: _Resume) -> None:
        apply_checkpoint(resume.payload, self.model, self.optimizer, scaler=self.scaler, scheduler=self.plan.scheduler,
                         restore_rng=False)
        self.start_step = int(resume.payload["step"])
        self.rows = resume.rows
        self.stream.seek(resume.payload["extra"]["fit"]["stream"])
        self.history_file = HistoryFile(path)
        self.history_file.continue_from(resume.mark)

    def history(self) -> History:
        return History.from_rows(self.rows, **self.attrs)

    def one_step(self, step: int, scale_before: float) -> StepResult:
        """Run one optimizer step and record its row."""
        plan = self.plan
        self.micro, epoch = self.stream.take(plan.accum_steps)
        r = _step(self.model, self.optimizer, self.scaler, self.micro, p=plan.precision, dev=plan.device,
                  params=self.params, loss_fn=plan.loss_fn, clip=plan.clip, scheduler=plan.scheduler,
                  channels_last=False, track_grad_norm=True, scale_before=scale_before)
        now = time.perf_counter()
        dt, self.t_prev = now - self.t_prev, now
        self.elapsed += dt
        self.rows.append({
            "step": step, "epoch": epoch, "loss": r.loss, "accuracy": r.accuracy, "scale": r.scale,
            "skipped": r.skipped, "grad_norm": r.grad_norm if r.grad_norm is not None else math.nan, "lr": r.lr,
            "samples": r.samples, "samples_per_s": r.samples / dt if dt > 0 else math.nan, "time_s": self.elapsed,
        })
        return r

    def save(self, path: Path, step: int) -> None:
        """History rows since the last save to the sidecar, then the checkpoint (atomically)."""
        if self.history_file is None:
            self.history_file = HistoryFile(path)
        mark = self.history_file.save(self.rows)
        extra = {"fit": {"settings": _run_settings(self.plan),
                         "stream": self.stream.position(), "history": mark.as_dict()}}
        save_fit_checkpoint(path, self, step, extra)

    def train(self) -> History:
        plan = self.plan
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        self.elapsed = float(self.rows[-1]["time_s"]) if self.rows else 0.0
        scale = self.scaler.get_scale()  # after this, each step's result carries it
        try:
            for cb in plan.callbacks:
                cb.before_fit(self)
            with precision_context(plan.precision):
                self.t_prev = time.perf_counter()
                for step in range(self.start_step + 1, plan.steps + 1):
                    r = self.one_step(step, scale)
                    scale = r.scale
                    for cb in plan.callbacks:
                        cb.after_step(self, step, r)
                    self.t_prev = time.perf_counter()  # callbacks' time (evaluation, saving) is not training time
        finally:
            for cb in plan.callbacks:
                cb.after_fit(self)
        return self.history()


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

    Every argument is checked before anything changes (a resume's whole checkpoint too).
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
    ``DivergenceGuard`` in the list replaces the default one.
    """
    plan = _plan_fit(model, loader, optimizer, scaler, precision=precision, steps=steps, loss_fn=loss_fn,
                     accum_steps=accum_steps, clip_grad_norm=clip_grad_norm, callbacks=callbacks)
    ckpt = plan.find(Checkpoint)
    resumed = _read_resume(plan, ckpt.path, model) if ckpt is not None and ckpt.resume else None
    run = _Run(plan, model, loader, scaler or make_scaler(plan.precision, plan.device))
    if resumed is not None and ckpt is not None:
        run.restore(ckpt.path, resumed)
    return run.train()
