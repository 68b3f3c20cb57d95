"""The learner's workspace: their own copies of the lessons in notebooks/work/, never overwritten.

The lessons in ``notebooks/`` are the reference: committed, with the outputs of the reference
run. A learner runs and saves copies instead. :func:`prepare` copies every lesson (and every
student copy, into ``work/student/``) that is not in the workspace yet and leaves existing files
alone; :func:`reset` starts a lesson over, keeping the old copy in ``work/old/``.
``notebooks/work/`` is git-ignored and not collected by pytest. The Chinese edition (``lang="zh"``,
``python -m fp16lab lab --lang zh``) copies ``notebooks/zh/`` (and ``notebooks/zh/student/``) into
``notebooks/work/zh/`` the same way.

A copy keeps the reference outputs (so it reads well before it is run), moves the reference
stamp to ``metadata.fp16lab_workspace`` (so that, once run and saved, the file does not claim to
hold the reference machine's outputs) and says so in its first output.
"""

from __future__ import annotations

import argparse
import copy as _copy
import datetime as _dt
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fp16lab import checks
from fp16lab.course import paths as _paths
from fp16lab.labs.runtime.i18n import check_lang, tr

__all__ = [
    "WORK_META",
    "Workspace",
    "work_copy",
    "kernel_metadata",
    "prepare",
    "reset",
    "configure",
    "add_parser",
]

WORK_META = "fp16lab_workspace"


@dataclass
class Workspace:
    """What :func:`prepare` found and did: copies made, copies kept, copies behind their lesson."""

    folder: Path
    created: list[Path] = field(default_factory=list)
    kept: list[Path] = field(default_factory=list)
    behind: list[Path] = field(default_factory=list)  # kept copies whose lesson's code changed since
    lang: str = "en"

    def __str__(self) -> str:
        lang = self.lang
        lines = [tr("your workspace: {folder}", lang=lang, folder=self.folder)]
        if self.created:
            lines.append(tr("  new copies: {names}", lang=lang,
                            names=tr(", ", lang=lang).join(_rel(p, self.folder) for p in self.created)))
        if self.kept:
            lines.append(tr("  kept as they are (your work): {n} file(s)", lang=lang, n=len(self.kept)))
        for p in self.behind:
            command = f"python -m fp16lab workspace{'' if lang == 'en' else ' --lang ' + lang} --reset {p.stem}"
            old = "work/old/" if lang == "en" else f"work/{lang}/old/"  # where reset moves it (see _folders)
            lines.append(tr("  note: the lesson behind {name} has changed since you copied it; `{command}` gives a "
                            "fresh copy (yours moves to {old})", lang=lang, name=_rel(p, self.folder),
                            command=command, old=old))
        return "\n".join(lines)


def _rel(p: Path, folder: Path) -> str:
    try:
        return str(p.relative_to(folder))
    except ValueError:
        return str(p)


def work_copy(nb: Any, *, source: str, lang: str = "en") -> Any:
    """The learner's copy of lesson ``nb`` (``nb`` itself is not changed).

    Same cells and stored outputs; the reference stamp (``metadata.fp16lab``) moves into
    ``metadata.fp16lab_workspace`` with ``source`` (the lesson's path) and the code digest, and
    the first output says (in ``lang``, "en" or "zh") that these are the reference machine's outputs
    until the learner runs the copy.
    """
    checks.notebook("nb", nb)
    checks.text("source", source)
    check_lang(lang)
    from fp16lab.course.outputs import KEY, code_digest, set_reference_note

    out = _copy.deepcopy(nb)
    stamp = out.metadata.pop(KEY, None)
    out.metadata.pop("widgets", None)
    out.metadata[WORK_META] = {
        "copy_of": source,
        "lesson_code_sha256": code_digest(nb),
        "reference_outputs": stamp,
        "made_by": "python -m fp16lab workspace",
    }
    if stamp and any(c.cell_type == "code" for c in out.cells):
        set_reference_note(out, meta=stamp, copy=True, lang=lang)
    out.metadata.update(kernel_metadata())
    return out


def kernel_metadata() -> dict[str, Any]:
    """The ``kernelspec`` and ``language_info`` this environment's Python kernel reports.

    JupyterLab writes both into a notebook when its kernel starts; a copy that carries another
    machine's (the reference run's Python version, or none in a student copy) would open marked
    unsaved. Empty when jupyter_client or ipykernel is missing (the copy keeps what it had).
    """
    try:
        from ipykernel.ipkernel import IPythonKernel
        from jupyter_client.kernelspec import KernelSpecManager

        spec = KernelSpecManager().get_kernel_spec("python3")
        return {"kernelspec": {"display_name": spec.display_name, "language": spec.language, "name": "python3"},
                "language_info": dict(IPythonKernel.language_info)}
    except Exception:  # noqa: BLE001 (a copy without a kernel's metadata still works)
        return {}


def _write_copy(lesson: Path, dest: Path, root: Path, lang: str = "en") -> None:
    import nbformat

    nb = nbformat.read(lesson, as_version=4)
    rel = lesson.relative_to(root).as_posix() if lesson.is_relative_to(root) else str(lesson)
    dest.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(work_copy(nb, source=rel, lang=lang), dest)


def _folders(root: Path, lang: str) -> tuple[Path, Path]:
    """(reference lessons, workspace) for a language: notebooks/ and work/, or notebooks/zh/ and work/zh/."""
    nbdir, work = _paths.notebooks_dir(root), _paths.work_dir(root)
    return (nbdir, work) if lang == "en" else (nbdir / lang, work / lang)


def _sources(root: Path, lang: str = "en") -> list[tuple[Path, Path]]:
    """(reference notebook, its place in the workspace) for every lesson and student copy of ``lang``."""
    nbdir, work = _folders(root, lang)
    if not nbdir.is_dir():  # a checkout without that edition: prepare says "no lessons found"
        return []
    pairs = [(p, work / p.name) for p in _paths.lessons(nbdir)]
    student = nbdir / "student"
    pairs += [(p, work / "student" / p.name) for p in (_paths.lessons(student) if student.is_dir() else [])]
    return pairs


def _behind(copy_path: Path, lesson: Path) -> bool:
    import nbformat

    from fp16lab.course.outputs import code_digest

    try:
        meta = nbformat.read(copy_path, as_version=4).metadata.get(WORK_META) or {}
    except Exception:  # noqa: BLE001 (a learner's file may be anything: then it is theirs, not behind)
        return False
    then = meta.get("lesson_code_sha256")
    return bool(then) and then != code_digest(nbformat.read(lesson, as_version=4))


def prepare(root: "str | Path | None" = None, *, lang: str = "en") -> Workspace:
    """Create notebooks/work/ and copy into it every lesson and student copy it lacks.

    Files already there are the learner's and are never overwritten; a copy whose lesson's code
    changed since is reported in ``behind``. Default ``root``: :func:`~fp16lab.course.paths.repo_root`.
    ``lang="zh"``: the Chinese lessons of notebooks/zh/ into notebooks/work/zh/.
    """
    check_lang(lang)
    base = checks.path("root", root) if root is not None else _paths.repo_root()
    ws = Workspace(_folders(base, lang)[1], lang=lang)
    pairs = _sources(base, lang)
    if not pairs:
        raise FileNotFoundError(f"no lessons found in {str(_folders(base, lang)[0])!r} to copy")
    ws.folder.mkdir(parents=True, exist_ok=True)
    for lesson, dest in pairs:
        if dest.exists():
            ws.kept.append(dest)
            if _behind(dest, lesson):
                ws.behind.append(dest)
        else:
            _write_copy(lesson, dest, base, lang)
            ws.created.append(dest)
    return ws


_NAME = re.compile(r"^(?:student/)?(\d\d)(?:_[\w.-]*)?$")


def _resolve(name: str, pairs: list[tuple[Path, Path]], work: Path) -> tuple[Path, Path]:
    text = name.strip().removesuffix(".ipynb")
    m = _NAME.match(text)
    student = text.startswith("student/")
    if m:
        hits = [(src, dest) for src, dest in pairs
                if dest.name.startswith(m.group(1) + "_") and (dest.parent.name == "student") == student
                and (text.split("/")[-1] in (m.group(1), dest.stem))]
        if len(hits) == 1:
            return hits[0]
    allowed = ", ".join(_rel(dest, work).removesuffix(".ipynb") for _, dest in pairs)
    raise ValueError(f"name must be a lesson number or name, e.g. '02' or 'student/02'; got {name!r}. "
                     f"Allowed: {allowed}")


def _untouched(copy_path: Path, lesson: Path, root: Path, lang: str = "en") -> bool:
    """True when the copy is exactly what a fresh copy of the lesson would be (the learner changed nothing)."""
    import nbformat

    rel = lesson.relative_to(root).as_posix() if lesson.is_relative_to(root) else str(lesson)
    try:
        mine = nbformat.read(copy_path, as_version=4)
    except Exception:  # noqa: BLE001 (a learner's file may be anything: then it is theirs, keep it)
        return False
    fresh = work_copy(nbformat.read(lesson, as_version=4), source=rel, lang=lang)
    strip = ("execution", "ExecuteTime", "collapsed", "scrolled", "trusted")
    for nb in (mine, fresh):
        for c in nb.cells:
            for k in strip:
                c.metadata.pop(k, None)
    return nbformat.writes(mine) == nbformat.writes(fresh)


def reset(names: Sequence[str], root: "str | Path | None" = None, *,
          lang: str = "en") -> list[tuple[Path, Path | None]]:
    """Start lessons over: a copy you changed moves to work/old/ (time-stamped), then a fresh copy is made.

    ``names``: lesson numbers or names, ``student/NN`` for a student copy. All names are checked
    before anything moves. An untouched copy is replaced without a backup. Returns (fresh copy,
    where the old one went or None). ``lang="zh"``: the Chinese copies in work/zh/.
    """
    names = checks.sequence_of("names", names, example="['02']", item=checks.text)
    check_lang(lang)
    base = checks.path("root", root) if root is not None else _paths.repo_root()
    work = _folders(base, lang)[1]
    pairs = _sources(base, lang)
    chosen = [_resolve(n, pairs, work) for n in names]  # refuse before any change
    when = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    done: list[tuple[Path, Path | None]] = []
    for lesson, dest in chosen:
        moved = None
        if dest.exists() and _untouched(dest, lesson, base, lang):
            dest.unlink()  # nothing of the learner's in it: no backup to keep
        if dest.exists():
            moved = work / "old" / f"{_rel(dest, work).replace('/', '-').removesuffix('.ipynb')}-{when}.ipynb"
            moved.parent.mkdir(parents=True, exist_ok=True)
            shutil.move(str(dest), str(moved))
        _write_copy(lesson, dest, base, lang)
        done.append((dest, moved))
    return done


def _workspace(args: argparse.Namespace) -> int:
    lang = check_lang(args.lang, "--lang")
    if args.reset:
        for fresh, old in reset(args.reset, lang=lang):
            print(tr("fresh copy: {fresh} (your previous copy: {old})", lang=lang, fresh=fresh, old=old) if old
                  else tr("fresh copy: {fresh}", lang=lang, fresh=fresh))
        return 0
    print(prepare(lang=lang))
    return 0


def configure(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the workspace options to ``parser``."""
    parser.add_argument("--reset", nargs="+", metavar="LESSON",
                        help="start these lessons over (e.g. 02, student/02): your copy moves to work/old/")
    parser.add_argument("--lang", default="en", metavar="LANG",
                        help="en (default) or zh: the Chinese lessons of notebooks/zh/, copied into notebooks/work/zh/")
    parser.set_defaults(func=_workspace)
    return parser


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Register ``workspace`` as a subcommand of ``python -m fp16lab``."""
    p = sub.add_parser("workspace", help="make your own copies of the lessons in notebooks/work/ (never overwritten)",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    configure(p)
