"""Checks on lesson prose: no measured number typed into markdown, and a link to the next lesson.

**Measured-looking numbers.** A lesson's markdown must point at its outputs ("the table above
shows ...") instead of typing a measured number, which goes stale on the next run or another
GPU. :func:`measured_numbers` finds a number followed by a unit (img/s, images/s, TFLOP/s, GB,
GiB, MiB, ms, s, %, × or x) on a markdown line. A line is exempt when it is marked as a fact
from elsewhere, on that same source line, by one of :data:`MARKERS`:

- the word ``cited``, as in ``(cited: NVIDIA H200 datasheet)`` or ``<!-- cited -->``;
- ``(article)``, for a number quoted from the source article;
- ``<!-- not measured -->``, for a setting, a target or arithmetic on format facts.

Dimensions (``4096×4096``, ``3x3``) and numbers inside URLs are not units.

**Next-lesson links.** Each lesson's last markdown cell links the next lesson's file
(``[lesson 01](01_fp16_numerics.ipynb)``), or the planned next one while it is being written;
the last lesson links the start page ``README.md``.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from fp16lab import checks
from fp16lab.course import paths as _paths

__all__ = ["UNITS", "MARKERS", "is_marked", "measured_numbers", "markdown_hits", "next_link_problem",
           "lint_lesson"]

UNITS = (
    "images/sec", "images/s", "image/s", "img/s", "samples/s", "tokens/s", "it/s",
    "TFLOP/s", "TFLOPS", "TFLOPs", "GFLOP/s", "GFLOPS", "GB/s", "GiB", "GB", "MiB", "MB", "KiB", "KB",
    "ms", "µs", "us", "s", "sec", "%", "×", "x",
)
MARKERS = (r"\bcited\b", r"\(article\)", r"<!--\s*not measured\s*-->")

_UNIT = "|".join(re.escape(u) for u in sorted(UNITS, key=len, reverse=True))
# a number (or a range of two, 30-80x) not glued to a word (sm_89, fp16, 2^16, v2.1), a unit, and no word,
# digit or "(" right after
_NUM = r"\d+(?:[.,]\d+)*"
_PATTERN = re.compile(
    r"(?<![\w.^/\-])[-+−]?" + _NUM + r"(?:[-–]" + _NUM + r")?[ \u00a0\u202f]?(?:" + _UNIT + r")(?![\w/])(?!\s*[\d(])"
)
_MARK = re.compile("|".join(MARKERS), re.I)
_URL = re.compile(r"https?://\S+|\]\([^)]*\)")


def is_marked(line: str) -> bool:
    """True when ``line`` carries one of :data:`MARKERS` (so its numbers are cited, not measured)."""
    checks.text("line", line)
    return bool(_MARK.search(line))


def measured_numbers(line: str) -> list[str]:
    """The number-with-unit strings on one markdown line that are not marked as cited."""
    checks.text("line", line)
    if is_marked(line):
        return []
    return [m.group(0) for m in _PATTERN.finditer(_URL.sub("", line))]


def _source(cell: Any) -> str:
    src = cell.get("source", "")
    return src if isinstance(src, str) else "".join(src)


def markdown_hits(nb: Any) -> list[tuple[int, str, list[str]]]:
    """Every (cell index, line, numbers) in ``nb``'s markdown with an unmarked number and unit."""
    checks.notebook("nb", nb)
    hits = []
    for i, cell in enumerate(nb.cells):
        if cell.get("cell_type") != "markdown":
            continue
        for line in _source(cell).splitlines():
            found = measured_numbers(line)
            if found:
                hits.append((i, line.strip(), found))
    return hits


_LINK = re.compile(r"\]\(\s*<?([^)\s>#]+)(?:#[^)\s]*)?>?\s*\)")


def next_link_problem(nb: Any, lesson: "str | Path", lessons: "list[Path] | None" = None) -> str | None:
    """Why the last markdown cell of ``nb`` lacks its link to what comes next, or None.

    The next lesson is the one after ``lesson`` in ``lessons`` (default: the lessons beside it);
    a link to the curriculum's lesson numbered one higher (:data:`~fp16lab.course.paths.CURRICULUM`)
    also counts, so that a lesson can point at the next one while that is still being written.
    After the last lesson, the link goes to the start page ``README.md``.
    """
    checks.notebook("nb", nb)
    path = checks.path("lesson", lesson)
    given = None if lessons is None else checks.sequence_of("lessons", lessons, example="[Path('01_x.ipynb')]",
                                                             item=checks.path)
    if given is None and not path.parent.is_dir():
        raise FileNotFoundError(f"lesson: the folder of {str(path)!r} does not exist, so it has no lessons beside it; "
                                "pass lessons=[...] or the path of a lesson in notebooks/")
    order = [p.name for p in (given if given is not None else _paths.lessons(path.parent))]
    if path.name not in order:
        raise ValueError(f"lesson must be one of {order}, got {path.name!r}")
    i = order.index(path.name)
    target = order[i + 1] if i + 1 < len(order) else "README.md"
    number = int(path.name[:2]) + 1 if path.name[:2].isdigit() else -1
    planned = {f"{stem}.ipynb" for stem in _paths.CURRICULUM if stem.startswith(f"{number:02d}_")}
    md = [c for c in nb.cells if c.get("cell_type") == "markdown"]
    if not md:
        return f"no markdown cell to end with a link to {target}"
    links = [Path(t).name for t in _LINK.findall(_source(md[-1]))]
    if planned & set(links):
        return None
    if target not in links:
        return (f"its last markdown cell does not link the next step: add e.g. "
                f"'- Next: [{'lesson ' + target[:2] if target != 'README.md' else 'the start page'}]({target})'")
    return None


def lint_lesson(lesson: "str | Path") -> list[str]:
    """All prose problems of one lesson file, one line each (empty when it is clean)."""
    path = _paths.notebook_path("lesson", lesson)
    nb = _paths.read_notebook("lesson", path)
    problems = [f"cell {i}: {', '.join(found)} typed into markdown (not marked as cited): {line[:120]}"
                for i, line, found in markdown_hits(nb)]
    why = next_link_problem(nb, path)
    if why:
        problems.append(why)
    return problems
