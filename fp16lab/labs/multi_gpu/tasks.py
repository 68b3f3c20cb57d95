"""What every rank runs: the lesson's experiments, each a function ``task(ctx, **kwargs)``.

Spawned processes import these by name, so they live here, not in the notebook. Each returns
plain Python data (numbers, lists, dicts, CPU tensors): the launcher pickles it back to the
parent, where :mod:`fp16lab.labs.multi_gpu.experiments` turns the ranks' answers into tables.
``fp16lab.labs.multi_gpu.task_source(experiment)`` shows a task's code in the lesson.
"""

from __future__ import annotations

import contextlib
import copy
import math
import os
import time
from collections.abc import Iterator
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from fp16lab.checks import non_negative_int, positive_float
from fp16lab.labs.multi_gpu.launcher import RankContext
from fp16lab.labs.multi_gpu.model import (
    comm_hook,
    flat,
    global_batch,
    micro,
    mlp,
    rel,
    replica_spread,
    sgd,
    shard,
    tap_all_reduce,
    wrap_ddp,
)
from fp16lab.train import amp_step, make_scaler, train_step

__all__ = [
    "whoami",
    "fail_on_rank",
    "hang_on_rank",
    "task_skip_agreement",
    "task_fsdp_skip_agreement",
    "task_accumulation",
]


# ------------------------------------------------------------------ demonstrations


def whoami(ctx: RankContext) -> dict[str, Any]:
    """Each rank's identity, and one all-reduce that proves the ranks talk to each other."""
    from fp16lab.hardware import gpu_facts

    t = torch.tensor([float(ctx.rank)], device=ctx.device)
    dist.all_reduce(t)  # sum of the ranks: 0 + 1 + ... + (n-1)
    facts = gpu_facts(ctx.device) if ctx.device.type == "cuda" else None
    return {
        "rank": ctx.rank,
        "world_size": dist.get_world_size(),
        "backend": str(dist.get_backend()),
        "device": str(ctx.device) + (f" ({facts.real_name})" if facts else ""),
        "pid": os.getpid(),
        "sum_of_ranks": float(t.item()),
        "torch": torch.__version__,
    }


def _demo_rank(ctx: RankContext, rank: object) -> None:
    """Every rank refuses a ``rank`` outside the world alike (no rank waits in a barrier for it)."""
    if non_negative_int("rank", rank) >= ctx.world_size:
        raise ValueError(f"rank must be a rank of this world (0..{ctx.world_size - 1}), got {rank!r}")


def fail_on_rank(ctx: RankContext, *, rank: int = 1) -> int:
    """A broken task: ``rank`` raises while the others wait for it in a barrier."""
    _demo_rank(ctx, rank)
    if ctx.rank == rank:
        raise ValueError(f"rank {rank} was told to fail")
    dist.barrier()
    return ctx.rank


def hang_on_rank(ctx: RankContext, *, rank: int = 1, seconds: float = 3600.0) -> int:
    """A hung task: ``rank`` sleeps for ``seconds`` instead of joining the others' barrier."""
    _demo_rank(ctx, rank)
    positive_float("seconds", seconds)
    if ctx.rank == rank:
        time.sleep(seconds)
    dist.barrier()
    return ctx.rank


def task_skip_agreement(ctx: RankContext, *, bad_rank: int, batch: int, width: int, depth: int, lr: float,
                        seed: int) -> dict[str, Any]:
    """One FP16-AMP step in which only ``bad_rank``'s loss is infinite."""
    torch.manual_seed(seed)
    ddp = wrap_ddp(mlp(width, depth).to(ctx.device), ctx)
    opt, scaler = sgd(ddp.parameters(), lr), make_scaler("fp16", ctx.device)
    before = flat(ddp.module)

    def loss_fn(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        loss = F.cross_entropy(out, y)
        return loss * float("inf") if ctx.rank == bad_rank else loss

    x, y = global_batch(0, ctx.world_size * batch, width, seed, ctx.device)
    r = train_step(ddp, opt, scaler, [(shard(x, ctx, batch), shard(y, ctx, batch))], precision="fp16",
                   device=ctx.device, loss_fn=loss_fn)
    return {"rank": ctx.rank, "own_loss_finite": math.isfinite(r.loss), "scale_before": r.scale_before,
            "scale_after": r.scale, "skipped": r.skipped, "params_changed": bool((flat(ddp.module) != before).any())}


def _full(model: nn.Module) -> torch.Tensor:
    """All weights of an FSDP2 model as one FP32 vector, gathered from the shards (a collective)."""
    return torch.cat([p.full_tensor().detach().float().reshape(-1) for p in model.parameters()])  # type: ignore[attr-defined]


def task_fsdp_skip_agreement(ctx: RankContext, *, bad_rank: int, batch: int, width: int, depth: int, lr: float,
                             seed: int) -> dict[str, Any]:
    """One FP16 FSDP2 step (``param_dtype=float16``, ``torch.amp.GradScaler``) in which only ``bad_rank``'s
    own gradient shard gets an inf, after the reduce-scatter: no other rank holds that value."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    torch.manual_seed(seed)
    model = mlp(width, depth).to(ctx.device)
    mesh = init_device_mesh(ctx.device.type, (ctx.world_size,))
    policy = MixedPrecisionPolicy(param_dtype=torch.float16, reduce_dtype=torch.float32)
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh, mp_policy=policy)
    fully_shard(model, mesh=mesh, mp_policy=policy)
    opt, scaler = sgd(model.parameters(), lr), make_scaler("fp16", ctx.device)
    before = _full(model)
    x, y = global_batch(0, ctx.world_size * batch, width, seed, ctx.device)
    scale_before = float(scaler.get_scale())
    own_finite = [True]

    # amp_step asks for the next micro-batch after the backward (and its reduce-scatter) and before
    # unscale_/step: the moment to touch a shard
    def one_batch_then_the_inf() -> Iterator[int]:
        yield 0
        shards = [p.grad.to_local() for p in model.parameters()]  # type: ignore[union-attr]
        if ctx.rank == bad_rank:
            with torch.no_grad():
                shards[0].view(-1)[0] = float("inf")  # this rank's shard only: the others never see it
        own_finite[0] = all(bool(torch.isfinite(g).all()) for g in shards)

    def loss_of(_: int) -> torch.Tensor:
        return F.cross_entropy(model(shard(x, ctx, batch)).float(), shard(y, ctx, batch))

    # precision "fp32": no autocast, FSDP2's policy casts; the scaler is fp16's
    amp_step(loss_of, one_batch_then_the_inf(), opt, scaler, precision="fp32", device=ctx.device)
    return {"rank": ctx.rank, "own_shard_finite": own_finite[0], "scale_before": scale_before,
            "scale_after": float(scaler.get_scale()), "skipped": float(scaler.get_scale()) < scale_before,
            "params_changed": bool((_full(model) != before).any())}


# ------------------------------------------------------- accumulation, no_sync, clip


def _ddp_accumulate(ctx: RankContext, ddp: DistributedDataParallel, opt: Any, scaler: Any, x: torch.Tensor, y: torch.Tensor,
                    k: int, batch: int, max_norm: float, use_no_sync: bool) -> tuple[float, float]:
    """One optimizer step of ``k`` micro-batches (the library's :func:`~fp16lab.train.amp_step`); returns
    (this rank's own norm before the all-reduce, the clipped global norm)."""
    own = [math.nan]

    def loss_of(part: int) -> torch.Tensor:
        if use_no_sync and part == k - 1 and k > 1:  # this rank's own partial gradient, before any all-reduce
            grads = [q.grad.reshape(-1) for q in ddp.parameters() if q.grad is not None]
            own[0] = float(torch.linalg.vector_norm(torch.cat(grads))) / scaler.get_scale()
        # no_sync(): the micro-batch's backward only accumulates locally (DDP reads the switch in the forward
        # pass); the last micro-batch's backward all-reduces.
        sync = ddp.no_sync() if use_no_sync and part < k - 1 else contextlib.nullcontext()
        with sync:
            return F.cross_entropy(ddp(shard(x, ctx, batch, part)), shard(y, ctx, batch, part)) / k

    # unscale_ after the synchronising backward, then the clip
    norm = amp_step(loss_of, range(k), opt, scaler, precision="fp16", device=ctx.device, clip_grad_norm=max_norm)
    return own[0], float(norm)  # type: ignore[arg-type]


def _single_accumulate(ctx: RankContext, model: nn.Module, opt: Any, scaler: Any, x: torch.Tensor,
                       y: torch.Tensor, k: int, batch: int, max_norm: float) -> float:
    """The same optimizer step in one process on every rank's rows; returns the clipped norm."""
    def loss_of(part: int) -> torch.Tensor:
        rows = micro(x, ctx.world_size, batch, part), micro(y, ctx.world_size, batch, part)
        return F.cross_entropy(model(rows[0]), rows[1]) / k

    norm = amp_step(loss_of, range(k), opt, scaler, precision="fp16", device=ctx.device, clip_grad_norm=max_norm)
    return float(norm)  # type: ignore[arg-type]


def task_accumulation(
    ctx: RankContext, *, micro_batches: int, steps: int, batch: int, width: int, depth: int, lr: float,
    seed: int, max_norm: float,
) -> dict[str, Any]:
    """FP16-AMP gradient accumulation under DDP, with and without ``no_sync``, then clipping."""
    k = micro_batches
    out: dict[str, Any] = {"rank": ctx.rank, "variants": []}
    for use_no_sync in (True, False):
        torch.manual_seed(seed)
        single = mlp(width, depth).to(ctx.device)
        ddp = wrap_ddp(copy.deepcopy(single), ctx)
        ddp.register_comm_hook(None, comm_hook("allreduce"))  # = DDP's built-in all-reduce, visible to the tap
        opt, scaler = sgd(ddp.parameters(), lr), make_scaler("fp16", ctx.device)
        opt1, scaler1 = sgd(single.parameters(), lr), make_scaler("fp16", ctx.device)
        own, synced, single_norms = [], [], []
        with tap_all_reduce() as calls:
            for step in range(steps):
                x, y = global_batch(step, k * ctx.world_size * batch, width, seed, ctx.device)
                o, s = _ddp_accumulate(ctx, ddp, opt, scaler, x, y, k, batch, max_norm, use_no_sync)
                own.append(o)
                synced.append(s)
                if ctx.rank == 0:
                    single_norms.append(_single_accumulate(ctx, single, opt1, scaler1, x, y, k, batch, max_norm))
        out["variants"].append({
            "no_sync": use_no_sync,
            "all_reduce_calls": len(calls),
            "all_reduce_bytes": sum(b for b, _ in calls),
            "own_norms": own,
            "synced_norms": synced,
            "single_norms": single_norms,
            "rel_param_diff": rel(flat(ddp.module), flat(single)) if ctx.rank == 0 else math.nan,
            "replica_spread": replica_spread(flat(ddp.module)),
        })
    return out
