"""Exercise checks, out of the lessons' sight: a check cell shows the verdict and a hint, never the answer.

One module per lesson (``fp16lab.course.answers.l07``); each check function takes the learner's
values, compares them with what it computes itself, and calls :func:`verdict`.
"""

from __future__ import annotations

__all__ = ["verdict"]


def verdict(ok: bool, hint: str, *, done: str = "correct") -> None:
    """Raise AssertionError with ``hint`` when ``ok`` is false; else print ``done`` (one line, no answer)."""
    if not isinstance(ok, bool):
        ok = bool(ok)
    if not ok:
        raise AssertionError(hint)
    print(f"✓ {done}")
