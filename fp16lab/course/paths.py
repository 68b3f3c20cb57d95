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
from typing import Any

from fp16lab.checks import existing_path, path, sequence_of
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
    "notebook_path",
    "read_notebook",
    "lesson_files",
    "read_json",
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
        f"{'start: ' if start is not None else ''}no fp16lab repository found above {where} (looked for a pyproject.toml with [project] "
        f"name = {PROJECT_NAME!r}). Run the command from inside your clone of the repository, "
        f"or set {ROOT_ENV}=/path/to/the/clone."
    )


def _root(root: "str | Path | None") -> Path:
    """``root`` when it is an existing folder (default: :func:`repo_root`); a typo is an error, not an empty tree."""
    return repo_root() if root is None else existing_path("root", root, kind="dir")


def notebooks_dir(root: "str | Path | None" = None) -> Path:
    """``notebooks/``: the lessons, the start page and the instructor guide.

    ``root`` (default None: :func:`repo_root`) must be an existing folder, as for every folder below.
    """
    return _root(root) / "notebooks"


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


def notebook_path(name: str, value: object) -> Path:
    """``value`` as the Path of an existing ``.ipynb`` file; a missing path or another file is refused naming ``name``."""
    p = existing_path(name, value, kind="file")
    if p.suffix != ".ipynb":
        raise ValueError(f"{name}: {str(p)!r} is not a notebook (.ipynb) file")
    return p


def read_notebook(name: str, value: object) -> Any:
    """The notebook (nbformat, version 4) at ``value``, an existing ``.ipynb`` file; errors name ``name``.

    A missing path, a folder, another kind of file or a file that is not a notebook is refused
    with the argument's name and the path, never nbformat's own error from deep inside.
    """
    import nbformat

    p = notebook_path(name, value)
    try:
        return nbformat.read(p, as_version=4)
    except Exception as exc:  # NotJSONError, a schema error, an unreadable file: all the same to the caller
        raise ValueError(f"{name}: {str(p)!r} is not a readable notebook ({type(exc).__name__}: "
                         f"{str(exc)[:120]})") from None


def lesson_files(name: str, value: object) -> list[Path]:
    """``value`` as a list of existing notebooks that read as notebooks (a bare string is refused).

    Each entry is checked as ``name[i]`` before any is used, so a typo in the third path stops the
    call before the first is written or run.
    """
    out = sequence_of(name, value, example="['notebooks/02_amp_training_loop.ipynb']", item=notebook_path)
    for i, p in enumerate(out):
        read_notebook(f"{name}[{i}]", p)
    return out


def read_json(name: str, value: object, what: str, *, missing: Any = None) -> Any:
    """The JSON in the file at ``value`` (``what`` it should be, for the message); errors name ``name``.

    ``missing`` (default None: an error) is returned for a file that does not exist yet, for the
    writers that start one; a folder or a file that is not JSON is always refused.
    """
    import json

    checks_text("what", what)
    p = path(name, value)
    if missing is not None and not p.exists():
        return missing
    p = existing_path(name, p, kind="file")
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(f"{name}: {str(p)!r} is not {what} (not valid JSON: {str(exc)[:80]})") from None


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


def replace_block(path: "str | os.PathLike[str]", start: str, end: str, body: str, *, name: str = "path") -> bool:
    """Put ``body`` between the ``start`` and ``end`` markers of the file at ``path``; True when it changed.

    Guides keep generated tables between marker comments; the text around them is left as it is.
    ``name`` (default ``'path'``) is the argument the caller took ``path`` as, for the messages.
    """
    checks_text("name", name)
    for arg, value in (("start", start), ("end", end), ("body", body)):
        checks_text(arg, value)
        if arg != "body" and not value.strip():
            raise ValueError(f"{arg} must be a non-empty marker, e.g. '<!-- agenda:start -->'; got {value!r}")
    p = existing_path(name, path, kind="file")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{name}: {str(p)!r} is not a text file") from None
    if start not in text or end not in text.split(start, 1)[1]:
        raise ValueError(f"{name}: {str(p)!r} lacks the markers {start!r} ... {end!r} around its generated block")
    head, rest = text.split(start, 1)
    tail = rest.split(end, 1)[1]
    new = f"{head}{start}\n{body}\n{end}{tail}"
    if new == text:
        return False
    p.write_text(new, encoding="utf-8")
    return True
