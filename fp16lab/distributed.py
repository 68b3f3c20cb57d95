"""Mixed precision across several processes: launch workers, and the lesson's DDP/FSDP experiments.

Spawned workers need importable code, so everything a rank runs lives here. Two layers:

* **Launching.** :class:`Workers` starts ``world_size`` processes with the ``spawn`` start
  method (Linux, macOS and Windows alike), joins them into one process group (gloo on CPUs,
  NCCL on CUDA GPUs, one GPU per rank) and keeps them alive, so one start-up serves many
  tasks. The parent hosts the rendezvous store on ``127.0.0.1`` on a port the operating
  system picks (no guessed port, no race). ``Workers.run(task, **kwargs)`` runs a module-level
  function ``task(ctx: RankContext, **kwargs)`` on every rank and returns the per-rank results.
  Every wait has a hard timeout: a rank that raises, dies or hangs ends the call with
  :class:`WorkerError` / :class:`WorkerTimeout` naming the rank (never a stuck kernel), and all
  workers are stopped. :func:`launch` is the one-shot form.
* **Experiments.** :func:`ddp_vs_single`, :func:`skip_agreement`, :func:`accumulation`,
  :func:`compress_hooks`, :func:`checkpoint_resume` and :func:`fsdp_policies` run one lesson
  measurement each on a :class:`Workers` and return a pandas table. The code each rank runs is
  in the private ``_task_*`` functions (``inspect.getsource`` shows it).

``python -m fp16lab.distributed bench --out results/`` runs the GPU measurements on all GPUs
of the machine and saves them with the world size and devices in their metadata.
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import importlib
import itertools
import math
import os
import pickle
import queue
import sys
import time
import traceback
import weakref
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from fp16lab.precision import Precision, autocast, parse_precision, precision_context

__all__ = [
    "BACKENDS",
    "PRELOAD",
    "FSDP2_MIN_TORCH",
    "HOOKS",
    "World",
    "RankContext",
    "WorkerError",
    "WorkerTimeout",
    "Workers",
    "check_world",
    "lesson_world",
    "launch",
    "whoami",
    "fail_on_rank",
    "hang_on_rank",
    "fsdp2_support",
    "rank_table",
    "ddp_vs_single",
    "skip_agreement",
    "accumulation",
    "compress_hooks",
    "checkpoint_resume",
    "fsdp_policies",
    "model_numel",
    "task_source",
    "world_metadata",
    "FSDP_POLICIES",
    "main",
]

BACKENDS = ("gloo", "nccl")
HOOKS = ("allreduce", "fp16", "bf16")
FSDP2_MIN_TORCH = (2, 6)  # `from torch.distributed.fsdp import fully_shard, MixedPrecisionPolicy`
_MASTER_ADDR = "127.0.0.1"
_CLASSES = 8


# ------------------------------------------------------------------------ validation


def _positive_int(name: str, value: object, *, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return int(value)


def _positive_float(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{name} must be a finite number of seconds > 0, got {value!r}")
    return float(value)


def _one_of(name: str, value: object, allowed: Sequence[str]) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, allowed))}, got {value!r}")
    return value


# ---------------------------------------------------------------------------- worlds


@dataclass(frozen=True)
class World:
    """A validated choice of backend and number of processes (see :func:`check_world`)."""

    backend: str
    world_size: int

    @property
    def device_type(self) -> str:
        """``"cuda"`` for NCCL (one GPU per rank), ``"cpu"`` for gloo."""
        return "cuda" if self.backend == "nccl" else "cpu"

    @property
    def multi_gpu(self) -> bool:
        """True when the ranks are two or more GPUs: GPU measurements are live."""
        return self.device_type == "cuda" and self.world_size >= 2

    def pick(self, quick: Any, full: Any) -> Any:
        """Sizes for this world: ``config.pick(quick, full)`` on GPU ranks, ``quick`` on CPU ranks
        (full sizes in half precision on CPU processes would take hours)."""
        from fp16lab.config import pick

        return pick(quick, full) if self.device_type == "cuda" else quick

    def __str__(self) -> str:
        what = ("GPU", "GPUs") if self.device_type == "cuda" else ("CPU process", "CPU processes")
        return f"{self.world_size} {what[self.world_size != 1]} on {self.backend}"


def _gloo_cap() -> int:
    return max(2, os.cpu_count() or 1)


def check_world(world_size: object = 2, backend: object = "gloo") -> World:
    """Validate a world before anything starts; ``ValueError`` says what is allowed.

    Defaults: 2 processes on gloo. gloo runs CPU processes (at most one per core here, and at
    least 2 are allowed); NCCL runs one process per visible CUDA GPU and needs that many GPUs
    (NCCL does not exist on Windows or without CUDA).
    """
    b = _one_of("backend", backend, BACKENDS)
    n = _positive_int("world_size", world_size)
    if not dist.is_available():
        raise ValueError("this torch build has no torch.distributed (dist.is_available() is False)")
    if b == "gloo":
        if not dist.is_gloo_available():
            raise ValueError("backend 'gloo' is not available in this torch build")
        cap = _gloo_cap()
        if n > cap:
            raise ValueError(
                f"world_size={n!r} is more gloo processes than this machine has CPU cores "
                f"(os.cpu_count()={os.cpu_count()}); allowed: 1..{cap}"
            )
    else:
        if not torch.cuda.is_available():
            raise ValueError("backend 'nccl' needs CUDA GPUs and none is visible; use backend='gloo'")
        if not dist.is_nccl_available():
            raise ValueError("backend 'nccl' is not available in this torch build (e.g. Windows); use 'gloo'")
        gpus = torch.cuda.device_count()
        if n > gpus:
            raise ValueError(
                f"world_size={n!r} needs {n} GPUs for backend 'nccl' (one per rank), this machine "
                f"has {gpus}; allowed: 1..{gpus}"
            )
    return World(b, n)


def lesson_world() -> World:
    """The world the lesson runs on: every GPU on NCCL in full mode with 2+ GPUs, else 2 CPU
    processes on gloo (quick mode, or a machine with fewer than two GPUs)."""
    from fp16lab.config import is_quick

    if not is_quick() and torch.cuda.is_available() and torch.cuda.device_count() >= 2 and dist.is_nccl_available():
        return check_world(torch.cuda.device_count(), "nccl")
    return check_world(2, "gloo")


# --------------------------------------------------------------------------- workers


@dataclass(frozen=True)
class RankContext:
    """What a task learns about the process it runs in."""

    rank: int
    world_size: int
    backend: str
    device: torch.device


class WorkerError(RuntimeError):
    """A rank raised, died or did not answer; ``rank`` (first failing), ``task``, ``details``."""

    def __init__(self, message: str, *, rank: int | None, task: str, details: str = "") -> None:
        super().__init__(message)
        self.rank = rank
        self.task = task
        self.details = details


class WorkerTimeout(WorkerError, TimeoutError):
    """Ranks did not finish within the timeout; ``ranks`` lists them, ``timeout`` the seconds."""

    def __init__(self, message: str, *, ranks: list[int], task: str, timeout: float) -> None:
        super().__init__(message, rank=ranks[0] if ranks else None, task=task)
        self.ranks = ranks
        self.timeout = timeout


def _store_kwargs() -> dict[str, Any]:
    # Windows builds of torch have no libuv; its TCPStore must use the older backend.
    return {"use_libuv": False} if sys.platform == "win32" else {}


# Imported by every rank while it starts: DDP's constructor imports torch._dynamo (seconds on a
# small CPU), and the tasks use fp16lab.train. Paying this during start-up keeps task timings honest
# and lets it overlap with the caller's own work (``Workers(wait=False)``).
PRELOAD = ("torch._dynamo", "fp16lab.train")


def _worker_main(
    rank: int, world_size: int, backend: str, port: int, threads: int, timeout: float, preload: tuple[str, ...],
    inbox: Any, outbox: Any,
) -> None:
    """The body of one spawned rank: join the group, then run tasks until told to stop."""
    import multiprocessing

    os.environ.update(
        MASTER_ADDR=_MASTER_ADDR, MASTER_PORT=str(port), RANK=str(rank), LOCAL_RANK=str(rank),
        WORLD_SIZE=str(world_size),
    )
    try:
        torch.set_num_threads(threads)
        if backend == "nccl":
            torch.cuda.set_device(rank)
            device = torch.device("cuda", rank)
        else:
            device = torch.device("cpu")
        store = dist.TCPStore(_MASTER_ADDR, port, is_master=False, timeout=timedelta(seconds=timeout),
                              **_store_kwargs())
        dist.init_process_group(backend, store=store, rank=rank, world_size=world_size,
                                timeout=timedelta(seconds=timeout))
        for module in preload:
            importlib.import_module(module)
    except BaseException as exc:  # report, then end this process
        outbox.put(("start", rank, "error", f"{type(exc).__name__}: {exc}", traceback.format_exc()))
        return
    outbox.put(("start", rank, "ok", pickle.dumps(os.getpid())))
    ctx = RankContext(rank, world_size, backend, device)
    parent = multiprocessing.parent_process()
    try:
        while True:
            try:
                msg = inbox.get(timeout=1.0)
            except queue.Empty:
                if parent is not None and not parent.is_alive():
                    return  # the launcher is gone: nobody will read our results
                continue
            if msg is None:
                return
            task_id, task, kwargs = msg
            try:
                payload = pickle.dumps(task(ctx, **kwargs))
            except BaseException as exc:
                outbox.put((task_id, rank, "error", f"{type(exc).__name__}: {exc}", traceback.format_exc()))
            else:
                outbox.put((task_id, rank, "ok", payload))
    finally:
        with contextlib.suppress(Exception):
            dist.destroy_process_group()


def _stop(procs: list[Any], queues: list[Any], store: Any, graceful: bool) -> None:
    """Stop worker processes (politely first when ``graceful``) and release the queues."""
    if graceful:
        for q in queues[:-1]:
            with contextlib.suppress(Exception):
                q.put(None)
        deadline = time.monotonic() + 10.0
        for p in procs:
            p.join(timeout=max(0.1, deadline - time.monotonic()))
    procs[:] = [p for p in procs if p.pid is not None]  # never started: nothing to stop
    for p in procs:
        if p.is_alive():
            p.terminate()
    for p in procs:
        p.join(timeout=5.0)
        if p.is_alive():
            p.kill()
            p.join(timeout=5.0)
    for q in queues:
        with contextlib.suppress(Exception):
            q.cancel_join_thread()
            q.close()
    procs.clear()
    del store


def _task_name(task: Callable[..., Any]) -> str:
    return f"{getattr(task, '__module__', '?')}.{getattr(task, '__qualname__', repr(task))}"


def _check_task(task: object) -> Callable[..., Any]:
    if not callable(task):
        raise ValueError(f"task must be a function task(ctx, **kwargs), got {task!r}")
    qual = getattr(task, "__qualname__", "")
    module = getattr(task, "__module__", None)
    if module in (None, "__main__") or "<lambda>" in qual or "<locals>" in qual:
        raise ValueError(
            f"task {qual or task!r} (module {module!r}) cannot be imported by a spawned worker: define "
            "it at the top level of an importable module (a .py file on sys.path), not in a notebook, "
            "a script's __main__, a lambda or another function"
        )
    try:
        pickle.dumps(task)
    except Exception as exc:
        raise ValueError(f"task {qual!r} cannot be pickled for the workers: {exc}") from None
    return task  # type: ignore[return-value]


class Workers:
    """``world_size`` spawned processes in one process group, reused for many tasks.

    Defaults: 2 processes on gloo, ``timeout=120`` s for each :meth:`run` (and for starting),
    ``threads`` = CPU cores // world_size (at least 1) torch threads per rank, ``preload`` =
    :data:`PRELOAD` (modules every rank imports while it starts), ``wait=True``
    (return once every rank has joined; ``wait=False`` returns at once and the first :meth:`run`
    or :meth:`ready` waits, so the processes start while the caller does other work). Use as a
    context manager, or call :meth:`close`. After a task fails or times out, all workers are
    stopped and this object refuses further tasks (start a new one).
    """

    def __init__(
        self, world_size: int = 2, backend: str = "gloo", *, timeout: float = 120.0, threads: int | None = None,
        preload: Sequence[str] | None = None, wait: bool = True,
    ) -> None:
        self.world = check_world(world_size, backend)
        self.timeout = _positive_float("timeout", timeout)
        cores = os.cpu_count() or 1
        self.threads = (
            max(1, cores // self.world.world_size) if threads is None else _positive_int("threads", threads)
        )
        self._procs: list[Any] = []
        self._queues: list[Any] = []
        self._closed = True
        self._ids = itertools.count()
        if not isinstance(wait, bool):
            raise ValueError(f"wait must be True or False, got {wait!r}")
        if preload is None:
            preload = PRELOAD
        if isinstance(preload, str) or not all(isinstance(m, str) and m for m in preload):
            raise ValueError(f"preload must be a sequence of module names, got {preload!r}")
        self.preload = tuple(preload)
        self.pids: list[int] = []
        self.start_seconds = math.nan
        self._start()
        if wait:
            self.ready()

    # -- lifecycle
    def _start(self) -> None:
        import torch.multiprocessing as mp

        t0 = time.perf_counter()
        n = self.world.world_size
        # The parent hosts the rendezvous store; port 0 lets the OS pick a free port atomically.
        self._store = dist.TCPStore(_MASTER_ADDR, 0, n + 1, is_master=True, wait_for_workers=False,
                                    timeout=timedelta(seconds=self.timeout), **_store_kwargs())
        self.port = int(self._store.port)
        ctx = mp.get_context("spawn")
        inboxes = [ctx.Queue() for _ in range(n)]
        self._outbox = ctx.Queue()
        self._queues = [*inboxes, self._outbox]
        self._inboxes = inboxes
        self._procs = [
            ctx.Process(
                target=_worker_main,
                args=(r, n, self.world.backend, self.port, self.threads, self.timeout, self.preload, inboxes[r],
                      self._outbox),
                name=f"fp16lab-rank{r}",
                daemon=True,
            )
            for r in range(n)
        ]
        self._finalizer = weakref.finalize(self, _stop, self._procs, self._queues, self._store, False)
        self._closed = False
        for p in self._procs:
            p.start()
        self._started = time.monotonic()
        self._t0 = t0

    def ready(self) -> Workers:
        """Wait until every rank has started and joined the group (within the timeout); return self."""
        if self.pids:
            return self
        if self._closed:
            raise RuntimeError("these Workers are stopped; start new ones")
        pids = self._collect("start", "start-up (spawn, import torch, join the process group)", self.timeout,
                             deadline=self._started + self.timeout)
        self.pids = [int(p) for p in pids]
        self.start_seconds = time.perf_counter() - self._t0
        return self

    def close(self) -> None:
        """Stop the workers (they finish the current task first, then exit); idempotent."""
        if not self._closed:
            self._closed = True
            self._finalizer.detach()
            _stop(self._procs, self._queues, self._store, graceful=True)

    def _abort(self) -> None:
        self._closed = True
        self._finalizer.detach()
        _stop(self._procs, self._queues, self._store, graceful=False)

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def alive(self) -> bool:
        """True while the workers accept tasks."""
        return not self._closed

    def __repr__(self) -> str:
        state = ("running" if self.pids else "starting") if self.alive else "stopped"
        return f"Workers({self.world}, port {self.port}, {state})"

    # -- tasks
    def run(self, task: Callable[..., Any], /, *, timeout: float | None = None, **kwargs: Any) -> list[Any]:
        """Run ``task(ctx, **kwargs)`` on every rank; return the results, index = rank.

        ``timeout`` (default: the one given at construction) bounds the whole call. Raises
        :class:`WorkerError` when a rank raises or exits, :class:`WorkerTimeout` when ranks do not
        answer in time; either way all workers are stopped first.
        """
        if self._closed:
            raise RuntimeError(
                "these Workers are stopped (closed, or a previous task failed or timed out); start new ones"
            )
        fn = _check_task(task)
        limit = self.timeout if timeout is None else _positive_float("timeout", timeout)
        try:
            pickle.dumps(kwargs)
        except Exception as exc:
            raise ValueError(f"the arguments of task {fn.__qualname__!r} cannot be pickled: {exc}") from None
        self.ready()
        task_id = next(self._ids)
        for q in self._inboxes:
            q.put((task_id, fn, kwargs))
        return self._collect(task_id, f"task {_task_name(fn)!r}", limit)

    def _collect(self, task_id: object, what: str, limit: float, deadline: float | None = None) -> list[Any]:
        n = self.world.world_size
        results: dict[int, Any] = {}
        deadline = time.monotonic() + limit if deadline is None else deadline
        while len(results) < n:
            remaining = deadline - time.monotonic()
            try:
                msg = self._outbox.get(timeout=min(0.25, remaining)) if remaining > 0 else self._outbox.get_nowait()
            except queue.Empty:
                msg = None
            if msg is None and remaining <= 0:
                pending = sorted(set(range(n)) - set(results))
                self._abort()
                raise WorkerTimeout(
                    f"rank{'s' if len(pending) > 1 else ''} {', '.join(map(str, pending))} did not finish {what} "
                    f"within the timeout of {limit:g} s ({len(results)} of {n} ranks answered); all workers "
                    "were stopped. A rank that hangs, or waits in a collective for a rank that never joins it, "
                    "looks like this. Start new Workers to continue.",
                    ranks=pending, task=what, timeout=limit,
                )
            if msg is None:
                for r, p in enumerate(self._procs):
                    if r not in results and not p.is_alive():
                        code = p.exitcode
                        self._abort()
                        raise WorkerError(
                            f"rank {r} exited (exit code {code}) during {what} without a result; all workers "
                            "were stopped. Its error is on the launcher's stderr (the terminal running Jupyter "
                            "or the script; a script must start workers under `if __name__ == '__main__':`). "
                            "Start new Workers to continue.",
                            rank=r, task=what,
                        )
                continue
            got_id, rank, status, *rest = msg
            if got_id != task_id:
                continue  # a late answer to an earlier call
            if status == "error":
                dead = [(r, p.exitcode) for r, p in enumerate(self._procs) if r != rank and not p.is_alive()]
                self._abort()
                if dead:  # a rank died, and this one failed because its peer vanished: name the dead one
                    r, code = dead[0]
                    raise WorkerError(
                        f"rank {r} exited (exit code {code}) during {what}; rank {rank} then failed: {rest[0]}; "
                        "all workers were stopped. Start new Workers to continue.",
                        rank=r, task=what, details=rest[1],
                    )
                raise WorkerError(
                    f"rank {rank} failed in {what}: {rest[0]}; all workers were stopped.\n"
                    f"--- traceback of rank {rank} ---\n{rest[1]}",
                    rank=rank, task=what, details=rest[1],
                )
            results[rank] = pickle.loads(rest[0])
        return [results[r] for r in range(n)]


def launch(
    task: Callable[..., Any], /, world_size: int = 2, backend: str = "gloo", *, timeout: float = 120.0,
    preload: Sequence[str] | None = None, **kwargs: Any,
) -> list[Any]:
    """Start a world, run ``task(ctx, **kwargs)`` on every rank once, stop it; results by rank.

    Defaults: 2 processes on gloo, 120 s for start-up and again for the task, ``preload`` as in
    :class:`Workers`. Everything is validated before a process starts.
    """
    _check_task(task)
    try:
        pickle.dumps(kwargs)
    except Exception as exc:
        raise ValueError(f"the arguments of task {getattr(task, '__qualname__', task)!r} cannot be pickled: {exc}") from None
    with Workers(world_size, backend, timeout=timeout, preload=preload) as workers:
        return workers.run(task, **kwargs)


# ----------------------------------------------------------------- demo tasks


def whoami(ctx: RankContext) -> dict[str, Any]:
    """Each rank's identity, and one all-reduce that proves the ranks talk to each other."""
    t = torch.tensor([float(ctx.rank)], device=ctx.device)
    dist.all_reduce(t)  # sum of the ranks: 0 + 1 + ... + (n-1)
    return {
        "rank": ctx.rank,
        "world_size": dist.get_world_size(),
        "backend": str(dist.get_backend()),
        "device": str(ctx.device) + (f" ({torch.cuda.get_device_name(ctx.device)})" if ctx.device.type == "cuda" else ""),
        "pid": os.getpid(),
        "sum_of_ranks": float(t.item()),
        "torch": torch.__version__,
    }


def fail_on_rank(ctx: RankContext, *, rank: int = 1) -> int:
    """A broken task: ``rank`` raises while the others wait for it in a collective."""
    if ctx.rank == rank:
        raise ValueError(f"rank {rank} was told to fail")
    dist.barrier()
    return ctx.rank


def hang_on_rank(ctx: RankContext, *, rank: int = 1, seconds: float = 3600.0) -> int:
    """A hung task: ``rank`` sleeps for ``seconds`` instead of joining the others' barrier."""
    if ctx.rank == rank:
        time.sleep(seconds)
    dist.barrier()
    return ctx.rank


def rank_table(workers: Workers) -> Any:
    """One row per rank (:func:`whoami`): rank, world size, backend, device, pid, sum of ranks."""
    import pandas as pd

    return pd.DataFrame(workers.run(whoami))


# ------------------------------------------------------------- model and data


def _mlp(width: int, depth: int) -> nn.Sequential:
    """``depth`` Linear+GELU blocks of ``width`` and a classifier head."""
    layers: list[nn.Module] = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.GELU()]
    layers.append(nn.Linear(width, _CLASSES))
    return nn.Sequential(*layers)


def model_numel(width: int, depth: int) -> int:
    """Parameters of the lesson's MLP: ``depth * (width**2 + width) + width * 8 + 8``."""
    return sum(p.numel() for p in _mlp(width, depth).parameters())


def _batch(step: int, rows: int, width: int, seed: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """The global batch of ``step``: Gaussian inputs labelled by a fixed random linear teacher.

    Every rank generates the same global batch and takes its own slice, so a single process can
    train on exactly the combined batch for comparison.
    """
    teacher = torch.randn(width, _CLASSES, generator=torch.Generator().manual_seed(seed))
    x = torch.randn(rows, width, generator=torch.Generator().manual_seed(seed * 100_003 + step + 1))
    y = (x @ teacher).argmax(1)
    return x.to(device), y.to(device)


def _shard(x: torch.Tensor, ctx: RankContext, per_rank: int, part: int = 0, parts: int = 1) -> torch.Tensor:
    """Rank ``ctx.rank``'s rows of micro-batch ``part`` (of ``parts``) of a global batch."""
    start = (part * ctx.world_size + ctx.rank) * per_rank
    return x[start : start + per_rank]


def _micro(x: torch.Tensor, world_size: int, per_rank: int, part: int) -> torch.Tensor:
    """All ranks' rows of micro-batch ``part``: what a single process trains on at that step."""
    size = world_size * per_rank
    return x[part * size : (part + 1) * size]


def _optimizer(params: Any, lr: float) -> torch.optim.Optimizer:
    """SGD with momentum for the DDP comparisons: its update is linear in the gradient, so a
    rounding-level difference between two runs stays rounding-level. (Adam divides by sqrt(v): a
    rounding difference in a near-zero gradient can flip a full-size step.)"""
    return torch.optim.SGD(params, lr=lr, momentum=0.9)


def _adam(params: Any, lr: float) -> torch.optim.Optimizer:
    """Adam for the FSDP memory comparison (two FP32 moments per parameter)."""
    return torch.optim.Adam(params, lr=lr)


def _flat(model: nn.Module) -> torch.Tensor:
    return torch.cat([p.detach().float().reshape(-1) for p in model.parameters()])


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def _replica_spread(flat: torch.Tensor) -> float:
    """Largest difference of any parameter between ranks (0.0: every replica is identical)."""
    hi, lo = flat.clone(), flat.clone()
    dist.all_reduce(hi, op=dist.ReduceOp.MAX)
    dist.all_reduce(lo, op=dist.ReduceOp.MIN)
    return float((hi - lo).abs().max())


@torch.no_grad()
def _eval_loss(model: nn.Module, width: int, seed: int, device: torch.device) -> float:
    """FP32 loss on a fixed held-out batch (the same on every rank)."""
    x, y = _batch(10**6, 512, width, seed, device)
    return float(F.cross_entropy(model(x).float(), y))


def _ddp(model: nn.Module, ctx: RankContext) -> nn.Module:
    from torch.nn.parallel import DistributedDataParallel as DDP

    return DDP(model, device_ids=[ctx.device.index] if ctx.device.type == "cuda" else None)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@contextlib.contextmanager
def _tap_all_reduce() -> Iterator[list[tuple[int, str]]]:
    """Record (bytes, dtype) of every tensor handed to ``torch.distributed.all_reduce``.

    PyTorch's DDP communication hooks (``default_hooks``) call ``dist.all_reduce`` from Python,
    so this sees exactly what they put on the wire. (DDP without a hook all-reduces in C++;
    ``allreduce_hook`` is documented as equivalent, and is what the lesson registers instead.)
    """
    calls: list[tuple[int, str]] = []
    original = dist.all_reduce

    def tapped(tensor: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
        calls.append((tensor.numel() * tensor.element_size(), str(tensor.dtype).replace("torch.", "")))
        return original(tensor, *args, **kwargs)

    dist.all_reduce = tapped  # type: ignore[assignment]
    try:
        yield calls
    finally:
        dist.all_reduce = original  # type: ignore[assignment]


def _hook(name: str) -> Callable[..., Any]:
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    return {
        "allreduce": default_hooks.allreduce_hook,
        "fp16": default_hooks.fp16_compress_hook,
        "bf16": default_hooks.bf16_compress_hook,
    }[name]


# ----------------------------------------------------------------------- tasks


def _task_ddp_vs_single(
    ctx: RankContext, *, precisions: list[str], steps: int, batch: int, width: int, depth: int, lr: float,
    seed: int,
) -> dict[str, Any]:
    """DDP on ``world_size`` ranks x ``batch`` rows against one process on the combined batch."""
    from fp16lab.train import make_scaler, train_step

    rows, spread = [], {}
    for name in precisions:
        p = Precision(name)
        with precision_context(p):  # fp32 = true FP32 (TF32 off on GPUs)
            torch.manual_seed(seed)
            single = _mlp(width, depth).to(ctx.device)  # the one-process reference (rank 0 uses it)
            ddp = _ddp(copy.deepcopy(single), ctx)
            opt, scaler = _optimizer(ddp.parameters(), lr), make_scaler(p, ctx.device)
            opt1, scaler1 = _optimizer(single.parameters(), lr), make_scaler(p, ctx.device)
            for step in range(steps):
                x, y = _batch(step, ctx.world_size * batch, width, seed, ctx.device)
                r = train_step(ddp, opt, scaler, [(_shard(x, ctx, batch), _shard(y, ctx, batch))],
                               precision=p, device=ctx.device)
                row = {"precision": name, "step": step, "loss": r.loss, "scale": r.scale, "skipped": r.skipped,
                       "grad_norm": r.grad_norm}
                if ctx.rank == 0:
                    r1 = train_step(single, opt1, scaler1, [(x, y)], precision=p, device=ctx.device)
                    row.update(single_loss=r1.loss, single_scale=r1.scale, single_grad_norm=r1.grad_norm,
                               rel_param_diff=_rel(_flat(ddp.module), _flat(single)))
                rows.append(row)
            spread[name] = _replica_spread(_flat(ddp.module))
    return {"rank": ctx.rank, "rows": rows, "replica_spread": spread}


def _task_skip_agreement(ctx: RankContext, *, bad_rank: int, batch: int, width: int, depth: int, lr: float,
                         seed: int) -> dict[str, Any]:
    """One FP16-AMP step in which only ``bad_rank``'s loss is non-finite."""
    from fp16lab.train import make_scaler, train_step

    torch.manual_seed(seed)
    ddp = _ddp(_mlp(width, depth).to(ctx.device), ctx)
    opt, scaler = _optimizer(ddp.parameters(), lr), make_scaler("fp16", ctx.device)
    before = _flat(ddp.module)

    def loss_fn(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        loss = F.cross_entropy(out, y)
        return loss * float("inf") if ctx.rank == bad_rank else loss

    x, y = _batch(0, ctx.world_size * batch, width, seed, ctx.device)
    r = train_step(ddp, opt, scaler, [(_shard(x, ctx, batch), _shard(y, ctx, batch))], precision="fp16",
                   device=ctx.device, loss_fn=loss_fn)
    return {"rank": ctx.rank, "own_loss_finite": math.isfinite(r.loss), "scale_before": r.scale_before,
            "scale_after": r.scale, "skipped": r.skipped,
            "params_changed": bool((_flat(ddp.module) != before).any())}


def _task_accumulation(
    ctx: RankContext, *, micro_batches: int, steps: int, batch: int, width: int, depth: int, lr: float,
    seed: int, max_norm: float,
) -> dict[str, Any]:
    """FP16-AMP gradient accumulation under DDP, with and without ``no_sync``, and clipping."""
    from fp16lab.train import make_scaler

    k, n = micro_batches, ctx.world_size
    out: dict[str, Any] = {"rank": ctx.rank, "variants": []}
    for use_no_sync in (True, False):
        torch.manual_seed(seed)
        single = _mlp(width, depth).to(ctx.device)
        ddp = _ddp(copy.deepcopy(single), ctx)
        ddp.register_comm_hook(None, _hook("allreduce"))  # = DDP's built-in all-reduce, visible to the tap
        opt, scaler = _optimizer(ddp.parameters(), lr), make_scaler("fp16", ctx.device)
        opt1, scaler1 = _optimizer(single.parameters(), lr), make_scaler("fp16", ctx.device)
        local_norms, synced_norms, single_norms = [], [], []
        with _tap_all_reduce() as calls:
            for step in range(steps):
                x, y = _batch(step, k * n * batch, width, seed, ctx.device)
                for part in range(k):
                    last = part == k - 1
                    # no_sync(): backward only accumulates locally; the last micro-batch all-reduces.
                    sync = contextlib.nullcontext() if (last or not use_no_sync) else ddp.no_sync()
                    with sync:
                        with autocast("fp16", ctx.device):
                            loss = F.cross_entropy(ddp(_shard(x, ctx, batch, part, k)), _shard(y, ctx, batch, part, k))
                        scaler.scale(loss / k).backward()
                    if use_no_sync and part == k - 2:  # this rank's own gradient, before any all-reduce
                        grads = [q.grad.float() / scaler.get_scale() for q in ddp.parameters()]
                        local_norms.append(float(torch.linalg.vector_norm(torch.cat([g.reshape(-1) for g in grads]))))
                scaler.unscale_(opt)  # after the last (synchronised) backward, before clipping
                synced_norms.append(float(torch.nn.utils.clip_grad_norm_(ddp.parameters(), max_norm)))
                scaler.step(opt)
                scaler.update()
                opt.zero_grad(set_to_none=True)
                if ctx.rank == 0:  # the same optimizer step in one process on the combined batch
                    for part in range(k):
                        with autocast("fp16", ctx.device):
                            loss1 = F.cross_entropy(single(_micro(x, n, batch, part)), _micro(y, n, batch, part))
                        scaler1.scale(loss1 / k).backward()
                    scaler1.unscale_(opt1)
                    single_norms.append(float(torch.nn.utils.clip_grad_norm_(single.parameters(), max_norm)))
                    scaler1.step(opt1)
                    scaler1.update()
                    opt1.zero_grad(set_to_none=True)
        out["variants"].append({
            "no_sync": use_no_sync,
            "all_reduce_calls": len(calls),
            "all_reduce_bytes": sum(b for b, _ in calls),
            "local_norms": local_norms,
            "synced_norms": synced_norms,
            "single_norms": single_norms,
            "rel_param_diff": _rel(_flat(ddp.module), _flat(single)) if ctx.rank == 0 else math.nan,
            "replica_spread": _replica_spread(_flat(ddp.module)),
        })
    return out


def _task_compress_hooks(
    ctx: RankContext, *, hooks: list[str], precision: str, steps: int, warmup: int, batch: int, width: int,
    depth: int, lr: float, seed: int,
) -> dict[str, Any]:
    """Train the same model once per communication hook; tap what each hands to all_reduce."""
    from fp16lab.train import make_scaler, train_step

    p = Precision(precision)
    out: dict[str, Any] = {"rank": ctx.rank, "rows": []}
    baseline: torch.Tensor | None = None
    for name in hooks:
        with precision_context(p):
            torch.manual_seed(seed)
            ddp = _ddp(_mlp(width, depth).to(ctx.device), ctx)
            ddp.register_comm_hook(None, _hook(name))
            opt, scaler = _optimizer(ddp.parameters(), lr), make_scaler(p, ctx.device)
            times, skipped = [], 0
            if ctx.device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(ctx.device)
            with _tap_all_reduce() as calls:
                for step in range(warmup + steps):
                    if step == warmup:
                        calls.clear()  # count the measured steps only
                    x, y = _batch(step, ctx.world_size * batch, width, seed, ctx.device)
                    _sync(ctx.device)
                    t0 = time.perf_counter()
                    r = train_step(ddp, opt, scaler, [(_shard(x, ctx, batch), _shard(y, ctx, batch))],
                                   precision=p, device=ctx.device, track_grad_norm=False)
                    _sync(ctx.device)
                    if step >= warmup:
                        times.append(time.perf_counter() - t0)
                    skipped += int(r.skipped)
            peak = torch.cuda.max_memory_allocated(ctx.device) if ctx.device.type == "cuda" else None
            flat = _flat(ddp.module).cpu()
            if baseline is None:
                baseline = flat
            out["rows"].append({
                "hook": name,
                "wire_dtype": calls[0][1] if calls else None,
                "all_reduce_calls": len(calls),
                "bytes": sum(b for b, _ in calls),
                "final_eval_loss": _eval_loss(ddp.module, width, seed, ctx.device),
                "rel_param_diff_vs_first": _rel(flat, baseline),
                "skipped_steps": skipped,
                "step_ms_median": 1e3 * sorted(times)[len(times) // 2],
                "peak_memory_bytes": peak,
            })
            del ddp, opt  # the next hook's peak memory must not include this model
    return out


def _task_checkpoint(
    ctx: RankContext, *, path: str, steps: int, save_at: int, batch: int, width: int, depth: int, lr: float,
    seed: int, init_scale: float, growth_interval: int,
) -> dict[str, Any]:
    """Uninterrupted FP16-AMP DDP run vs save at ``save_at`` and resume, with and without the scaler."""
    from fp16lab.train import load_checkpoint, save_checkpoint, train_step

    def fresh() -> tuple[nn.Module, torch.optim.Optimizer, torch.amp.GradScaler]:
        torch.manual_seed(seed)
        model = _mlp(width, depth).to(ctx.device)
        return model, _optimizer(model.parameters(), lr), torch.amp.GradScaler(
            ctx.device.type, init_scale=init_scale, growth_interval=growth_interval)

    def train(ddp: nn.Module, opt: Any, scaler: Any, start: int, stop: int) -> list[dict[str, Any]]:
        hist = []
        for step in range(start, stop):
            x, y = _batch(step, ctx.world_size * batch, width, seed, ctx.device)
            r = train_step(ddp, opt, scaler, [(_shard(x, ctx, batch), _shard(y, ctx, batch))], precision="fp16",
                           device=ctx.device, track_grad_norm=False)
            hist.append({"step": step, "scale": r.scale, "skipped": r.skipped})
        return hist

    model, opt, scaler = fresh()
    ddp = _ddp(model, ctx)
    full = train(ddp, opt, scaler, 0, steps)
    reference = _flat(model)

    model, opt, scaler = fresh()
    first = train(_ddp(model, ctx), opt, scaler, 0, save_at)
    if ctx.rank == 0:  # one writer; every rank holds the same model, optimizer and scaler state
        save_checkpoint(path, model, opt, scaler=scaler, step=save_at)
    dist.barrier()  # nobody reads the file before it is complete
    rows = []
    for restore_scaler in (True, False):
        model, opt, scaler = fresh()
        # Each rank has its own RNG stream; this task's data depend on the step only.
        load_checkpoint(path, model, opt, scaler=scaler if restore_scaler else None, restore_rng=False)
        rest = train(_ddp(model, ctx), opt, scaler, save_at, steps)
        flat = _flat(model)
        rows.append({
            "resume": "with the scaler state" if restore_scaler else "scaler state not restored",
            "scale_at_resume": rest[0]["scale"] if rest else math.nan,
            "final_scale": rest[-1]["scale"] if rest else math.nan,
            "skipped_after_resume": sum(h["skipped"] for h in rest),
            "max_abs_param_diff": float((flat - reference).abs().max()),
            "bitwise_equal": bool(torch.equal(flat, reference)),
        })
    return {"rank": ctx.rank, "uninterrupted": full, "first_part": first, "resumed": rows,
            "replica_spread": _replica_spread(reference)}


def _fsdp2() -> tuple[Any, Any]:
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    return fully_shard, MixedPrecisionPolicy


def _local_bytes(tensors: Any) -> int:
    """Bytes of the tensors this rank holds (a DTensor counts its local shard only)."""
    total = 0
    for t in tensors:
        if t is None:
            continue
        local = t.to_local() if hasattr(t, "to_local") else t
        total += local.numel() * local.element_size()
    return total


def _optimizer_tensors(opt: torch.optim.Optimizer) -> list[torch.Tensor]:
    return [v for state in opt.state.values() for v in state.values()
            if isinstance(v, torch.Tensor) and v.numel() > 1]


def _task_fsdp(ctx: RankContext, *, policies: list[str], steps: int, batch: int, width: int, depth: int,
               lr: float, seed: int) -> dict[str, Any]:
    """FSDP2 with MixedPrecisionPolicy settings, DDP for comparison, one FP32 process as reference."""
    from torch.distributed.device_mesh import init_device_mesh

    fully_shard, MixedPrecisionPolicy = _fsdp2()
    dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16}
    mesh = init_device_mesh(ctx.device.type, (ctx.world_size,))  # explicit: CPU ranks keep CPU shards
    n = ctx.world_size
    with precision_context("fp32"):
        # The reference: one process, FP32, the combined batch; its first gradient and final weights.
        torch.manual_seed(seed)
        single = _mlp(width, depth).to(ctx.device)
        opt1 = _adam(single.parameters(), lr)
        for step in range(steps):
            x, y = _batch(step, n * batch, width, seed, ctx.device)
            F.cross_entropy(single(x), y).backward()
            if step == 0:
                ref_grad = torch.cat([q.grad.reshape(-1) for q in single.parameters()]).cpu()
            opt1.step()
            opt1.zero_grad(set_to_none=True)
        ref_final, ref_loss = _flat(single).cpu(), _eval_loss(single, width, seed, ctx.device)
        del single, opt1  # keep the GPU memory below for the measured setups only
        rows = []
        for spec in ["ddp", *policies]:
            torch.manual_seed(seed)
            model = _mlp(width, depth).to(ctx.device)
            if spec == "ddp":
                net = _ddp(model, ctx)
            else:
                param_dtype, reduce_dtype = (dtypes[s] for s in spec.split("/"))
                policy = MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=reduce_dtype)
                for layer in model:
                    if isinstance(layer, nn.Linear):
                        fully_shard(layer, mesh=mesh, mp_policy=policy)
                net = fully_shard(model, mesh=mesh, mp_policy=policy)
            opt = _adam(net.parameters(), lr)
            grad_bytes = 0
            for step in range(steps):
                if step == min(1, steps - 1) and ctx.device.type == "cuda":
                    torch.cuda.reset_peak_memory_stats(ctx.device)  # steady state: after step 0's extra gather
                x, y = _batch(step, n * batch, width, seed, ctx.device)
                loss = F.cross_entropy(net(_shard(x, ctx, batch)).float(), _shard(y, ctx, batch))
                loss.backward()
                if step == 0:  # full_tensor() is a collective: every rank calls it
                    first_grad = torch.cat([(q.grad.full_tensor() if hasattr(q.grad, "full_tensor") else q.grad)
                                            .float().reshape(-1).cpu() for q in net.parameters()])
                if step == steps - 1:
                    grad_bytes = _local_bytes(q.grad for q in net.parameters())
                opt.step()
                opt.zero_grad(set_to_none=True)
            peak = torch.cuda.max_memory_allocated(ctx.device) if ctx.device.type == "cuda" else None
            held = {"param_bytes": _local_bytes(net.parameters()), "grad_bytes": grad_bytes,
                    "optimizer_bytes": _local_bytes(_optimizer_tensors(opt))}
            final = torch.cat([(q.full_tensor() if hasattr(q, "full_tensor") else q).detach().float().reshape(-1).cpu()
                               for q in net.parameters()])
            del net, model, opt
            rows.append({
                "setup": spec, **held, "peak_memory_bytes": peak,
                "first_grad": first_grad if ctx.rank == 0 else None,
                "rel_grad_error": _rel(first_grad, ref_grad),
                "rel_param_diff": _rel(final, ref_final),
                "final_eval_loss": _eval_loss(_unflat(width, depth, final, ctx.device), width, seed, ctx.device),
            })
    return {"rank": ctx.rank, "rows": rows, "reference_eval_loss": ref_loss}


def _unflat(width: int, depth: int, flat: torch.Tensor, device: torch.device) -> nn.Module:
    """A plain copy of the lesson's MLP holding the weights ``flat`` (to evaluate a sharded model)."""
    model = _mlp(width, depth).to(device)
    torch.nn.utils.vector_to_parameters(flat.to(device), model.parameters())
    return model


# ------------------------------------------------------------- parent-side API


@dataclass(frozen=True)
class _Sizes:
    batch: int
    width: int
    depth: int
    lr: float
    seed: int


def _sizes(batch: object, width: object, depth: object, lr: object, seed: object) -> _Sizes:
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not math.isfinite(lr) or lr <= 0:
        raise ValueError(f"lr must be a finite number > 0, got {lr!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be an int >= 0, got {seed!r}")
    return _Sizes(_positive_int("batch", batch), _positive_int("width", width), _positive_int("depth", depth),
                  float(lr), seed)


def _check_workers(workers: object) -> Workers:
    if not isinstance(workers, Workers):
        raise ValueError(f"workers must be a running fp16lab.distributed.Workers, got {workers!r}")
    if not workers.alive:
        raise ValueError("these Workers are stopped; start new ones (Workers(world_size, backend))")
    return workers


def ddp_vs_single(
    workers: Workers, *, precisions: Sequence[str] = ("fp32", "fp16", "bf16"), steps: int = 12, batch: int = 16,
    width: int = 64, depth: int = 2, lr: float = 0.05, seed: int = 0,
) -> Any:
    """Train with DDP (``batch`` rows per rank) and in one process on the combined batch.

    One row per (precision, step): DDP's loss (the mean of the ranks' losses) and the single
    process's loss on all rows, both gradient norms, ``rel_param_diff`` = ||w_ddp - w_single|| /
    ||w_single|| after the step, whether rank 0 skipped it, and each GradScaler's scale. ``attrs["replica_spread"]``: the largest difference of any weight
    between ranks at the end, per precision. Defaults: fp32/fp16/bf16, 12 steps of SGD with momentum 0.9 (lr 0.05),
    16 rows per rank, a width-64, depth-2 MLP, seed 0.
    """
    import pandas as pd

    w = _check_workers(workers)
    names = [parse_precision(p).value for p in precisions]
    if not names:
        raise ValueError("precisions must name at least one of 'fp32', 'tf32', 'fp16', 'bf16', got none")
    s = _sizes(batch, width, depth, lr, seed)
    res = w.run(_task_ddp_vs_single, precisions=names, steps=_positive_int("steps", steps), batch=s.batch,
                width=s.width, depth=s.depth, lr=s.lr, seed=s.seed)
    first = pd.DataFrame(res[0]["rows"])
    # Every rank saw its own rows; the mean of the ranks' losses is the loss of the combined batch.
    frame = pd.DataFrame({
        "precision": first["precision"], "step": first["step"],
        "ddp_loss": sum(pd.Series([row["loss"] for row in r["rows"]]) for r in res) / len(res),
        "single_loss": first["single_loss"],
        "ddp_grad_norm": first["grad_norm"], "single_grad_norm": first["single_grad_norm"],
        "rel_param_diff": first["rel_param_diff"],
        "skipped": first["skipped"], "single_scale": first["single_scale"],
    })
    for r in res:
        frame[f"scale_rank{r['rank']}"] = [row["scale"] for row in r["rows"]]
    frame.attrs["replica_spread"] = res[0]["replica_spread"]
    frame.attrs["world"] = str(w.world)
    return frame


def skip_agreement(workers: Workers, *, bad_rank: int = 1, batch: int = 16, width: int = 64, depth: int = 2,
                   lr: float = 0.05, seed: int = 0) -> Any:
    """One FP16-AMP DDP step where only ``bad_rank``'s loss is inf: one row per rank (its own
    loss finite?, scale before/after, skipped, weights changed). Default: rank 1 goes bad."""
    import pandas as pd

    w = _check_workers(workers)
    bad = _positive_int("bad_rank", bad_rank, minimum=0)
    if bad >= w.world.world_size:
        raise ValueError(f"bad_rank must be a rank of this world (0..{w.world.world_size - 1}), got {bad_rank!r}")
    s = _sizes(batch, width, depth, lr, seed)
    return pd.DataFrame(w.run(_task_skip_agreement, bad_rank=bad, batch=s.batch, width=s.width, depth=s.depth,
                              lr=s.lr, seed=s.seed))


def accumulation(
    workers: Workers, *, micro_batches: int = 4, steps: int = 3, batch: int = 8, width: int = 64, depth: int = 2,
    lr: float = 0.05, seed: int = 0, max_norm: float = 1.0,
) -> Any:
    """Gradient accumulation (FP16-AMP, clipping at ``max_norm``) with and without ``no_sync``.

    One row per variant: all-reduce calls and bytes per optimizer step (tapped), the relative
    weight difference to one process on the combined batch, the clipped norms (after unscale_)
    on every rank and in the single process, and each rank's own gradient norm before the
    all-reduce. Defaults: 4 micro-batches of 8 rows per rank, 3 steps, max_norm 1.0.
    """
    import pandas as pd

    w = _check_workers(workers)
    k = _positive_int("micro_batches", micro_batches, minimum=2)
    st = _positive_int("steps", steps)
    s = _sizes(batch, width, depth, lr, seed)
    res = w.run(_task_accumulation, micro_batches=k, steps=st, batch=s.batch, width=s.width, depth=s.depth,
                lr=s.lr, seed=s.seed, max_norm=_positive_float("max_norm", max_norm))
    rows = []
    for i, v0 in enumerate(res[0]["variants"]):
        row = {
            "variant": "no_sync on the first micro-batches" if v0["no_sync"] else "all-reduce every micro-batch",
            "micro_batches": k,
            "all_reduce_calls_per_step": v0["all_reduce_calls"] / st,
            "bytes_per_step": v0["all_reduce_bytes"] / st,
            "rel_param_diff_vs_single": v0["rel_param_diff"],
            "replica_spread": v0["replica_spread"],
            "single_clip_norm": v0["single_norms"][-1],
        }
        for r in res:
            v = r["variants"][i]
            row[f"clip_norm_rank{r['rank']}"] = v["synced_norms"][-1]
            row[f"own_norm_rank{r['rank']}"] = v["local_norms"][-1] if v["local_norms"] else math.nan
        rows.append(row)
    frame = pd.DataFrame(rows)
    frame.attrs["world"] = str(w.world)
    return frame


def compress_hooks(
    workers: Workers, *, hooks: Sequence[str] = HOOKS, precision: str = "fp16", steps: int = 10, warmup: int = 2,
    batch: int = 16, width: int = 64, depth: int = 2, lr: float = 0.05, seed: int = 0,
) -> Any:
    """Train once per DDP communication hook and measure what goes on the wire.

    One row per hook (``allreduce`` = full precision, ``fp16``/``bf16`` = PyTorch's
    ``fp16_compress_hook``/``bf16_compress_hook``): wire dtype, all-reduce calls and bytes per
    step (tapped), the bytes expected from the parameter count, the ring all-reduce traffic each
    rank sends (2(n-1)/n of the payload), the final held-out loss, the weight difference to the
    first hook's run, skipped steps, the median step time (slowest rank; meaningful on GPUs only)
    and the peak GPU memory. Defaults: all three hooks, FP16-AMP, 2 warm-up + 10 measured steps.
    """
    import pandas as pd

    w = _check_workers(workers)
    names = [_one_of("hooks", h, HOOKS) for h in hooks]
    if not names:
        raise ValueError(f"hooks must name at least one of {', '.join(map(repr, HOOKS))}, got none")
    p = parse_precision(precision).value
    st = _positive_int("steps", steps)
    s = _sizes(batch, width, depth, lr, seed)
    res = w.run(_task_compress_hooks, hooks=names, precision=p, steps=st,
                warmup=_positive_int("warmup", warmup, minimum=0), batch=s.batch, width=s.width, depth=s.depth,
                lr=s.lr, seed=s.seed)
    n = w.world.world_size
    numel = model_numel(s.width, s.depth)
    rows = []
    for i, row in enumerate(res[0]["rows"]):
        itemsize = 4 if row["hook"] == "allreduce" else 2
        rows.append({
            "hook": row["hook"],
            "wire_dtype": row["wire_dtype"],
            "all_reduce_calls_per_step": row["all_reduce_calls"] / st,
            "bytes_per_step": row["bytes"] / st,
            "expected_bytes_per_step": numel * itemsize,
            "ring_bytes_sent_per_rank": 2 * (n - 1) / n * row["bytes"] / st,
            "final_eval_loss": row["final_eval_loss"],
            "rel_param_diff_vs_allreduce": row["rel_param_diff_vs_first"],
            "skipped_steps": row["skipped_steps"],
            "step_ms": max(r["rows"][i]["step_ms_median"] for r in res),
            "peak_memory_gib": (max(r["rows"][i]["peak_memory_bytes"] for r in res) / 2**30
                                if row["peak_memory_bytes"] is not None else None),
        })
    frame = pd.DataFrame(rows)
    frame.attrs.update(world=str(w.world), precision=p, params=numel)
    return frame


def checkpoint_resume(
    workers: Workers, folder: "str | os.PathLike[str]", *, steps: int = 12, save_at: int = 6, batch: int = 16,
    width: int = 64, depth: int = 2, lr: float = 0.05, seed: int = 0, init_scale: float = 2.0**16,
    growth_interval: int = 2,
) -> Any:
    """FP16-AMP DDP: an uninterrupted run against save-at-``save_at``-and-resume runs.

    Rank 0 writes the checkpoint (model, optimizer, GradScaler) into ``folder`` with
    :func:`fp16lab.train.save_checkpoint`; every rank loads it. One row per resume variant (with
    / without the scaler state): scale at resume, skipped steps after it, the largest weight
    difference to the uninterrupted run, and whether the weights are bitwise equal.
    ``attrs["uninterrupted"]`` holds the uninterrupted run's scale per step. Defaults: 12 steps,
    save after 6, ``growth_interval=2`` so that the scale moves within a short run (PyTorch's
    default is 2000 steps).
    """
    import pandas as pd

    w = _check_workers(workers)
    out = Path(folder)
    if not out.is_dir():
        raise ValueError(f"folder must be an existing directory, got {str(folder)!r}")
    st = _positive_int("steps", steps, minimum=2)
    at = _positive_int("save_at", save_at)
    if at >= st:
        raise ValueError(f"save_at must be between 1 and steps - 1 = {st - 1}, got {save_at!r}")
    s = _sizes(batch, width, depth, lr, seed)
    res = w.run(_task_checkpoint, path=str(out / "ddp_amp.pt"), steps=st, save_at=at, batch=s.batch,
                width=s.width, depth=s.depth, lr=s.lr, seed=s.seed, init_scale=_positive_float("init_scale", init_scale),
                growth_interval=_positive_int("growth_interval", growth_interval))
    frame = pd.DataFrame(res[0]["resumed"])
    frame.insert(1, "uninterrupted_final_scale", res[0]["uninterrupted"][-1]["scale"])
    frame.attrs["uninterrupted"] = pd.DataFrame(res[0]["uninterrupted"])
    frame.attrs["replica_spread"] = max(r["replica_spread"] for r in res)
    frame.attrs["all_ranks_equal"] = all(
        [x["max_abs_param_diff"] for x in r["resumed"]] == [x["max_abs_param_diff"] for x in res[0]["resumed"]]
        for r in res)
    return frame


def fsdp2_support() -> str | None:
    """None when FSDP2 (``fully_shard`` + ``MixedPrecisionPolicy``) can run here, else why not."""
    version = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
    if version < FSDP2_MIN_TORCH:
        return (f"FSDP2's public API (torch.distributed.fsdp.fully_shard, MixedPrecisionPolicy) needs torch >= "
                f"{'.'.join(map(str, FSDP2_MIN_TORCH))}; this is torch {torch.__version__}")
    try:
        _fsdp2()
    except ImportError as exc:
        return f"torch.distributed.fsdp has no fully_shard/MixedPrecisionPolicy here: {exc}"
    return None


FSDP_POLICIES = ("fp32/fp32", "bf16/fp32", "bf16/bf16")


def fsdp_policies(
    workers: Workers, *, policies: Sequence[str] = FSDP_POLICIES, steps: int = 8, batch: int = 16, width: int = 64,
    depth: int = 2, lr: float = 1e-3, seed: int = 0,
) -> Any:
    """FSDP2 ``fully_shard`` with ``MixedPrecisionPolicy(param_dtype, reduce_dtype)``, plus DDP.

    ``policies`` are "param_dtype/reduce_dtype" pairs of fp32/bf16. One row per setup and rank:
    bytes of weights, gradients and Adam state this rank holds (shards only), peak GPU memory,
    the first gradient's and the final weights' relative error against one FP32 process on the
    combined batch, and the final held-out loss. ``attrs["reduce_error"]``: relative difference
    of the first gradient between bf16 and fp32 reduction (what reducing in bf16 adds).
    Defaults: the three policies fp32/fp32, bf16/fp32, bf16/bf16; 8 Adam steps.
    """
    import pandas as pd

    w = _check_workers(workers)
    why = fsdp2_support()
    if why is not None:
        raise ValueError(why)
    names = []
    for p in policies:
        parts = p.split("/") if isinstance(p, str) else []
        if len(parts) != 2 or any(x not in ("fp32", "bf16") for x in parts):
            raise ValueError(f"each policy must be 'param_dtype/reduce_dtype' of fp32/bf16 (e.g. 'bf16/fp32'), got {p!r}")
        names.append(p)
    if not names:
        raise ValueError("policies must name at least one 'param_dtype/reduce_dtype' pair, got none")
    s = _sizes(batch, width, depth, lr, seed)
    res = w.run(_task_fsdp, policies=names, steps=_positive_int("steps", steps), batch=s.batch, width=s.width,
                depth=s.depth, lr=s.lr, seed=s.seed)
    rows = []
    for r in res:
        for row in r["rows"]:
            d = {k: v for k, v in row.items() if k != "first_grad"}
            d["rank"] = r["rank"]
            d["held_bytes"] = d["param_bytes"] + d["grad_bytes"] + d["optimizer_bytes"]
            rows.append(d)
    frame = pd.DataFrame(rows)
    cols = ["setup", "rank", "param_bytes", "grad_bytes", "optimizer_bytes", "held_bytes", "peak_memory_bytes",
            "rel_grad_error", "rel_param_diff", "final_eval_loss"]
    frame = frame[cols]
    grads = {row["setup"]: row["first_grad"] for row in res[0]["rows"]}
    frame.attrs["reduce_error"] = (
        _rel(grads["bf16/bf16"], grads["bf16/fp32"]) if "bf16/bf16" in grads and "bf16/fp32" in grads else None
    )
    frame.attrs["reference_eval_loss"] = res[0]["reference_eval_loss"]
    frame.attrs["params"] = model_numel(s.width, s.depth)
    frame.attrs["world"] = str(w.world)
    return frame


_TASKS: dict[str, Callable[..., Any]] = {
    "ddp_vs_single": _task_ddp_vs_single,
    "skip_agreement": _task_skip_agreement,
    "accumulation": _task_accumulation,
    "compress_hooks": _task_compress_hooks,
    "checkpoint_resume": _task_checkpoint,
    "fsdp_policies": _task_fsdp,
}


def task_source(experiment: Callable[..., Any]) -> str:
    """The source of the code every rank runs for ``experiment`` (e.g. ``ddp_vs_single``)."""
    import inspect

    name = getattr(experiment, "__name__", None)
    if name not in _TASKS:
        raise ValueError(f"experiment must be one of {', '.join(_TASKS)}, got {experiment!r}")
    return inspect.getsource(_TASKS[name])


def world_metadata(world: World) -> dict[str, Any]:
    """:func:`fp16lab.env.run_metadata` of rank 0's device plus ``world_size``, ``backend``,
    ``devices`` (one name per rank) and the NCCL version: what a multi-process result needs."""
    from fp16lab.env import run_metadata

    if not isinstance(world, World):
        raise ValueError(f"world must be an fp16lab.distributed.World, got {world!r}")
    gpu = world.device_type == "cuda"
    meta = run_metadata("cuda:0" if gpu else "cpu")
    meta.update(
        world_size=world.world_size,
        backend=world.backend,
        devices=[torch.cuda.get_device_name(i) for i in range(world.world_size)] if gpu else ["cpu"] * world.world_size,
        nccl=".".join(map(str, torch.cuda.nccl.version())) if world.backend == "nccl" else None,
    )
    return meta


# ---------------------------------------------------------------------- CLI


def _bench(args: argparse.Namespace) -> int:
    from fp16lab.results import save_results

    world = lesson_world() if args.world_size is None else check_world(args.world_size, args.backend or "nccl")
    out = Path(args.out)
    if not out.is_dir():
        raise SystemExit(f"--out must be an existing folder, got {str(out)!r}")
    width, depth, batch = world.pick(64, 4096), world.pick(2, 8), world.pick(16, 64)
    print(f"world: {world}; MLP width {width}, depth {depth} ({model_numel(width, depth):,} parameters), "
          f"{batch} rows per rank", flush=True)
    meta = {**world_metadata(world), "width": width, "depth": depth, "batch_per_rank": batch}
    with Workers(world.world_size, world.backend, timeout=args.timeout) as workers:
        print(f"started {workers} in {workers.start_seconds:.1f} s", flush=True)
        jobs: list[tuple[str, Callable[[], Any]]] = [
            ("multi_gpu_ddp", lambda: ddp_vs_single(workers, steps=world.pick(12, 50), batch=batch, width=width,
                                                    depth=depth)),
            ("multi_gpu_hooks", lambda: compress_hooks(workers, steps=world.pick(10, 50), warmup=world.pick(2, 10),
                                                       batch=batch, width=width, depth=depth)),
            ("multi_gpu_fsdp", lambda: fsdp_policies(workers, steps=world.pick(8, 20), batch=batch, width=width,
                                                     depth=depth)),
        ]
        for name, job in jobs:
            t0 = time.perf_counter()
            frame = job()
            path = save_results(frame, out / f"{name}.json", {**meta, "seconds": round(time.perf_counter() - t0, 1)})
            print(f"{name}: {len(frame)} rows -> {path}", flush=True)
            print(frame.to_string(max_rows=20), flush=True)
    return 0


def add_distributed_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Register ``distributed`` with ``python -m fp16lab``."""
    p = sub.add_parser("distributed", help="multi-process DDP/FSDP measurements (see fp16lab.distributed)")
    _add_args(p)


def _add_args(p: argparse.ArgumentParser) -> None:
    cmds = p.add_subparsers(dest="action", required=True)
    b = cmds.add_parser("bench", help="measure DDP, compress hooks and FSDP2 on all GPUs; save JSON results")
    b.add_argument("--out", default="results/local", help="existing folder for the JSON files (default results/local)")
    b.add_argument("--world-size", type=int, default=None,
                   help="processes (default: every GPU on NCCL in full mode with 2+ GPUs, else 2 on gloo)")
    b.add_argument("--backend", choices=BACKENDS, default=None, help="with --world-size (default nccl)")
    b.add_argument("--timeout", type=float, default=600.0, help="seconds for start-up and for each task (default 600)")
    b.set_defaults(func=_bench)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m fp16lab.distributed bench [--out DIR] [--world-size N --backend B] [--timeout S]``."""
    parser = argparse.ArgumentParser(prog="python -m fp16lab.distributed", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_args(parser)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
