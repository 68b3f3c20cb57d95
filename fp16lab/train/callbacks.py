"""fit's extras as small callbacks (fastai style): evaluation, checkpoints, the scheduler, the guard, a bar.

A callback is an object with any of ``check(plan)`` (refuse bad settings before anything changes),
``before_fit(run)``, ``after_step(run, step, result)`` and ``after_fit(run)``; ``order`` sorts them
(the guard first, the progress bar last). Write your own by subclassing :class:`Callback`: ``run``
(:class:`fp16lab.train.run.Run`) exposes ``model``, ``optimizer``, ``scaler``, ``rows`` (the history so
far, the step's row last) and ``plan`` (:class:`fp16lab.train.run.Plan`, fit's checked settings).
Each callback owns its work: :class:`Schedule` registers its scheduler in the plan and steps it,
:class:`Checkpoint` resumes in ``before_fit`` and saves after its steps; fit itself only fires events.
"""

from __future__ import annotations

import itertools
import math
import numbers
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from fp16lab.checks import boolean, function, positive_float, positive_int, say, sequence_of
from fp16lab.precision import Precision
from fp16lab.train.checkpoint import (
    HistoryFile,
    apply_checkpoint,
    check_checkpoint_fits,
    check_writable_folder,
    read_checkpoint,
    save_checkpoint,
)
from fp16lab.train.run import HISTORY_COLUMNS, Plan, Run
from fp16lab.train.step import Batch, StepResult, check_loader, check_scheduler, evaluate_parsed, split_batch

__all__ = ["Callback", "Evaluate", "Checkpoint", "Schedule", "DivergenceGuard", "ProgressBar",
           "NONFINITE_LOSS_STREAK", "TrainingDiverged", "HISTORY_COLUMNS",
           "fit_callbacks"]

# fp16 with DivergenceGuard(min_scale=None): this many non-finite losses in a row stop the run
NONFINITE_LOSS_STREAK = 3


class TrainingDiverged(RuntimeError):
    """Raised by :func:`fit`'s :class:`DivergenceGuard` when a run cannot go on. ``reason`` says why:

    - ``"data"``: the loss is not finite and the step's inputs or targets hold NaN/inf;
    - ``"loss"``: the loss is not finite (fp32/tf32/bf16: at once; fp16 with
      ``min_scale=None``: on ``NONFINITE_LOSS_STREAK`` steps in a row);
    - ``"grad_norm"``: fp32/tf32/bf16 gradients that are not finite (no scaler skips them);
    - ``"scale"``: the fp16 loss scale fell below ``min_scale`` (a heuristic).

    Attributes: ``step``, ``value``, ``reason`` and ``history`` (the :class:`History` up to
    and including the failing step).
    """

    def __init__(self, message: str, *, step: int, value: float, reason: str, history: Any) -> None:
        super().__init__(message)
        self.step = step
        self.value = value
        self.reason = reason
        self.history = history


class Callback:
    """A hook into :func:`fit`; override only what you need (every method does nothing by default)."""

    order = 50

    def check(self, plan: Plan) -> None:
        """Refuse bad settings before fit changes anything."""

    def before_fit(self, run: Run) -> None:
        """Called once before the first step (a :class:`Checkpoint` resumes here, at its ``order`` 20)."""

    def after_step(self, run: Run, step: int, result: StepResult) -> None:
        """Called after each optimizer step; ``run.rows[-1]`` is that step's row."""

    def after_fit(self, run: Run) -> None:
        """Called once at the end, also when the run stops with an error."""

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if not k.startswith("_"))
        return f"{type(self).__name__}({fields})"


def _due(step: int, last: int, every: int | None) -> bool:
    return step == last or (every is not None and step % every == 0)


def _every(value: object) -> int | None:
    return positive_int("every", value) if value is not None else None


# ------------------------------------------------------------------------ evaluation


def _metrics(result: object) -> dict[str, float]:
    """fn's result as plain floats (numpy and 0-d tensor numbers accepted)."""
    if not isinstance(result, Mapping):
        raise ValueError(f"Evaluate(fn=...) must return a dict of name -> number, got {type(result).__name__}")
    out: dict[str, float] = {}
    for k, v in result.items():
        if not isinstance(k, str) or k in HISTORY_COLUMNS:
            raise ValueError(f"Evaluate(fn=...) returned the key {k!r}: keys must be str and not one of the History "
                             f"columns {', '.join(HISTORY_COLUMNS)} (e.g. 'val_{k}')")
        if isinstance(v, torch.Tensor) and v.numel() == 1:
            v = v.item()
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise ValueError(f"Evaluate(fn=...) returned {k!r}: {v!r:.60} ({type(v).__name__}); values must be "
                             "numbers (python, numpy or a one-element tensor)")
        out[k] = float(v)
    return out


class Evaluate(Callback):
    """Evaluate every ``every`` steps and at the end: ``loader`` adds val_loss/val_accuracy, ``fn(model)`` its dict."""

    order = 10

    def __init__(self, loader: Iterable[Batch] | None = None,
                 fn: Callable[[nn.Module], Mapping[str, Any]] | None = None, every: int | None = None) -> None:
        if loader is not None:
            check_loader("loader", loader)
        self.loader = loader
        self.fn = function("fn", fn, "a function model -> dict", n_args=1, optional=True)
        self.every = _every(every)
        if loader is None and fn is None:
            raise ValueError("Evaluate needs something to evaluate: give loader= and/or fn=")

    def after_step(self, run: Run, step: int, result: StepResult) -> None:
        if not _due(step, run.plan.steps, self.every):
            return
        plan = run.plan
        if self.loader is not None:
            run.rows[-1].update(evaluate_parsed(run.model, self.loader, plan.precision, plan.device, plan.loss_fn, False,
                                                name="Evaluate's loader"))
        if self.fn is not None:
            run.rows[-1].update(_metrics(self.fn(run.model)))


# ------------------------------------------------------------------------ the scheduler


class Schedule(Callback):
    """Step ``scheduler`` once per optimizer step that was not skipped (its state goes into checkpoints)."""

    order = 0

    def __init__(self, scheduler: Any) -> None:
        check_scheduler(scheduler, None)  # its type here; the optimizer it drives when fit starts
        self.scheduler = scheduler

    def check(self, plan: Plan) -> None:
        check_scheduler(self.scheduler, plan.optimizer)
        plan.scheduler = self.scheduler  # checkpoints save and restore it

    def after_step(self, run: Run, step: int, result: StepResult) -> None:
        if not result.skipped:  # a skipped step changed no weight: the schedule waits for the next one
            self.scheduler.step()


# ------------------------------------------------------------------------ checkpoints


@dataclass(frozen=True)
class _Resume:
    payload: dict[str, Any]
    rows: list[dict[str, Any]]
    mark: Mapping[str, Any]


def _run_settings(plan: Plan) -> dict[str, Any]:
    """What a resumed run must share with the run that wrote the checkpoint."""
    return {"precision": plan.precision.value, "accum_steps": plan.accum_steps, **plan.loader_facts}


def _read_resume(plan: Plan, path: Path, model: nn.Module) -> _Resume:
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



class Checkpoint(Callback):
    """Save model, optimizer, scheduler, **scaler**, step and data position to ``path`` every ``every`` steps and at the end.

    The history goes once into ``<path>.history.jsonl`` beside it (appended at each save).
    ``resume=False`` starts at step 0 and overwrites both at its first save; ``resume=True``
    continues the checkpoint exactly (same precision, accum_steps, batch size and batches per
    epoch, optimizer and scheduler classes, model shapes); a missing file is a
    ``FileNotFoundError`` (pass ``resume=Path(path).exists()`` to resume only when there is one).
    """

    order = 20

    def __init__(self, path: str | os.PathLike[str], every: int | None = None, resume: bool = False) -> None:
        self.path: Path = check_writable_folder(path, name="path")
        if HistoryFile(self.path).path.is_dir():
            raise ValueError(f"{str(HistoryFile(self.path).path)!r} (where fit keeps the history of path="
                             f"{str(self.path)!r}) is a folder; move it or choose another checkpoint name")
        self.every = _every(every)
        self.resume = boolean("resume", resume)
        self._history: HistoryFile | None = None  # the sidecar, per fit run

    def before_fit(self, run: Run) -> None:
        """Resume (``resume=True``): the checkpoint is read and checked completely first, so a refused resume
        changes nothing; then model, optimizer, scheduler, scaler, history and data position continue it."""
        self._history = None
        if not self.resume:
            return
        resumed = _read_resume(run.plan, self.path, run.model)
        apply_checkpoint(resumed.payload, run.model, run.optimizer, scaler=run.scaler, scheduler=run.plan.scheduler,
                         restore_rng=False)  # the stream restores the RNG at the data position below
        run.start_step = int(resumed.payload["step"])
        run.rows = resumed.rows
        run.stream.seek(resumed.payload["extra"]["fit"]["stream"])
        self._history = HistoryFile(self.path)
        self._history.continue_from(resumed.mark)

    def after_step(self, run: Run, step: int, result: StepResult) -> None:
        """Save when due: the history rows since the last save to the sidecar, then the checkpoint (atomically)."""
        if not _due(step, run.plan.steps, self.every):
            return
        if self._history is None:
            self._history = HistoryFile(self.path)
        mark = self._history.save(run.rows)
        extra = {"fit": {"settings": _run_settings(run.plan), "stream": run.stream.position(),
                         "history": mark.as_dict()}}
        save_checkpoint(self.path, run.model, run.optimizer, scaler=run.scaler, scheduler=run.plan.scheduler,
                        step=step, extra=extra)


# ------------------------------------------------------------------------ the divergence guard


def _advice(precision: Precision) -> str:
    tips = [say("a lower learning rate"), say("gradient clipping (clip_grad_norm=1.0)"),
            say("keeping the unstable op in an FP32 island (fp16lab.precision.autocast('fp32', device))")]
    if precision is Precision.FP16:
        tips.append(say("bf16 instead of fp16 (fp32's range, no scaler needed)"))
    elif precision is Precision.BF16:
        tips.append(say("fp32 for the layers that overflow"))
    return say("Try: {tips}.", tips=say("; ").join(tips))


def _nonfinite_inputs(micro: Sequence[Batch]) -> str | None:
    """Which micro-batch holds NaN/inf inputs or targets (read only after a non-finite loss)."""
    for i, batch in enumerate(micro, 1):
        for what, t in zip(("inputs", "targets"), split_batch(batch), strict=True):
            if t.is_floating_point() and not bool(torch.isfinite(t).all()):
                n_nan, n_inf = int(torch.isnan(t).sum()), int(torch.isinf(t).sum())
                return say("micro-batch {i} of {n}: its {what} hold {n_nan} NaN and {n_inf} inf values", i=i,
                           n=len(micro), what=say("inputs") if what == "inputs" else say("targets"), n_nan=n_nan, n_inf=n_inf)
    return None


class DivergenceGuard(Callback):
    """Stop a run that cannot go on with :class:`TrainingDiverged` (fit always runs one; pass your own to tune it).

    A non-finite loss whose inputs hold NaN/inf stops the run at once ("check your data"); in
    fp32/tf32/bf16 so does any non-finite loss or gradient norm. In fp16 a non-finite gradient
    only skips the step; ``min_scale=1.0`` stops the run when the scale falls below it, a
    heuristic (GradScaler does not promise a scale >= 1, but a scale that low means nearly every
    step overflows). ``min_scale=None`` turns that off; then a loss that is non-finite on
    ``NONFINITE_LOSS_STREAK`` steps in a row stops the run.
    """

    order = 0

    def __init__(self, min_scale: float | None = 1.0) -> None:
        self.min_scale = positive_float("min_scale", min_scale) if min_scale is not None else None

    def after_step(self, run: Run, step: int, result: StepResult) -> None:
        why = self.diagnose(run.plan.precision, step, result, run.micro, run.rows)
        if why is not None:
            reason, value, message = why
            raise TrainingDiverged(message, step=step, value=value, reason=reason, history=run.history())

    def diagnose(self, p: Precision, step: int, r: StepResult, micro: Sequence[Batch],
                 rows: Sequence[Mapping[str, Any]]) -> tuple[str, float, str] | None:
        """(reason, value, message) when the run cannot go on after this step; None while it is fine."""
        if not math.isfinite(r.loss):
            bad_data = _nonfinite_inputs(micro)
            if bad_data is not None:
                return "data", r.loss, say("step {step}: the loss is {loss} because the data is not finite ({bad}). "
                                           "Check your data: look for NaN/inf in the dataset and in the preprocessing "
                                           "(a division by zero, log of 0, a missing value).", step=step, loss=r.loss,
                                           bad=bad_data)
            if not p.uses_scaler:
                return "loss", r.loss, say("step {step}: the loss is {loss} (not finite) training in {precision}. ",
                                           step=step, loss=r.loss, precision=p.value) + _advice(p)
            streak = len(list(itertools.takewhile(lambda row: not math.isfinite(row["loss"]), reversed(rows))))
            if self.min_scale is None and streak >= NONFINITE_LOSS_STREAK:
                return "loss", r.loss, say("step {step}: the loss was not finite on {streak} steps in a row in fp16: "
                                           "the forward pass overflows, which no loss scale can fix (min_scale=None "
                                           "turned the scale check off). ", step=step, streak=streak) + _advice(p)
        if not p.uses_scaler and r.grad_norm is not None and not math.isfinite(r.grad_norm):
            return "grad_norm", r.grad_norm, say("step {step}: the gradient norm is {norm} in {precision} (no "
                                                 "GradScaler skips such a step: the weights are no longer finite). ",
                                                 step=step, norm=r.grad_norm, precision=p.value) + _advice(p)
        if p.uses_scaler and self.min_scale is not None and r.scale < self.min_scale:
            recent = sum(bool(x["skipped"]) for x in rows[-50:])
            forward = "" if math.isfinite(r.loss) else say(": the loss itself is not finite, the forward pass overflows")
            return "scale", r.scale, say(
                "step {step}: the fp16 loss scale fell to {scale:g}, below min_scale={min_scale:g} ({recent} of the "
                "last {n} steps were skipped for inf/NaN gradients; last loss {loss:g}{forward}). A scale below "
                "min_scale is a heuristic sign of divergence (GradScaler itself does not promise a scale >= 1); "
                "DivergenceGuard(min_scale=None) turns it off. ", step=step, scale=r.scale, min_scale=self.min_scale,
                recent=recent, n=min(len(rows), 50), loss=r.loss, forward=forward) + _advice(p)
        return None


# ------------------------------------------------------------------------ progress


class ProgressBar(Callback):
    """A tqdm bar with the loss and the scale (fit's default callback; ``callbacks=[]`` runs quietly)."""

    order = 90

    def __init__(self, desc: str | None = None) -> None:
        if desc is not None and not isinstance(desc, str):
            raise TypeError(f"desc must be a str or None, got {desc!r}")
        self.desc = desc
        self._bar: Any = None

    def before_fit(self, run: Run) -> None:
        from tqdm.auto import tqdm

        self._bar = tqdm(total=run.plan.steps, initial=run.start_step, leave=False,
                         desc=self.desc or f"fit {run.plan.precision.value}")

    def after_step(self, run: Run, step: int, result: StepResult) -> None:
        self._bar.update(1)
        if step % 10 == 0 or step == run.plan.steps:
            self._bar.set_postfix(loss=f"{result.loss:.4g}", scale=f"{result.scale:g}", refresh=False)

    def after_fit(self, run: Run) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None


def fit_callbacks(callbacks: object) -> list[Callback]:
    """The callbacks :func:`~fp16lab.train.fit` runs, sorted by ``order``: None means ``[ProgressBar()]``, a
    list exactly those, and a :class:`DivergenceGuard` unless the list has one (fit's one default)."""
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
        given.append(DivergenceGuard())  # the guard always runs
    return sorted(given, key=lambda cb: cb.order)
