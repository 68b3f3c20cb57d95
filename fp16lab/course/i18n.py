"""What the learner's own run prints, in their language: one switch, one catalogue, English by default.

``FP16LAB_LANG=zh`` (which ``python -m fp16lab lab --lang zh`` sets for its kernels) turns the exercise
hints and verdicts, the stored-outputs note and the doctor's fixes into Chinese. The English text is
the key (gettext-style), so English callers stay readable: ``tr("Hint: assign {name}", name="tol")``.
A message without a Chinese entry, or an unknown ``FP16LAB_LANG``, falls back to English: never an
error. Chinese entries follow the glossary (术语表) of ``notebooks/zh/README.md``; each keeps the
same ``{fields}`` as its English (tests/test_i18n.py checks that, and that no entry is dead).
"""

from __future__ import annotations

import os

__all__ = ["LANG_ENV", "LANGUAGES", "check_lang", "language", "tr", "ZH"]

LANG_ENV = "FP16LAB_LANG"
LANGUAGES = ("en", "zh")


def check_lang(name: str, value: object) -> str:
    """``value`` if it is one of :data:`LANGUAGES`; else ValueError naming ``name`` (explicit input is checked)."""
    if not isinstance(value, str) or value not in LANGUAGES:
        raise ValueError(f"{name} must be one of {', '.join(map(repr, LANGUAGES))}; got {value!r}")
    return value


def language(lang: str | None = None) -> str:
    """``lang`` if given and known, else ``FP16LAB_LANG`` if known, else English (a switch never raises)."""
    raw = lang if lang is not None else os.environ.get(LANG_ENV, "")
    value = raw.strip().lower().replace("_", "-")
    if value in ("zh-cn", "zh-hans"):
        value = "zh"
    return value if value in LANGUAGES else "en"


def tr(msgid: str, /, *, lang: str | None = None, **fields: object) -> str:
    """``msgid`` in the chosen language (see :func:`language`), its ``{fields}`` filled in.

    Without fields the text is returned as it is (literal braces need no escaping); with fields it
    is a :meth:`str.format` template, in both languages.
    """
    text = ZH.get(msgid, msgid) if language(lang) == "zh" else msgid
    return text.format(**fields) if fields else text


# The Chinese catalogue, keyed by the English msgid. Terms: notebooks/zh/README.md's 术语表.
ZH: dict[str, str] = {
}
