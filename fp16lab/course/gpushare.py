"""Is this GPU shared? Said before a lesson measures speed, and in the doctor.

Twenty students on one GPU time-slice it: every speed they measure comes out lower and noisier than the
card's own, and a lesson's speed check can fail because of a neighbour's work. :func:`gpu_sharing` says
so before anything runs: other compute processes on the GPU (nvidia-smi), memory in use beyond this
process's own (which also covers processes in other containers that nvidia-smi cannot name), and
``FP16LAB_SHARED_GPU``, the number of learners an instructor put on one GPU (``workshop classroom`` sets it).
A lesson's setup cell displays it (a coloured note); ``python -m fp16lab doctor`` has it as a row.

nvidia-smi numbers GPUs in PCI order; CUDA does too when ``CUDA_DEVICE_ORDER=PCI_BUS_ID``, and on a
server of one GPU model the orders agree. ``CUDA_VISIBLE_DEVICES`` (indices or ``GPU-`` UUIDs) is
followed, so a lab given one GPU asks about that GPU.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass

import torch

from fp16lab.checks import non_negative_int
from fp16lab.labs.runtime.i18n import tr

__all__ = ["SHARED_ENV", "GPUShare", "gpu_sharing"]

SHARED_ENV = "FP16LAB_SHARED_GPU"
CONTEXT_GIB = 0.75  # about what a CUDA context of this process holds once torch has used the GPU


@dataclass(frozen=True)
class GPUShare:
    """Who else uses this GPU: other processes (nvidia-smi), memory they hold, and what that does to speed."""

    index: int
    others: tuple[str, ...] = ()  # "pid name (MiB)" per other process nvidia-smi shows
    other_gib: float = 0.0  # memory in use on the GPU beyond this process's own
    declared: int = 0  # FP16LAB_SHARED_GPU: how many learners the instructor put on this GPU
    available: bool = True  # False: no CUDA GPU here, nothing to say

    @property
    def shared(self) -> bool:
        """True when another process, another's memory (1 GiB or more) or the instructor says so."""
        return self.available and (bool(self.others) or self.other_gib >= 1.0 or self.declared > 1)

    def __str__(self) -> str:
        if not self.available:
            return tr("no CUDA GPU here: nothing shares it")
        if not self.shared:
            return tr("cuda:{index} is not shared: no other process uses it now", index=self.index)
        who = []
        if self.others:
            who.append(tr("{n} other process(es): {list}", n=len(self.others), list="; ".join(self.others)))
        if self.other_gib >= 1.0:
            who.append(tr("{gib:.1f} GiB held by others", gib=self.other_gib))
        if self.declared > 1:
            who.append(tr("{n} learners share it ({env})", n=self.declared, env=SHARED_ENV))
        return tr("cuda:{index} is SHARED ({who}). The GPU time-slices between processes: your speed numbers come "
                  "out lower and noisier than the card's own, and a lesson's speed check can fail because of a "
                  "neighbour's work, not yours. Run the speed sections again when the GPU is quiet, or read the "
                  "stored reference outputs; numerics and memory checks are not affected.",
                  index=self.index, who="; ".join(who))

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        import html

        colour = "#b35900" if self.shared else "#1a7f37"
        return f'<div style="border-left:4px solid {colour};padding:4px 8px">{html.escape(str(self))}</div>'


def _smi_target(index: int) -> str:
    """nvidia-smi's ``-i`` for CUDA device ``index``, through CUDA_VISIBLE_DEVICES when it is set."""
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    return visible[index] if index < len(visible) else str(index)


def _smi(args: list[str]) -> list[list[str]] | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run([exe, *args, "--format=csv,noheader,nounits"], capture_output=True, text=True,
                             timeout=20, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return [[p.strip() for p in line.split(",")] for line in out.strip().splitlines() if line.strip()]


def _nvidia_smi_processes(index: int) -> list[str] | None:
    """Compute processes on GPU ``index`` other than this one, or None when nvidia-smi cannot say."""
    rows = _smi(["-i", _smi_target(index), "--query-compute-apps=pid,process_name,used_memory"])
    if rows is None:
        return None
    return [f"{r[0]} {os.path.basename(r[1])} ({r[2]} MiB)" for r in rows
            if len(r) >= 3 and r[0].isdigit() and int(r[0]) != os.getpid()]


def _used_gib(index: int) -> float | None:
    """Memory in use on GPU ``index`` by every process, in GiB (nvidia-smi), or None."""
    rows = _smi(["-i", _smi_target(index), "--query-gpu=memory.used"])
    try:
        return float(rows[0][0]) / 1024 if rows else None
    except (ValueError, IndexError):
        return None


def gpu_sharing(index: int = 0) -> GPUShare:
    """Whether other processes share CUDA GPU ``index`` now, and what that does to the lessons' speed numbers.

    Default: GPU 0. Without a CUDA GPU it says so (``available=False``); ``index`` is checked against the
    GPUs this process sees. Shows as a coloured note in Jupyter.
    """
    index = non_negative_int("index", index)
    raw = os.environ.get(SHARED_ENV, "").strip()
    declared = int(raw) if raw.isdigit() else 0
    if not torch.cuda.is_available():
        return GPUShare(index, available=False, declared=declared)
    count = torch.cuda.device_count()
    if index >= count:
        raise ValueError(f"index {index!r} is out of range: this machine has {count} CUDA GPU(s)")
    others = _nvidia_smi_processes(index) or []
    used = _used_gib(index)
    other_gib = 0.0
    if used is not None:
        mine = torch.cuda.memory_reserved(index) / 2**30 + (CONTEXT_GIB if torch.cuda.is_initialized() else 0.0)
        other_gib = max(0.0, used - mine)
    return GPUShare(index, tuple(others), round(other_gib, 1), declared)
