"""Quick mode: the one switch that decides problem sizes for every lesson.

Quick mode is on when ``FP16LAB_QUICK`` says so, else when ``CI`` is set, else when
there is no CUDA GPU. ``FP16LAB_QUICK=0`` forces full sizes even on a CPU.
Lessons never branch on the device for sizes; they call :func:`pick` (or
:func:`pick_for_memory` where the size depends on the GPU's memory), and
:func:`live_gpu` is the one definition of "measure it here, live" (otherwise a lesson
shows the committed reference, :func:`fp16lab.labs.runtime.results.measure_or_reference`).

*Profile smoke* (``FP16LAB_SMOKE=1``, full mode only) keeps full-mode code paths and sizes
but fewer steps and repeats, so a pass over every lesson under every hardware profile fits
in minutes; lessons pass ``smoke=`` to :func:`pick` for step counts and repeats only.
"""

from __future__ import annotations

import math
import numbers
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from fp16lab.labs.runtime.i18n import tr

if TYPE_CHECKING:
    from fp16lab.hardware import GPUFacts

__all__ = ["Mode", "mode", "is_quick", "is_smoke", "pick", "pick_for_memory", "live_gpu", "gpu_label"]

T = TypeVar("T")

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


@dataclass(frozen=True)
class Mode:
    """Which sizes the lessons use, and why."""

    quick: bool
    reason: str
    smoke: bool = False
    gpu: "GPUFacts | None" = field(default=None, compare=False, repr=False)  # the GPU behind "CUDA GPU: ..."

    @property
    def name(self) -> str:
        return "quick" if self.quick else ("full-smoke" if self.smoke else "full")

    @property
    def meaning(self) -> str:
        """What the mode means for the numbers, in the learner's language (FP16LAB_LANG)."""
        if self.quick:
            return tr("sizes are shrunk so every lesson runs in minutes on a laptop CPU. Numbers "
                      "measured in this mode are not FP16 speed-ups; the GPU reference outputs show those.")
        if self.smoke:
            return tr("full problem sizes and code paths, fewer steps and repeats (profile smoke run).")
        return tr("full problem sizes.")

    @property
    def reason_text(self) -> str:
        """Why this mode, in the learner's language (``reason`` itself stays English: it is data)."""
        if self.reason == "no CUDA GPU":
            return tr("no CUDA GPU")
        if self.reason == "CI is set":
            return tr("CI is set")
        if self.reason.startswith("CUDA GPU: "):
            label = gpu_label(self.gpu) if self.gpu is not None else self.reason.removeprefix("CUDA GPU: ")
            return tr("CUDA GPU: {label}", label=label)
        return self.reason  # FP16LAB_QUICK=1: the setting itself

    @property
    def title(self) -> str:
        """The banner's title: QUICK MODE, FULL MODE or FULL-SMOKE MODE (translated)."""
        if self.quick:
            return tr("QUICK MODE")
        return tr("FULL-SMOKE MODE") if self.smoke else tr("FULL MODE")

    def __str__(self) -> str:
        return tr("{title} ({reason}): {meaning}", title=self.title, reason=self.reason_text, meaning=self.meaning)

    def _repr_html_(self) -> str:
        import html

        colour = "#b35900" if self.quick else "#1a7f37"
        return (
            f'<div style="border-left:4px solid {colour};padding:4px 8px">'
            f"<b>{html.escape(self.title)}</b>{html.escape(tr(' ({reason})', reason=self.reason_text))} &mdash; "
            f"{html.escape(self.meaning)}</div>"
        )

    def __repr__(self) -> str:
        return str(self)


def _flag(name: str) -> bool | None:
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return None
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    if name == "CI":  # CI systems set CI to many things ("true", "1", "yes", a name)
        return True
    raise ValueError(
        f"{name}={raw!r} is not understood; use one of {sorted(_TRUE | _FALSE)}"
    )


def mode() -> Mode:
    """Return the current :class:`Mode` (read from the environment each call)."""
    smoke = bool(_flag("FP16LAB_SMOKE"))
    explicit = _flag("FP16LAB_QUICK")
    if explicit is not None:
        return Mode(explicit, f"FP16LAB_QUICK={os.environ['FP16LAB_QUICK']}", smoke and not explicit)
    if _flag("CI"):
        return Mode(True, "CI is set")
    from fp16lab.hardware import gpu_facts

    facts = gpu_facts()
    if facts is None:
        return Mode(True, "no CUDA GPU")
    return Mode(False, f"CUDA GPU: {facts.label}", smoke, facts)


def gpu_label(facts: "GPUFacts") -> str:
    """:attr:`fp16lab.hardware.GPUFacts.label` in the learner's language (``FP16LAB_LANG``): the chip, and under
    a hardware profile which chip really runs (the English is ``facts.label`` itself, character for character)."""
    from fp16lab.hardware import GPUFacts

    if not isinstance(facts, GPUFacts):
        raise TypeError(f"facts must be a GPUFacts from fp16lab.hardware.gpu_facts(), got {type(facts).__name__}")
    if facts.profile is None:
        return facts.name
    return tr("{name} profile ({profile}) on a real {real}: memory and code path emulated, speed is the real chip's",
              name=facts.name, profile=facts.profile, real=facts.real_name)


def is_quick() -> bool:
    """True when lessons should use their quick (small) sizes."""
    return mode().quick


def is_smoke() -> bool:
    """True in a profile smoke run: full sizes, fewer steps (``FP16LAB_SMOKE=1``)."""
    return mode().smoke


def pick(quick: T, full: T, *, smoke: T | None = None) -> T:
    """``quick`` in quick mode, else ``full`` (or ``smoke``, when given, in a profile smoke run)."""
    m = mode()
    if m.quick:
        return quick
    return smoke if (m.smoke and smoke is not None) else full


def pick_for_memory(quick: T, full: Mapping[float, T]) -> T:
    """``quick`` in quick mode; else the value of ``full`` whose GiB key is the largest <= this GPU's memory.

    ``full`` maps usable GPU memory in GiB to a size, e.g. ``{7.5: 64, 15: 128, 23: 256}``;
    the memory is the hardware profile's under a profile. Raises ``ValueError`` when even the
    smallest key does not fit (say what the lesson needs rather than run out of memory).
    """
    if not isinstance(full, Mapping) or not full:
        raise ValueError(f"full must be a non-empty mapping of GiB -> value, got {full!r}")
    for key in full:
        if isinstance(key, bool) or not isinstance(key, numbers.Real) or not math.isfinite(key) or key < 0:
            raise ValueError(f"full's keys must be finite GiB numbers >= 0, got {key!r}")
    if is_quick():
        return quick
    from fp16lab.hardware import usable_memory_gib

    gib = usable_memory_gib()
    if gib is None:  # full mode forced on a machine without CUDA: plan for the smallest card
        return full[min(full)]
    fitting = [k for k in full if k <= gib]
    if not fitting:
        raise ValueError(
            f"this GPU has {gib:.1f} GiB usable; the smallest size here needs {min(full)} GiB"
        )
    return full[max(fitting)]


def live_gpu() -> bool:
    """Measure GPU effects live: full mode on a machine with a CUDA GPU (else show the reference)."""
    if is_quick():
        return False
    import torch

    return torch.cuda.is_available()
