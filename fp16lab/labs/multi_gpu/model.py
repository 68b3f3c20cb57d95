"""The lesson's model, data and measuring tools, as every rank uses them.

A small MLP classifier on data generated from a seed (nothing is downloaded): Gaussian inputs
labelled by a fixed random linear "teacher". Every rank generates the same *global* batch of a
step and keeps its own rows (:func:`shard`), so one process can train on exactly the combined
batch for comparison. The tools measure what the lesson claims: the weights as one vector, the
largest difference between replicas, and the bytes handed to ``all_reduce``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from fp16lab.checks import (
    instance,
    module,
    non_negative_int,
    one_of,
    positive_float,
    positive_int,
    sequence_of,
)
from fp16lab.device import parse_device
from fp16lab.labs.multi_gpu.launcher import RankContext

__all__ = [
    "CLASSES",
    "HOOKS",
    "mlp",
    "model_numel",
    "global_batch",
    "shard",
    "micro",
    "sgd",
    "flat",
    "rel",
    "replica_spread",
    "wrap_ddp",
    "tap_all_reduce",
    "comm_hook",
]

CLASSES = 8
HOOKS = ("allreduce", "fp16", "bf16")


def mlp(width: int, depth: int) -> nn.Sequential:
    """``depth`` Linear(width, width) + GELU blocks and a Linear(width, 8) classifier head."""
    width, depth = positive_int("width", width), positive_int("depth", depth)
    layers: list[nn.Module] = []
    for _ in range(depth):
        layers += [nn.Linear(width, width), nn.GELU()]
    layers.append(nn.Linear(width, CLASSES))
    return nn.Sequential(*layers)


def model_numel(width: int, depth: int) -> int:
    """Parameters of :func:`mlp`: ``depth * (width**2 + width) + width * 8 + 8``."""
    w, d = positive_int("width", width), positive_int("depth", depth)
    return d * (w * w + w) + w * CLASSES + CLASSES


def global_batch(step: int, rows: int, width: int, seed: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """All ranks' rows of ``step``: Gaussian inputs, labels from a fixed random linear teacher."""
    step, rows, width = non_negative_int("step", step), positive_int("rows", rows), positive_int("width", width)
    seed, device = non_negative_int("seed", seed), parse_device(device)
    teacher = torch.randn(width, CLASSES, generator=torch.Generator().manual_seed(seed))
    x = torch.randn(rows, width, generator=torch.Generator().manual_seed(seed * 100_003 + step + 1))
    y = (x @ teacher).argmax(1)
    return x.to(device), y.to(device)


def shard(x: torch.Tensor, ctx: RankContext, per_rank: int, part: int = 0) -> torch.Tensor:
    """Rank ``ctx.rank``'s ``per_rank`` rows of micro-batch ``part`` of a global batch."""
    start = (part * ctx.world_size + ctx.rank) * per_rank
    return x[start : start + per_rank]


def micro(x: torch.Tensor, world_size: int, per_rank: int, part: int) -> torch.Tensor:
    """Every rank's rows of micro-batch ``part``: what one process trains on in their place."""
    instance("x", x, torch.Tensor, "a tensor of a global batch's rows (global_batch)")
    size = positive_int("world_size", world_size) * positive_int("per_rank", per_rank)
    part = non_negative_int("part", part)
    if x.dim() == 0 or (part + 1) * size > x.shape[0]:
        raise ValueError(f"x has shape {tuple(x.shape)}: micro-batch part={part} of world_size * per_rank = {size} "
                         f"rows needs at least {(part + 1) * size} rows")
    return x[part * size : (part + 1) * size]


def sgd(params: Iterable[Any], lr: float) -> torch.optim.Optimizer:
    """SGD with momentum 0.9 for the DDP comparisons: its update is linear in the gradient, so a
    rounding-level difference between two runs stays rounding-level. (Adam divides by sqrt(v): a
    rounding difference in a near-zero gradient can flip the sign of a full-size step.)"""
    tensors = sequence_of("params", params, example="model.parameters()",
                          item=lambda name, p: instance(name, p, torch.Tensor, "a parameter (model.parameters())"))
    return torch.optim.SGD(tensors, lr=positive_float("lr", lr), momentum=0.9)


def flat(model: nn.Module) -> torch.Tensor:
    """All weights of ``model`` as one FP32 vector (DTensors: call on their full tensors)."""
    module("model", model)
    return torch.cat([p.detach().float().reshape(-1) for p in model.parameters()])


def rel(a: torch.Tensor, b: torch.Tensor) -> float:
    """Relative difference ``||a - b|| / ||b||`` of two tensors of one shape (never broadcast)."""
    instance("a", a, torch.Tensor, "a tensor")
    instance("b", b, torch.Tensor, "a tensor")
    if a.shape != b.shape:
        raise ValueError(f"a and b must have the same shape, got {tuple(a.shape)} and {tuple(b.shape)}")
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def replica_spread(weights: torch.Tensor) -> float:
    """Largest difference of any weight between ranks (0.0: every replica is identical); a collective."""
    instance("weights", weights, torch.Tensor, "a tensor of this rank's weights (flat(model))")
    hi, lo = weights.clone(), weights.clone()
    dist.all_reduce(hi, op=dist.ReduceOp.MAX)
    dist.all_reduce(lo, op=dist.ReduceOp.MIN)
    return float((hi - lo).abs().max())


def wrap_ddp(model: nn.Module, ctx: RankContext) -> DistributedDataParallel:
    """``DistributedDataParallel`` around ``model`` on this rank's device (one GPU per rank)."""
    return DistributedDataParallel(model, device_ids=[ctx.device.index] if ctx.device.type == "cuda" else None)


@contextlib.contextmanager
def tap_all_reduce() -> Iterator[list[tuple[int, str]]]:
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

    dist.all_reduce = tapped
    try:
        yield calls
    finally:
        dist.all_reduce = original


def comm_hook(name: str) -> Callable[..., Any]:
    """PyTorch's DDP hook for ``name``: allreduce (FP32), fp16 or bf16 (``*_compress_hook``)."""
    one_of("name", name, HOOKS)
    from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

    return {
        "allreduce": default_hooks.allreduce_hook,
        "fp16": default_hooks.fp16_compress_hook,
        "bf16": default_hooks.bf16_compress_hook,
    }[name]
