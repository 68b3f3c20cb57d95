"""The lesson's measurements as tables: each runs one task on every rank of a :class:`Workers`.

Arguments are validated here, once, before anything is sent to the ranks; the ranks run the
code in :mod:`fp16lab.labs.multi_gpu.tasks`; the answers come back as pandas DataFrames (what the
ranks agree on as columns, per-rank values as ``..._rank{r}`` columns or rows).
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch

import fp16lab.labs.multi_gpu.tasks as tasks
from fp16lab.checks import instance, non_negative_int, one_of, positive_float, positive_int
from fp16lab.course.runtime.results import Measured, load_reference, output_path, save_results
from fp16lab.labs.multi_gpu.launcher import Workers, World
from fp16lab.labs.multi_gpu.model import HOOKS, model_numel, rel
from fp16lab.precision import parse_precision

__all__ = [
    "FSDP2_MIN_TORCH",
    "FSDP_POLICIES",
    "rank_table",
    "ddp_vs_single",
    "skip_agreement",
    "accumulation",
    "compress_hooks",
    "checkpoint_resume",
    "fsdp2_support",
    "fsdp_policies",
    "task_source",
    "world_metadata",
    "measure_or_reference",
]

FSDP2_MIN_TORCH = (2, 6)  # `from torch.distributed.fsdp import fully_shard, MixedPrecisionPolicy`
FSDP_POLICIES = ("fp32/fp32", "bf16/fp32", "bf16/bf16")


@dataclass(frozen=True)
class _Model:
    batch: int
    width: int
    depth: int
    lr: float
    seed: int

    def kwargs(self) -> dict[str, Any]:
        return {"batch": self.batch, "width": self.width, "depth": self.depth, "lr": self.lr, "seed": self.seed}


def _model(batch: object, width: object, depth: object, lr: object, seed: object) -> _Model:
    return _Model(positive_int("batch", batch), positive_int("width", width), positive_int("depth", depth),
                  positive_float("lr", lr), non_negative_int("seed", seed))


def _running(workers: object) -> Workers:
    if not isinstance(workers, Workers):
        raise ValueError(f"workers must be a fp16lab.labs.multi_gpu.Workers, got {workers!r}")
    w = workers
    if not w.alive:
        raise ValueError("workers are stopped (closed, or a task failed or timed out); start new Workers")
    return w


def rank_table(workers: Workers) -> pd.DataFrame:
    """One row per rank (:func:`~fp16lab.labs.multi_gpu.tasks.whoami`): rank, world size, backend,
    device, process id, and the sum of all ranks from one all-reduce."""
    return pd.DataFrame(_running(workers).run(tasks.whoami))


def ddp_vs_single(
    workers: Workers, *, precisions: Sequence[str] = ("fp32", "fp16", "bf16"), steps: int = 12, batch: int = 16,
    width: int = 64, depth: int = 2, lr: float = 0.05, seed: int = 0,
) -> pd.DataFrame:
    """Train with DDP (``batch`` rows per rank) and in one process on the combined batch.

    One row per (precision, step): DDP's loss (the mean of the ranks' losses) and the single
    process's loss on all rows, both gradient norms, ``rel_param_diff`` = ||w_ddp - w_single|| /
    ||w_single|| after the step, whether the step was skipped, and each rank's GradScaler scale.
    ``attrs["replica_spread"]``: per precision, the largest difference of any weight between
    ranks at the end. Defaults: fp32, fp16 and bf16; 12 steps of SGD with momentum 0.9 (lr 0.05);
    16 rows per rank; a width-64, depth-2 MLP; seed 0.
    """
    w = _running(workers)
    names = [parse_precision(p).value for p in precisions]
    if not names:
        raise ValueError("precisions must name at least one of 'fp32', 'tf32', 'fp16', 'bf16', got none")
    m = _model(batch, width, depth, lr, seed)
    res = w.run(tasks.task_ddp_vs_single, precisions=names, steps=positive_int("steps", steps), **m.kwargs())
    first = pd.DataFrame(res[0]["rows"])
    losses = pd.DataFrame({r["rank"]: [row["loss"] for row in r["rows"]] for r in res})
    frame = pd.DataFrame({
        "precision": first["precision"], "step": first["step"],
        # every rank saw its own rows: the mean of the ranks' losses is the combined batch's loss
        "ddp_loss": losses.mean(axis=1), "single_loss": first["single_loss"],
        "ddp_grad_norm": first["grad_norm"], "single_grad_norm": first["single_grad_norm"],
        "rel_param_diff": first["rel_param_diff"], "skipped": first["skipped"], "single_scale": first["single_scale"],
    })
    for r in res:
        frame[f"scale_rank{r['rank']}"] = [row["scale"] for row in r["rows"]]
    frame.attrs.update(replica_spread=res[0]["replica_spread"], world=str(w.world))
    return frame


def skip_agreement(workers: Workers, *, bad_rank: int = 1, batch: int = 16, width: int = 64, depth: int = 2,
                   lr: float = 0.05, seed: int = 0) -> pd.DataFrame:
    """One FP16-AMP DDP step where only ``bad_rank``'s loss is inf: one row per rank (its own
    loss finite?, scale before/after, skipped, weights changed). Default: rank 1 goes bad."""
    w = _running(workers)
    bad = non_negative_int("bad_rank", bad_rank)
    if bad >= w.world.world_size:
        raise ValueError(f"bad_rank must be a rank of this world (0..{w.world.world_size - 1}), got {bad_rank!r}")
    m = _model(batch, width, depth, lr, seed)
    return pd.DataFrame(w.run(tasks.task_skip_agreement, bad_rank=bad, **m.kwargs()))


def accumulation(
    workers: Workers, *, micro_batches: int = 4, steps: int = 3, batch: int = 8, width: int = 64, depth: int = 2,
    lr: float = 0.05, seed: int = 0, max_norm: float = 1.0,
) -> pd.DataFrame:
    """Gradient accumulation (FP16-AMP, clipping at ``max_norm``) with and without ``no_sync``.

    One row per variant: all-reduce calls and bytes per optimizer step (tapped), the relative
    weight difference to one process on the combined batch, the largest weight difference
    between ranks, the clipped norm (after ``unscale_``) on every rank and in the single process,
    and each rank's own gradient norm before the all-reduce (``own_norm_rank{r}``, with no_sync).
    Defaults: 4 micro-batches of 8 rows per rank, 3 steps, ``max_norm=1.0``.
    """
    w = _running(workers)
    k = positive_int("micro_batches", micro_batches, minimum=2)
    st = positive_int("steps", steps)
    m = _model(batch, width, depth, lr, seed)
    res = w.run(tasks.task_accumulation, micro_batches=k, steps=st, max_norm=positive_float("max_norm", max_norm),
                **m.kwargs())
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
            row[f"own_norm_rank{r['rank']}"] = v["own_norms"][-1]
        rows.append(row)
    frame = pd.DataFrame(rows)
    frame.attrs["world"] = str(w.world)
    return frame


def compress_hooks(
    workers: Workers, *, hooks: Sequence[str] = HOOKS, precision: str = "fp16", steps: int = 10, warmup: int = 2,
    batch: int = 16, width: int = 64, depth: int = 2, lr: float = 0.05, seed: int = 0,
) -> pd.DataFrame:
    """Train once per DDP communication hook and measure what goes on the wire.

    One row per hook (``allreduce`` = full precision, ``fp16``/``bf16`` = PyTorch's
    ``fp16_compress_hook``/``bf16_compress_hook``): wire dtype, all-reduce calls and bytes per
    step (tapped), the bytes expected from the parameter count, the ring all-reduce traffic each
    rank sends (2(n-1)/n of the payload), the final held-out loss, the weight difference to the
    first hook's run, skipped steps, the median step time of the slowest rank (a speed result on
    GPUs only) and the peak GPU memory. Defaults: all three hooks, FP16-AMP, 2 warm-up and 10
    measured steps.
    """
    w = _running(workers)
    names = [one_of("hooks", h, HOOKS) for h in hooks]
    if not names:
        raise ValueError(f"hooks must name at least one of {', '.join(map(repr, HOOKS))}, got none")
    p = parse_precision(precision).value
    st = positive_int("steps", steps)
    m = _model(batch, width, depth, lr, seed)
    res = w.run(tasks.task_compress_hooks, hooks=names, precision=p, steps=st,
                warmup=non_negative_int("warmup", warmup), **m.kwargs())
    n, numel = w.world.world_size, model_numel(m.width, m.depth)
    rows = []
    for i, row in enumerate(res[0]["rows"]):
        peaks = [r["rows"][i]["peak_memory_bytes"] for r in res]
        rows.append({
            "hook": row["hook"],
            "wire_dtype": row["wire_dtype"],
            "all_reduce_calls_per_step": row["all_reduce_calls"] / st,
            "bytes_per_step": row["bytes"] / st,
            "expected_bytes_per_step": numel * (4 if row["hook"] == "allreduce" else 2),
            "ring_bytes_sent_per_rank": 2 * (n - 1) / n * row["bytes"] / st,
            "final_eval_loss": row["final_eval_loss"],
            "rel_param_diff_vs_allreduce": row["rel_param_diff_vs_first"],
            "skipped_steps": row["skipped_steps"],
            "step_ms": max(r["rows"][i]["step_ms_median"] for r in res),
            "peak_memory_gib": None if None in peaks else max(peaks) / 2**30,
        })
    frame = pd.DataFrame(rows)
    frame.attrs.update(world=str(w.world), precision=p, params=numel)
    return frame


def checkpoint_resume(
    workers: Workers, folder: "str | os.PathLike[str]", *, steps: int = 12, save_at: int = 6, batch: int = 16,
    width: int = 64, depth: int = 2, lr: float = 0.05, seed: int = 0, init_scale: float = 2.0**16,
    growth_interval: int = 2,
) -> pd.DataFrame:
    """FP16-AMP DDP: an uninterrupted run against save-after-``save_at``-steps-and-resume runs.

    Rank 0 writes the checkpoint (model, optimizer, GradScaler) into ``folder`` with
    :func:`fp16lab.train.save_checkpoint`; every rank loads it. One row per resume variant (with
    / without the scaler state): scale at resume, skipped steps after it, the largest weight
    difference to the uninterrupted run, and whether the weights are bitwise equal.
    ``attrs["uninterrupted"]`` holds the uninterrupted run's scale per step. Defaults: 12 steps,
    save after 6, ``growth_interval=2`` so that the scale moves within a short run (PyTorch's
    default is 2000 steps), initial scale 2**16.
    """
    w = _running(workers)
    out = Path(folder)
    if not out.is_dir():
        raise ValueError(f"folder must be an existing directory, got {str(folder)!r}")
    st = positive_int("steps", steps, minimum=2)
    at = positive_int("save_at", save_at)
    if at >= st:
        raise ValueError(f"save_at must be between 1 and steps - 1 = {st - 1}, got {save_at!r}")
    m = _model(batch, width, depth, lr, seed)
    res = w.run(tasks.task_checkpoint, path=str(out / "ddp_amp.pt"), steps=st, save_at=at,
                init_scale=positive_float("init_scale", init_scale),
                growth_interval=positive_int("growth_interval", growth_interval), **m.kwargs())
    frame = pd.DataFrame(res[0]["resumed"])
    frame.insert(1, "uninterrupted_final_scale", res[0]["uninterrupted"][-1]["scale"])
    diffs = [[row["max_abs_param_diff"] for row in r["resumed"]] for r in res]
    frame.attrs.update(uninterrupted=pd.DataFrame(res[0]["uninterrupted"]),
                       replica_spread=max(r["replica_spread"] for r in res),
                       all_ranks_equal=all(d == diffs[0] for d in diffs))
    return frame


def fsdp2_support() -> str | None:
    """None when FSDP2 (``fully_shard`` + ``MixedPrecisionPolicy``) can run here, else why not.

    Decided by the torch version (the public API exists from torch 2.6 on), so that asking does
    not import FSDP into this process; the ranks import it when they run :func:`fsdp_policies`.
    """
    version = tuple(int(x) for x in torch.__version__.split("+")[0].split(".")[:2])
    if version < FSDP2_MIN_TORCH:
        return (f"FSDP2's public API (torch.distributed.fsdp.fully_shard, MixedPrecisionPolicy) needs torch >= "
                f"{'.'.join(map(str, FSDP2_MIN_TORCH))}; this is torch {torch.__version__}")
    if not torch.distributed.is_available():
        return "this torch build has no torch.distributed"
    return None


def _policy(value: object) -> str:
    parts = value.split("/") if isinstance(value, str) else []
    if len(parts) != 2 or any(x not in ("fp32", "bf16") for x in parts):
        raise ValueError(f"each policy must be 'param_dtype/reduce_dtype' of fp32/bf16 (e.g. 'bf16/fp32'), got {value!r}")
    return str(value)


def fsdp_policies(
    workers: Workers, *, policies: Sequence[str] = FSDP_POLICIES, steps: int = 8, batch: int = 16, width: int = 64,
    depth: int = 2, lr: float = 1e-3, seed: int = 0,
) -> pd.DataFrame:
    """FSDP2 ``fully_shard`` with ``MixedPrecisionPolicy(param_dtype, reduce_dtype)``, plus DDP.

    ``policies`` are "param_dtype/reduce_dtype" pairs of fp32/bf16. One row per setup and rank:
    bytes of weights, gradients and Adam state this rank holds (shards only), peak GPU memory
    (steady state, from the second step), the first gradient's and the final weights' relative
    error against one FP32 process on the combined batch, and the final held-out loss.
    ``attrs["reduce_error"]``: relative difference of the first gradient between bf16 and fp32
    reduction (what reducing in bf16 adds). Defaults: fp32/fp32, bf16/fp32 and bf16/bf16;
    8 Adam steps (lr 1e-3). Raises ValueError where FSDP2 is missing (:func:`fsdp2_support`).
    """
    w = _running(workers)
    why = fsdp2_support()
    if why is not None:
        raise ValueError(why)
    names = [_policy(p) for p in policies]
    if not names:
        raise ValueError("policies must name at least one 'param_dtype/reduce_dtype' pair, got none")
    m = _model(batch, width, depth, lr, seed)
    res = w.run(tasks.task_fsdp, policies=names, steps=positive_int("steps", steps), **m.kwargs())
    rows = []
    for r in res:
        for row in r["rows"]:
            d = {k: v for k, v in row.items() if k != "first_grad"}
            d.update(rank=r["rank"], held_bytes=d["param_bytes"] + d["grad_bytes"] + d["optimizer_bytes"])
            rows.append(d)
    cols = ["setup", "rank", "param_bytes", "grad_bytes", "optimizer_bytes", "held_bytes", "peak_memory_bytes",
            "rel_grad_error", "rel_param_diff", "final_eval_loss"]
    frame = pd.DataFrame(rows)[cols]
    grads = {row["setup"]: row["first_grad"] for row in res[0]["rows"]}
    both = "bf16/bf16" in grads and "bf16/fp32" in grads
    frame.attrs.update(reduce_error=rel(grads["bf16/bf16"], grads["bf16/fp32"]) if both else None,
                       reference_eval_loss=res[0]["reference_eval_loss"], params=model_numel(m.width, m.depth),
                       world=str(w.world))
    return frame


_TASKS: dict[str, Callable[..., Any]] = {
    "ddp_vs_single": tasks.task_ddp_vs_single,
    "skip_agreement": tasks.task_skip_agreement,
    "accumulation": tasks.task_accumulation,
    "compress_hooks": tasks.task_compress_hooks,
    "checkpoint_resume": tasks.task_checkpoint,
    "fsdp_policies": tasks.task_fsdp,
}


def task_source(experiment: Callable[..., Any]) -> str:
    """The source of the code every rank runs for ``experiment`` (e.g. ``ddp_vs_single``)."""
    name = getattr(experiment, "__name__", None)
    if name not in _TASKS or getattr(experiment, "__module__", None) != __name__:
        raise ValueError(f"experiment must be one of {', '.join(_TASKS)}, got {experiment!r}")
    return inspect.getsource(_TASKS[name])


def world_metadata(world: World) -> dict[str, Any]:
    """:func:`fp16lab.course.env.run_metadata` of rank 0's device, plus ``world_size``, ``backend``,
    ``devices`` (the chip of every rank) and the NCCL version: what a multi-process result needs."""
    from fp16lab.course.env import run_metadata
    from fp16lab.hardware import gpu_facts

    w = instance("world", world, World, "a fp16lab.labs.multi_gpu.World")
    gpu = w.device_type == "cuda"
    meta = run_metadata("cuda:0" if gpu else "cpu")
    devices = []
    for i in range(w.world_size):
        facts = gpu_facts(i) if gpu else None
        devices.append(facts.real_name if facts else "cpu")
    nccl = ".".join(map(str, torch.cuda.nccl.version())) if w.backend == "nccl" else None
    meta.update(world_size=w.world_size, backend=w.backend, devices=devices, nccl=nccl)
    return meta


def measure_or_reference(world: World, name: str, measure: Callable[[], pd.DataFrame],
                         extra: dict[str, Any] | None = None) -> Measured:
    """:func:`fp16lab.course.runtime.results.measure_or_reference` for several GPUs: live when ``world`` is 2+ GPUs.

    A live table is saved to ``output_path(name)`` with :func:`world_metadata` (plus ``extra``);
    otherwise the committed multi-GPU reference is loaded (``frame`` None while none is recorded).
    """
    w = instance("world", world, World, "a fp16lab.labs.multi_gpu.World")
    if not isinstance(name, str) or not name or "/" in name or name.endswith(".json"):
        raise ValueError(f"name must be a bare results name like 'multi_gpu_hooks', got {name!r}")
    if not callable(measure):
        raise ValueError(f"measure must be a function returning a DataFrame, got {measure!r}")
    if extra is not None and not isinstance(extra, dict):
        raise ValueError(f"extra must be a dict of metadata or None, got {extra!r}")
    if not w.multi_gpu:
        frame, meta = load_reference(name)
        return Measured(frame, meta, live=False)
    frame = measure()
    if not isinstance(frame, pd.DataFrame):
        raise ValueError(f"measure must return a pandas DataFrame, it returned {type(frame).__name__}")
    meta = {**world_metadata(w), **(extra or {})}
    save_results(frame, output_path(name), meta)
    return Measured(frame, meta, live=True)
