"""Exercise checks, out of the lessons' sight: a check cell shows the verdict and a hint, never the answer.

One module per lesson (``fp16lab.course.answers.l07``); each check function takes the learner's
values, compares them with what it computes itself, and ends in :func:`verdict`. Every hint and
verdict goes through :func:`fp16lab.labs.runtime.i18n.tr`, so ``FP16LAB_LANG=zh`` shows them in Chinese.

A wrong answer raises :class:`WrongAnswer`. Jupyter (IPython) renders it through its
``_render_traceback_``: the learner sees the hint alone, not a traceback whose source lines would show
the checker's code, and so the answer. nbval still sees an error (student copies'
``# NBVAL_RAISES_EXCEPTION`` keeps working), and pytest still shows the whole traceback.
"""

from __future__ import annotations

from typing import NoReturn

from fp16lab.checks import text
from fp16lab.labs.runtime.i18n import language, tr

__all__ = ["WrongAnswer", "verdict", "require", "cannot_check"]

_HINT = "提示："  # the Chinese hints' prefix (the glossary's 提示 for hint)


class WrongAnswer(AssertionError):
    """A wrong or missing exercise answer; its one argument is the hint (already translated).

    In Chinese every hint starts with "提示：" (lessons 00-05 write it in the hint, 06-10 do not, in English
    either); ``hint=False`` for a message that is no hint (:func:`cannot_check`). English is left as it is.
    """

    def __init__(self, *args: object, hint: bool = True) -> None:
        if hint and args and isinstance(args[0], str) and language() == "zh" and not args[0].startswith(_HINT):
            args = (_HINT + args[0], *args[1:])
        super().__init__(*args)

    def _render_traceback_(self) -> list[str]:
        """What IPython shows instead of a traceback: the hint, nothing of the checker's source."""
        return [f"✗ {self.args[0] if self.args else ''}"]


def require(ok: object, hint: str) -> None:
    """One part of a check: raise :class:`WrongAnswer` with ``hint`` unless ``ok``; print nothing when it holds.

    Use it for every part but the last, so a partly wrong answer never shows a ✓ before it fails.
    ``hint`` is a str (checked before ``ok`` is: a check's own mistake is not a learner's wrong answer).
    """
    text("hint", hint)
    if not bool(ok):
        raise WrongAnswer(hint)


def verdict(ok: object, hint: str, *, done: str | None = None) -> None:
    """The last part of a check: :func:`require`, then print ``done`` (one line, no answer; default "correct").

    ``hint`` and ``done`` come already translated (``tr(...)`` at the call).
    """
    text("hint", hint)
    if done is not None:
        text("done", done)
    require(ok, hint)
    print(f"✓ {tr('correct') if done is None else done}")


def cannot_check(reason: str) -> NoReturn:
    """Fail a check that lacks what it needs (no GPU and no reference, say): it says why instead of passing."""
    text("reason", reason)
    raise WrongAnswer(tr("this check cannot run here: {reason}", reason=reason), hint=False)
