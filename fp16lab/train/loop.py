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
import numbers
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from torch import nn

from fp16lab.train.checkpoint import (
    CHECKPOINT_FORMAT,
    HistoryFile,
    apply_checkpoint,
    check_checkpoint_fits,
    check_writable_folder,
    load_checkpoint,
    read_checkpoint,
    rng_state,
    save_checkpoint,
    set_rng_state,
)
from fp16lab.checks import boolean, function, positive_float, positive_int
from fp16lab.precision import Precision, check_precision_supported, precision_context
from fp16lab.train.step import (
    Batch,
    LossFn,
    StepResult,
    _check_core,
    _check_loader,
    _check_scaler_fits,
    _check_scheduler,
    _evaluate,
    _loss_fn,
    _resolve_run_device,
    _split,
    _step,
    _trainable,
    evaluate,
    make_scaler,
    train_step,
)

__all__ = ["History", "TrainingDiverged", "fit", "NONFINITE_LOSS_STREAK"]

_COLUMNS = ("step", "epoch", "loss", "accuracy", "scale", "skipped", "grad_norm", "lr", "samples", "samples_per_s",
            "time_s")
# fp16 with min_scale=None: this many non-finite losses in a row stop the run
NONFINITE_LOSS_STREAK = 3


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


class TrainingDiverged(RuntimeError):
    """Raised by :func:`fit` when a run cannot go on. ``reason`` says why:

    - ``"data"``: the loss is not finite and the step's inputs or targets hold NaN/inf;
    - ``"loss"``: the loss is not finite (fp32/tf32/bf16: at once; fp16 with
      ``min_scale=None``: on ``NONFINITE_LOSS_STREAK`` steps in a row);
    - ``"grad_norm"``: fp32/tf32/bf16 gradients that are not finite (no scaler skips them);
    - ``"scale"``: the fp16 loss scale fell below ``min_scale`` (a heuristic, see :func:`fit`).

    Attributes: ``step``, ``value``, ``reason`` and ``history`` (the :class:`History` up to
    and including the failing step).
    """

    def __init__(self, message: str, *, step: int, value: float, reason: str, history: History) -> None:
        super().__init__(message)
        self.step = step
        self.value = value
        self.reason = reason
        self.history = history


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
    move_model: bool
    steps: int
    accum_steps: int
    loss_fn: LossFn
    clip: float | None
    min_scale: float | None
    eval_loader: Iterable[Batch] | None
    eval_fn: Callable[[nn.Module], Mapping[str, Any]] | None
    eval_every: int | None
    checkpoint: Path | None
    checkpoint_every: int | None
    resume: bool
    channels_last: bool
    track_grad_norm: bool
    progress: bool
    desc: str
    loader_facts: dict[str, int | None] = field(default_factory=dict)


def _loader_facts(loader: object) -> dict[str, int | None]:
    """What a resume must find unchanged: the loader's batch size and batches per epoch."""
    n_batches = _check_loader("loader", loader)
    size = getattr(loader, "batch_size", None)
    return {"batch_size": size if isinstance(size, int) else None, "batches_per_epoch": n_batches}


def _plan_steps(steps: object, epochs: object, accum: int, n_batches: int | None) -> int:
    if steps is not None and epochs is not None:
        raise ValueError(f"give steps or epochs, not both (got steps={steps!r}, epochs={epochs!r})")
    if steps is not None:
        return positive_int("steps", steps)
    n_epochs = positive_int("epochs", epochs) if epochs is not None else 1
    if n_batches is None:
        raise ValueError("the loader has no len(); give steps= instead of epochs=")
    return n_epochs * math.ceil(n_batches / accum)  # the last step of an epoch takes what is left


def _plan_fit(model: nn.Module, loader: object, optimizer: torch.optim.Optimizer, scaler: object,
              scheduler: object, a: dict[str, Any]) -> _Plan:
    """Check every argument of :func:`fit` (``a``: its keyword arguments); change nothing."""
    _check_core(model, optimizer, scaler)
    _check_scheduler(scheduler, optimizer)
    dev = _resolve_run_device(model, a["device"])
    p = check_precision_supported(a["precision"], dev)
    _check_scaler_fits(scaler, p)  # type: ignore[arg-type]
    accum = positive_int("accum_steps", a["accum_steps"])
    facts = _loader_facts(loader)
    every = {k: positive_int(k, a[k]) if a[k] is not None else None for k in ("eval_every", "checkpoint_every")}
    eval_loader, eval_fn = a["eval_loader"], function("eval_fn", a["eval_fn"], "a function model -> dict",
                                                                  n_args=1, optional=True)
    if eval_loader is not None:
        _check_loader("eval_loader", eval_loader)
    if every["eval_every"] is not None and eval_loader is None and eval_fn is None:
        raise ValueError("eval_every needs something to evaluate: give eval_loader= and/or eval_fn=")
    resume = boolean("resume", a["resume"])
    ckpt = a["checkpoint"]
    if (resume or every["checkpoint_every"] is not None) and ckpt is None:
        raise ValueError("resume/checkpoint_every need checkpoint=<path of the checkpoint file>")
    if ckpt is not None:
        ckpt = check_writable_folder(ckpt, name="checkpoint")
        if HistoryFile(ckpt).path.is_dir():
            raise ValueError(f"{str(HistoryFile(ckpt).path)!r} (where fit keeps the history of checkpoint={str(ckpt)!r}) "
                             "is a folder; move it or choose another checkpoint name")
    if a["desc"] is not None and not isinstance(a["desc"], str):
        raise ValueError(f"desc must be a str or None, got {a['desc']!r}")
    return _Plan(
        precision=p, device=dev, move_model=a["device"] is not None,
        steps=_plan_steps(a["steps"], a["epochs"], accum, facts["batches_per_epoch"]), accum_steps=accum,
        loss_fn=_loss_fn(a["loss_fn"]),
        clip=positive_float("clip_grad_norm", a["clip_grad_norm"]) if a["clip_grad_norm"] is not None else None,
        min_scale=positive_float("min_scale", a["min_scale"]) if a["min_scale"] is not None else None,
        eval_loader=eval_loader, eval_fn=eval_fn, eval_every=every["eval_every"], checkpoint=ckpt,
        checkpoint_every=every["checkpoint_every"], resume=resume,
        channels_last=boolean("channels_last", a["channels_last"]),
        track_grad_norm=boolean("track_grad_norm", a["track_grad_norm"]),
        progress=boolean("progress", a["progress"]), desc=a["desc"] or f"fit {p.value}", loader_facts=facts,
    )


# ---------------------------------------------------------------- fit: resume (checked before applied)


@dataclass(frozen=True)
class _Resume:
    payload: dict[str, Any]
    rows: list[dict[str, Any]]
    mark: Mapping[str, Any]


def _run_settings(plan: _Plan) -> dict[str, Any]:
    """What a resumed run must share with the run that wrote the checkpoint."""
    return {"precision": plan.precision.value, "accum_steps": plan.accum_steps, **plan.loader_facts}


def _read_resume(plan: _Plan, model: nn.Module, optimizer: torch.optim.Optimizer, scheduler: Any) -> _Resume:
    """Read and check the checkpoint completely; raise before anything is changed."""
    path = plan.checkpoint
    assert path is not None
    if not path.exists():
        raise FileNotFoundError(
            f"resume=True, but there is no checkpoint at checkpoint={str(path)!r}. To start a new run pass "
            "resume=False; to resume only when the file exists, pass resume=Path(checkpoint).exists()"
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
    check_checkpoint_fits(payload, path, model, optimizer, scheduler=scheduler,
                          scaler_enabled=plan.precision.uses_scaler)
    step = int(payload["step"])
    if step > plan.steps:
        raise ValueError(f"the checkpoint {str(path)!r} is at step {step}, past the steps={plan.steps} asked for; "
                         f"ask for steps >= {step} to continue it")
    rows = HistoryFile(path).read(fit_extra["history"], step)
    return _Resume(payload=payload, rows=rows, mark=fit_extra["history"])


# ---------------------------------------------------------------- fit: the divergence check


@dataclass(frozen=True)
class _Divergence:
    """Why a run cannot go on: the reason (TrainingDiverged.reason), the value, the message."""

    reason: str
    value: float
    message: str


def _advice(precision: Precision) -> str:
    tips = ["a lower learning rate", "gradient clipping (clip_grad_norm=1.0)"]
    tips.append("keeping the unstable op in an FP32 island (torch.autocast(device_type, enabled=False))")
    if precision is Precision.FP16:
        tips.append("bf16 instead of fp16 (fp32's range, no scaler needed)")
    elif precision is Precision.BF16:
        tips.append("fp32 for the layers that overflow")
    return "Try: " + "; ".join(tips) + "."


def _nonfinite_inputs(micro: Sequence[Batch]) -> str | None:
    """Which micro-batch holds NaN/inf inputs or targets (read only after a non-finite loss)."""
    for i, batch in enumerate(micro, 1):
        for what, t in zip(("inputs", "targets"), _split(batch), strict=True):
            if t.is_floating_point() and not bool(torch.isfinite(t).all()):
                n_nan, n_inf = int(torch.isnan(t).sum()), int(torch.isinf(t).sum())
                return f"micro-batch {i} of {len(micro)}: its {what} hold {n_nan} NaN and {n_inf} inf values"
    return None


def _check_divergence(plan: _Plan, step: int, r: StepResult, micro: Sequence[Batch],
                      rows: Sequence[Mapping[str, Any]]) -> _Divergence | None:
    """The run's health after one step; None while it is fine."""
    p = plan.precision
    if not math.isfinite(r.loss):
        bad_data = _nonfinite_inputs(micro)
        if bad_data is not None:
            return _Divergence("data", r.loss, f"step {step}: the loss is {r.loss} because the data is not finite "
                               f"({bad_data}). Check your data: look for NaN/inf in the dataset and in the "
                               "preprocessing (a division by zero, log of 0, a missing value).")
        if not p.uses_scaler:
            return _Divergence("loss", r.loss, f"step {step}: the loss is {r.loss} (not finite) training in {p.value}. "
                               + _advice(p))
        streak = len(list(itertools.takewhile(lambda row: not math.isfinite(row["loss"]), reversed(rows))))
        if plan.min_scale is None and streak >= NONFINITE_LOSS_STREAK:
            return _Divergence("loss", r.loss, f"step {step}: the loss was not finite on {streak} steps in a row in "
                               "fp16: the forward pass overflows, which no loss scale can fix (min_scale=None turned "
                               "the scale check off). " + _advice(p))
    if not p.uses_scaler and r.grad_norm is not None and not math.isfinite(r.grad_norm):
        return _Divergence("grad_norm", r.grad_norm, f"step {step}: the gradient norm is {r.grad_norm} in {p.value} "
                           "(no GradScaler skips such a step: the weights are no longer finite). " + _advice(p))
    if p.uses_scaler and plan.min_scale is not None and r.scale < plan.min_scale:
        recent = sum(bool(x["skipped"]) for x in rows[-50:])
        forward = "" if math.isfinite(r.loss) else ": the loss itself is not finite, the forward pass overflows"
        return _Divergence("scale", r.scale, (
            f"step {step}: the fp16 loss scale fell to {r.scale:g}, below min_scale={plan.min_scale:g} "
            f"({recent} of the last {min(len(rows), 50)} steps were skipped for inf/NaN gradients; last loss "
            f"{r.loss:g}{forward}). A scale below min_scale is a heuristic sign of divergence (GradScaler itself does not "
            "promise a scale >= 1); min_scale=None turns it off. " + _advice(p)))
    return None


# ---------------------------------------------------------------- fit: the run


def _metrics(result: object) -> dict[str, float]:
    """eval_fn's result as plain floats (numpy and 0-d tensor numbers accepted)."""
    if not isinstance(result, Mapping):
        raise ValueError(f"eval_fn must return a dict of name -> number, got {type(result).__name__}")
    out: dict[str, float] = {}
    for k, v in result.items():
        if not isinstance(k, str) or k in _COLUMNS:
            raise ValueError(f"eval_fn returned the key {k!r}: keys must be str and not one of the History "
                             f"columns {', '.join(_COLUMNS)} (e.g. 'val_{k}')")
        if isinstance(v, torch.Tensor) and v.numel() == 1:
            v = v.item()
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise ValueError(f"eval_fn returned {k!r}: {v!r:.60} ({type(v).__name__}); values must be numbers "
                             "(python, numpy or a one-element tensor)")
        out[k] = float(v)
    return out


class _Run:
    """One fit run: the objects, the plan, the rows so far and the timing."""

    def __init__(self, plan: _Plan, model: nn.Module, loader: Iterable[Batch], optimizer: torch.optim.Optimizer,
                 scaler: torch.amp.GradScaler, scheduler: Any) -> None:
        self.plan, self.model, self.optimizer, self.scaler, self.scheduler = plan, model, optimizer, scaler, scheduler
        self.stream = _Stream(loader, plan.device)
        self.params = _trainable(model)
        self.rows: list[dict[str, Any]] = []
        self.start_step = 0
        self.t_prev = self.elapsed = 0.0  # set when the run starts
        self.history_file = HistoryFile(plan.checkpoint) if plan.checkpoint is not None else None
        self.attrs = dict(precision=plan.precision.value, device=str(plan.device), accum_steps=plan.accum_steps,
                          clip_grad_norm=plan.clip)

    def restore(self, resume: _Resume) -> None:
        apply_checkpoint(resume.payload, self.model, self.optimizer, scaler=self.scaler, scheduler=self.scheduler,
                         restore_rng=False)
        self.start_step = int(resume.payload["step"])
        self.rows = resume.rows
        self.stream.seek(resume.payload["extra"]["fit"]["stream"])
        assert self.history_file is not None
        self.history_file.continue_from(resume.mark)

    def history(self) -> History:
        return History.from_rows(self.rows, **self.attrs)

    def one_step(self, step: int, scale_before: float) -> tuple[StepResult, list[Batch]]:
        """Run one optimizer step and record its row."""
        plan = self.plan
        micro, epoch = self.stream.take(plan.accum_steps)
        r = _step(self.model, self.optimizer, self.scaler, micro, p=plan.precision, dev=plan.device,
                  params=self.params, loss_fn=plan.loss_fn, clip=plan.clip, scheduler=self.scheduler,
                  channels_last=plan.channels_last, track_grad_norm=plan.track_grad_norm, scale_before=scale_before)
        now = time.perf_counter()
        dt, self.t_prev = now - self.t_prev, now
        self.elapsed += dt
        self.rows.append({
            "step": step, "epoch": epoch, "loss": r.loss, "accuracy": r.accuracy, "scale": r.scale,
            "skipped": r.skipped, "grad_norm": r.grad_norm if r.grad_norm is not None else math.nan, "lr": r.lr,
            "samples": r.samples, "samples_per_s": r.samples / dt if dt > 0 else math.nan, "time_s": self.elapsed,
        })
        return r, micro

    def evaluate_and_save(self, step: int) -> None:
        """Evaluate and checkpoint when their cadence (or the final step) says so."""
        plan, final = self.plan, step == self.plan.steps

        def due(every: int | None) -> bool:
            return final or (every is not None and step % every == 0)

        if (plan.eval_loader is not None or plan.eval_fn is not None) and due(plan.eval_every):
            if plan.eval_loader is not None:
                self.rows[-1].update(_evaluate(self.model, plan.eval_loader, plan.precision, plan.device,
                                               plan.loss_fn, plan.channels_last))
            if plan.eval_fn is not None:
                self.rows[-1].update(_metrics(plan.eval_fn(self.model)))
            self.t_prev = time.perf_counter()  # evaluation time is not training time
        if plan.checkpoint is not None and due(plan.checkpoint_every):
            self.save(step)
            self.t_prev = time.perf_counter()

    def save(self, step: int) -> None:
        """History rows since the last save to the sidecar, then the checkpoint (atomically)."""
        assert self.history_file is not None and self.plan.checkpoint is not None
        mark = self.history_file.save(self.rows)
        extra = {"fit": {"settings": _run_settings(self.plan),
                         "stream": self.stream.position(), "history": mark.as_dict()}}
        save_checkpoint(self.plan.checkpoint, self.model, self.optimizer, scaler=self.scaler,
                        scheduler=self.scheduler, step=step, extra=extra)

    def train(self) -> History:
        from tqdm.auto import tqdm

        plan = self.plan
        self.model.train()
        self.optimizer.zero_grad(set_to_none=True)
        self.elapsed = float(self.rows[-1]["time_s"]) if self.rows else 0.0
        scale = self.scaler.get_scale()  # after this, each step's result carries it
        bar = tqdm(total=plan.steps, initial=self.start_step, disable=not plan.progress, desc=plan.desc, leave=False)
        try:
            with precision_context(plan.precision):
                self.t_prev = time.perf_counter()
                for step in range(self.start_step + 1, plan.steps + 1):
                    r, micro = self.one_step(step, scale)
                    scale = r.scale
                    bad = _check_divergence(plan, step, r, micro, self.rows)
                    if bad is not None:
                        raise TrainingDiverged(bad.message, step=step, value=bad.value, reason=bad.reason,
                                               history=self.history())
                    self.evaluate_and_save(step)
                    bar.update(1)
                    if step % 10 == 0 or step == plan.steps:
                        bar.set_postfix(loss=f"{r.loss:.4g}", scale=f"{r.scale:g}", refresh=False)
        finally:
            bar.close()
        return self.history()


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
    eval_fn: Callable[[nn.Module], Mapping[str, Any]] | None = None,
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

    Every argument is checked before anything changes (also the checkpoint folder, and a
    resume's whole checkpoint). Defaults: ``precision="fp16"`` (fp32, tf32, fp16 or bf16; TF32
    set for the run by ``precision_context``), ``device`` = the model's (the model is moved
    when given), ``epochs=1`` when neither ``steps`` nor ``epochs`` is given (``steps`` counts
    optimizer steps in total, across a resume), cross-entropy loss (``loss_fn`` must return the
    batch mean, a 0-d tensor), ``accum_steps=1`` (micro-batches weighted by size: one big
    batch; a step never spans two epochs, so an epoch's last step takes the micro-batches
    left), no clipping, a new ``GradScaler`` (enabled for fp16 only) unless ``scaler`` is
    given, NCHW, the gradient norm tracked.

    ``optimizer`` is yours; it must hold every trainable parameter of the model, so build it
    after changing the model (e.g. after ``pad_layers``). On a GPU pass
    ``torch.optim.Adam(model.parameters(), fused=True)``: one kernel for the whole update,
    and no GradScaler host sync in ``step``.

    Evaluation: ``eval_loader`` (val_loss, val_accuracy) and/or ``eval_fn(model) -> dict`` of
    numbers (python, numpy or one-element tensors; stored as floats) every ``eval_every`` steps
    and at the end. Checkpoints: every ``checkpoint_every`` steps and at the end to the file
    ``checkpoint``; the history goes once into ``<checkpoint>.history.jsonl`` beside it
    (appended at each save). ``resume=False`` starts at step 0 and overwrites both at its
    first save; ``resume=True`` continues the checkpoint exactly (same precision, accum_steps,
    batch size and batches per epoch, optimizer and scheduler classes, model shapes) and
    returns the whole history; a missing file is a ``FileNotFoundError`` (pass
    ``resume=Path(checkpoint).exists()`` to resume only when there is one).

    Divergence (:class:`TrainingDiverged`): a non-finite loss whose inputs hold NaN/inf stops
    the run at once ("check your data"); in fp32/tf32/bf16 so does any non-finite loss or
    gradient norm. In fp16 a non-finite gradient only skips the step; ``min_scale=1.0`` stops
    the run when the scale falls below it, a heuristic (GradScaler does not promise a scale
    >= 1, but a scale that low means nearly every step overflows). ``min_scale=None`` turns
    that off; then a loss that is non-finite on ``NONFINITE_LOSS_STREAK`` steps in a row
    stops the run. The scheduler is stepped once per optimizer step that was not skipped.
    """
    args = {k: v for k, v in locals().items() if k not in ("model", "loader", "optimizer", "scaler", "scheduler")}
    plan = _plan_fit(model, loader, optimizer, scaler, scheduler, args)
    resumed = _read_resume(plan, model, optimizer, scheduler) if plan.resume else None
    if plan.move_model:
        model.to(plan.device)
    if plan.channels_last:
        model.to(memory_format=torch.channels_last)
    run = _Run(plan, model, loader, optimizer, scaler or make_scaler(plan.precision, plan.device), scheduler)
    if resumed is not None:
        run.restore(resumed)
    return run.train()
