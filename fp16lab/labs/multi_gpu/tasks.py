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
from typing import Any

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn
from torch.nn.parallel import DistributedDataParallel

from fp16lab.checks import non_negative_int, positive_float
from fp16lab.device import synchronize
from fp16lab.labs.multi_gpu.launcher import RankContext
from fp16lab.labs.multi_gpu.model import (
    adam,
    comm_hook,
    eval_loss,
    flat,
    fsdp2,
    global_batch,
    local_bytes,
    micro,
    mlp,
    optimizer_tensors,
    rel,
    replica_spread,
    sgd,
    shard,
    tap_all_reduce,
    unflat,
    wrap_ddp,
)
from fp16lab.precision import Precision, autocast, precision_context
from fp16lab.train import load_checkpoint, make_scaler, save_checkpoint, train_step

__all__ = [
    "whoami",
    "fail_on_rank",
    "hang_on_rank",
    "task_ddp_vs_single",
    "task_skip_agreement",
    "task_accumulation",
    "task_compress_hooks",
    "task_checkpoint",
    "task_fsdp",
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


# ------------------------------------------------------- DDP equals one process


def task_ddp_vs_single(
    ctx: RankContext, *, precisions: list[str], steps: int, batch: int, width: int, depth: int, lr: float,
    seed: int,
) -> dict[str, Any]:
    """DDP on ``world_size`` ranks x ``batch`` rows against one process on the combined batch."""
    rows, spread = [], {}
    for name in precisions:
        p = Precision(name)
        with precision_context(p):  # fp32 = true FP32 (TF32 off on GPUs)
            torch.manual_seed(seed)
            single = mlp(width, depth).to(ctx.device)  # the one-process reference (rank 0 trains it)
            ddp = wrap_ddp(copy.deepcopy(single), ctx)
            opt, scaler = sgd(ddp.parameters(), lr), make_scaler(p, ctx.device)
            opt1, scaler1 = sgd(single.parameters(), lr), make_scaler(p, ctx.device)
            for step in range(steps):
                x, y = global_batch(step, ctx.world_size * batch, width, seed, ctx.device)
                r = train_step(ddp, opt, scaler, [(shard(x, ctx, batch), shard(y, ctx, batch))],
                               precision=p, device=ctx.device)
                row = {"precision": name, "step": step, "loss": r.loss, "scale": r.scale, "skipped": r.skipped,
                       "grad_norm": r.grad_norm}
                if ctx.rank == 0:
                    r1 = train_step(single, opt1, scaler1, [(x, y)], precision=p, device=ctx.device)
                    row.update(single_loss=r1.loss, single_scale=r1.scale, single_grad_norm=r1.grad_norm,
                               rel_param_diff=rel(flat(ddp.module), flat(single)))
                rows.append(row)
            spread[name] = replica_spread(flat(ddp.module))
    return {"rank": ctx.rank, "rows": rows, "replica_spread": spread}


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


# ------------------------------------------------------- accumulation, no_sync, clip


def _ddp_accumulate(ctx: RankContext, ddp: DistributedDataParallel, opt: Any, scaler: Any, x: torch.Tensor, y: torch.Tensor,
                    k: int, batch: int, max_norm: float, use_no_sync: bool) -> tuple[float, float]:
    """One optimizer step of ``k`` micro-batches; returns (this rank's own norm before the
    all-reduce, the clipped global norm)."""
    own = math.nan
    for part in range(k):
        last = part == k - 1
        # no_sync(): backward only accumulates locally; the last micro-batch's backward all-reduces.
        sync = contextlib.nullcontext() if (last or not use_no_sync) else ddp.no_sync()
        with sync:
            with autocast("fp16", ctx.device):
                loss = F.cross_entropy(ddp(shard(x, ctx, batch, part)), shard(y, ctx, batch, part))
            scaler.scale(loss / k).backward()
        if use_no_sync and part == k - 2:  # this rank's own partial gradient, before any all-reduce
            own = float(torch.linalg.vector_norm(torch.cat([q.grad.reshape(-1) for q in ddp.parameters() if q.grad is not None])))
            own /= scaler.get_scale()
    scaler.unscale_(opt)  # after the synchronising backward, before clipping
    norm = float(torch.nn.utils.clip_grad_norm_(ddp.parameters(), max_norm))
    scaler.step(opt)
    scaler.update()
    opt.zero_grad(set_to_none=True)
    return own, norm


def _single_accumulate(ctx: RankContext, model: nn.Module, opt: Any, scaler: Any, x: torch.Tensor,
                       y: torch.Tensor, k: int, batch: int, max_norm: float) -> float:
    """The same optimizer step in one process on every rank's rows; returns the clipped norm."""
    for part in range(k):
        with autocast("fp16", ctx.device):
            loss = F.cross_entropy(model(micro(x, ctx.world_size, batch, part)), micro(y, ctx.world_size, batch, part))
        scaler.scale(loss / k).backward()
    scaler.unscale_(opt)
    norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm))
    scaler.step(opt)
    scaler.update()
    opt.zero_grad(set_to_none=True)
    return norm


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


# ------------------------------------------------------------------ 16-bit gradients


def task_compress_hooks(
    ctx: RankContext, *, hooks: list[str], precision: str, steps: int, warmup: int, batch: int, width: int,
    depth: int, lr: float, seed: int,
) -> dict[str, Any]:
    """Train the same model once per communication hook; tap what each hands to all_reduce."""
    p = Precision(precision)
    rows: list[dict[str, Any]] = []
    baseline: torch.Tensor | None = None
    for name in hooks:
        with precision_context(p):
            torch.manual_seed(seed)
            ddp = wrap_ddp(mlp(width, depth).to(ctx.device), ctx)
            ddp.register_comm_hook(None, comm_hook(name))
            opt, scaler = sgd(ddp.parameters(), lr), make_scaler(p, ctx.device)
            times, skipped = [], 0
            if ctx.device.type == "cuda":
                torch.cuda.reset_peak_memory_stats(ctx.device)
            with tap_all_reduce() as calls:
                for step in range(warmup + steps):
                    if step == warmup:
                        calls.clear()  # count the measured steps only
                    x, y = global_batch(step, ctx.world_size * batch, width, seed, ctx.device)
                    synchronize(ctx.device)
                    t0 = time.perf_counter()
                    r = train_step(ddp, opt, scaler, [(shard(x, ctx, batch), shard(y, ctx, batch))],
                                   precision=p, device=ctx.device, track_grad_norm=False)
                    synchronize(ctx.device)
                    if step >= warmup:
                        times.append(time.perf_counter() - t0)
                    skipped += int(r.skipped)
            peak = torch.cuda.max_memory_allocated(ctx.device) if ctx.device.type == "cuda" else None
            weights = flat(ddp.module).cpu()
            baseline = weights if baseline is None else baseline
            rows.append({
                "hook": name,
                "wire_dtype": calls[0][1] if calls else None,
                "all_reduce_calls": len(calls),
                "bytes": sum(b for b, _ in calls),
                "final_eval_loss": eval_loss(ddp.module, width, seed, ctx.device),
                "rel_param_diff_vs_first": rel(weights, baseline),
                "skipped_steps": skipped,
                "step_ms_median": 1e3 * sorted(times)[len(times) // 2],
                "peak_memory_bytes": peak,
            })
            del ddp, opt  # the next hook's peak memory must not include this model
    return {"rank": ctx.rank, "rows": rows}


# --------------------------------------------------------------------- checkpoints


def task_checkpoint(
    ctx: RankContext, *, path: str, steps: int, save_at: int, batch: int, width: int, depth: int, lr: float,
    seed: int, init_scale: float, growth_interval: int,
) -> dict[str, Any]:
    """Uninterrupted FP16-AMP DDP run vs save at ``save_at`` and resume, with and without the scaler."""

    def fresh() -> tuple[nn.Module, torch.optim.Optimizer, torch.amp.GradScaler]:
        torch.manual_seed(seed)
        model = mlp(width, depth).to(ctx.device)
        scaler = torch.amp.GradScaler(ctx.device.type, init_scale=init_scale, growth_interval=growth_interval)
        return model, sgd(model.parameters(), lr), scaler

    def train(model: nn.Module, opt: Any, scaler: Any, start: int, stop: int) -> list[dict[str, Any]]:
        ddp, hist = wrap_ddp(model, ctx), []
        for step in range(start, stop):
            x, y = global_batch(step, ctx.world_size * batch, width, seed, ctx.device)
            r = train_step(ddp, opt, scaler, [(shard(x, ctx, batch), shard(y, ctx, batch))], precision="fp16",
                           device=ctx.device, track_grad_norm=False)
            hist.append({"step": step, "scale": r.scale, "skipped": r.skipped})
        return hist

    model, opt, scaler = fresh()
    uninterrupted = train(model, opt, scaler, 0, steps)
    reference = flat(model)

    model, opt, scaler = fresh()
    train(model, opt, scaler, 0, save_at)
    if ctx.rank == 0:  # one writer: every rank holds the same model, optimizer and scaler state
        save_checkpoint(path, model, opt, scaler=scaler, step=save_at)
    dist.barrier()  # nobody reads the file before it is complete
    rows = []
    for restore_scaler in (True, False):
        model, opt, scaler = fresh()
        # restore_rng=False: each rank has its own RNG stream; this task's data depend on the step only.
        load_checkpoint(path, model, opt, scaler=scaler if restore_scaler else None, restore_rng=False)
        rest = train(model, opt, scaler, save_at, steps)
        weights = flat(model)
        rows.append({
            "resume": "with the scaler state" if restore_scaler else "scaler state not restored",
            "scale_at_resume": rest[0]["scale"],
            "final_scale": rest[-1]["scale"],
            "skipped_after_resume": sum(h["skipped"] for h in rest),
            "max_abs_param_diff": float((weights - reference).abs().max()),
            "bitwise_equal": bool(torch.equal(weights, reference)),
        })
    return {"rank": ctx.rank, "uninterrupted": uninterrupted, "resumed": rows,
            "replica_spread": replica_spread(reference)}


# --------------------------------------------------------------------------- FSDP2


def _fsdp_reference(ctx: RankContext, steps: int, batch: int, width: int, depth: int, lr: float,
                    seed: int) -> tuple[torch.Tensor, torch.Tensor, float]:
    """One process, FP32, the combined batch: (first gradient, final weights, held-out loss), on the CPU."""
    torch.manual_seed(seed)
    single = mlp(width, depth).to(ctx.device)
    opt = adam(single.parameters(), lr)
    first = torch.empty(0)
    for step in range(steps):
        x, y = global_batch(step, ctx.world_size * batch, width, seed, ctx.device)
        F.cross_entropy(single(x), y).backward()
        if step == 0:
            first = torch.cat([q.grad.reshape(-1) for q in single.parameters() if q.grad is not None]).cpu()
        opt.step()
        opt.zero_grad(set_to_none=True)
    return first, flat(single).cpu(), eval_loss(single, width, seed, ctx.device)


def _sharded(ctx: RankContext, spec: str, width: int, depth: int) -> Any:
    """``spec`` "ddp", or "param_dtype/reduce_dtype": fully_shard each Linear, then the whole model."""
    model = mlp(width, depth).to(ctx.device)
    if spec == "ddp":
        return wrap_ddp(model, ctx)
    from torch.distributed.device_mesh import init_device_mesh

    fully_shard, MixedPrecisionPolicy = fsdp2()
    dtypes = {"fp32": torch.float32, "bf16": torch.bfloat16}
    param_dtype, reduce_dtype = (dtypes[s] for s in spec.split("/"))
    policy = MixedPrecisionPolicy(param_dtype=param_dtype, reduce_dtype=reduce_dtype)
    mesh = init_device_mesh(ctx.device.type, (ctx.world_size,))  # explicit: CPU ranks keep CPU shards
    for layer in model:
        if isinstance(layer, nn.Linear):
            fully_shard(layer, mesh=mesh, mp_policy=policy)
    return fully_shard(model, mesh=mesh, mp_policy=policy)


def _full(t: torch.Tensor) -> torch.Tensor:
    """The whole tensor on the CPU: a DTensor's ``full_tensor()`` gathers it (a collective)."""
    return (t.full_tensor() if hasattr(t, "full_tensor") else t).detach().float().reshape(-1).cpu()


def task_fsdp(ctx: RankContext, *, policies: list[str], steps: int, batch: int, width: int, depth: int,
              lr: float, seed: int) -> dict[str, Any]:
    """FSDP2 with MixedPrecisionPolicy settings, and DDP, against one FP32 process (Adam)."""
    rows = []
    with precision_context("fp32"):
        ref_grad, ref_final, ref_loss = _fsdp_reference(ctx, steps, batch, width, depth, lr, seed)
        for spec in ["ddp", *policies]:
            torch.manual_seed(seed)
            net = _sharded(ctx, spec, width, depth)
            opt = adam(net.parameters(), lr)
            first, grad_bytes = torch.empty(0), 0
            for step in range(steps):
                if step == min(1, steps - 1) and ctx.device.type == "cuda":
                    torch.cuda.reset_peak_memory_stats(ctx.device)  # steady state, after step 0's extra gather
                x, y = global_batch(step, ctx.world_size * batch, width, seed, ctx.device)
                F.cross_entropy(net(shard(x, ctx, batch)).float(), shard(y, ctx, batch)).backward()
                if step == 0:  # every rank calls full_tensor(): it is a collective
                    first = torch.cat([_full(q.grad) for q in net.parameters() if q.grad is not None])
                if step == steps - 1:
                    grad_bytes = local_bytes(q.grad for q in net.parameters())
                opt.step()
                opt.zero_grad(set_to_none=True)
            peak = torch.cuda.max_memory_allocated(ctx.device) if ctx.device.type == "cuda" else None
            held = {"param_bytes": local_bytes(net.parameters()), "grad_bytes": grad_bytes,
                    "optimizer_bytes": local_bytes(optimizer_tensors(opt))}
            final = torch.cat([_full(q) for q in net.parameters()])
            del net, opt  # the next setup's peak memory must not include this one
            rows.append({
                "setup": spec, **held, "peak_memory_bytes": peak,
                "first_grad": first if ctx.rank == 0 else None,
                "rel_grad_error": rel(first, ref_grad),
                "rel_param_diff": rel(final, ref_final),
                "final_eval_loss": eval_loss(unflat(width, depth, final, ctx.device), width, seed, ctx.device),
            })
    return {"rank": ctx.rank, "rows": rows, "reference_eval_loss": ref_loss}
