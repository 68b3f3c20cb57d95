"""How each configuration's step is built: the article's loop verbatim, the hand-written
current-API step, fp16lab's ``train_step``, ``torch.compile`` and whole-step CUDA-graph capture.

:func:`build_runner` (what a :class:`~fp16lab.labs.benchmark.measure.Session` opens, its
arguments checked there) returns a function ``run(n)`` that runs ``n`` steps on one synthetic,
device-resident batch; the model, optimizer and data live as long as that function does.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from fp16lab.checks import function, positive_int
from fp16lab.device import parse_device, resolve_device
from fp16lab.labs.benchmark.configs import BenchConfig, BenchSettings, ModelSpec
from fp16lab.precision import autocast
from fp16lab.train import amp_step, make_scaler, train_step

__all__ = ["article_scaler", "article_loop", "capture_step"]

Runner = Callable[[int], None]


def article_scaler() -> Any:
    """``torch.cuda.amp.GradScaler()`` exactly as the article makes it (deprecated: warns)."""
    from torch.cuda.amp import GradScaler

    return GradScaler()  # 用于动态调整梯度缩放


def article_loop(
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    scaler: Any,
    criterion: Callable[..., torch.Tensor],
    dataloader: Iterable[tuple[torch.Tensor, torch.Tensor]],
    num_epochs: int = 1,
) -> None:
    """The article's training loop, line for line (deprecated ``torch.cuda.amp`` API and all).

    Only the scaler is passed in (the article creates it once, before the loop: see
    :func:`article_scaler`) so that timed windows continue one run. Do not copy this:
    lesson 02 shows the current API and what the loop gets wrong.
    """
    from torch.cuda.amp import autocast

    for _epoch in range(num_epochs):
        for inputs, targets in dataloader:
            inputs, targets = inputs.cuda(), targets.cuda()
            # 启用混合精度
            with autocast():
                outputs = model(inputs)
                loss = criterion(outputs, targets)
            # 反向传播和优化
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()


class _Repeat:
    """A 'dataloader' that yields the same device-resident batch ``n`` times."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, n: int) -> None:
        self.x, self.y, self.n = x, y, n

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        for _ in range(self.n):
            yield self.x, self.y


def capture_step(step: Callable[[], None], device: torch.device, warmup: int = 3) -> Callable[[], None]:
    """Capture one call of ``step`` in a CUDA graph and return the graph's ``replay``.

    Follows PyTorch's whole-network recipe: ``warmup`` calls on a side stream first (cuDNN
    autotuning, lazily made state such as the GradScaler's scale), then one captured call.
    ``step`` must leave the gradients ``None`` (``zero_grad(set_to_none=True)``), so the
    captured backward allocates them from the graph's private memory pool, and must not read
    anything back to the host (``.item()``): a capture forbids synchronisation. ``device`` must be
    a CUDA GPU of this machine (CUDA graphs exist only there); ``warmup`` (default 3) at least 1.
    """
    function("step", step, "a function of no arguments (one training step)", n_args=0)
    warmup = positive_int("warmup", warmup)
    device = resolve_device(parse_device(device))
    if device.type != "cuda":
        raise ValueError(f"device {str(device)!r}: CUDA graphs exist only on CUDA; give a CUDA device, e.g. 'cuda'")
    side = torch.cuda.Stream(device)
    side.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(side):
        for _ in range(warmup):
            step()
    torch.cuda.current_stream(device).wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        step()
    return graph.replay


def _compiled(net: nn.Module, mode: str | None) -> Callable[..., torch.Tensor]:
    if mode is None:
        return net
    return torch.compile(net, mode=mode)  # an unknown mode raises here: an 'error' row


def _data(batch: int, s: BenchSettings, cfg: BenchConfig, dev: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    fmt = torch.channels_last if cfg.channels_last else torch.contiguous_format
    g = torch.Generator(device="cpu").manual_seed(s.seed)
    x = torch.randn(batch, 3, s.image_size, s.image_size, generator=g).to(dev).contiguous(memory_format=fmt)
    y = torch.randint(0, s.num_classes, (batch,), generator=g).to(dev)
    return x, y


def build_runner(
    spec: ModelSpec, cfg: BenchConfig, batch: int, s: BenchSettings, task: str, dev: torch.device
) -> tuple[Runner, nn.Module]:
    """Model, optimizer, scaler and one synthetic batch on ``dev``; returns ``(run, model)``.

    ``run(n)`` runs ``n`` steps. For a ``cuda_graph`` configuration the capture happens on the
    first call (its warm-up steps and the captured step count as that call's steps).
    """
    torch.manual_seed(s.seed)
    net = spec.build(s.num_classes).to(dev)
    if cfg.channels_last:
        net = net.to(memory_format=torch.channels_last)
    x, y = _data(batch, s, cfg, dev)
    fwd = _compiled(net, cfg.compile_mode)
    if task == "infer":
        net.eval()

        def infer(n: int) -> None:
            with torch.inference_mode(), autocast(cfg.precision, dev):
                for _ in range(n):
                    fwd(x)

        return infer, net
    net.train()
    optimizer = cfg.make_optimizer(net.parameters())
    if cfg.loop == "article":
        scaler = article_scaler()
        criterion = nn.CrossEntropyLoss()
        return (lambda n: article_loop(fwd, optimizer, scaler, criterion, _Repeat(x, y, n))), net  # type: ignore[arg-type]
    if cfg.loop == "train_step":
        return train_step_runner(net, fwd, optimizer, cfg, x, y, dev), net
    step = hand_step(fwd, optimizer, cfg, x, y, dev)
    if not cfg.cuda_graph:
        return repeat_step(step), net
    return graph_runner(step, dev), net


def repeat_step(step: Callable[[], None]) -> Runner:
    def run(n: int) -> None:
        for _ in range(n):
            step()

    return run


def hand_step(
    model: Callable[..., torch.Tensor],
    optimizer: torch.optim.Optimizer,
    cfg: BenchConfig,
    x: torch.Tensor,
    y: torch.Tensor,
    dev: torch.device,
) -> Callable[[], None]:
    """The library's AMP step (:func:`fp16lab.train.amp_step`): autocast forward, scaled backward
    outside it, step, update, zero.

    The order of :func:`fp16lab.train.train_step`, without its per-step read-back of loss,
    scale and gradient norm to the host (that sync is right for a training history; the
    ``train_step`` configuration measures what it costs). In a captured step the weight-cast
    cache is off (its FP16 copies of the weights must not outlive the capture).
    """
    scaler = make_scaler(cfg.precision, dev)
    mark = cfg.compile_mode == "reduce-overhead"
    batch = [(x, y)]
    cache = False if cfg.cuda_graph else None

    def loss_of(xy: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        return F.cross_entropy(model(xy[0]), xy[1])

    def step() -> None:
        if mark:  # CUDA Graph Trees: a new iteration starts here
            torch.compiler.cudagraph_mark_step_begin()
        amp_step(loss_of, batch, optimizer, scaler, precision=cfg.precision, device=dev, cache_enabled=cache)

    return step


def train_step_runner(
    net: nn.Module,
    model: Callable[..., torch.Tensor],
    optimizer: torch.optim.Optimizer,
    cfg: BenchConfig,
    x: torch.Tensor,
    y: torch.Tensor,
    dev: torch.device,
) -> Runner:
    scaler = make_scaler(cfg.precision, dev)
    module = model if isinstance(model, nn.Module) else net

    def run(n: int) -> None:
        for _ in range(n):
            train_step(module, optimizer, scaler, [(x, y)], precision=cfg.precision, device=dev,
                       channels_last=cfg.channels_last)

    return run


def graph_runner(step: Callable[[], None], dev: torch.device) -> Runner:
    replay: list[Callable[[], None]] = []

    def run(n: int) -> None:
        if not replay:  # the first call runs 3 warm-up steps on a side stream, then captures one
            replay.append(capture_step(step, dev, warmup=3))
            n -= 3
        for _ in range(max(n, 0)):
            replay[0]()

    return run
