"""The metadata stored beside every measurement: which chip, torch, CUDA, driver, TF32 settings, mode and date."""

from __future__ import annotations

import datetime as _dt
import platform
import shutil
import subprocess
from typing import Any

import torch

from fp16lab.device import resolve_device
from fp16lab.hardware import gpu_facts
from fp16lab.labs.runtime.quick import mode
from fp16lab.precision import tf32_state

__all__ = ["run_metadata", "driver_version"]


def driver_version() -> str | None:
    """The NVIDIA driver's version from ``nvidia-smi``, or None where there is none (or it does not answer)."""
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run(
            [exe, "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return out.splitlines()[0].strip() if out else None


def run_metadata(device: "torch.device | str | None" = None) -> dict[str, Any]:
    """The settings that matter for a measurement, to store beside its numbers.

    Under a hardware profile, ``device`` is the profile's GPU and ``real_device`` the chip
    that really ran: speeds are always the real chip's.
    """
    dev = resolve_device(device)
    facts = gpu_facts(dev) if dev.type == "cuda" else None
    m = mode()
    st = tf32_state()
    return {
        "device": facts.name if facts else dev.type.upper(),
        "real_device": facts.real_name if facts else dev.type.upper(),
        "profile": facts.profile if facts else None,
        "device_type": dev.type,
        "capability": facts.sm if facts else None,
        "sm_count": facts.sm_count if facts else None,
        "memory_gib": round(facts.memory_gib, 2) if facts else None,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "driver": driver_version() if facts else None,
        "python": platform.python_version(),
        "tf32_matmul": st["matmul"] == "tf32",
        "tf32_cudnn": st["cudnn_conv"] == "tf32",
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        "mode": m.name,
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d"),
    }
