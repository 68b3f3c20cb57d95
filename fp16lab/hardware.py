"""Hardware facts, the one seam: what the GPU is, what it supports, its peaks, and profiles.

Everything in fp16lab that decides by the GPU (sizes, which precisions run, "% of peak")
reads its facts from :func:`gpu_facts`; nothing else asks torch for the name, capability,
memory or SM count. A *hardware profile* (``FP16LAB_PROFILE=rtx4090d``, or
:func:`use_profile`) makes a bigger GPU report a smaller card's facts and caps the caching
allocator at that card's memory, so a lesson takes the same code path and fits in the same
memory as on that card. A profile emulates memory and code path, never speed: every speed
printed under a profile says which chip really ran (:attr:`GPUFacts.label`).
"""

from __future__ import annotations

import numbers
import os
import re
from dataclasses import dataclass, field
from typing import Any

import torch

from fp16lab.device import parse_device

__all__ = [
    "Peak",
    "PEAK_TFLOPS",
    "peak_for",
    "chip_features",
    "build_code_for",
    "Profile",
    "PROFILES",
    "PROFILE_ENV",
    "active_profile",
    "use_profile",
    "GPUFacts",
    "gpu_facts",
    "cuda_capability",
    "usable_memory_gib",
]

GIB = 2**30
MIB = 2**20

# ------------------------------------------------------------------ peak throughput


@dataclass(frozen=True)
class Peak:
    """Dense (no sparsity) peak TFLOP/s, cited from datasheets; None where the chip has none.

    ``fp16``/``bf16``/``fp8`` are with FP32 accumulate (what autocast matmuls use);
    ``fp16_acc16`` is FP16 with FP16 accumulate (``allow_fp16_accumulation``), which GeForce
    parts run at twice their FP32-accumulate rate and data-center parts at the same rate.
    ``acc16_source`` names the document that gives ``fp16_acc16`` where ``source`` gives no
    separate FP16-accumulate figure (the H200 datasheet: the H100 whitepaper, same chip).
    """

    gpu: str
    fp32: float
    tf32: float | None
    fp16: float | None
    bf16: float | None
    fp16_acc16: float | None
    fp8: float | None
    source: str
    acc16_source: str | None = None   # where fp16_acc16 comes from, when ``source`` does not give it

    def for_precision(self, precision: str) -> float | None:
        """The peak for ``'fp32'``, ``'tf32'``, ``'fp16'``, ``'bf16'``, ``'fp16_acc16'`` or ``'fp8'``."""
        if precision not in _PEAK_FIELDS:
            raise ValueError(f"precision must be one of {', '.join(map(repr, _PEAK_FIELDS))}; got {precision!r}")
        value: float | None = getattr(self, precision)
        return value


_PEAK_FIELDS = ("fp32", "tf32", "fp16", "bf16", "fp16_acc16", "fp8")

# Dense peaks at boost clock, from the vendors' datasheets and whitepapers (cited, not
# measured). Datasheets quote sparse Tensor Core figures for Ampere and later: halved here.
PEAK_TFLOPS: dict[str, Peak] = {
    # Hopper: H100 SXM5 and H200 SXM share the chip and clocks (H200 datasheet: FP16/BF16
    # 1979 sparse -> 989.5 dense, TF32 989 -> 494.5, FP8 3958 -> 1979, FP32 67). The Hopper
    # whitepaper states the SXM5's dense figures themselves (989.4: 132 SMs x 4096 x 1830 MHz).
    # The H200 datasheet gives no FP16-accumulate figure: the equal rate is the H100 whitepaper's.
    "H200": Peak("H200", 67.0, 494.5, 989.5, 989.5, 989.5, 1979.0, "NVIDIA H200 datasheet",
                 "NVIDIA H100 Tensor Core GPU Architecture whitepaper (SXM5, dense)"),
    "H100 SXM": Peak("H100 SXM", 66.9, 494.7, 989.4, 989.4, 989.4, 1978.9,
                     "NVIDIA H100 Tensor Core GPU Architecture whitepaper (SXM5, dense)"),
    "H100 NVL": Peak("H100 NVL", 60.0, 417.5, 835.5, 835.5, 835.5, 1670.5, "NVIDIA H100 datasheet (NVL)"),
    "H100 PCIe": Peak("H100 PCIe", 51.0, 378.0, 756.5, 756.5, 756.5, 1513.0, "NVIDIA H100 datasheet (PCIe)"),
    # Ampere data center: A100 datasheet (FP16 312 dense, TF32 156 dense); no FP8.
    "A100": Peak("A100", 19.5, 156.0, 312.0, 312.0, 312.0, None, "NVIDIA A100 datasheet"),
    "A10": Peak("A10", 31.2, 62.5, 125.0, 125.0, 125.0, None, "NVIDIA A10 datasheet"),
    # Ada data center: full-rate FP32 accumulate. L40S datasheet (dense | sparse: TF32 183 | 366,
    # FP16/BF16 362.05 | 733, FP8 733 | 1466, FP32 91.6); L4 datasheet (FP16 242 sparse, FP8 485 sparse).
    "L40S": Peak("L40S", 91.6, 183.0, 362.05, 362.05, 362.05, 733.0, "NVIDIA L40S datasheet"),
    "L4": Peak("L4", 30.3, 60.0, 121.0, 121.0, 121.0, 242.5, "NVIDIA L4 datasheet"),
    # GeForce Ada: Ada Lovelace architecture whitepaper, appendix. FP16/BF16/FP8 with FP32
    # accumulate run at HALF the FP16-accumulate rate on GeForce (4090: 165.2 vs 330.3).
    # Per SM and clock: 256 FP32, 512 FP16-with-FP32-accumulate, 1024 FP16-accumulate FLOPs.
    "RTX 4090D": Peak("RTX 4090D", 73.5, 73.5, 147.0, 147.0, 294.0, 294.0, "Ada whitepaper, 4090 scaled to 114 SMs"),
    "RTX 4090": Peak("RTX 4090", 82.6, 82.6, 165.2, 165.2, 330.3, 330.3, "NVIDIA Ada GPU architecture whitepaper"),
    "RTX 4090 Laptop": Peak(
        "RTX 4090 Laptop", 39.7, 39.7, 79.4, 79.4, 158.8, 158.8,
        "Ada whitepaper per-SM rates x 76 SMs x 2040 MHz max boost (laptop clocks vary with power limit)",
    ),
    "RTX 4060 Laptop": Peak(
        "RTX 4060 Laptop", 14.6, 14.6, 29.1, 29.1, 58.2, 58.2,
        "Ada whitepaper per-SM rates x 24 SMs x 2370 MHz max boost (laptop clocks vary with power limit)",
    ),
    # GeForce Ampere: GA102 whitepaper (3090: FP16/FP32-acc 71, FP16-acc 142, TF32 35.6 dense);
    # the 3060 (GA106, 28 SMs, 1777 MHz boost) from the same per-SM rates.
    "RTX 3090": Peak("RTX 3090", 35.6, 35.6, 71.0, 71.0, 142.0, None, "NVIDIA Ampere GA102 whitepaper"),
    "RTX 3060": Peak("RTX 3060", 12.7, 12.7, 25.5, 25.5, 51.0, None, "GA102 whitepaper per-SM rates x 28 SMs x 1777 MHz"),
    # Turing and Volta: no TF32, no native BF16, no FP8.
    "T4": Peak("T4", 8.1, None, 65.0, None, 65.0, None, "NVIDIA T4 datasheet"),
    "V100": Peak("V100", 15.7, None, 125.0, None, 125.0, None, "NVIDIA V100 datasheet (SXM2)"),
}

# The whole model name, as words, once the vendor, brand, memory-size and "GPU" words are
# dropped: 'NVIDIA GeForce RTX 4090 D' -> ('4090', 'd'). A name matches only a model listed
# here word for word, so a near miss (A1000 vs A100, 4090 D vs 4090, H200 NVL vs H200, a
# laptop part vs its desktop namesake, a "Ti") gets no peak, never a neighbour's. The H200
# NVL (a lower-clocked PCIe card) has no row: its peak is not the SXM part's.
_MODEL_NAMES: dict[tuple[str, ...], str] = {
    ("h200",): "H200", ("h200", "sxm"): "H200", ("h200", "sxm5"): "H200",
    ("h100", "hbm3"): "H100 SXM", ("h100", "sxm"): "H100 SXM", ("h100", "sxm5"): "H100 SXM",
    ("h100", "sxm5", "hbm3"): "H100 SXM", ("h100",): "H100 SXM",
    ("h100", "nvl"): "H100 NVL",
    ("h100", "pcie"): "H100 PCIe",
    ("a100",): "A100", ("a100", "sxm4"): "A100", ("a100", "pcie"): "A100",  # same dense peaks
    ("a10",): "A10",
    ("l40s",): "L40S",
    ("l4",): "L4",
    ("4090",): "RTX 4090",
    ("4090", "d"): "RTX 4090D", ("4090d",): "RTX 4090D",
    ("4090", "laptop"): "RTX 4090 Laptop",
    ("4060", "laptop"): "RTX 4060 Laptop",
    ("3090",): "RTX 3090",
    ("3060",): "RTX 3060", ("3060", "lite", "hash", "rate"): "RTX 3060",  # LHR: the same chip and clocks
    ("t4",): "T4",
    ("v100", "sxm2"): "V100",  # the row is the SXM2 part; the PCIe V100 has a lower peak
}
_DROPPED_WORDS = {"nvidia", "geforce", "rtx", "tesla", "gpu", "tensor", "core"}
_MEMORY_WORD = re.compile(r"\d+(\.\d+)?(gb|g|gib)")


def _model_words(gpu_name: str) -> tuple[str, ...]:
    """The words that name the model: lower case, split at spaces, '-' and '_', brand and memory dropped."""
    words = re.split(r"[\s\-_/]+", gpu_name.lower().strip())
    return tuple(w for w in words if w and w not in _DROPPED_WORDS and not _MEMORY_WORD.fullmatch(w))


def peak_for(gpu_name: str) -> Peak | None:
    """The cited :class:`Peak` row for a device name such as ``'NVIDIA GeForce RTX 4090 D'``, or None.

    The whole model name must match a known model (see ``_MODEL_NAMES``); an unknown or
    near-miss name gets None ("no peak known"), never a neighbouring chip's row.
    """
    if not isinstance(gpu_name, str):
        raise ValueError(f"gpu_name must be a device name string, got {gpu_name!r} ({type(gpu_name).__name__})")
    key = _MODEL_NAMES.get(_model_words(gpu_name))
    return PEAK_TFLOPS[key] if key else None


def _capability(value: object, name: str = "capability") -> tuple[int, int]:
    ok = (
        isinstance(value, tuple)
        and len(value) == 2
        and all(isinstance(v, numbers.Integral) and not isinstance(v, bool) and int(v) >= 0 for v in value)
    )
    if not ok:
        raise ValueError(f"{name} must be a (major, minor) tuple of ints such as (8, 9), got {value!r}")
    return (int(value[0]), int(value[1]))  # type: ignore[index]


def chip_features(capability: tuple[int, int], name: str | None = None) -> dict[str, bool]:
    """Which reduced-precision features a chip runs natively, from its capability (and name).

    GTX 16xx cards are sm_75 like the T4 but have no Tensor Cores: pass ``name`` to tell.
    """
    cap = _capability(capability)
    if name is not None and not isinstance(name, str):
        raise ValueError(f"name must be a GPU name string such as 'Tesla T4' or None, got {name!r}")
    no_tensor_cores = bool(name) and re.search(r"gtx\s*16", str(name).lower()) is not None
    return {
        "fp16_tensor_cores": cap >= (7, 0) and not no_tensor_cores,  # Volta
        "bf16_native": cap >= (8, 0),  # Ampere
        "tf32": cap >= (8, 0),  # Ampere
        "fp8": cap >= (8, 9),  # Ada, Hopper
    }


_ARCH = re.compile(r"^(sm|compute)_(\d+)(\d)([af]?)$")


def build_code_for(arch_list: list[str], capability: tuple[int, int]) -> str | None:
    """The entry of a torch build's arch list (``torch.cuda.get_arch_list()``) a chip can run, or None.

    Why: a wheel need not name the chip. Machine code for sm_XY runs on sm_XZ for Z >= Y (same major),
    PTX compute_XY is compiled on load for any capability >= XY; "a"/"f" (arch-specific) code runs on its
    own chip (family) only (cited: NVIDIA CUDA C++ Programming Guide, binary compatibility). The closest
    machine code wins, then PTX.
    """
    if not isinstance(arch_list, (list, tuple)) or not all(isinstance(a, str) for a in arch_list):
        raise ValueError(f"arch_list must be a list of strings such as ['sm_80', 'sm_86'], got {arch_list!r}")
    cap = _capability(capability)
    cubins: list[tuple[tuple[int, int], str]] = []
    ptx: list[tuple[tuple[int, int], str]] = []
    for entry in arch_list:
        m = _ARCH.match(entry.strip())
        if m is None:
            continue
        kind, major, minor, special = m.group(1), int(m.group(2)), int(m.group(3)), m.group(4)
        target = (major, minor)
        if kind == "sm":
            fits = target == cap if special == "a" else (major == cap[0] and minor <= cap[1])
            if fits:
                cubins.append((target, entry))
        elif target <= cap and not special:
            ptx.append((target, entry))
    if cubins:
        return max(cubins)[1]
    return max(ptx)[1] if ptx else None


# ------------------------------------------------------------------------ profiles


@dataclass(frozen=True)
class Profile:
    """A GPU a lesson can be made to behave like: its name, capability, memory and SM count."""

    key: str
    name: str
    capability: tuple[int, int]
    memory_mib: int
    sm_count: int
    note: str

    @property
    def memory_bytes(self) -> int:
        return self.memory_mib * MIB


# Memory as the card reports it (nvidia-smi / torch total_memory), from the vendors' specs.
PROFILES: dict[str, Profile] = {
    p.key: p
    for p in (
        Profile("rtx4090d", "NVIDIA GeForce RTX 4090 D", (8, 9), 24564, 114,
                "the article's card: 24 GB, GeForce half-rate FP32 accumulate"),
        Profile("rtx3060", "NVIDIA GeForce RTX 3060", (8, 6), 12288, 28, "12 GB GeForce Ampere"),
        Profile("rtx4060-laptop", "NVIDIA GeForce RTX 4060 Laptop GPU", (8, 9), 8188, 24,
                "a student's laptop: 8 GB"),
        Profile("t4", "Tesla T4", (7, 5), 15360, 40, "cloud T4: 16 GB, sm_75, BF16 only emulated"),
        Profile("a100-40gb", "NVIDIA A100-SXM4-40GB", (8, 0), 40536, 108, "A100 40 GB"),
    )
}

PROFILE_ENV = "FP16LAB_PROFILE"
_override: list[str | None] = []  # use_profile() sets it; wins over the environment
_capped: dict[int, str] = {}  # device index -> profile whose allocator cap is applied


def _parse_profile(name: object) -> Profile | None:
    if name is None or (isinstance(name, str) and name.strip().lower() in ("", "none")):
        return None
    if isinstance(name, str) and name.strip().lower() in PROFILES:
        return PROFILES[name.strip().lower()]
    raise ValueError(
        f"name: unknown hardware profile {name!r}; known: {', '.join(PROFILES)} (or 'none')"
    )


def active_profile() -> Profile | None:
    """The hardware profile in force: :func:`use_profile`'s, else ``FP16LAB_PROFILE``'s, else None."""
    if _override:
        return _parse_profile(_override[-1])
    return _parse_profile(os.environ.get(PROFILE_ENV))


def use_profile(name: str | None) -> Profile | None:
    """Make this process behave like GPU ``name`` (a key of :data:`PROFILES`), or None for the real one.

    Checked against the real GPU at once: a profile with more memory than the card raises,
    and nothing changes. The allocator cap stays for the life of the process once set.
    """
    profile = _parse_profile(name)
    if profile is not None:
        real = _real_properties(0)
        if real is None:
            raise ValueError(_NO_GPU_FOR_PROFILE.format(profile=profile.key))
        _check_fits(profile, real)
    _override.clear()
    _override.append(None if profile is None else profile.key)
    return profile


_NO_GPU_FOR_PROFILE = (
    "hardware profile {profile!r} emulates a GPU's memory and code path on a real CUDA GPU, and "
    "none is visible here; unset " + PROFILE_ENV + " (quick mode on the CPU needs no profile)"
)


# ---------------------------------------------------------------------------- facts


@dataclass(frozen=True)
class _Props:
    name: str
    capability: tuple[int, int]
    sm_count: int
    total_memory: int


def _real_properties(index: int) -> _Props | None:
    """What torch says about CUDA GPU ``index``: the only place fp16lab asks (tests fake it)."""
    if not torch.cuda.is_available():
        return None
    p = torch.cuda.get_device_properties(index)
    return _Props(p.name, (int(p.major), int(p.minor)), int(p.multi_processor_count), int(p.total_memory))


def _check_fits(profile: Profile, real: _Props) -> None:
    if profile.memory_bytes > real.total_memory:
        raise ValueError(
            f"hardware profile {profile.key!r} needs {profile.memory_bytes / GIB:.2f} GiB but this GPU "
            f"({real.name}) has {real.total_memory / GIB:.2f} GiB; a profile can only shrink a card. "
            f"Known profiles: {', '.join(PROFILES)}"
        )


def _apply_cap(index: int, profile: Profile, real: _Props) -> None:
    """Cap the caching allocator of GPU ``index`` at the profile's memory (once per process)."""
    if _capped.get(index) == profile.key:
        return
    _check_fits(profile, real)
    torch.cuda.set_per_process_memory_fraction(profile.memory_bytes / real.total_memory, index)
    _capped[index] = profile.key


@dataclass(frozen=True)
class GPUFacts:
    """What fp16lab knows about one CUDA GPU (a profile's facts when one is active)."""

    index: int
    name: str
    real_name: str
    capability: tuple[int, int]
    sm_count: int
    memory_bytes: int
    total_memory_bytes: int
    peak: Peak | None
    features: dict[str, bool] = field(default_factory=dict)
    profile: str | None = None

    @property
    def sm(self) -> str:
        """The capability as ``'sm_89'``."""
        return f"sm_{self.capability[0]}{self.capability[1]}"

    @property
    def memory_gib(self) -> float:
        """Usable memory in GiB (the profile's under a profile)."""
        return self.memory_bytes / GIB

    @property
    def geforce(self) -> bool:
        """GeForce parts run FP16/BF16 with FP32 accumulate at half their FP16-accumulate rate."""
        return "geforce" in self.name.lower()

    def supports(self, precision: str) -> bool:
        """Whether this chip runs ``precision`` natively: fp32, fp16 always; tf32/bf16 sm_80+; fp8 sm_89+."""
        rules = {
            "fp32": True,
            "fp16": True,
            "tf32": self.features.get("tf32", False),
            "bf16": self.features.get("bf16_native", False),
            "fp8": self.features.get("fp8", False),
        }
        if precision not in rules:
            raise ValueError(f"precision must be one of {', '.join(map(repr, rules))}; got {precision!r}")
        return rules[precision]

    @property
    def label(self) -> str:
        """Which chip this is, and which really runs: say it beside every speed."""
        if self.profile is None:
            return self.name
        return f"{self.name} profile ({self.profile}) on a real {self.real_name}: memory and code path emulated, speed is the real chip's"

    def as_dict(self) -> dict[str, Any]:
        """A flat dict for a table or a results file's metadata."""
        return {
            "gpu": self.name,
            "real_gpu": self.real_name,
            "profile": self.profile,
            "capability": self.sm,
            "sm_count": self.sm_count,
            "memory_gib": round(self.memory_gib, 2),
            "geforce": self.geforce,
            "peak_row": self.peak.gpu if self.peak else None,
            **{f"supports_{p}": self.supports(p) for p in ("tf32", "bf16", "fp8")},
        }


def _index(device: "torch.device | str | int | None") -> int:
    if device is None:
        return torch.cuda.current_device() if torch.cuda.is_available() else 0
    if isinstance(device, numbers.Integral) and not isinstance(device, bool):
        idx = int(device)
        if idx < 0:
            raise ValueError(f"device index must be an int >= 0 (or 'cuda:N'), got {device!r}")
    else:
        dev = parse_device(device)  # type: ignore[arg-type]
        if dev.type != "cuda":
            raise ValueError(f"device {str(device)!r} is not a CUDA GPU; GPU facts exist only for 'cuda' devices")
        idx = dev.index if dev.index is not None else (torch.cuda.current_device() if torch.cuda.is_available() else 0)
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count and not 0 <= idx < count:
        raise ValueError(f"device index {idx!r} is out of range: this machine has {count} CUDA GPU(s)")
    return idx


def gpu_facts(device: "torch.device | str | int | None" = None) -> GPUFacts | None:
    """Facts about CUDA GPU ``device`` (default: the current one), or None without a CUDA GPU.

    Under a hardware profile the profile's name, capability, SM count, memory and peaks are
    reported (``real_name`` keeps the real chip) and the allocator is capped at its memory.
    """
    profile = active_profile()
    idx = _index(device)
    real = _real_properties(idx)
    if real is None:
        if profile is not None:
            raise ValueError(_NO_GPU_FOR_PROFILE.format(profile=profile.key))
        return None
    if profile is None:
        name, cap, sms, mem = real.name, real.capability, real.sm_count, real.total_memory
    else:
        _apply_cap(idx, profile, real)
        name, cap, sms, mem = profile.name, profile.capability, profile.sm_count, profile.memory_bytes
    return GPUFacts(
        index=idx,
        name=name,
        real_name=real.name,
        capability=cap,
        sm_count=sms,
        memory_bytes=mem,
        total_memory_bytes=real.total_memory,
        peak=peak_for(name),
        features=chip_features(cap, name),
        profile=None if profile is None else profile.key,
    )


def cuda_capability(device: "torch.device | str | int" = 0) -> tuple[int, int]:
    """Compute capability (major, minor) of a CUDA GPU (the profile's under a profile)."""
    facts = gpu_facts(device)
    if facts is None:
        raise ValueError(f"no CUDA GPU is visible, so device {str(device)!r} has no compute capability")
    return facts.capability


def usable_memory_gib(device: "torch.device | str | int | None" = None) -> float | None:
    """GiB a lesson may plan for on ``device`` (the profile's under a profile); None without CUDA."""
    facts = gpu_facts(device)
    return None if facts is None else facts.memory_gib
