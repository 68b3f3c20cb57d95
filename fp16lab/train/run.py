"""One :func:`~fp16lab.train.fit` run: its checked :class:`Plan`, the :class:`Run` that callbacks see, the
data stream that replays exactly on a resume, and the :class:`History` it returns.

The loop fires events; the callbacks (:mod:`fp16lab.train.callbacks`) own what happens at them: a
``Schedule`` registers its scheduler in the plan and steps it, a ``Checkpoint`` saves and resumes (the
run exposes what it needs: ``rows``, ``start_step`` and the data stream's ``position()`` / ``seek()``).
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import torch
from torch import nn

from fp16lab.precision import Precision, precision_context
from fp16lab.train.checkpoint import rng_state, set_rng_state
from fp16lab.train.step import Batch, LossFn, StepResult, parsed_step, split_batch

__all__ = ["History", "Plan", "Run", "Stream", "HISTORY_COLUMNS"]

HISTORY_COLUMNS = ("step", "epoch", "loss", "accuracy", "scale", "skipped", "grad_norm", "lr", "samples",
                   "samples_per_s", "time_s")
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


class Stream:
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
            split_batch(batch, f"loader[{self.pos}]" + (f" of epoch {self.epoch}" if self.epoch else ""))  # as drawn
            self.pos += 1
            micro.append(batch)
        return micro, epoch


# ---------------------------------------------------------------- the plan and the resume


@dataclass
class Plan:
    """fit's arguments, parsed and checked; nothing has been changed yet (what a callback's ``check`` reads).

    ``scheduler`` is the LR scheduler a :class:`~fp16lab.train.callbacks.Schedule` registered in its
    ``check`` (it goes into checkpoints), None without one.
    """

    precision: Precision
    device: torch.device
    optimizer: torch.optim.Optimizer
    steps: int
    accum_steps: int
    loss_fn: LossFn
    clip: float | None
    callbacks: list[Any]
    scheduler: Any = None
    loader_facts: dict[str, int | None] = field(default_factory=dict)


# ---------------------------------------------------------------- the run


class Run:
    """One fit run: the objects, the plan, the rows so far and the timing (what callbacks see and call:
    ``model``, ``optimizer``, ``scaler``, ``plan``, ``rows``, ``micro``, ``start_step``, ``stream`` and
    ``history()``)."""

    def __init__(self, plan: Plan, model: nn.Module, loader: Iterable[Batch],
                 scaler: torch.amp.GradScaler) -> None:
        self.plan, self.model, self.optimizer, self.scaler = plan, model, plan.optimizer, scaler
        self.stream = Stream(loader, plan.device)
        self.params = [q for q in model.parameters() if q.requires_grad]
        self.rows: list[dict[str, Any]] = []
        self.micro: list[Batch] = []  # the last step's micro-batches
        self.start_step = 0
        self.t_prev = self.elapsed = 0.0  # set when the run starts
        self.attrs = dict(precision=plan.precision.value, device=str(plan.device), accum_steps=plan.accum_steps,
                          clip_grad_norm=plan.clip)

    def history(self) -> History:
        return History.from_rows(self.rows, **self.attrs)

    def one_step(self, step: int, taken: tuple[list[Batch], int] | None = None) -> StepResult:
        """Run one optimizer step and record its row (``taken``: its micro-batches and epoch, drawn already)."""
        plan = self.plan
        self.micro, epoch = taken if taken is not None else self.stream.take(plan.accum_steps)
        r = parsed_step(self.model, self.optimizer, self.scaler, self.micro, p=plan.precision, dev=plan.device,
                         params=self.params, loss_fn=plan.loss_fn, clip=plan.clip, channels_last=False,
                         track_grad_norm=True)
        now = time.perf_counter()
        dt, self.t_prev = now - self.t_prev, now
        self.elapsed += dt
        self.rows.append({
            "step": step, "epoch": epoch, "loss": r.loss, "accuracy": r.accuracy, "scale": r.scale,
            "skipped": r.skipped, "grad_norm": r.grad_norm if r.grad_norm is not None else math.nan, "lr": r.lr,
            "samples": r.samples, "samples_per_s": r.samples / dt if dt > 0 else math.nan, "time_s": self.elapsed,
        })
        return r

    def train(self) -> History:
        """Fire the callbacks' events around the steps (a Checkpoint resumes in its ``before_fit``)."""
        plan = self.plan
        try:
            for cb in plan.callbacks:
                cb.before_fit(self)
            self.t_prev = time.perf_counter()
            # the first step's batches are drawn (and checked) before the model or its gradients change
            first = self.stream.take(plan.accum_steps) if self.start_step < plan.steps else None
            self.model.train()
            self.optimizer.zero_grad(set_to_none=True)
            self.elapsed = float(self.rows[-1]["time_s"]) if self.rows else 0.0
            with precision_context(plan.precision):
                for step in range(self.start_step + 1, plan.steps + 1):
                    r = self.one_step(step, first)
                    first = None
                    for cb in plan.callbacks:
                        cb.after_step(self, step, r)
                    self.t_prev = time.perf_counter()  # callbacks' time (evaluation, saving) is not training time
        finally:
            for cb in plan.callbacks:
                cb.after_fit(self)
        return self.history()
