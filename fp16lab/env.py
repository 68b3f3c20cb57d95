"""Environment report, device choice, chip capabilities and a table of peak throughput."""

from __future__ import annotations

import datetime as _dt
import platform
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import torch

from fp16lab.precision import parse_device

__all__ = [
    "Status",
    "Check",
    "Report",
    "GPUInfo",
    "Peak",
    "PEAK_TFLOPS",
    "choose_device",
    "cuda_capability",
    "gpu_info",
    "chip_features",
    "peak_for",
    "run_metadata",
    "report",
]

MIN_PYTHON = (3, 10)
MIN_TORCH = (2, 4)


class Status(str, Enum):
    OK = "OK"
    WARN = "WARN"
    FAIL = "FAIL"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class Check:
    """One row of the report: what was checked, what was found, and how to fix it."""

    name: str
    value: str
    status: Status = Status.OK
    fix: str = ""


_COLOURS = {Status.OK: "#1a7f37", Status.WARN: "#b35900", Status.FAIL: "#cf222e"}


@dataclass
class Report:
    """An environment report; renders as a table in Jupyter and as text elsewhere."""

    checks: list[Check] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """True when no row FAILs (WARN rows are allowed)."""
        return not any(c.status is Status.FAIL for c in self.checks)

    def __getitem__(self, name: str) -> Check:
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(f"no check named {name!r}; have {[c.name for c in self.checks]}")

    def to_frame(self) -> "Any":
        import pandas as pd

        return pd.DataFrame(
            [(c.name, c.value, c.status.value, c.fix) for c in self.checks],
            columns=["check", "value", "status", "fix"],
        )

    def __str__(self) -> str:
        w = max(len(c.name) for c in self.checks)
        lines = []
        for c in self.checks:
            lines.append(f"[{c.status.value:4}] {c.name:<{w}}  {c.value}")
            if c.fix:
                lines.append(f"{'':7}{'':<{w}}  fix: {c.fix}")
        verdict = "no FAIL rows" if self.ok else "at least one FAIL row: see the fixes above"
        lines.append(f"verdict: {verdict}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        import html

        rows = []
        for c in self.checks:
            colour = _COLOURS[c.status]
            rows.append(
                "<tr>"
                f'<td style="text-align:left">{html.escape(c.name)}</td>'
                f'<td style="text-align:left">{html.escape(c.value)}</td>'
                f'<td style="color:{colour};font-weight:bold">{c.status.value}</td>'
                f'<td style="text-align:left">{html.escape(c.fix)}</td></tr>'
            )
        head = "<tr><th>check</th><th>value</th><th>status</th><th>fix</th></tr>"
        return f"<table>{head}{''.join(rows)}</table>"


# ---------------------------------------------------------------------------- devices


def choose_device(prefer: "str | torch.device | None" = None) -> torch.device:
    """The device lessons run on: ``prefer`` if given (validated), else cuda > mps > cpu."""
    if prefer is not None:
        dev = parse_device(prefer)
        if dev.type == "cuda" and not torch.cuda.is_available():
            raise ValueError(f"device {str(prefer)!r} requested but no CUDA GPU is visible")
        if dev.type == "mps" and not _mps_available():
            raise ValueError(f"device {str(prefer)!r} requested but MPS is not available")
        return dev
    if torch.cuda.is_available():
        return torch.device("cuda")
    if _mps_available():
        return torch.device("mps")
    return torch.device("cpu")


def _mps_available() -> bool:
    mps = getattr(torch.backends, "mps", None)
    return bool(mps and mps.is_available())


def cuda_capability(device: "torch.device | str | int" = 0) -> tuple[int, int]:
    """Compute capability (major, minor) of a CUDA device."""
    return tuple(torch.cuda.get_device_capability(device))  # type: ignore[return-value]


@dataclass(frozen=True)
class GPUInfo:
    """What the lessons need to know about a CUDA GPU."""

    name: str
    capability: tuple[int, int]
    sm_count: int
    total_memory_gib: float

    @property
    def sm(self) -> str:
        return f"sm_{self.capability[0]}{self.capability[1]}"


def gpu_info(index: int = 0) -> GPUInfo | None:
    """Facts about CUDA GPU ``index``, or None when no CUDA GPU is visible."""
    if not torch.cuda.is_available():
        return None
    p = torch.cuda.get_device_properties(index)
    return GPUInfo(
        name=p.name,
        capability=cuda_capability(index),
        sm_count=p.multi_processor_count,
        total_memory_gib=p.total_memory / 2**30,
    )


def chip_features(capability: tuple[int, int]) -> dict[str, bool]:
    """Which reduced-precision features a compute capability has natively."""
    return {
        "fp16_tensor_cores": capability >= (7, 0),  # Volta
        "bf16_native": capability >= (8, 0),  # Ampere
        "tf32": capability >= (8, 0),  # Ampere
        "fp8": capability >= (8, 9),  # Ada, Hopper
    }


# ------------------------------------------------------------------ peak throughput


@dataclass(frozen=True)
class Peak:
    """Dense (no sparsity) peak TFLOP/s; fp16/bf16 are with FP32 accumulate. None: absent."""

    gpu: str
    fp32: float
    tf32: float | None
    fp16: float | None
    bf16: float | None
    source: str


# Dense peaks, boost clock, from the vendor's datasheets/whitepapers. Datasheets quote
# sparse Tensor Core figures for Ampere and later: those are halved here.
PEAK_TFLOPS: dict[str, Peak] = {
    # Hopper: H100 SXM5 and H200 SXM share the chip and clocks (H200 datasheet: FP16/BF16
    # 1979 sparse -> 989.5 dense, TF32 989 sparse -> 494.5, FP32 67).
    "H200": Peak("H200", 67.0, 494.5, 989.5, 989.5, "NVIDIA H200 datasheet"),
    "H100 SXM": Peak("H100 SXM", 67.0, 494.5, 989.5, 989.5, "NVIDIA H100 datasheet (SXM5)"),
    "H100 PCIe": Peak("H100 PCIe", 51.0, 378.0, 756.0, 756.0, "NVIDIA H100 datasheet (PCIe)"),
    # Ampere data center: A100 whitepaper / datasheet (FP16 312 dense, TF32 156 dense).
    "A100": Peak("A100", 19.5, 156.0, 312.0, 312.0, "NVIDIA A100 datasheet"),
    "A10": Peak("A10", 31.2, 62.5, 125.0, 125.0, "NVIDIA A10 datasheet"),
    # Ada data center: L4 datasheet (FP16 242 sparse, TF32 120 sparse, FP32 30.3);
    # L40S datasheet (FP16 733 sparse, TF32 366 sparse, FP32 91.6).
    "L40S": Peak("L40S", 91.6, 183.0, 366.0, 366.0, "NVIDIA L40S datasheet"),
    "L4": Peak("L4", 30.3, 60.0, 121.0, 121.0, "NVIDIA L4 datasheet"),
    # GeForce Ada: Ada Lovelace architecture whitepaper, appendix table. FP16/BF16 with
    # FP32 accumulate run at HALF the FP16-accumulate rate on GeForce parts (4090: 165.2
    # vs 330.3). The 4090D has 114 of the 4090's 128 SMs at a higher boost clock
    # (2520 MHz): 73.5 FP32, 147 FP16/FP32-accumulate.
    "RTX 4090D": Peak("RTX 4090D", 73.5, 73.5, 147.0, 147.0, "Ada whitepaper, scaled to 114 SMs"),
    "RTX 4090": Peak("RTX 4090", 82.6, 82.6, 165.2, 165.2, "NVIDIA Ada GPU architecture whitepaper"),
    # GeForce Ampere: Ampere GA102 whitepaper (3090: FP16/FP32-acc 71, TF32 35.6 dense).
    "RTX 3090": Peak("RTX 3090", 35.6, 35.6, 71.0, 71.0, "NVIDIA Ampere GA102 whitepaper"),
    # Turing and Volta: no TF32, no native BF16.
    "T4": Peak("T4", 8.1, None, 65.0, None, "NVIDIA T4 datasheet"),
    "V100": Peak("V100", 15.7, None, 125.0, None, "NVIDIA V100 datasheet (SXM2)"),
}

# Most specific pattern first; matched against the lower-cased device name.
_NAME_PATTERNS: list[tuple[str, str]] = [
    (r"h200", "H200"),
    (r"h100.*pcie", "H100 PCIe"),
    (r"h100", "H100 SXM"),
    (r"a100", "A100"),
    (r"\ba10\b", "A10"),
    (r"l40s", "L40S"),
    (r"\bl4\b", "L4"),
    (r"4090\s*d\b", "RTX 4090D"),
    (r"4090", "RTX 4090"),
    (r"3090", "RTX 3090"),
    (r"\bt4\b", "T4"),
    (r"v100", "V100"),
]


def peak_for(gpu_name: str) -> Peak | None:
    """The :class:`Peak` row for a device name such as ``'NVIDIA GeForce RTX 4090 D'``."""
    name = gpu_name.lower()
    for pattern, key in _NAME_PATTERNS:
        if re.search(pattern, name):
            return PEAK_TFLOPS[key]
    return None


# --------------------------------------------------------------------------- report


def _driver_version() -> str | None:
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


def _version_tuple(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v.split("+")[0])[:2])


def tf32_state() -> str:
    """The TF32 switches as currently set."""
    return (
        f"matmul.allow_tf32={torch.backends.cuda.matmul.allow_tf32}, "
        f"cudnn.allow_tf32={torch.backends.cudnn.allow_tf32}, "
        f"float32_matmul_precision={torch.get_float32_matmul_precision()!r}"
    )


def run_metadata(device: "torch.device | str | None" = None) -> dict[str, Any]:
    """The settings that matter for a measurement, to store beside its numbers."""
    dev = choose_device(device) if device is None else parse_device(device)
    info = gpu_info(dev.index or 0) if dev.type == "cuda" else None
    from fp16lab.config import mode

    m = mode()
    return {
        "device": info.name if info else dev.type.upper(),
        "device_type": dev.type,
        "capability": info.sm if info else None,
        "sm_count": info.sm_count if info else None,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "driver": _driver_version() if info else None,
        "python": platform.python_version(),
        "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
        "tf32_cudnn": torch.backends.cudnn.allow_tf32,
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        "mode": m.name,
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d"),
    }


def _package_checks() -> list[Check]:
    import importlib.metadata as md

    rows = []
    for pkg in ("torchvision", "pandas", "matplotlib", "seaborn", "tqdm"):
        try:
            rows.append(Check(pkg, md.version(pkg)))
        except md.PackageNotFoundError:
            rows.append(
                Check(pkg, "not installed", Status.FAIL, f"pip install {pkg} (or run `make setup`)")
            )
    return rows


def report(device_index: int = 0) -> Report:
    """Check this machine for the series: versions, GPU, what the chip supports, TF32 flags.

    Never raises on a machine without a GPU, without cuDNN or with a CPU-only torch: those
    become WARN rows with a fix. ``device_index`` (default 0) picks the CUDA GPU.
    """
    from fp16lab.config import mode

    rows: list[Check] = []
    py = sys.version_info[:2]
    rows.append(
        Check("Python", platform.python_version())
        if py >= MIN_PYTHON
        else Check("Python", platform.python_version(), Status.FAIL, "install Python >= 3.10")
    )
    tv = torch.__version__
    rows.append(
        Check("torch", tv)
        if _version_tuple(tv) >= MIN_TORCH
        else Check("torch", tv, Status.FAIL, "pip install -U 'torch>=2.4' (torch.amp APIs)")
    )
    rows += _package_checks()

    m = mode()
    rows.append(Check("quick mode", f"{m.name} ({m.reason})"))

    cuda_build = torch.version.cuda
    if cuda_build is None:
        rows.append(
            Check(
                "torch CUDA build",
                "CPU-only wheel",
                Status.WARN,
                "if this machine has an NVIDIA GPU, install a CUDA wheel: "
                "pip install torch --index-url https://download.pytorch.org/whl/cu126",
            )
        )
    else:
        rows.append(Check("torch CUDA build", f"CUDA {cuda_build}"))

    if _mps_available():
        rows.append(Check("Apple MPS", "available (fp16 autocast works; no GradScaler speed claims)"))

    if not torch.cuda.is_available():
        why = (
            "no CUDA device visible"
            if cuda_build
            else "torch has no CUDA support"
        )
        rows.append(
            Check(
                "CUDA GPU",
                f"none ({why})",
                Status.WARN,
                "lessons run in quick mode on the CPU and show the committed H200 reference "
                "outputs for GPU-only results; for your own numbers use an NVIDIA GPU "
                "(check `nvidia-smi`, and CUDA_VISIBLE_DEVICES)",
            )
        )
        rows.append(Check("TF32 flags", tf32_state()))
        return Report(rows)

    info = gpu_info(device_index)
    assert info is not None
    driver = _driver_version()
    rows.append(
        Check("driver", driver)
        if driver
        else Check("driver", "unknown", Status.WARN, "nvidia-smi not found or failed; check the driver install")
    )
    if torch.backends.cudnn.is_available():
        rows.append(Check("cuDNN", str(torch.backends.cudnn.version())))
    else:
        rows.append(
            Check("cuDNN", "not available", Status.WARN, "convolutions will be slow; reinstall a CUDA torch wheel (it bundles cuDNN)")
        )
    rows.append(Check("GPU", f"{info.name} (cuda:{device_index})"))
    rows.append(Check("compute capability", info.sm))
    rows.append(Check("SMs", str(info.sm_count)))
    rows.append(Check("memory", f"{info.total_memory_gib:.1f} GiB"))
    rows += capability_checks(info.capability)
    peak = peak_for(info.name)
    if peak:
        rows.append(
            Check(
                "peak table",
                f"{peak.gpu}: FP32 {peak.fp32}, TF32 {peak.tf32}, FP16 {peak.fp16}, "
                f"BF16 {peak.bf16} dense TFLOP/s ({peak.source})",
            )
        )
    else:
        rows.append(
            Check(
                "peak table",
                f"{info.name!r} is not in fp16lab.env.PEAK_TFLOPS",
                Status.WARN,
                "'% of peak' figures are not shown; add your GPU's datasheet numbers to PEAK_TFLOPS",
            )
        )
    rows.append(Check("TF32 flags", tf32_state()))
    return Report(rows)


def capability_checks(capability: tuple[int, int]) -> list[Check]:
    """Report rows for what a chip of ``capability`` supports natively."""
    f = chip_features(capability)
    sm = f"sm_{capability[0]}{capability[1]}"
    rows = [
        Check("FP16 Tensor Cores", "yes")
        if f["fp16_tensor_cores"]
        else Check(
            "FP16 Tensor Cores",
            f"no ({sm} < sm_70)",
            Status.WARN,
            "fp16 runs but without Tensor Cores: expect little or no AMP speed-up on this GPU",
        ),
        Check("BF16 native", "yes")
        if f["bf16_native"]
        else Check(
            "BF16 native",
            f"no ({sm} < sm_80)",
            Status.WARN,
            "use fp16 with GradScaler; torch.cuda.is_bf16_supported() may still say True "
            "here because bf16 is emulated (slow)",
        ),
        Check("TF32", "yes")
        if f["tf32"]
        else Check("TF32", f"no ({sm} < sm_80)", Status.WARN, "FP32 matmuls run at plain FP32 speed"),
        Check("FP8", "yes" if f["fp8"] else f"no ({sm} < sm_89; only a later FP8 lesson needs it)"),
    ]
    return rows
