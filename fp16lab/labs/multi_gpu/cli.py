"""``python -m fp16lab.labs.multi_gpu bench``: the lesson's multi-GPU measurements, saved with their world.

Run it on a machine with two or more GPUs: it starts one rank per GPU on NCCL (full mode), runs
DDP vs one process, the gradient-communication hooks and the FSDP2 policies at the lesson's full
sizes, and writes ``multi_gpu_ddp.json``, ``multi_gpu_hooks.json`` and ``multi_gpu_fsdp.json``
into ``--out`` with the world size, backend, NCCL version and every rank's device in the metadata.
"""

from __future__ import annotations

import argparse
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from fp16lab.checks import positive_float
from fp16lab.labs.multi_gpu.experiments import compress_hooks, ddp_vs_single, fsdp_policies, world_metadata
from fp16lab.labs.multi_gpu.launcher import BACKENDS, Workers, check_world, lesson_world
from fp16lab.labs.multi_gpu.model import model_numel

__all__ = ["bench", "add_distributed_parser", "main"]


def bench(out: "str | Path", *, world_size: int | None = None, backend: str = "nccl", timeout: float = 600.0) -> list[Path]:
    """Measure DDP, the compress hooks and FSDP2 on a world; save one JSON file each into ``out``.

    Defaults: the lesson's world (every GPU on NCCL in full mode with 2+ GPUs, else 2 CPU
    processes on gloo at quick sizes); ``backend`` applies with an explicit ``world_size``;
    600 s for start-up and for each measurement. Returns the paths written.
    """
    from fp16lab.course.runtime.results import save_results

    if not isinstance(out, (str, os.PathLike)) or not Path(out).is_dir():
        raise ValueError(f"out must be an existing folder, got {out!r}")
    folder = Path(out)
    world = lesson_world() if world_size is None else check_world(world_size, backend)
    timeout = positive_float("timeout", timeout)
    width, depth, batch = world.pick(64, 4096), world.pick(2, 8), world.pick(16, 64)
    print(f"world: {world}; MLP width {width}, depth {depth} ({model_numel(width, depth):,} parameters), "
          f"{batch} rows per rank", flush=True)
    meta = {**world_metadata(world), "width": width, "depth": depth, "batch_per_rank": batch}
    size = {"batch": batch, "width": width, "depth": depth}
    written = []
    with Workers(world.world_size, world.backend, timeout=timeout) as workers:
        print(f"started {workers} in {workers.start_seconds:.1f} s", flush=True)
        jobs: list[tuple[str, Callable[[], Any]]] = [
            ("multi_gpu_ddp", lambda: ddp_vs_single(workers, steps=world.pick(12, 50), **size)),
            ("multi_gpu_hooks", lambda: compress_hooks(workers, steps=world.pick(12, 50), warmup=world.pick(2, 10),
                                                       **size)),
            ("multi_gpu_fsdp", lambda: fsdp_policies(workers, steps=world.pick(4, 20), **size)),
        ]
        for name, job in jobs:
            t0 = time.perf_counter()
            frame = job()
            path = save_results(frame, folder / f"{name}.json", {**meta, "seconds": round(time.perf_counter() - t0, 1)})
            written.append(path)
            print(f"{name}: {len(frame)} rows -> {path}\n{frame.to_string(max_rows=24)}", flush=True)
    return written


def _run(args: argparse.Namespace) -> int:
    try:
        bench(args.out, world_size=args.world_size, backend=args.backend, timeout=args.timeout)
    except ValueError as exc:  # a refused argument: say so, change nothing
        raise SystemExit(f"bench: {exc}") from None
    return 0


def _add_args(p: argparse.ArgumentParser) -> None:
    cmds = p.add_subparsers(dest="action", required=True)
    b = cmds.add_parser("bench", help="measure DDP, compress hooks and FSDP2 on all GPUs; save JSON results")
    b.add_argument("--out", default="results/local", help="existing folder for the JSON files (default results/local)")
    b.add_argument("--world-size", type=int, default=None,
                   help="processes (default: every GPU on NCCL in full mode with 2+ GPUs, else 2 on gloo)")
    b.add_argument("--backend", choices=BACKENDS, default="nccl", help="with --world-size (default nccl)")
    b.add_argument("--timeout", type=float, default=600.0, help="seconds for start-up and for each task (default 600)")
    b.set_defaults(func=_run)


def add_distributed_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Register ``distributed`` with ``python -m fp16lab``."""
    _add_args(sub.add_parser("distributed", help="multi-process DDP/FSDP measurements (fp16lab.labs.multi_gpu)"))


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m fp16lab.labs.multi_gpu bench [--out DIR] [--world-size N --backend B] [--timeout S]``."""
    parser = argparse.ArgumentParser(prog="python -m fp16lab.labs.multi_gpu", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    _add_args(parser)
    from fp16lab.course.command import run_parsed

    return run_parsed(parser.parse_args(argv))
