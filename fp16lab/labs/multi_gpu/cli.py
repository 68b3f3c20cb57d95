"""``python -m fp16lab distributed``: the multi-GPU reference run, i.e. the training script under torchrun.

On a machine with two or more GPUs this starts ``fp16lab.labs.multi_gpu.train`` once per
configuration (DDP in FP32 and BF16, 16-bit gradients through the communication hooks, FSDP2 with
BF16 weights), one process per GPU on NCCL, and each run writes ``OUT/multi_gpu_<name>.json``::

    python -m fp16lab distributed --out results            # every GPU; the reference results
    python -m fp16lab distributed --dry-run                # print the torchrun commands only

Each run is exactly::

    torchrun --standalone --nproc_per_node=N -m fp16lab.labs.multi_gpu.train ARGS --out OUT/multi_gpu_NAME.json

Without GPUs it runs the same commands on 2 CPU processes (gloo) at the tiny size: a check of the
path, not a measurement. :func:`torchrun_command` and :func:`run_script` are what lesson 10 uses.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

__all__ = ["REFERENCE_RUNS", "torchrun_command", "start_script", "finish_script", "run_script", "reference_runs", "reference_commands", "add_distributed_parser"]

# name -> the script's arguments (size, steps and --out are added per run)
REFERENCE_RUNS: dict[str, list[str]] = {
    "ddp_fp32": ["--precision", "fp32"],
    "ddp_bf16": ["--precision", "bf16"],
    "ddp_fp16_grad_fp16": ["--precision", "fp16", "--grad-dtype", "fp16"],
    "ddp_bf16_grad_bf16": ["--precision", "bf16", "--grad-dtype", "bf16"],
    "fsdp_bf16": ["--fsdp", "--precision", "bf16", "--grad-dtype", "fp32"],
}


def torchrun_command(script_args: Sequence[str], nproc: int = 2) -> list[str]:
    """``python -m torch.distributed.run --standalone --nproc_per_node=N -m fp16lab.labs.multi_gpu.train ARGS``
    (``torchrun`` is that module's console script)."""
    if isinstance(nproc, bool) or not isinstance(nproc, int) or nproc < 1:
        raise ValueError(f"nproc must be an int >= 1, got {nproc!r}")
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={nproc}",
            "-m", "fp16lab.labs.multi_gpu.train", *map(str, script_args)]


def _env() -> dict[str, str]:
    """This process's environment, with this fp16lab first on the path (a worktree or an install)."""
    root = str(Path(__file__).resolve().parents[3])
    path = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONPATH": root + (os.pathsep + path if path else ""), "OMP_NUM_THREADS": "1"}


_RUNNING: list[subprocess.Popen[str]] = []  # torchruns started by this process and not yet waited for


def _slots(nproc: int) -> int:
    """How many torchruns may run at once: each rank wants a core, and ranks that wait on a busy CPU miss
    the rendezvous and gloo timeouts (a 2-core CI machine runs them one at a time)."""
    return max(1, (os.cpu_count() or 1) // (2 * max(1, nproc)))


def start_script(script_args: Sequence[str], nproc: int = 2) -> tuple[subprocess.Popen[str], Path]:
    """Start one torchrun of the script in the background; (process, the JSON path it will write).

    When as many torchruns as this machine's cores allow are still running, it first waits for one
    of them to end. The run's output goes to ``<out>.log`` beside the JSON.
    """
    args = list(map(str, script_args))
    if "--out" not in args:
        args += ["--out", tempfile.mkstemp(suffix=".json", prefix="fp16lab_train_")[1]]
    out = Path(args[args.index("--out") + 1])
    while sum(p.poll() is None for p in _RUNNING) >= _slots(nproc):
        time.sleep(0.2)
    _RUNNING[:] = [p for p in _RUNNING if p.poll() is None]
    with open(out.with_suffix(".log"), "w", encoding="utf-8") as log:  # a file, never a pipe that can fill up
        proc = subprocess.Popen(torchrun_command(args, nproc), stdout=log, stderr=subprocess.STDOUT, text=True,
                                env=_env())
    _RUNNING.append(proc)
    return proc, out


def _why(log: str) -> str:
    """The line of a failed run's log that says why (not the launcher's ChildFailedError wrapper)."""
    lines = [ln.strip() for ln in log.splitlines() if ln.strip() and not ln.startswith(("W1", "I1", " "))]
    named = [ln for ln in lines if ("error:" in ln or "Error" in ln) and "ChildFailedError" not in ln]
    return named[0] if named else (lines[-1] if lines else "no output")


def finish_script(proc: subprocess.Popen[str], out: Path, timeout: float = 600.0) -> dict[str, Any]:
    """Wait (at most ``timeout`` s) and read the JSON; a failure is a RuntimeError of one line."""
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise RuntimeError(f"torchrun did not finish within {timeout:g} s and was stopped") from None
    log_path = out.with_suffix(".log")
    if proc.returncode != 0:
        log = log_path.read_text(encoding="utf-8", errors="replace") if log_path.exists() else ""
        raise RuntimeError(f"torchrun exited with status {proc.returncode}: {_why(log)} (log: {log_path})")
    return dict(json.loads(out.read_text()))


def run_script(script_args: Sequence[str], nproc: int = 2, timeout: float = 600.0) -> dict[str, Any]:
    """Run the script under torchrun (``nproc`` processes on this machine) and return rank 0's JSON."""
    return finish_script(*start_script(script_args, nproc), timeout=timeout)


def reference_runs() -> dict[str, dict[str, Any]]:
    """The committed multi-GPU reference runs, ``results/multi_gpu_<name>.json``, by name (may be empty)."""
    from fp16lab.labs.runtime.results import RESULTS_DIR

    return {p.stem.removeprefix("multi_gpu_"): json.loads(p.read_text())
            for p in sorted(Path(RESULTS_DIR).glob("multi_gpu_*.json"))}


def reference_commands(out: Path, nproc: int, steps: int, preset: str) -> dict[str, list[str]]:
    """The reference runs' commands; the BF16 hook only where this torch build accepts it."""
    from fp16lab.labs.multi_gpu.train import bf16_hook_support

    runs = {k: v for k, v in REFERENCE_RUNS.items() if not (k == "ddp_bf16_grad_bf16" and bf16_hook_support())}
    return {name: torchrun_command([*args, "--preset", preset, "--steps", str(steps),
                                    "--out", str(out / f"multi_gpu_{name}.json")], nproc)
            for name, args in runs.items()}


def _run(args: argparse.Namespace) -> int:
    gpus = torch.cuda.device_count()
    nproc = args.nproc or (gpus if gpus >= 1 else 2)
    if gpus and nproc > gpus:
        raise SystemExit(f"distributed: --nproc {nproc} needs {nproc} GPUs (one per process); this machine has {gpus}")
    if not args.dry_run and not args.out.is_dir():
        raise SystemExit(f"distributed: --out {str(args.out)!r} is not an existing folder")
    steps = args.steps or (50 if gpus else 4)
    commands = reference_commands(args.out, nproc, steps, args.preset or ("small" if gpus else "tiny"))
    for name, cmd in commands.items():
        print(f"{name}: torchrun {' '.join(cmd[3:])}", flush=True)
        if args.dry_run:
            continue
        result = subprocess.run(cmd, env=_env(), check=False)
        if result.returncode != 0:
            print(f"distributed: {name} failed (exit status {result.returncode}); its output is above", file=sys.stderr)
            return 1
    return 0


def _positive(text: str) -> int:
    from fp16lab.labs.multi_gpu.train import positive_arg as positive

    return positive(text)


def add_distributed_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Register ``distributed`` with ``python -m fp16lab``."""
    p = sub.add_parser("distributed", help="the multi-GPU reference run: lesson 10's script under torchrun",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=Path("results/local"), help="existing folder (default results/local)")
    p.add_argument("--nproc", type=_positive, default=None, help="processes (default: every GPU, else 2 CPU processes)")
    p.add_argument("--steps", type=_positive, default=None, help="steps per run (default 50 on GPUs, 4 on CPUs)")
    p.add_argument("--preset", choices=("tiny", "small", "base"), default=None,
                   help="GPT size (default small on GPUs, tiny on CPUs)")
    p.add_argument("--dry-run", action="store_true", help="print the torchrun commands, run nothing")
    p.set_defaults(func=_run)
