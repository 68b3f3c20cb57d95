"""Memory, seen from the tensors and from the CUDA caching allocator: peaks, caps, fragmentation, snapshots.

- :func:`track_tensor_memory` counts the bytes of tensor storages that operators create inside a
  block, with their peak, on any device (CPU included): what in-place operations save.
- :func:`memory_cap` caps the CUDA caching allocator for a block (a cap only ever shrinks: never
  above the card's, or the hardware profile's, memory) and restores it afterwards.
- :func:`run_or_oom` turns an out-of-memory error into a table row, so a lesson never fails on one.
- :func:`fragmentation_workload` allocates activations of changing sizes, as batches of varying
  size do, and reports reserved against allocated memory; :func:`allocator_experiment` runs it in
  a fresh Python process with ``PYTORCH_CUDA_ALLOC_CONF`` set (the allocator reads it once, at
  CUDA initialisation), e.g. ``expandable_segments:True``.
- :func:`snapshot_summary` turns ``torch.cuda.memory._snapshot()`` into two tables: the
  segments (reserved, allocated, inactive) and the live memory grouped by the code that allocated it.

Nothing here forks: the child process is a plain ``python -m fp16lab.labs.memory.allocator`` (Windows-safe).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import html
import json
import os
import random
import subprocess
import sys
import time
import warnings
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from fp16lab.checks import function, non_negative_int, positive_float, positive_int, sequence_of
from fp16lab.device import free_memory, is_oom, resolve_device

__all__ = [
    "MIB",
    "GIB",
    "TensorMemory",
    "track_tensor_memory",
    "memory_cap",
    "run_or_oom",
    "WORKLOAD_LAYERS",
    "fragmentation_workload",
    "allocator_experiment",
    "ALLOC_CONF_ENV",
    "SnapshotSummary",
    "snapshot_summary",
    "main",
]

MIB = 2**20
GIB = 2**30
ALLOC_CONF_ENV = "PYTORCH_CUDA_ALLOC_CONF"

# ------------------------------------------------------------------ tensor-level accounting


@dataclass
class TensorMemory:
    """Bytes of tensor storages created by operators inside a :func:`track_tensor_memory` block.

    ``peak_bytes``: the most that was alive at once; ``allocated_bytes``: all storages created
    (every byte written anew: memory traffic); ``live_bytes``: still alive when the block ended;
    ``allocations``: how many storages were created. Storages that existed before the block (the
    inputs, the weights) are not counted, and neither are an allocator's rounding and workspaces.
    """

    peak_bytes: int = 0
    allocated_bytes: int = 0
    live_bytes: int = 0
    allocations: int = 0
    _live: dict[tuple[str, int], int] = field(default_factory=dict, repr=False)

    @property
    def peak_mib(self) -> float:
        return self.peak_bytes / MIB

    @property
    def allocated_mib(self) -> float:
        return self.allocated_bytes / MIB

    def as_row(self) -> dict[str, float | int]:
        """A flat dict (MiB) for a results table."""
        return {"peak_mib": self.peak_mib, "allocated_mib": self.allocated_mib,
                "live_mib": self.live_bytes / MIB, "allocations": self.allocations}

    def _add(self, key: tuple[str, int], nbytes: int) -> None:
        self._live[key] = nbytes
        self.live_bytes += nbytes
        self.allocated_bytes += nbytes
        self.allocations += 1
        self.peak_bytes = max(self.peak_bytes, self.live_bytes)

    def _free(self, key: tuple[str, int]) -> None:
        self.live_bytes -= self._live.pop(key, 0)


def _storage_key(t: torch.Tensor) -> tuple[str, int] | None:
    storage = t.untyped_storage()
    ptr = storage.data_ptr()
    return (str(t.device), ptr) if ptr and storage.nbytes() else None


def _make_mode(result: TensorMemory) -> Any:
    from torch.utils._python_dispatch import TorchDispatchMode  # the mechanism of FlopCounterMode
    from torch.utils._pytree import tree_leaves

    class _Tracker(TorchDispatchMode):
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            inputs = {k for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)
                      for k in [_storage_key(t)] if k is not None}
            out = func(*args, **(kwargs or {}))
            for t in tree_leaves(out):
                if not isinstance(t, torch.Tensor):
                    continue
                key = _storage_key(t)
                if key is None or key in inputs or key in result._live:
                    continue  # a view or an in-place result: no new memory
                storage = t.untyped_storage()
                result._add(key, storage.nbytes())
                weakref.finalize(storage, result._free, key)
            return out

    return _Tracker()


@contextlib.contextmanager
def track_tensor_memory() -> Iterator[TensorMemory]:
    """Count the tensor memory that operators allocate in the block, with its peak, on any device.

    Why: the CPU has no ``max_memory_allocated``, yet what an in-place operation saves (a
    temporary, not the activations autograd keeps) is the same on every device. Works through a
    ``TorchDispatchMode`` (the mechanism ``torch.utils.flop_counter`` uses), so it sees every
    operator, the backward pass included. On CUDA compare with ``torch.cuda.max_memory_allocated``,
    which adds the allocator's rounding and library workspaces.
    """
    result = TensorMemory()
    with _make_mode(result):
        yield result


# ------------------------------------------------------------------ the allocator's cap


def _cap_fraction(cap_bytes: int, usable_bytes: int, total_bytes: int, current: float) -> float | None:
    """The new per-process fraction for a cap of ``cap_bytes``, or None when it would not shrink."""
    fraction = min(cap_bytes, usable_bytes) / total_bytes
    return fraction if fraction < current else None


@contextlib.contextmanager
def memory_cap(gib: float, device: "torch.device | str | None" = None) -> Iterator[float]:
    """Cap the CUDA caching allocator at ``gib`` GiB in the block, then restore the previous cap.

    Why: "the largest batch on a 24 GB card" can be measured on a bigger GPU. A cap only ever
    shrinks: on a card (or hardware profile) with less memory than ``gib`` nothing changes, so the
    fraction passed to ``torch.cuda.set_per_process_memory_fraction`` is never above 1. Yields the
    cap in force, in GiB. ``device`` defaults to the current CUDA GPU; cached blocks are released
    first. Raises ``ValueError`` for a bad ``gib`` or a device that is not a CUDA GPU.
    """
    from fp16lab.hardware import gpu_facts

    gib = positive_float("gib", gib)
    dev = resolve_device("cuda" if device is None else device)
    if dev.type != "cuda":
        raise ValueError(f"device {str(device)!r} is not a CUDA GPU; memory_cap caps the CUDA caching allocator")
    facts = gpu_facts(dev)
    assert facts is not None  # resolve_device checked that CUDA is here
    index = facts.index
    previous = float(torch.cuda.get_per_process_memory_fraction(index))
    new = _cap_fraction(int(gib * GIB), facts.memory_bytes, facts.total_memory_bytes, previous)
    free_memory(dev)
    if new is not None:
        torch.cuda.set_per_process_memory_fraction(new, index)
    try:
        yield (new if new is not None else previous) * facts.total_memory_bytes / GIB
    finally:
        if new is not None:
            free_memory(dev)
            torch.cuda.set_per_process_memory_fraction(previous, index)


def run_or_oom(fn: Callable[[], Mapping[str, Any]], device: "torch.device | str | None" = None,
               **labels: Any) -> dict[str, Any]:
    """``{**labels, **fn(), "oom": False}``, or ``{**labels, "oom": True, "error": ...}`` when it ran out of memory.

    Why: a lesson sized for a big GPU must still finish on a small one: an out-of-memory error
    becomes a row and a sentence, never a failed cell. Memory is freed after an OOM (``device``,
    default: the CUDA GPU when there is one). Any other error propagates. ``labels`` may not be
    named ``oom`` or ``error`` (the row's own columns), and neither may a key of ``fn()``'s dict be ``oom``.
    """
    function("fn", fn, "a function of no arguments returning a dict", n_args=0)
    dev = resolve_device(device) if device is not None else None
    clash = [k for k in ("oom", "error") if k in labels]
    if clash:
        raise ValueError(f"labels may not be named {', '.join(map(repr, clash))}: run_or_oom writes those columns")
    try:
        result = fn()
    except (MemoryError, RuntimeError) as err:  # torch's OOM errors are one of these
        if not is_oom(err):
            raise
        message = str(err).strip().splitlines()[0][:160] if str(err).strip() else ""
        del err
        free_memory(dev if dev is not None else torch.device("cuda" if torch.cuda.is_available() else "cpu"))
        return {**labels, "oom": True, "error": message}
    if not isinstance(result, Mapping) or "oom" in result:
        raise ValueError(f"fn must return a dict (of the row's columns, no 'oom' key), it returned {result!r:.120}")
    return {**labels, **result, "oom": False}


# ------------------------------------------------------------------ fragmentation

# Activation sizes of the layers of a made-up network, per sample, in units of ``unit_mib``.
WORKLOAD_LAYERS: tuple[int, ...] = (3, 5, 8, 12, 8, 5, 3, 2)


def _stats_row(dev: torch.device, steps: int, seconds: float) -> dict[str, Any]:
    s = torch.cuda.memory_stats(dev)
    return {
        "peak_allocated_mib": s.get("allocated_bytes.all.peak", 0) / MIB,
        "peak_reserved_mib": s.get("reserved_bytes.all.peak", 0) / MIB,
        "reserved_over_allocated": s.get("reserved_bytes.all.peak", 0) / max(1, s.get("allocated_bytes.all.peak", 0)),
        "peak_inactive_split_mib": s.get("inactive_split_bytes.all.peak", 0) / MIB,
        "segments_allocated": s.get("segment.all.allocated", 0),
        "alloc_retries": s.get("num_alloc_retries", 0),
        "ms_per_step": 1e3 * seconds / steps,
    }


def _segments_expandable(snapshot: Mapping[str, Any]) -> bool | None:
    flags = [seg.get("is_expandable") for seg in snapshot.get("segments", [])]
    known = [bool(f) for f in flags if f is not None]
    return any(known) if known else None


def _workload(dev: torch.device, *, steps: int, batch: int, unit_mib: float, layers: Sequence[int],
              seed: int, empty_cache_every: int) -> dict[str, Any]:
    rng = random.Random(seed)
    free_memory(dev)
    torch.cuda.reset_peak_memory_stats(dev)
    torch.cuda.reset_accumulated_memory_stats(dev)
    expandable: bool | None = None
    live_segments = 0
    snapshot_s = 0.0
    torch.cuda.synchronize(dev)
    start = time.perf_counter()
    for step in range(steps):
        b = rng.randint(batch // 2, batch)  # the batch changes from step to step
        acts = [torch.zeros(int(b * c * unit_mib * MIB), dtype=torch.uint8, device=dev) for c in layers]
        if step == steps - 1:  # the segments at the last step, its activations alive (not timed)
            t0 = time.perf_counter()
            snapshot = torch.cuda.memory._snapshot(dev)
            expandable, live_segments = _segments_expandable(snapshot), len(snapshot.get("segments", []))
            snapshot_s = time.perf_counter() - t0
        del acts  # the "backward" frees them all
        if empty_cache_every and (step + 1) % empty_cache_every == 0:
            torch.cuda.empty_cache()
    torch.cuda.synchronize(dev)
    row = _stats_row(dev, steps, time.perf_counter() - start - snapshot_s)
    row["live_segments"] = live_segments
    row["expandable_segments"] = expandable
    return row


def fragmentation_workload(
    *, steps: int = 40, batch: int = 64, unit_mib: float = 0.35, seed: int = 0,
    empty_cache_every: int = 0, layers: Sequence[int] = WORKLOAD_LAYERS, device: "torch.device | str" = "cuda",
) -> dict[str, Any]:
    """Allocate activations whose size changes every step, as varying batch sizes do; report the allocator.

    Why: with changing sizes the caching allocator keeps blocks that no longer fit, so *reserved*
    memory grows past what is *allocated*; ``expandable_segments`` and ``empty_cache()`` are the
    two remedies, at different costs. Each step draws a batch in [batch/2, batch] (seeded), creates
    one tensor per layer of ``batch * layer * unit_mib`` MiB, then frees them all. Defaults: 40
    steps, batch 64, 0.35 MiB per unit (about 1 GiB at the peak, every block above 10 MiB),
    ``empty_cache_every=0`` (never; k: after every k-th step), :data:`WORKLOAD_LAYERS`, CUDA.
    Returns peak allocated and reserved MiB, their ratio, the peak of inactive split blocks
    (fragments), segments allocated (cudaMalloc calls; expandable segments grow by mapping pages
    instead), allocation retries, ms per step (host time, the last step's snapshot excluded), the
    segments alive at the last step (``live_segments``, from a snapshot) and whether they were
    expandable (None when the snapshot does not say).
    """
    steps = positive_int("steps", steps)
    batch = positive_int("batch", batch, minimum=2)
    unit_mib = positive_float("unit_mib", unit_mib)
    seed = non_negative_int("seed", seed)
    empty_cache_every = non_negative_int("empty_cache_every", empty_cache_every)
    layers = sequence_of("layers", layers, example="[1, 2, 3]", item=positive_int)
    dev = resolve_device(device)
    if dev.type != "cuda":
        raise ValueError(f"device {str(device)!r} is not a CUDA GPU; the workload measures the CUDA caching allocator")
    from fp16lab.hardware import gpu_facts

    gpu_facts(dev)  # applies a hardware profile's memory cap, if one is active
    return _workload(dev, steps=steps, batch=batch, unit_mib=unit_mib, layers=tuple(layers), seed=seed,
                     empty_cache_every=empty_cache_every)


def _child_env(alloc_conf: str | None) -> dict[str, str]:
    from fp16lab.hardware import PROFILE_ENV, active_profile

    env = dict(os.environ)
    env.pop(ALLOC_CONF_ENV, None)
    if alloc_conf:
        env[ALLOC_CONF_ENV] = alloc_conf
    profile = active_profile()
    env[PROFILE_ENV] = profile.key if profile is not None else "none"  # use_profile() is per process
    root = str(Path(__file__).resolve().parent.parent)  # the child imports this very fp16lab
    env["PYTHONPATH"] = root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def allocator_experiment(
    alloc_conf: str | None, *, empty_cache_every: Sequence[int] = (0,), steps: int = 40, batch: int = 64,
    unit_mib: float = 0.35, seed: int = 0, repeats: int = 1, timeout: float = 300.0,
) -> pd.DataFrame:
    """Run :func:`fragmentation_workload` in a fresh process whose allocator reads ``alloc_conf``.

    Why: ``PYTORCH_CUDA_ALLOC_CONF`` (e.g. ``"expandable_segments:True"``) is read once, when CUDA
    starts, so a notebook that already uses the GPU cannot switch it: a child process can.
    ``alloc_conf=None`` runs the default allocator. One row per value of ``empty_cache_every``
    (default: ``(0,)``, never), run one after the other in that process. The child is
    ``python -m fp16lab.labs.memory.allocator`` (no fork, so it works on Windows too) and inherits the hardware
    profile. An out-of-memory error becomes a row with ``oom=True``; other failures raise
    ``RuntimeError`` with the child's message. ``repeats`` (default 1): the child runs the settings in
    turns that many times (same seed, so the same sizes); each row then holds the medians and
    ``ms_spread``, the run-to-run spread of ``ms_per_step`` ((max - min) / median, NaN for one run), with
    ``runs``. Defaults as in :func:`fragmentation_workload`; ``timeout`` 300 s.
    """
    if alloc_conf is not None and (not isinstance(alloc_conf, str) or not alloc_conf.strip() or "\n" in alloc_conf):
        raise ValueError(f"alloc_conf must be None or a setting such as 'expandable_segments:True', got {alloc_conf!r}")
    everies = sequence_of("empty_cache_every", empty_cache_every, example="[0, 1]", item=non_negative_int)
    args = ["--steps", str(positive_int("steps", steps)), "--batch", str(positive_int("batch", batch, minimum=2)),
            "--unit-mib", repr(positive_float("unit_mib", unit_mib)), "--seed", str(non_negative_int("seed", seed)),
            "--empty-cache-every", ",".join(map(str, everies)), "--repeats", str(positive_int("repeats", repeats))]
    timeout = positive_float("timeout", timeout)
    if not torch.cuda.is_available():  # said here, before a child process starts only to find out
        raise RuntimeError("allocator_experiment measures the CUDA caching allocator, but no CUDA GPU is visible "
                           "here; run it on a CUDA GPU (lesson 05 shows the committed reference elsewhere)")
    cmd = [sys.executable, "-m", "fp16lab.labs.memory.allocator", "workload", *args]
    done = subprocess.run(cmd, env=_child_env(alloc_conf), capture_output=True, text=True, timeout=timeout, check=False)
    lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
    if done.returncode != 0 or not lines:
        tail = (done.stderr or done.stdout).strip().splitlines()[-5:]
        raise RuntimeError(f"the allocator experiment ({ALLOC_CONF_ENV}={alloc_conf!r}) failed "
                           f"(exit {done.returncode}): " + " | ".join(tail))
    rows = json.loads(lines[-1])["rows"]
    return _per_setting(pd.DataFrame([{"alloc_conf": alloc_conf or "(default)", **r} for r in rows]))


def _per_setting(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per ``empty_cache_every`` (in first-seen order): medians, ``ms_spread`` and ``runs``."""
    out = []
    for every, part in runs.groupby("empty_cache_every", sort=False):
        first = {k: v.item() if hasattr(v, "item") else v for k, v in part.iloc[0].to_dict().items()}  # numpy -> Python
        row: dict[str, Any] = {k: v for k, v in first.items() if not isinstance(v, (int, float)) or isinstance(v, bool)}
        row.update(part.drop(columns=["oom", "expandable_segments"], errors="ignore").median(numeric_only=True).to_dict())
        row["empty_cache_every"] = int(every)
        row["oom"] = bool(part["oom"].any()) if "oom" in part else False
        ms = part["ms_per_step"].dropna() if "ms_per_step" in part else pd.Series(dtype=float)
        row["ms_spread"] = float((ms.max() - ms.min()) / ms.median()) if len(ms) > 1 else float("nan")
        row["runs"] = len(ms)
        out.append(row)
    table = pd.DataFrame(out)
    return table[[c for c in runs.columns if c in table] + [c for c in table if c not in runs.columns]]  # the runs' order


# ------------------------------------------------------------------ snapshots


@dataclass
class SnapshotSummary:
    """``torch.cuda.memory._snapshot()`` as tables: ``segments`` by pool, ``by_frame`` live memory by code."""

    segments: pd.DataFrame
    by_frame: pd.DataFrame

    @property
    def reserved_mib(self) -> float:
        return float(self.segments["reserved_mib"].sum()) if len(self.segments) else 0.0

    @property
    def inactive_mib(self) -> float:
        return float(self.segments["inactive_mib"].sum()) if len(self.segments) else 0.0

    def _repr_html_(self) -> str:
        return ("<p><b>segments</b> (one cudaMalloc each)</p>" + self.segments.to_html(index=False)
                + "<p><b>live memory by the code that allocated it</b></p>" + self.by_frame.to_html(index=False)
                + f"<p>{html.escape(f'{self.inactive_mib:.1f} of {self.reserved_mib:.1f} MiB reserved is inactive')}</p>")


def _where(frames: Sequence[Mapping[str, Any]]) -> str:
    """The innermost frame outside torch itself: the line of user (or library) code that allocated."""
    for f in frames or []:
        name = str(f.get("filename", "")).replace("\\", "/")
        if "/torch/" in name or not name.endswith(".py"):  # torch itself, or a C++ frame
            continue
        return f"{name.rsplit('/', 1)[-1]}:{f.get('line')} ({f.get('name')})"
    return "(no Python frame recorded)"


def snapshot_summary(snapshot: Mapping[str, Any], top: int = 8) -> SnapshotSummary:
    """Summarise a CUDA memory snapshot (the dict ``torch.cuda.memory._snapshot()`` returns) as tables.

    Why: the HTML viewer (pytorch.org/memory_viz) is for exploring; a table states the facts a
    lesson can assert. ``segments``: per pool (small/large, expandable or not) the number of
    segments and their reserved, allocated and inactive MiB (inactive: cached, free, inside a
    segment). ``by_frame``: live (``active_allocated``) memory grouped by the innermost Python
    frame outside torch, the ``top`` largest (default 8); frames exist only for allocations made
    while ``torch.cuda.memory._record_memory_history()`` was on.
    """
    if not isinstance(snapshot, Mapping) or "segments" not in snapshot:
        raise ValueError("snapshot must be the dict torch.cuda.memory._snapshot() returns (with 'segments'), "
                         f"got {type(snapshot).__name__}")
    top = positive_int("top", top)
    _check_snapshot(snapshot)
    seg_rows, block_rows = [], []
    for seg in snapshot["segments"]:
        blocks = seg.get("blocks", [])
        inactive = sum(b["size"] for b in blocks if b.get("state") == "inactive")
        seg_rows.append({"pool": seg.get("segment_type", "?"), "expandable": bool(seg.get("is_expandable", False)),
                         "reserved": seg["total_size"], "allocated": seg.get("allocated_size", 0), "inactive": inactive})
        block_rows += [{"where": _where(b.get("frames", [])), "bytes": b["size"]}
                       for b in blocks if b.get("state") == "active_allocated"]
    segs = pd.DataFrame(seg_rows, columns=["pool", "expandable", "reserved", "allocated", "inactive"])
    segments = (segs.groupby(["pool", "expandable"], as_index=False)
                .agg(segments=("reserved", "size"), reserved=("reserved", "sum"),
                     allocated=("allocated", "sum"), inactive=("inactive", "sum")))
    for col in ("reserved", "allocated", "inactive"):
        segments[f"{col}_mib"] = segments.pop(col) / MIB
    blocks_df = pd.DataFrame(block_rows, columns=["where", "bytes"])
    by_frame = (blocks_df.groupby("where", as_index=False).agg(blocks=("bytes", "size"), bytes=("bytes", "sum"))
                .sort_values("bytes", ascending=False).head(top).reset_index(drop=True))
    by_frame["mib"] = by_frame.pop("bytes") / MIB
    return SnapshotSummary(segments, by_frame)


def _check_snapshot(snapshot: Mapping[str, Any]) -> None:
    """The keys :func:`snapshot_summary` reads: a list of segments with ``total_size``, blocks with ``size``."""
    hint = "snapshot must be the dict torch.cuda.memory._snapshot() returns"
    segments = snapshot["segments"]
    if not isinstance(segments, list):
        raise ValueError(f"{hint}: 'segments' is a list, got {type(segments).__name__}")
    for i, seg in enumerate(segments):
        if not isinstance(seg, Mapping) or "total_size" not in seg or not isinstance(seg.get("blocks", []), list):
            raise ValueError(f"{hint}: segments[{i}] lacks 'total_size' (or its 'blocks' is not a list): {seg!r:.120}")
        for j, b in enumerate(seg.get("blocks", [])):
            if not isinstance(b, Mapping) or "size" not in b:
                raise ValueError(f"{hint}: segments[{i}]['blocks'][{j}] lacks 'size': {b!r:.120}")


# ------------------------------------------------------------------ the child process


def _parse_everies(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated ints such as '0,1', got {text!r}") from None
    if not values or any(v < 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected ints >= 0 such as '0,1', got {text!r}")
    return values


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m fp16lab.labs.memory.allocator workload ...``: run the workload here, print one JSON line."""
    parser = argparse.ArgumentParser(prog="python -m fp16lab.labs.memory.allocator", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("workload", help="the fragmenting workload on this process's CUDA allocator")
    w.add_argument("--steps", type=int, default=40)
    w.add_argument("--batch", type=int, default=64)
    w.add_argument("--unit-mib", type=float, default=0.35)
    w.add_argument("--seed", type=int, default=0)
    w.add_argument("--empty-cache-every", type=_parse_everies, default=[0])
    w.add_argument("--repeats", type=int, default=1)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print(f"error: no CUDA GPU is visible; {ALLOC_CONF_ENV} configures the CUDA allocator", file=sys.stderr)
        return 2
    def one(every: int) -> dict[str, Any]:
        return fragmentation_workload(steps=args.steps, batch=args.batch, unit_mib=args.unit_mib, seed=args.seed,
                                      empty_cache_every=every)

    rows = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(max(1, args.repeats)):  # the settings in turns, each repeat with the same sizes
            for every in args.empty_cache_every:
                rows.append(run_or_oom(functools.partial(one, every), device="cuda", empty_cache_every=every))
    unsupported = any("expandable_segments not supported" in str(c.message) for c in caught)
    for r in rows:
        if unsupported:
            r["expandable_segments"] = False
    print(json.dumps({"alloc_conf": os.environ.get(ALLOC_CONF_ENV), "rows": rows}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
