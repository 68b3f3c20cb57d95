"""CUDA graphs and torch.compile for inference, each with the time it costs to set up.

Why: a small batch is launch-bound (the GPU waits while Python launches each kernel: the pitfalls lesson).
A CUDA graph records the kernels of one call once and replays them all with a single launch;
``torch.compile(mode="reduce-overhead")`` compiles (fusing kernels) and captures CUDA graphs for you.
Both cost time up front, which a fair comparison counts:

- :func:`capture_cuda_graph`: warm up on a side stream, capture ``torch.cuda.CUDAGraph``, time it;
- :func:`compile_for_inference`: ``torch.compile`` and its first calls, timed.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from fp16lab.checks import one_of, positive_int
from fp16lab.device import resolve_device, synchronize

__all__ = ["CapturedGraph", "capture_cuda_graph", "Compiled", "COMPILE_MODES", "compile_for_inference"]


def check_no_arg_fn(fn: object) -> None:
    """``fn`` must be callable with no arguments (a module needs its input: wrap it in a lambda)."""
    if not callable(fn):
        raise ValueError(f"fn must be a function of no arguments, got {fn!r}")
    target = fn.forward if isinstance(fn, nn.Module) else fn
    try:
        sig = inspect.signature(target)
    except (TypeError, ValueError):  # a builtin without a signature: nothing to check
        return
    try:
        sig.bind()
    except TypeError:
        raise ValueError(f"fn must be a function of no arguments (e.g. lambda: model(static_x)); "
                         f"{type(fn).__name__} {getattr(fn, '__qualname__', '')}{sig} needs arguments") from None


@dataclass
class CapturedGraph:
    """A ``torch.cuda.CUDAGraph`` and what capturing it produced.

    ``output`` is the static output the captured kernels write on every :meth:`replay`
    (overwritten by the next replay: clone what you keep); ``capture_s`` the seconds the
    warm-up and the capture took.
    """

    graph: Any
    output: Any
    capture_s: float

    def replay(self) -> Any:
        """Launch every captured kernel again (one launch from the CPU); returns :attr:`output`."""
        self.graph.replay()
        return self.output

    __call__ = replay


def capture_cuda_graph(
    fn: Callable[[], Any], *, warmup: int = 3, device: "torch.device | str | None" = None
) -> CapturedGraph:
    """Capture the CUDA work of ``fn()`` in a ``torch.cuda.CUDAGraph``, under ``torch.inference_mode``.

    ``fn`` takes no arguments and reads its inputs from tensors you keep (the *static* inputs:
    copy new data into them with ``copy_`` before each replay). It runs ``warmup`` times on a
    side stream first (as PyTorch's CUDA-graph notes require: lazy initialisation, cuBLAS
    workspaces, allocator), then once under capture, which records kernels without running
    them. Under autocast, use ``cache_enabled=False`` inside ``fn``. Defaults: ``warmup=3``,
    ``device`` = the current CUDA device.
    """
    check_no_arg_fn(fn)
    warmup = positive_int("warmup", warmup)
    dev = resolve_device("cuda" if device is None else device)
    if dev.type != "cuda":
        raise ValueError(f"CUDA graphs need a CUDA device, got device {str(dev)!r}")
    synchronize(dev)
    t0 = time.perf_counter()
    side = torch.cuda.Stream(device=dev)
    side.wait_stream(torch.cuda.current_stream(dev))
    with torch.cuda.stream(side), torch.inference_mode():
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream(dev).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.inference_mode(), torch.cuda.graph(graph):
        output = fn()
    synchronize(dev)
    return CapturedGraph(graph, output, time.perf_counter() - t0)


@dataclass
class Compiled:
    """A ``torch.compile`` d callable and the seconds its first ``calls`` calls took (compilation)."""

    fn: Callable[..., Any]
    compile_s: float
    mode: str | None
    backend: str

    def __call__(self, *args: Any) -> Any:
        """Call the compiled function under ``torch.no_grad()``."""
        with torch.no_grad():
            return self.fn(*args)


def _run_eagerly_once(model: Callable[..., Any], example_args: tuple[Any, ...]) -> None:
    """Call ``model(*example_args)`` once without the compiler: a wrong input fails with the model's own error.

    (Under ``torch.compile`` the same mistake surfaces as Dynamo's fake-tensor failure.)
    """
    try:
        with torch.no_grad():
            model(*example_args)
    except Exception as exc:
        if hasattr(exc, "add_note"):  # Python 3.11+: keep the model's error, say where it happened
            exc.add_note("(compile_for_inference: model(*example_args) failed when run eagerly, before compiling: "
                         "check that example_args are what the model takes)")
        raise


def _check_example_args(model: Callable[..., Any], example_args: tuple[Any, ...]) -> None:
    """``model`` can be called with ``example_args`` (by its signature, where it has one): else the error names them."""
    target = model.forward if isinstance(model, nn.Module) else model
    try:
        sig = inspect.signature(target)
    except (TypeError, ValueError):
        return
    try:
        sig.bind(*example_args)
    except TypeError as exc:
        raise ValueError(f"example_args: {len(example_args)} given, but {type(model).__name__}{sig} cannot be called "
                         f"with them ({exc}); pass the model's inputs after it, e.g. "
                         "compile_for_inference(model, x)") from None


COMPILE_MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def compile_for_inference(
    model: "nn.Module | Callable[..., Any]",
    *example_args: Any,
    mode: str | None = "reduce-overhead",
    backend: str = "inductor",
    calls: int = 3,
) -> Compiled:
    """``torch.compile(model, mode=mode)``, warmed up on ``example_args``; the time that took is kept.

    The model runs once eagerly first (untimed), so a wrong input fails with the model's own
    error rather than the compiler's. The first compiled call compiles; with
    ``mode="reduce-overhead"`` (CUDA graphs through CUDA-graph trees) the next calls record and then replay the graph, so ``calls=3`` (default) calls are
    timed together (synchronised) as ``compile_s``. Calls run under ``torch.no_grad()`` (compile
    has had rough edges with ``inference_mode``). Defaults: ``mode="reduce-overhead"``,
    ``backend="inductor"`` (``mode`` must be None for other backends).
    """
    if not callable(model):
        raise ValueError(f"model must be a module or function, got {model!r}")
    if mode is not None:
        one_of("mode", mode, COMPILE_MODES)
        if backend != "inductor":
            raise ValueError(f"mode={mode!r} needs backend='inductor'; pass mode=None with backend={backend!r}")
    if not isinstance(backend, str) or not backend:
        raise ValueError(f"backend must be a torch.compile backend name such as 'inductor', got {backend!r}")
    import torch._dynamo

    known = torch._dynamo.list_backends(exclude_tags=())
    if backend not in known:
        raise ValueError(f"backend {backend!r} is not a torch.compile backend here; allowed: {', '.join(map(repr, known))}")
    calls = positive_int("calls", calls)
    _check_example_args(model, example_args)
    devices = {a.device for a in example_args if isinstance(a, torch.Tensor)}
    _run_eagerly_once(model, example_args)
    fn = torch.compile(model, mode=mode, backend=backend)
    for d in devices:
        synchronize(d)
    t0 = time.perf_counter()
    with torch.no_grad():
        for _ in range(calls):
            fn(*example_args)
    for d in devices:
        synchronize(d)
    return Compiled(fn, time.perf_counter() - t0, mode, backend)
