"""Quick mode: the one switch that decides problem sizes for every lesson.

Quick mode is on when ``FP16LAB_QUICK`` says so, else when ``CI`` is set, else when
there is no CUDA GPU. ``FP16LAB_QUICK=0`` forces full sizes even on a CPU.
Lessons never branch on the device for sizes; they call :func:`pick`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TypeVar

__all__ = ["Mode", "mode", "is_quick", "pick"]

T = TypeVar("T")

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


@dataclass(frozen=True)
class Mode:
    """Which sizes the lessons use, and why."""

    quick: bool
    reason: str

    @property
    def name(self) -> str:
        return "quick" if self.quick else "full"

    @property
    def meaning(self) -> str:
        if self.quick:
            return (
                "sizes are shrunk so every lesson runs in minutes on a laptop CPU. Numbers "
                "measured in this mode are not FP16 speed-ups; the GPU reference outputs show those."
            )
        return "full problem sizes."

    def __str__(self) -> str:
        return f"{self.name.upper()} MODE ({self.reason}): {self.meaning}"

    def _repr_html_(self) -> str:
        import html

        colour = "#b35900" if self.quick else "#1a7f37"
        return (
            f'<div style="border-left:4px solid {colour};padding:4px 8px">'
            f"<b>{self.name.upper()} MODE</b> ({html.escape(self.reason)}) &mdash; {self.meaning}</div>"
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
    explicit = _flag("FP16LAB_QUICK")
    if explicit is not None:
        return Mode(explicit, f"FP16LAB_QUICK={os.environ['FP16LAB_QUICK']}")
    if _flag("CI"):
        return Mode(True, "CI is set")
    import torch

    if not torch.cuda.is_available():
        return Mode(True, "no CUDA GPU")
    return Mode(False, f"CUDA GPU: {torch.cuda.get_device_name(0)}")


def is_quick() -> bool:
    """True when lessons should use their quick (small) sizes."""
    return mode().quick


def pick(quick: T, full: T) -> T:
    """Return ``quick`` in quick mode and ``full`` otherwise."""
    return quick if is_quick() else full
