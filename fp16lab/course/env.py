"""The environment report (``python -m fp16lab doctor``); the metadata stored with every measurement is
:func:`fp16lab.labs.runtime.metadata.run_metadata`, re-exported here.

Device choice lives in :mod:`fp16lab.device`; GPU facts, peaks and profiles in :mod:`fp16lab.hardware`.
"""

from __future__ import annotations

import platform
import re
import sys
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import torch

from fp16lab.checks import non_negative_int
from fp16lab.checks import text as checks_text
from fp16lab.course.card import cited_source
from fp16lab.device import mps_available
from fp16lab.hardware import PROFILE_ENV, active_profile, chip_features, gpu_facts
from fp16lab.labs.runtime.i18n import tr
from fp16lab.labs.runtime.metadata import driver_version, run_metadata
from fp16lab.precision import tf32_state

__all__ = [
    "Status",
    "Check",
    "Report",
    "MIN_PYTHON",
    "MIN_TORCH",
    "run_metadata",
    "report",
    "capability_checks",
    "cuda_unavailable_reason",
    "driver_cuda_version",
    "wheel_cudnn",
    "torchvision_check",
    "MIN_DRIVER",
    "label",
]

MIN_PYTHON = (3, 10)
# The oldest torch the tests have passed on: 2.11, the reference GPU's (the unit tests and every lesson
# ran there). The APIs alone would allow 2.9 (fp32_precision TF32 settings), but an untested floor is a
# guess; the CPU-only CI lane tests 2.13 and the default lane the newest pip gives.
MIN_TORCH = (2, 11)


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
        """The rows as a DataFrame (columns check, value, status, fix; the check's label in the learner's language)."""
        import pandas as pd

        return pd.DataFrame(
            [(label(c.name), c.value, c.status.value, c.fix) for c in self.checks],
            columns=["check", "value", "status", "fix"],
        )

    def __str__(self) -> str:
        from unicodedata import east_asian_width

        def width(t: str) -> int:  # a CJK character takes two columns in a terminal
            return sum(2 if east_asian_width(ch) in "WF" else 1 for ch in t)

        w = max(width(label(c.name)) for c in self.checks)
        lines = []
        for c in self.checks:
            name = label(c.name)
            lines.append(f"[{c.status.value:4}] {name}{' ' * (w - width(name))}  {c.value}")
            if c.fix:
                lines.append(f"{'':7}{'':<{w}}  " + tr("fix: {fix}", fix=c.fix))
        verdict = tr("no FAIL rows") if self.ok else tr("at least one FAIL row: see the fixes above")
        lines.append(tr("verdict: {verdict}", verdict=verdict))
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
                f'<td style="text-align:left">{html.escape(label(c.name))}</td>'
                f'<td style="text-align:left">{html.escape(c.value)}</td>'
                f'<td style="color:{colour};font-weight:bold">{c.status.value}</td>'
                f'<td style="text-align:left">{_code_spans(html.escape(c.fix))}</td></tr>'
            )
        heads = (tr("check"), tr("value"), tr("status"), tr("fix"))
        head = "<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in heads) + "</tr>"
        return f"<table>{head}{''.join(rows)}</table>"


# The report's row labels, in the learner's language at display time (Check.name stays the English key:
# ``report()["GPU"]`` works in both languages). Names that are API or product names stay as they are.
LABELS = ("Python", "torch", "quick mode", "torch CUDA build", "Apple MPS", "CUDA GPU", "TF32 settings",
          "hardware profile", "GPU", "driver", "cuDNN", "compute capability", "SMs", "memory",
          "FP16 Tensor Cores", "BF16 native", "TF32", "FP8", "peak table", "torchvision works",
          "GPU shared")


def label(name: str) -> str:
    """A row's label in the learner's language (``FP16LAB_LANG``); a package name stays as it is."""
    name = checks_text("name", name)
    zh = {"quick mode": tr("quick mode"), "torch CUDA build": tr("torch CUDA build"),
          "TF32 settings": tr("TF32 settings"),
          "hardware profile": tr("hardware profile"), "driver": tr("driver"),
          "compute capability": tr("compute capability"), "SMs": tr("SMs"), "memory": tr("memory"),
          "FP16 Tensor Cores": tr("FP16 Tensor Cores"), "BF16 native": tr("BF16 native"), "peak table": tr("peak table"),
          "torchvision works": tr("torchvision works"), "GPU shared": tr("GPU shared")}
    return zh.get(name, name)


def _code_spans(text: str) -> str:
    """Render `backticks` in (already escaped) fix text as <code>."""
    return re.sub(r"`([^`]+)`", r"<code>\1</code>", text)


# --------------------------------------------------------------------------- report


def _version_tuple(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", v.split("+")[0])[:2])


def _tf32_text() -> str:
    st = tf32_state()
    return tr("matmul.fp32_precision={matmul!r}, cudnn.conv.fp32_precision={conv!r} "
              "(PyTorch's default: 'ieee' matmuls, 'tf32' convolutions)", matmul=st["matmul"], conv=st["cudnn_conv"])


def _mode_value(m: "Any") -> str:
    """The mode row's value: ``quick (no CUDA GPU)``, in the learner's language."""
    names = {"quick": tr("quick"), "full": tr("full"), "full-smoke": tr("full, fewer steps (smoke)")}
    return tr("{mode} ({reason})", mode=names.get(m.name, m.name), reason=m.reason_text)


def _package_checks() -> list[Check]:
    import importlib.metadata as md

    rows = []
    for pkg in (*_NEEDED, *_FOR_THE_LAB):
        try:
            rows.append(Check(pkg, md.version(pkg)))
        except md.PackageNotFoundError:
            if pkg in _NEEDED:
                rows.append(Check(pkg, tr("not installed"), Status.FAIL,
                                  tr("`pip install {pkg}` (or run `make setup`)", pkg=pkg)))
            else:  # the lessons still run (VS Code, nbclient, a headless runner): a warning, not a failure
                rows.append(Check(pkg, tr("not installed"), Status.WARN,
                                  tr("{why}: `pip install {pkg}` (or run `make setup`)", why=_for_the_lab(pkg),
                                     pkg=pkg)))
    return rows


_NEEDED = ("torchvision", "pandas", "matplotlib", "seaborn", "tqdm")
_FOR_THE_LAB = ("jupyterlab", "ipywidgets")


def _for_the_lab(pkg: str) -> str:
    """Why the lab needs ``pkg`` (in the learner's language)."""
    if pkg == "jupyterlab":
        return tr("needed to open the lessons in JupyterLab (`make lab`)")
    return tr("needed for live progress bars in JupyterLab (without it they print as text)")


def report(device_index: int = 0) -> Report:
    """Check this machine for the series: versions, GPU, what the chip supports, TF32 settings.

    Never raises on a machine without a GPU, without cuDNN or with a CPU-only torch: those
    become WARN rows with a fix. ``device_index`` (default 0) picks the CUDA GPU; a bad
    index or an unknown ``FP16LAB_PROFILE`` is refused before anything is checked.
    """
    from fp16lab.labs.runtime.quick import gpu_label, mode

    index = non_negative_int("device_index", device_index)
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if count and index >= count:
        raise ValueError(f"device_index {device_index!r} is out of range: this machine has {count} CUDA GPU(s)")
    rows: list[Check] = [_python_check(), _torch_check(), *_package_checks()]
    try:
        active_profile()
    except ValueError as exc:  # an unknown FP16LAB_PROFILE: everything below would raise it
        rows.append(Check("hardware profile", tr("{env} not usable", env=PROFILE_ENV), Status.FAIL, str(exc)))
        return Report(rows)
    m = mode()
    rows.append(Check("quick mode", _mode_value(m)))
    rows.append(_cuda_build_check())
    rows.append(torchvision_check())
    if mps_available():
        rows.append(Check("Apple MPS", tr("available (fp16 autocast works; no GradScaler speed claims)")))
    if not torch.cuda.is_available():
        old = _driver_too_old(cuda_unavailable_reason())
        if old is not None:
            rows.append(old)
        rows.append(_no_gpu_check())
        rows.append(Check("TF32 settings", _tf32_text()))
        return Report(rows)
    try:
        facts = gpu_facts(index)
    except ValueError as exc:  # an unknown profile, or one bigger than this card
        rows.append(Check("hardware profile", tr("{env} not usable", env=PROFILE_ENV), Status.FAIL, str(exc)))
        return Report(rows)
    assert facts is not None
    rows += _driver_checks()
    if facts.profile:
        rows.append(Check("hardware profile", gpu_label(facts), Status.WARN,
                          tr("unset {env} to measure this GPU as it is", env=PROFILE_ENV)))
    rows.append(Check("GPU", f"{facts.name} (cuda:{index})"))
    rows.append(_arch_check(facts.capability))
    rows.append(Check("SMs", str(facts.sm_count)))
    rows.append(Check("memory", f"{facts.memory_gib:.1f} GiB"))
    rows += capability_checks(facts.capability, facts.name)
    rows.append(_peak_check(facts.name))
    rows.append(Check("TF32 settings", _tf32_text()))
    from fp16lab.course.gpushare import gpu_sharing

    share = gpu_sharing(index)
    rows.append(Check("GPU shared", tr("yes"), Status.WARN, str(share)) if share.shared
                else Check("GPU shared", tr("no")))
    return Report(rows)


def _python_check() -> Check:
    v = platform.python_version()
    if sys.version_info[:2] >= MIN_PYTHON:
        return Check("Python", v)
    return Check("Python", v, Status.FAIL, tr("install Python >= 3.10"))


def _torch_check() -> Check:
    tv = torch.__version__
    if _version_tuple(tv) >= MIN_TORCH:
        return Check("torch", tv)
    floor = ".".join(map(str, MIN_TORCH))
    return Check(
        "torch", tv, Status.FAIL,
        tr("the lessons need torch >= {floor} (fp32_precision TF32 settings, allow_fp16_accumulation, "
           "FSDP2): `pip install -U 'torch>={floor}' torchvision` (or re-run `make setup`)", floor=floor),
    )


def _cuda_build_check() -> Check:
    if torch.version.cuda is None:
        return Check(
            "torch CUDA build", tr("CPU-only wheel"), Status.WARN,
            tr("if this machine has an NVIDIA GPU, install a CUDA wheel: "
               "`pip install torch --index-url https://download.pytorch.org/whl/cu126`"),
        )
    return Check("torch CUDA build", f"CUDA {torch.version.cuda}")


# The oldest Linux driver each CUDA major version of a wheel runs on (minor version compatibility within a
# major; cited: NVIDIA CUDA Toolkit release notes, "CUDA Toolkit and Corresponding Driver Versions").
MIN_DRIVER = {13: "580.65.06", 12: "525.60.13", 11: "450.80.02"}
TORCH_INDEX = "https://download.pytorch.org/whl/"


def cuda_unavailable_reason() -> str | None:
    """Why this torch cannot use CUDA, in torch's own words (``torch.cuda.init()``'s error), or None.

    ``torch.cuda.is_available()`` only says False (and warns once); ``torch.cuda.init()`` raises the
    reason every time: "Found no NVIDIA driver on your system", "The NVIDIA driver on your system is
    too old (found version 12020)", "No CUDA GPUs are available", ...
    """
    if torch.version.cuda is None:
        return None
    try:
        torch.cuda.init()
    except Exception as exc:  # noqa: BLE001 (any failure is the answer)
        first = str(exc).strip().splitlines()
        return first[0] if first else type(exc).__name__
    return None


def driver_cuda_version() -> tuple[int, int] | None:
    """The newest CUDA version the installed NVIDIA driver supports (``cuDriverGetVersion``), or None."""
    import ctypes
    import os

    for name in (["nvcuda.dll"] if os.name == "nt" else ["libcuda.so.1", "libcuda.so"]):
        try:
            lib = ctypes.CDLL(name)
            v = ctypes.c_int(0)
            if lib.cuDriverGetVersion(ctypes.byref(v)) == 0 and v.value > 0:
                return v.value // 1000, (v.value % 1000) // 10
        except (OSError, AttributeError):
            continue
    return None


def wheel_cudnn() -> tuple[str, str] | None:
    """The pip package that brought torch its cuDNN, (name, version), or None (conda, a CPU wheel, a source build).

    Why: torch loads this bundled cuDNN, not one installed beside it, so this is the cuDNN that runs.
    """
    from importlib import metadata

    found = sorted((d.metadata["Name"] or "", d.version) for d in metadata.distributions()
                   if (d.metadata["Name"] or "").lower().replace("_", "-").startswith("nvidia-cudnn"))
    return found[-1] if found else None


def _driver_too_old(reason: str | None) -> Check | None:
    """A FAIL row naming the driver, the wheel's CUDA and the fix, when the driver is older than the wheel."""
    wheel = _version_tuple(torch.version.cuda or "")
    if len(wheel) < 2:
        return None
    supports = driver_cuda_version()
    found = re.search(r"too old \(found version (\d+)\)", reason or "")
    if supports is None and found:
        v = int(found.group(1))
        supports = (v // 1000, (v % 1000) // 10)
    if supports is None or supports[0] >= wheel[0]:
        if not (reason and "too old" in reason):
            return None
    driver = driver_version() or tr("unknown")
    have = f"{supports[0]}.{supports[1]}" if supports else "?"
    need = MIN_DRIVER.get(wheel[0], "?")
    alt = "cu128" if supports and supports >= (12, 8) else ("cu126" if supports and supports >= (12, 0) else None)
    fix = tr("update the NVIDIA driver to {need} or newer (Linux; cited: NVIDIA's CUDA release notes), "
             "then run the doctor again", need=need)
    if alt:
        fix += tr("; or keep this driver and install torch built for CUDA {cuda}: `pip install --force-reinstall "
                  "torch torchvision --index-url {index}{tag}`", cuda=f"{alt[2:4]}.{alt[4:]}", index=TORCH_INDEX,
                  tag=alt)
    return Check("driver", tr("{driver} supports CUDA up to {have}, but torch {torch} is built with CUDA {wheel}: "
                              "the driver is too old, so torch sees no GPU", driver=driver, have=have,
                              torch=torch.__version__, wheel=torch.version.cuda), Status.FAIL, fix)


def _no_gpu_check() -> Check:
    why = tr("no CUDA device visible") if torch.version.cuda else tr("torch has no CUDA support")
    reason = cuda_unavailable_reason()
    if reason:
        why = tr("{why}; torch says: \"{reason}\"", why=why, reason=reason)
    return Check(
        "CUDA GPU", tr("none ({why})", why=why), Status.WARN,
        tr("lessons run in quick mode on the CPU and show the committed reference outputs for "
           "GPU-only results; for your own numbers use an NVIDIA GPU (check `nvidia-smi`, and "
           "`CUDA_VISIBLE_DEVICES`)"),
    )


def torchvision_check() -> Check:
    """FAIL when ``import torchvision.models`` fails; WARN when its C++ operators do not run (``ops.nms``).

    The version alone says nothing: PyPI's CUDA-built torchvision beside a CPU-only torch imports as far
    as its operators and then fails ("operator torchvision::nms does not exist"). The lessons need the
    models and transforms; the operators only for detection models.
    """
    import importlib.metadata as md

    try:
        version = md.version("torchvision")
    except md.PackageNotFoundError:
        return Check("torchvision works", tr("not installed"), Status.FAIL,
                     tr("`pip install {pkg}` (or run `make setup`)", pkg="torchvision"))
    tv = _version_tuple(torch.__version__)
    match = f"0.{tv[1] + 15}" if len(tv) == 2 and tv[0] == 2 else "?"  # torchvision 0.(N+15) is torch 2.N's
    fix = tr("install the torchvision built for this torch, from the same place as torch (torch {torch} goes "
             "with torchvision {match}.x; a CPU-only torch with the one from {index}cpu): `pip install "
             "--force-reinstall torch=={plain} torchvision --index-url <the index torch came from>`",
             torch=torch.__version__, match=match, index=TORCH_INDEX, plain=torch.__version__.split("+")[0])
    try:
        import torchvision.models  # noqa: F401
    except Exception as exc:  # noqa: BLE001 (ImportError, RuntimeError from operator registration, ...)
        return Check("torchvision works", tr("{version}: `import torchvision.models` fails: \"{error}\"", version=version,
                                             error=_first_line(exc)), Status.FAIL, fix)
    try:
        from torchvision.ops import nms

        boxes = torch.tensor([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 1.0], [2.0, 2.0, 3.0, 3.0]])
        kept = nms(boxes, torch.tensor([0.9, 0.8, 0.7]), 0.5).tolist()
        if kept != [0, 2]:
            raise RuntimeError(f"nms kept {kept}, expected [0, 2]")
    except Exception as exc:  # noqa: BLE001
        return Check("torchvision works", tr("{version}: models import; its operators fail (\"{error}\")",
                                             version=version, error=_first_line(exc)), Status.WARN,
                     tr("the lessons need only the models and transforms; for detection ops: {fix}", fix=fix))
    return Check("torchvision works", tr("{version}: models import, ops.nms runs", version=version))


def _first_line(exc: BaseException) -> str:
    """torch's own words, quoted by the caller: the first sentence of the first line, at most 160 characters."""
    lines = str(exc).strip().splitlines()
    first = re.split(r"(?<=[.!?])\s", lines[0], maxsplit=1)[0] if lines else ""
    text = f"{type(exc).__name__}: {first}".strip().replace('"', "'").replace("”", "'")
    return text if len(text) <= 160 else text[:159] + "…"


def _driver_checks() -> list[Check]:
    driver = driver_version()
    rows = [
        Check("driver", driver)
        if driver
        else Check("driver", tr("unknown"), Status.WARN, tr("`nvidia-smi` not found or failed; check the driver install"))
    ]
    if torch.backends.cudnn.is_available():
        rows.append(Check("cuDNN", str(torch.backends.cudnn.version())))
    else:
        rows.append(Check("cuDNN", tr("not available"), Status.WARN,
                          tr("convolutions will be slow; reinstall a CUDA torch wheel (it bundles cuDNN)")))
    return rows


def _arch_check(capability: tuple[int, int]) -> Check:
    """FAIL when this torch build ships no kernels for the chip (e.g. sm_70 on CUDA 13 wheels)."""
    sm = f"sm_{capability[0]}{capability[1]}"
    arches = torch.cuda.get_arch_list()
    # A build runs a chip when it has its exact sm_XY, or an sm_X* of the same major at or
    # below it (binary compatible), or PTX (compute_XY) at or below it to JIT from.
    def ok(a: str) -> bool:
        kind, _, num = a.partition("_")
        if not num.isdigit():
            return False
        major, minor = int(num[:-1]), int(num[-1])
        if kind == "sm":
            return major == capability[0] and minor <= capability[1]
        return kind == "compute" and (major, minor) <= capability
    if not arches or any(ok(a) for a in arches):
        return Check("compute capability", sm)
    return Check(
        "compute capability", tr("{sm}: this torch build has no kernels for it (built for {arches})", sm=sm,
                                 arches=", ".join(arches)),
        Status.FAIL,
        tr("the series does not support this GPU with this torch build; torch's CUDA 12.6 wheels still "
           "ship Volta (sm_70) kernels: `pip install torch torchvision --index-url "
           "https://download.pytorch.org/whl/cu126`"),
    )


def _peak_check(name: str) -> Check:
    from fp16lab.hardware import peak_for

    peak = peak_for(name)
    if peak is None:
        return Check(
            "peak table", tr("{name!r} is not in fp16lab.hardware.PEAK_TFLOPS", name=name), Status.WARN,
            tr("'% of peak' figures are not shown; add your GPU's datasheet numbers to `PEAK_TFLOPS`"),
        )
    return Check(
        "peak table",
        tr("{gpu}: FP32 {fp32}, TF32 {tf32}, FP16 {fp16}, BF16 {bf16}, FP16-accumulate {acc16}, FP8 {fp8} "
           "dense TFLOP/s (cited: {source})", gpu=peak.gpu, fp32=peak.fp32, tf32=peak.tf32, fp16=peak.fp16,
           bf16=peak.bf16, acc16=peak.fp16_acc16, fp8=peak.fp8,
           source=cited_source(peak.source) + (tr("; FP16-accumulate: {source}", source=cited_source(peak.acc16_source))
                                               if peak.acc16_source else "")),
    )


def capability_checks(capability: tuple[int, int], name: str | None = None) -> list[Check]:
    """Report rows for what a chip of ``capability`` (and ``name``) supports natively."""
    f = chip_features(capability, name)
    sm = f"sm_{capability[0]}{capability[1]}"
    return [
        Check("FP16 Tensor Cores", tr("yes"))
        if f["fp16_tensor_cores"]
        else Check(
            "FP16 Tensor Cores",
            tr("no ({sm} < {floor})", sm=sm, floor="sm_70") if capability < (7, 0)
            else tr("no ({name}: a GTX 16xx has none)", name=name),
            Status.WARN,
            tr("fp16 runs but without Tensor Cores: expect little or no AMP speed-up on this GPU"),
        ),
        Check("BF16 native", tr("yes"))
        if f["bf16_native"]
        else Check(
            "BF16 native",
            tr("no ({sm} < {floor})", sm=sm, floor="sm_80"),
            Status.WARN,
            tr("use fp16 with GradScaler; `torch.cuda.is_bf16_supported()` may still say True "
               "here because bf16 is emulated (slow)"),
        ),
        Check("TF32", tr("yes"))
        if f["tf32"]
        else Check("TF32", tr("no ({sm} < {floor})", sm=sm, floor="sm_80"), Status.WARN,
                   tr("FP32 matmuls run at plain FP32 speed")),
        Check("FP8", tr("yes (lesson 09_fp8)") if f["fp8"]
              else tr("no ({sm} < sm_89; lesson 09_fp8 shows its numerics and the reference run)", sm=sm)),
    ]
