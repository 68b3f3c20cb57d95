"""Where the course files are: the repository root, found once, and the folders under it.

Every course tool asks :func:`repo_root` instead of guessing from ``__file__``: it works the
same from a clone, an editable install, a worktree, or a lesson's kernel running in
``notebooks/work/``.
"""

from __future__ import annotations

import argparse
import os
import re
from pathlib import Path

from fp16lab.checks import existing_path, path
from fp16lab.checks import text as checks_text

__all__ = [
    "ROOT_ENV",
    "PROJECT_NAME",
    "is_repo_root",
    "repo_root",
    "notebooks_dir",
    "student_dir",
    "work_dir",
    "timings_file",
    "instructors_guide",
    "start_page",
    "lessons",
    "LESSON_GLOB",
    "CURRICULUM",
    "notebook_file",
    "replace_block",
    "positive_seconds",
]

ROOT_ENV = "FP16LAB_ROOT"
PROJECT_NAME = "fp16lab"
LESSON_GLOB = "[0-9][0-9]_*.ipynb"
# The series as planned (DESIGN.md), by file stem: lessons link the next one even before it exists.
CURRICULUM = (
    "00_setup_and_verify", "01_fp16_numerics", "02_amp_training_loop", "03_tensor_core_alignment",
    "04_pitfalls_numerics", "05_pitfalls_speed_memory", "06_benchmarking", "07_transformers",
    "08_inference", "09_fp8", "10_multi_gpu",
)

_SECTION = re.compile(r"^\s*\[([^\]]+)\]\s*$")
_NAME = re.compile(r"""^\s*name\s*=\s*["']([^"']+)["']""")


def _project_name(pyproject: Path) -> str | None:
    """The ``[project] name`` of a pyproject.toml (a small reader: tomllib is Python >= 3.11)."""
    try:
        text = pyproject.read_text(encoding="utf-8")
    except OSError:
        return None
    section = None
    for line in text.splitlines():
        m = _SECTION.match(line)
        if m:
            section = m.group(1).strip()
            continue
        if section == "project":
            n = _NAME.match(line)
            if n:
                return n.group(1)
    return None


def is_repo_root(folder: "str | Path") -> bool:
    """True when ``folder`` holds a pyproject.toml whose project is named ``fp16lab``."""
    return _project_name(path("folder", folder) / "pyproject.toml") == PROJECT_NAME


def _search_up(start: Path) -> Path | None:
    for folder in (start, *start.parents):
        if is_repo_root(folder):
            return folder
    return None


def repo_root(start: "str | Path | None" = None) -> Path:
    """The fp16lab repository: the nearest folder above ``start`` with fp16lab's pyproject.toml.

    ``FP16LAB_ROOT``, when set, names the root and must be one. Otherwise the search goes up
    from ``start`` (default: the current folder, then the folder of this package, which an
    editable install places in the checkout). Raises FileNotFoundError saying where it looked.
    """
    explicit = os.environ.get(ROOT_ENV)
    if explicit:
        root = Path(explicit).expanduser().resolve()
        if not is_repo_root(root):
            raise FileNotFoundError(
                f"{ROOT_ENV}={explicit!r} is not the fp16lab repository: it has no pyproject.toml "
                f"with [project] name = {PROJECT_NAME!r}. Point it at your clone, or unset it."
            )
        return root
    starts = [path("start", start).expanduser().resolve()] if start is not None else [
        Path.cwd().resolve(), Path(__file__).resolve().parent]
    for s in starts:
        found = _search_up(s if s.is_dir() else s.parent)
        if found is not None:
            return found
    where = " nor above ".join(repr(str(s)) for s in starts)
    raise FileNotFoundError(
        f"no fp16lab repository found above {where} (looked for a pyproject.toml with [project] "
        f"name = {PROJECT_NAME!r}). Run the command from inside your clone of the repository, "
        f"or set {ROOT_ENV}=/path/to/the/clone."
    )


def notebooks_dir(root: "str | Path | None" = None) -> Path:
    """``notebooks/``: the lessons, the start page and the instructor guide."""
    return (repo_root() if root is None else path("root", root)) / "notebooks"


def student_dir(root: "str | Path | None" = None) -> Path:
    """``notebooks/student/``: the generated student copies (and timings.json)."""
    return notebooks_dir(root) / "student"


def work_dir(root: "str | Path | None" = None) -> Path:
    """``notebooks/work/``: the learner's own copies (git-ignored, never overwritten)."""
    return notebooks_dir(root) / "work"


def timings_file(root: "str | Path | None" = None) -> Path:
    """``notebooks/student/timings.json``: each lesson's measured run times."""
    return student_dir(root) / "timings.json"


def instructors_guide(root: "str | Path | None" = None) -> Path:
    """``notebooks/INSTRUCTORS.md``: the workshop guide with its agenda and coverage table."""
    return notebooks_dir(root) / "INSTRUCTORS.md"


def start_page(root: "str | Path | None" = None) -> Path:
    """``notebooks/README.md``: the learners' start page, where the lab opens."""
    return notebooks_dir(root) / "README.md"


def lessons(folder: "str | Path | None" = None) -> list[Path]:
    """The lessons ``NN_name.ipynb`` in ``folder`` (default: notebooks/), in order; a missing folder is an error."""
    where = existing_path("folder", notebooks_dir() if folder is None else folder, kind="dir")
    return sorted(where.glob(LESSON_GLOB))


def notebook_file(value: str) -> Path:
    """A command-line notebook argument: an existing ``.ipynb`` file, else an error that quotes it."""
    p = path("value", value)
    if p.suffix != ".ipynb" or not p.is_file():
        why = "does not exist" if not p.exists() else "is not a .ipynb file"
        raise argparse.ArgumentTypeError(f"{value!r} {why}; give a notebook such as "
                                         "notebooks/02_amp_training_loop.ipynb")
    return p


def positive_seconds(value: str) -> int:
    """A command-line time limit: a whole number of seconds >= 1, else an error that quotes it."""
    checks_text("value", value)
    try:
        seconds = int(value)
    except ValueError:
        seconds = 0
    if seconds < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of seconds >= 1, got {value!r}")
    return seconds


def replace_block(path: "str | os.PathLike[str]", start: str, end: str, body: str) -> bool:
    """Put ``body`` between the ``start`` and ``end`` markers of the file at ``path``; True when it changed.

    Guides keep generated tables between marker comments; the text around them is left as it is.
    """
    for arg, value in (("start", start), ("end", end), ("body", body)):
        checks_text(arg, value)
    p = existing_path("path", path, kind="file")
    text = p.read_text(encoding="utf-8")
    if start not in text or end not in text.split(start, 1)[1]:
        raise ValueError(f"{str(p)!r} lacks the markers {start!r} ... {end!r} around its generated block")
    head, rest = text.split(start, 1)
    tail = rest.split(end, 1)[1]
    new = f"{head}{start}\n{body}\n{end}{tail}"
    if new == text:
        return False
    p.write_text(new, encoding="utf-8")
    return True
