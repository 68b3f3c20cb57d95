"""Measuring: one configuration (:func:`bench_one`) and a whole run (:func:`run_benchmark`).

What "honestly" means here: synthetic data already on the device (the input pipeline is not
measured by accident); untimed warm-up steps (torch.compile, cuDNN autotuning, the caching
allocator); :func:`fp16lab.timing.time_windows` around windows of N steps (CUDA events on a
GPU), their median and spread; peak memory from ``torch.cuda.max_memory_allocated`` above what
was allocated before the configuration was built; and with every row the settings as used.

A run measures the configurations in ``repeat`` in interleaved rounds (all built and warmed
first, then article, recipe, compiled, article, recipe, compiled, ...), the others one after
another, then a batch-size sweep, then the exploration. A configuration that runs out of
memory, that the device cannot run, that fails (an unknown compile mode, a capture that
breaks) or that misses its compile time box becomes a row saying so, and the run goes on.
"""

from __future__ import annotations

import contextlib
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import torch

from fp16lab.checks import boolean, function, instance, one_of, positive_float, positive_int, text
from fp16lab.device import choose_device, free_memory, is_oom, parse_device, resolve_device, synchronize
from fp16lab.labs.benchmark.configs import (
    TASKS,
    BenchConfig,
    BenchSettings,
    ModelArg,
    ModelSpec,
    config_entry,
    parse_model,
    unsupported_reason,
)
from fp16lab.labs.benchmark.steps import Runner, build_runner
from fp16lab.precision import tf32_flags, tf32_state
from fp16lab.timing import time_windows

__all__ = [
    "Session",
    "Opener",
    "CompileTimeout",
    "bench_one",
    "time_box",
    "attempt",
    "release",
    "skipped_row",
    "measure_single",
]


class CompileTimeout(Exception):
    """A configuration was not built, compiled and warmed up within its time box."""


def _settings_row(spec: ModelSpec, cfg: BenchConfig, batch: int, s: BenchSettings, task: str,
                 dev: torch.device) -> dict[str, Any]:
    """A result row before measuring: the settings asked for, and NaN where numbers will go."""
    nan = float("nan")
    return {
        "config": cfg.name, "label": cfg.label, "model": spec.name, "task": task, "batch_size": batch,
        "image_size": s.image_size, "precision": cfg.precision.value, "memory_format": cfg.memory_format,
        "compile": cfg.compile, "compile_mode": cfg.compile_mode or "", "cuda_graph": cfg.cuda_graph,
        "loop": cfg.loop,
        "amp_api": ("torch.cuda.amp (deprecated)" if cfg.loop == "article" else "torch.amp")
        if cfg.precision.autocast_dtype is not None else "none",
        "grad_scaler": cfg.precision.uses_scaler and task == "train",
        "optimizer": cfg.optimizer if task == "train" else "none",
        "tf32_matmul": cfg.tf32_matmul, "tf32_cudnn": cfg.tf32_cudnn, "cudnn_benchmark": s.cudnn_benchmark,
        "cpu_threads": s.cpu_threads if dev.type == "cpu" and s.cpu_threads else torch.get_num_threads(),
        "warmup_steps": s.warmup, "steps_per_window": s.steps, "windows": s.windows, "device": dev.type,
        "status": "pending", "img_per_s": nan, "img_per_s_min": nan, "img_per_s_max": nan, "spread": nan,
        "step_ms": nan, "peak_mem_gb": nan, "peak_reserved_gb": nan, "baseline_gb": nan, "first_step_s": nan,
        "warmup_s": nan, "warnings": "", "notes": "", "error": "",
    }


def finish_row(row: dict[str, Any], secs: list[float], batch: int, steps: int) -> dict[str, Any]:
    """Fill ``row`` from window times: images/s per window = batch * steps / seconds; their median."""
    rates = [batch * steps / t for t in secs]
    med = statistics.median(rates)
    row.update(
        status="ok", img_per_s=med, img_per_s_min=min(rates), img_per_s_max=max(rates),
        spread=(max(rates) - min(rates)) / med, step_ms=1e3 * statistics.median(secs) / steps,
        window_s=[round(t, 6) for t in secs],
    )
    return row


@contextlib.contextmanager
def _backend(cfg: BenchConfig, s: BenchSettings, dev: torch.device) -> Iterator[None]:
    """TF32 settings, cudnn.benchmark and (on the CPU) the thread count for this configuration."""
    old_bench, old_threads = torch.backends.cudnn.benchmark, torch.get_num_threads()
    torch.backends.cudnn.benchmark = s.cudnn_benchmark
    if dev.type == "cpu" and s.cpu_threads is not None:
        torch.set_num_threads(s.cpu_threads)
    try:
        with tf32_flags(cfg.tf32_matmul, cudnn=cfg.tf32_cudnn):
            yield
    finally:
        torch.backends.cudnn.benchmark = old_bench
        torch.set_num_threads(old_threads)


def _compile_counters() -> dict[str, int]:
    """Graph breaks and skipped CUDA graphs so far (torch._dynamo's counters: private, may move)."""
    try:
        from torch._dynamo.utils import counters

        return {"graph breaks": sum(counters["graph_break"].values()),
                "cudagraph skips": int(counters["inductor"].get("cudagraph_skips", 0))}
    except Exception:  # a private API: its absence must not fail a benchmark
        return {}


def _session_args(spec: ModelSpec, cfg: BenchConfig, batch: int, s: BenchSettings, task: str,
                  dev: "torch.device | str") -> tuple[ModelSpec, BenchConfig, int, BenchSettings, str, torch.device]:
    """A :class:`Session`'s arguments, checked once: what :func:`bench_one` and ``run_benchmark`` pass."""
    return (instance("spec", spec, ModelSpec, "a ModelSpec (parse_model('resnet50') builds one)"),
            instance("cfg", cfg, BenchConfig, "a BenchConfig (e.g. CONFIGS['fp16_cl_fused'])"),
            positive_int("batch", batch),
            instance("s", s, BenchSettings, "a BenchSettings (default_settings() builds one)"),
            one_of("task", task, TASKS),
            resolve_device(parse_device(dev, name="dev"), name="dev"))


class Session:
    """One configuration built on the device and warmed up, ready to time windows of steps.

    :meth:`open` builds and warms up (recording the first step's seconds, the warm-up's and
    the peak memory above what was allocated before), :meth:`time` times windows,
    :meth:`close` drops the model and returns the row. Several sessions can be open at once:
    that is how rounds interleave.
    """

    def __init__(self, spec: ModelSpec, cfg: BenchConfig, batch: int, s: BenchSettings, task: str,
                 dev: torch.device) -> None:
        self.spec, self.cfg, self.batch, self.s, self.task, self.dev = _session_args(spec, cfg, batch, s, task, dev)
        self.row = _settings_row(self.spec, self.cfg, self.batch, self.s, self.task, self.dev)
        self.steps = 0
        self._run: Runner | None = None
        self._warnings: set[str] = set()

    @contextlib.contextmanager
    def _scope(self) -> Iterator[None]:
        with _backend(self.cfg, self.s, self.dev), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            try:
                yield
            finally:
                self._warnings.update(f"{w.category.__name__}: {w.message}" for w in caught)

    def open(self) -> None:
        """Build the model, optimizer and data, and run the warm-up steps."""
        dev, s, row = self.dev, self.s, self.row
        if dev.type == "cuda":
            torch.cuda.reset_peak_memory_stats(dev)
            base = (torch.cuda.memory_allocated(dev), torch.cuda.memory_reserved(dev))
            row["baseline_gb"] = base[0] / 1e9
        before = _compile_counters() if self.cfg.compile else {}
        with self._scope():
            st = tf32_state()
            row.update(tf32_matmul=st["matmul"] == "tf32", tf32_cudnn=st["cudnn_conv"] == "tf32",
                       cudnn_benchmark=torch.backends.cudnn.benchmark, cpu_threads=torch.get_num_threads())
            t0 = time.perf_counter()
            self._run, net = build_runner(self.spec, self.cfg, self.batch, s, self.task, dev)
            row["model_class"] = type(net).__name__
            del net
            self._run(1)
            synchronize(dev)
            row["first_step_s"] = time.perf_counter() - t0
            if s.warmup > 1:
                self._run(s.warmup - 1)
                synchronize(dev)
            self.steps = s.warmup
            row["warmup_s"] = time.perf_counter() - t0
        if dev.type == "cuda":
            row["peak_mem_gb"] = (torch.cuda.max_memory_allocated(dev) - base[0]) / 1e9
            row["peak_reserved_gb"] = (torch.cuda.max_memory_reserved(dev) - base[1]) / 1e9
        if before:
            after = _compile_counters()
            row["notes"] = "; ".join(f"{k}: {after.get(k, 0) - v}" for k, v in before.items())

    def warm(self, steps: int) -> None:
        """Run ``steps`` untimed steps (before each round's windows)."""
        if self._run is None:
            raise RuntimeError(f"session {self.cfg.name!r} is not open")
        with self._scope():
            self._run(steps)
            synchronize(self.dev)
        self.steps += steps

    def time(self, windows: int) -> list[float]:
        """Seconds of each of ``windows`` timed windows of ``settings.steps`` steps."""
        run, steps = self._run, self.s.steps
        if run is None:
            raise RuntimeError(f"session {self.cfg.name!r} is not open")
        with self._scope():
            secs = time_windows(lambda: run(steps), self.dev, windows)
        self.steps += windows * steps
        return secs

    def skip_reason(self) -> str | None:
        """Why this configuration cannot run on this device (or task), or None."""
        reason = unsupported_reason(self.cfg, self.dev)
        if reason is None and self.task == "infer" and self.cfg.cuda_graph:
            reason = "CUDA-graph configurations are measured for training only"
        return reason

    def close(self) -> dict[str, Any]:
        """Drop the model, optimizer and data; the row with the warnings seen and the steps run."""
        self._run = None
        self.row["warnings"] = "; ".join(sorted(self._warnings))
        self.row["steps_run"] = self.steps
        return self.row


Opener = Callable[[ModelSpec, BenchConfig, int, BenchSettings, str, torch.device], Session]


def _check_session(session: object) -> None:
    """A :class:`Session`, or a stand-in from run_benchmark's ``opener`` with what a row needs: ``row`` (a
    dict), ``cfg`` (a BenchConfig), ``batch``, ``dev`` and ``close()``."""
    if isinstance(session, Session):
        return
    if (isinstance(getattr(session, "row", None), dict) and isinstance(getattr(session, "cfg", None), BenchConfig)
            and isinstance(getattr(session, "dev", None), torch.device) and hasattr(session, "batch")
            and callable(getattr(session, "close", None))):
        return
    raise ValueError(f"session must be a Session (or an opener's stand-in with row, cfg, batch, dev and close()), "
                     f"got {session!r:.80} ({type(session).__name__})")


@contextlib.contextmanager
def time_box(seconds: float | None, what: str) -> Iterator[None]:
    """Raise :class:`CompileTimeout` in the block after ``seconds`` (POSIX main thread only; else no box).

    ``seconds``: a finite number > 0, or None (no box); ``what`` names the configuration in the message.
    """
    import signal
    import threading

    if seconds is not None:
        seconds = positive_float("seconds", seconds)
    text("what", what)
    if seconds is None or not hasattr(signal, "SIGALRM") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: Any) -> None:
        raise CompileTimeout(f"{what} was not built, compiled and warmed up within its time box of {seconds:g} s")

    old = signal.signal(signal.SIGALRM, stop)
    signal.setitimer(signal.ITIMER_REAL, max(seconds, 0.01))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def attempt(session: Session, action: Callable[[], None], *, reset: bool = True) -> bool:
    """Run ``action``; on an exception mark the session's row (OOM / timeout / error), close it and free
    memory (``reset=False`` keeps other open sessions' compiled graphs: no ``torch.compiler.reset``).

    ``session``: a :class:`Session` (or what run_benchmark's ``opener`` builds in its place); ``action``
    a function of no arguments. Checked before ``action`` runs.
    """
    _check_session(session)
    function("action", action, "a function of no arguments", n_args=0)
    boolean("reset", reset)
    try:
        action()
        return True
    except Exception as e:  # reported in the row; the run goes on (Ctrl-C is not an Exception)
        status = "OOM" if is_oom(e) else "timeout" if _timed_out(e) else "error"
        session.row.update(status=status, error=describe_error(e))
        print(f"bench: {session.cfg.name} at batch {session.batch}: {status}: {session.row['error']}", file=sys.stderr)
    session.close()
    release(session.dev, session.cfg.compile and reset)
    return False


def _timed_out(e: BaseException) -> bool:
    """A time box fired, even where torch.compile wrapped it in an error of its own (InductorError)."""
    seen: set[int] = set()
    x: BaseException | None = e
    while x is not None and id(x) not in seen:
        if isinstance(x, CompileTimeout):
            return True
        seen.add(id(x))
        x = x.__cause__ or x.__context__
    return False


def describe_error(e: BaseException) -> str:
    """``Type: first line`` of an exception, and of the one it was raised while handling (a failed
    CUDA-graph capture raises again when the capture is closed: the first error is the cause)."""

    def line(x: BaseException) -> str:
        text = str(x).strip()
        return f"{type(x).__name__}: {text.splitlines()[0][:300] if text else ''}"

    ctx = e.__cause__ or e.__context__
    return line(e) + (f" (raised while handling {line(ctx)})" if ctx is not None else "")


def release(dev: torch.device, compiled: bool) -> None:
    """Drop compiled graphs (and the models they hold) and return cached memory; never raises."""
    try:
        if compiled:
            torch.compiler.reset()
        free_memory(dev)
    except Exception as e:  # e.g. a CUDA error left by a failed capture: say so, keep the rows
        print(f"bench: cleanup after a failed configuration raised {type(e).__name__}: {e}", file=sys.stderr)


def skipped_row(session: Session, reason: str) -> dict[str, Any]:
    """The row of a configuration this device cannot run, with the reason (a non-empty str)."""
    _check_session(session)
    if not text("reason", reason).strip():
        raise ValueError(f"reason must say why the configuration is skipped, got {reason!r}")
    session.row.update(status="skipped", error=reason)
    return session.close()


def measure_single(session: Session, timeout: float | None = None) -> dict[str, Any]:
    """Open, time ``settings.windows`` windows, close: one row (never raises but for Ctrl-C).

    ``timeout`` time-boxes building, compiling and warming up a compiled configuration.
    """
    reason = session.skip_reason()
    if reason is not None:
        return skipped_row(session, reason)
    secs: list[float] = []

    def action() -> None:
        with time_box(timeout if session.cfg.compile else None, session.cfg.name):
            session.open()
        secs.extend(session.time(session.s.windows))

    if not attempt(session, action):
        return session.row
    row = finish_row(session.close(), secs, session.batch, session.s.steps)
    release(session.dev, session.cfg.compile)
    return row


def bench_one(
    model: ModelArg = "resnet50",
    config: "BenchConfig | str" = "fp16_cl_fused",
    batch_size: int = 256,
    *,
    settings: BenchSettings | None = None,
    device: "torch.device | str | None" = None,
    task: str = "train",
) -> dict[str, Any]:
    """Measure one (model, configuration, batch size): images/s (median of windows), spread, memory.

    ``model``: a torchvision name (default ``'resnet50'``, ``weights=None``: nothing is
    downloaded) or a function returning a fresh ``nn.Module`` (``lambda: MyNet()``) that takes
    ``(batch, 3, image_size, image_size)`` images and returns ``(batch, num_classes)`` logits.
    ``config``: a name from :data:`~fp16lab.labs.benchmark.configs.CONFIGS` (default the recommended
    ``'fp16_cl_fused'``) or your own :class:`~fp16lab.labs.benchmark.configs.BenchConfig`.
    ``batch_size=256``, ``settings=default_settings()``, ``device`` from
    :func:`fp16lab.device.choose_device`, ``task='train'`` (Adam step) or ``'infer'`` (eval,
    inference_mode, forward only). Returns one row: ``status`` is 'ok', or 'OOM', 'error',
    'timeout' or 'skipped' (this device cannot run it) with the reason in ``error``.
    """
    from fp16lab.labs.benchmark.configs import default_settings

    spec = parse_model(model)
    cfg = config_entry("config", config)
    b = positive_int("batch_size", batch_size)
    one_of("task", task, TASKS)
    s = default_settings() if settings is None else instance("settings", settings, BenchSettings, "a BenchSettings")
    dev = choose_device(device)
    return measure_single(Session(spec, cfg, b, s, task, dev))
