"""Exercise checks, out of the lessons' sight: a check cell shows the verdict and a hint, never the answer.

One module per lesson (``fp16lab.course.answers.l07``); each check function takes the learner's
values, compares them with what it computes itself, and calls :func:`verdict`. Every hint and
verdict goes through :func:`fp16lab.course.i18n.tr`, so ``FP16LAB_LANG=zh`` shows them in Chinese.
"""

from __future__ import annotations

from fp16lab.course.i18n import tr

__all__ = ["verdict"]


def verdict(ok: bool, hint: str, *, done: str | None = None) -> None:
    """Raise AssertionError with ``hint`` when ``ok`` is false; else print ``done`` (one line, no answer).

    ``hint`` and ``done`` come already translated (``tr(...)`` at the call); ``done`` defaults to "correct".
    """
    if not isinstance(ok, bool):
        ok = bool(ok)
    if not ok:
        raise AssertionError(hint)
    print(f"✓ {tr('correct') if done is None else done}")
