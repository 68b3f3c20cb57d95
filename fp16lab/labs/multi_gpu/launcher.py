"""Launching ranks: a validated world, spawned worker processes, hard timeouts.

:class:`Workers` starts ``world_size`` processes with the ``spawn`` start method (Linux, macOS
and Windows alike), joins them into one process group (gloo on CPUs, NCCL on CUDA GPUs, one GPU
per rank) and keeps them alive, so one start-up serves many tasks. The parent hosts the
rendezvous store on ``127.0.0.1`` on a port the operating system picks (port 0: no guessed port,
no race). ``Workers.run(task, **kwargs)`` runs a module-level function ``task(ctx, **kwargs)`` on
every rank and returns the per-rank results. Every wait has a hard timeout: a rank that raises,
dies or hangs ends the call with :class:`WorkerError` / :class:`WorkerTimeout` naming the rank
(never a stuck kernel), and all workers are stopped. :func:`launch` is the one-shot form.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import itertools
import math
import os
import pickle
import queue
import sys
import time
import traceback
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from fp16lab.checks import one_of, positive_float, positive_int
from fp16lab.labs.runtime.i18n import tr

__all__ = [
    "BACKENDS",
    "PRELOAD",
    "World",
    "RankContext",
    "WorkerError",
    "WorkerTimeout",
    "Workers",
    "check_world",
    "lesson_world",
    "launch",
]

BACKENDS = ("gloo", "nccl")
_MASTER_ADDR = "127.0.0.1"


@dataclass(frozen=True)
class World:
    """A validated choice of backend and number of processes (see :func:`check_world`)."""

    backend: str
    world_size: int

    def __post_init__(self) -> None:  # syntax only; check_world also checks this machine
        one_of("backend", self.backend, BACKENDS)
        object.__setattr__(self, "world_size", positive_int("world_size", self.world_size))

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
        from fp16lab.labs.runtime.quick import pick

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
    b = one_of("backend", backend, BACKENDS)
    n = positive_int("world_size", world_size)
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
    from fp16lab.labs.runtime.quick import is_quick

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
# small CPU), and the tasks import fp16lab.train (pandas). Paying this during start-up keeps task timings honest.
PRELOAD = ("torch._dynamo", "fp16lab.labs.multi_gpu.tasks")


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
    return task


def _check_call(task: Callable[..., Any], kwargs: dict[str, Any]) -> None:
    """``task(ctx, **kwargs)`` must bind, and ``kwargs`` must pickle: checked before any rank is asked."""
    qual = getattr(task, "__qualname__", repr(task))
    try:
        pickle.dumps(kwargs)
    except Exception as exc:
        raise ValueError(f"the arguments of task {qual!r} cannot be pickled: {exc}") from None
    try:
        sig = inspect.signature(task)
    except (TypeError, ValueError):  # a builtin without a signature: nothing to check
        sig = None
    if sig is not None:
        try:
            sig.bind(None, **kwargs)
        except TypeError as exc:
            raise ValueError(f"task {qual!r} cannot be called as task(ctx, **kwargs) with the keyword arguments "
                             f"{sorted(kwargs)}: {exc} (its signature: {sig})") from None


class Workers:
    """``world_size`` spawned processes in one process group, reused for many tasks.

    Defaults: 2 processes on gloo, ``timeout=120`` s for starting and for each :meth:`run`; each
    rank gets CPU cores // world_size torch threads and imports :data:`PRELOAD` while it starts.
    Use as a context manager, or call :meth:`close`. After a task fails or times out, all workers
    are stopped and this object refuses further tasks (start a new one).
    """

    def __init__(self, world_size: int = 2, backend: str = "gloo", *, timeout: float = 120.0) -> None:
        self.world = check_world(world_size, backend)
        self.timeout = positive_float("timeout", timeout)
        self.threads = max(1, (os.cpu_count() or 1) // self.world.world_size)
        self._procs: list[Any] = []
        self._queues: list[Any] = []
        self._closed = True
        self._ids = itertools.count()
        self.preload = PRELOAD
        self.pids: list[int] = []
        self.start_seconds = math.nan
        self._start()
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
        try:
            pids = self._collect("start", "start-up (spawn, import torch, join the process group)", self.timeout,
                                 deadline=self._started + self.timeout,
                                 said=tr("start-up (spawn, import torch, join the process group)"))
        except KeyboardInterrupt:
            self._abort()
            raise
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
        limit = self.timeout if timeout is None else positive_float("timeout", timeout)
        _check_call(fn, kwargs)
        self.ready()
        task_id = next(self._ids)
        for q in self._inboxes:
            q.put((task_id, fn, kwargs))
        try:
            return self._collect(task_id, f"task {_task_name(fn)!r}", limit, said=tr("task {name!r}", name=_task_name(fn)))
        except KeyboardInterrupt:  # interrupted kernel: the ranks may be mid-collective; stop them all
            self._abort()
            raise

    def _collect(self, task_id: object, what: str, limit: float, deadline: float | None = None,
                 said: str | None = None) -> list[Any]:
        """The results of ``task_id`` by rank; ``what`` names it in the exception's ``task`` (English), ``said`` in the messages,
        which a lesson shows (the reader's language; ``what`` when None)."""
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
                who = tr("ranks {ranks}", ranks=tr(", ").join(map(str, pending))) if len(pending) > 1 else \
                    f"rank {pending[0]}"
                raise WorkerTimeout(
                    tr("{who} did not finish {what} within the timeout of {limit:g} s ({answered} of {n} ranks "
                       "answered); all workers were stopped. A rank that hangs, or waits in a collective for a rank "
                       "that never joins it, looks like this. Start new Workers to continue.",
                       who=who, what=said or what, limit=limit, answered=len(results), n=n),
                    ranks=pending, task=what, timeout=limit,
                )
            if msg is None:
                for r, p in enumerate(self._procs):
                    if r not in results and not p.is_alive():
                        code = p.exitcode
                        self._abort()
                        raise WorkerError(
                            tr("rank {r} exited (exit code {code}) during {what} without a result; all workers "
                               "were stopped. Its error is on the launcher's stderr (the terminal running Jupyter "
                               "or the script; a script must start workers under `if __name__ == '__main__':`). "
                               "Start new Workers to continue.", r=r, code=code, what=said or what),
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
                        tr("rank {r} exited (exit code {code}) during {what}; rank {rank} then failed: {error}; "
                           "all workers were stopped. Start new Workers to continue.", r=r, code=code,
                           what=said or what, rank=rank, error=rest[0]),
                        rank=r, task=what, details=rest[1],
                    )
                raise WorkerError(
                    tr("rank {rank} failed in {what}: {error}; all workers were stopped.\n"
                       "--- traceback of rank {rank} ---\n{details}", rank=rank, what=said or what, error=rest[0],
                       details=rest[1]),
                    rank=rank, task=what, details=rest[1],
                )
            results[rank] = pickle.loads(rest[0])
        return [results[r] for r in range(n)]


def launch(
    task: Callable[..., Any], /, world_size: int = 2, backend: str = "gloo", *, timeout: float = 120.0, **kwargs: Any,
) -> list[Any]:
    """Start a world, run ``task(ctx, **kwargs)`` on every rank once, stop it; results by rank.

    Defaults: 2 processes on gloo, 120 s for start-up and again for the task. Everything is
    validated before a process starts.
    """
    _check_call(_check_task(task), kwargs)
    with Workers(world_size, backend, timeout=timeout) as workers:
        return workers.run(task, **kwargs)
