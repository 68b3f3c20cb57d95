"""The largest batch that fits: grow, bisect, and recover cleanly from every out-of-memory error."""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import torch
from torch import nn

from fp16lab.checks import positive_int
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
from fp16lab.precision import Precision, precision_context
from fp16lab.train import make_scaler, train_step

__all__ = ["BatchSearch", "max_batch_size"]


@dataclass
class BatchSearch:
    """Result of :func:`max_batch_size`: the largest batch that ran, and every trial."""

    max_batch: int
    trials: pd.DataFrame
    limit: int  # the largest size the search could try: the ``limit`` asked for, rounded down to ``multiple``
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


@dataclass
class _Trials:
    """Runs one training step per batch size and records it; an OOM is a failed trial, not an error."""

    model: nn.Module
    make_batch: Callable[[int], Any]
    precision: Precision
    device: torch.device
    loss_fn: LossFn
    optimizer: OptimizerFactory
    rows: list[dict[str, Any]] = field(default_factory=list)

    def _run(self, n: int) -> float | None:
        # Everything a trial allocates lives in this frame, so an exception frees it all.
        dev = self.device
        if dev.type == "cuda":
            free_memory(dev)
            torch.cuda.reset_peak_memory_stats(dev)
        x, y = split_batch(self.make_batch(n), f"make_batch({n})")
        check_batch(x, f"make_batch({n}) inputs")
        if batch_size(x) != n:
            raise ValueError(f"make_batch({n}) returned inputs of {batch_size(x)} samples; it must return n={n} "
                             "samples, or the search measures the wrong batch size")
        x, y = to_device(x, dev), to_device(y, dev)
        opt = self.optimizer(self.model.parameters())
        train_step(self.model, opt, make_scaler(self.precision, dev), [(x, y)], precision=self.precision,
                   device=dev, loss_fn=self.loss_fn, track_grad_norm=False)
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)
            return torch.cuda.max_memory_allocated(dev) / MIB
        return None

    def attempt(self, n: int) -> bool:
        """True when a step at batch ``n`` ran; out-of-memory errors (CUDA, CPU, MPS) are caught."""
        err: str | None = None
        peak: float | None = None
        try:
            peak = self._run(n)
        except Exception as e:  # noqa: BLE001 - only out-of-memory is caught; the rest propagates
            if not is_oom(e):
                raise
            err = oom_message(e)  # keep only the text: the traceback holds the trial's tensors
        for prm in self.model.parameters():
            prm.grad = None
        free_memory(self.device)
        self.rows.append({"batch_size": n, "ok": err is None, "peak_mib": peak, "error": err or ""})
        return err is None


def _search(trials: _Trials, start: int, top: int, multiple: int) -> tuple[int, int | None]:
    """Double from ``start`` until a step fails or ``top`` ran, then bisect: (largest good, first bad)."""
    good, bad, n = 0, None, start
    while True:
        if not trials.attempt(n):
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
        if trials.attempt(mid):
            good = mid
        else:
            bad = mid
    return good, bad


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
    and an out-of-memory error (CUDA's, the CPU's ``MemoryError``, Apple MPS's) is caught:
    references dropped, memory freed; the model's weights, buffers and mode are restored
    at the end, so the process stays usable. Works on any device; on the CPU nothing runs
    out of memory before ``limit`` in practice.
    """
    model = check_module(model)
    make_batch = check_make_batch(make_batch)
    check_trainable(model)
    start, limit = positive_int("start", start), positive_int("limit", limit)
    multiple = positive_int("multiple", multiple)
    if start > limit:
        raise ValueError(f"start ({start}) must be <= limit ({limit})")
    if start % multiple:
        raise ValueError(f"start ({start}) must be a multiple of multiple ({multiple})")
    dev = resolve_model_device(model, device)
    trials = _Trials(
        model, make_batch, check_precision(precision, dev), dev,
        check_loss_fn(loss_fn), check_optimizer_factory(optimizer),
    )
    with restored(model, True), precision_context(trials.precision):
        model.train()
        top = limit // multiple * multiple  # the largest size the search may try; what the result reports
        good, bad = _search(trials, start, top, multiple)
    table = pd.DataFrame(trials.rows, columns=["batch_size", "ok", "peak_mib", "error"])
    return BatchSearch(good, table, top, trials.precision.value, str(dev), hit_limit=bad is None)
