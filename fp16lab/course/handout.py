"""The student hand-out: the course without its solutions, ready to zip or copy to a USB stick.

``python -m fp16lab workshop handout DEST`` copies the repository into ``DEST`` and leaves out what
gives the answers away: the lessons themselves (``notebooks/NN_*.ipynb`` and ``notebooks/zh/NN_*.ipynb``,
which hold the solution cells and their outputs), the Chinese translation sources, the instructor
guide and the workshop material, and ``tests/`` (whose exercise tests hold the right answers). The
student copies (``notebooks/student/``, ``notebooks/zh/student/``) stay, and the start pages link
them, so ``make lab`` puts only student copies into ``work/student/``. What a learner needs to run
them stays: the package, ``results/`` (the committed GPU reference data), the README, the Makefile.

The exercise checks live in ``fp16lab.course.answers``: they recompute the expected value from the
learner's inputs, so a determined learner can read how an answer is judged; the hand-out keeps the
solutions out of sight, not out of reach.
"""

from __future__ import annotations

import re
import shutil
from fnmatch import fnmatchcase
from pathlib import Path

from fp16lab import checks
from fp16lab.course import paths as _paths

__all__ = ["LEFT_OUT", "NOTE", "handout_files", "student_start_page", "handout"]

# (glob relative to the repository root, why it stays out)
LEFT_OUT = (
    ("notebooks/[0-9][0-9]_*.ipynb", "the lessons hold the solutions and their outputs"),
    ("notebooks/zh/[0-9][0-9]_*.ipynb", "the Chinese lessons hold the solutions and their outputs"),
    ("notebooks/zh/translations", "the translation sources of the lessons"),
    ("notebooks/INSTRUCTORS*.md", "the instructor guide"),
    ("notebooks/zh/INSTRUCTORS*.md", "the Chinese instructor guide"),
    ("notebooks/workshop", "the instructor's workshop material (plans, talk tracks, post-test answers)"),
    ("tests", "the exercise tests hold the right answers"),
)
_NEVER = {".git", ".venv", ".venv-cpu", "wheelhouse", "__pycache__", ".mypy_cache", ".ruff_cache", ".pytest_cache",
          "build", "dist", ".ipynb_checkpoints"}


def _left_out(rel: Path, root: Path) -> bool:
    parts = rel.parts
    if any(p in _NEVER or p.endswith(".egg-info") or p.startswith(".venv") for p in parts):
        return True
    if parts[:2] == ("notebooks", "work"):
        return True
    prefixes = ["/".join(parts[:k]) for k in range(1, len(parts) + 1)]
    return any(fnmatchcase(p, pattern) for pattern, _ in LEFT_OUT for p in prefixes)


def handout_files(root: "str | Path | None" = None) -> list[Path]:
    """Every file of the repository at ``root`` (default: this one) that goes into the hand-out, relative."""
    base = checks.existing_path("root", root, kind="dir") if root is not None else _paths.repo_root()
    return [p.relative_to(base) for p in sorted(base.rglob("*"))
            if p.is_file() and not p.is_symlink() and not _left_out(p.relative_to(base), base)]


_LESSON_LINK = re.compile(r"\]\((?P<prefix>(?:\.\./)?)(?:work/(?P<zh>zh/)?)?(?P<name>[0-9][0-9]_[\w.-]*\.ipynb)"
                          r"(?P<anchor>#[^)]*)?\)")
_GUIDE_LINK = re.compile(r"\[([^\]]+)\]\((?:\.\./)*INSTRUCTORS[\w.-]*\.md(?:#[^)]*)?\)")


def student_start_page(text: str, *, lang: str = "en") -> str:
    """A start page whose lesson links open the learner's student copies, with no link to the instructor guide."""
    checks.text("text", text)
    zh = checks.one_of("lang", lang, ("en", "zh")) == "zh"

    def lesson(m: re.Match[str]) -> str:
        folder = "../work/zh/student/" if zh else "work/student/"
        return f"]({folder}{m.group('name')}{m.group('anchor') or ''})"

    return _GUIDE_LINK.sub(r"\1", _LESSON_LINK.sub(lesson, text))


def handout(dest: "str | Path", root: "str | Path | None" = None, *, solutions: bool = False) -> list[Path]:
    """Copy the course into ``dest`` for students; without the solutions unless ``solutions=True``.

    ``dest`` must not exist yet or be empty (nothing is overwritten). Returns the files written,
    relative to ``dest``. With ``solutions=True`` it is a plain copy of the course files (what a
    learner's own clone holds, less the instructor material and tests), used by ``workshop classroom``.
    """
    base = checks.path("root", root) if root is not None else _paths.repo_root()
    target = checks.path("dest", dest)
    solutions = checks.boolean("solutions", solutions)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise ValueError(f"dest must be a new or empty folder (nothing is overwritten), got {str(target)!r}")
    if target.resolve().is_relative_to(base.resolve()) and not _left_out(target.resolve().relative_to(base.resolve()),
                                                                           base):
        raise ValueError(f"dest must be outside the repository (or in a git-ignored folder such as wheelhouse/), "
                         f"got {str(target)!r}")
    files = list(handout_files(base))
    if solutions:
        nbdir = _paths.notebooks_dir(base)
        for folder in (nbdir, nbdir / "zh"):
            files += [p.relative_to(base) for p in (_paths.lessons(folder) if folder.is_dir() else [])]
    written = []
    for rel in sorted(set(files)):
        out = target / rel
        out.parent.mkdir(parents=True, exist_ok=True)
        if not solutions and rel.as_posix() in ("notebooks/README.md", "notebooks/zh/README.md"):
            text = (base / rel).read_text(encoding="utf-8")
            out.write_text(student_start_page(text, lang="zh" if "zh" in rel.parts else "en"), encoding="utf-8")
        else:
            shutil.copy2(base / rel, out)
        written.append(rel)
    if not solutions:
        (target / NOTE).write_text(NOTE_TEXT, encoding="utf-8")
        written.append(Path(NOTE))
    return written


NOTE = "HANDOUT.md"
NOTE_TEXT = """# The student hand-out / 学生资料包

This copy of fp16lab has the student copies of the lessons (`notebooks/student/`), not the lessons with
their solutions, and no tests: `make setup` (or `make setup CPU=1`), `make doctor`, then `make lab` (or
`make lab LAB_LANG=zh`). The lab opens the start page; its links open your copies in `work/student/`.
`make test` needs the full repository. Problems: `notebooks/FAQ.md`.

这份 fp16lab 只包含课程的学生版副本（`notebooks/student/`），不含带参考答案的课程，也不含测试：先运行 `make setup`（或 `make setup CPU=1`）、`make doctor`，再运行 `make lab LAB_LANG=zh`。lab 打开起始页，其中的链接打开你在 `work/zh/student/` 中的副本。`make test` 需要完整的仓库。遇到问题请看 `notebooks/zh/FAQ.md`。
"""
