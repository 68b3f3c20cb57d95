"""The Chinese edition: one translation file per lesson, and the notebooks made from it and the English.

English is the source of truth. ``notebooks/zh/translations/<lesson>.md`` holds, for each markdown
cell of ``notebooks/<lesson>.ipynb`` that has been translated, a header line naming the cell's id and
a digest of the English source it was translated from, then the Chinese text::

    <!-- cell 672d1d40 en:3f2a9c1b0d4e -->
    中文正文……

A cell whose English changed after its translation is *stale*: its digest no longer matches.

``python -m fp16lab translations write`` makes ``notebooks/zh/<lesson>.ipynb`` for every lesson that
has a translation file: the English code cells as they are (source, outputs, metadata; so the code
digest, the stored outputs and the portability rows are shared), each markdown cell in Chinese where
its translation is fresh, else in English (and reported), relative links rewritten for
``notebooks/zh/``, and first among the outputs, in place of the English reference note, the same note in
Chinese (:func:`zh_note`: outputs of the English run on the reference machine; your copy is in notebooks/work/zh/).
It also makes the student copies ``notebooks/zh/student/`` with :mod:`fp16lab.course.student`.
``translations check`` lists every stale or missing cell and every Chinese notebook that is not what
``write`` makes; ``translations skeleton NN`` starts (or refreshes) a lesson's translation file.
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fp16lab import checks
from fp16lab.course import paths as _paths

__all__ = [
    "Entry", "Gap", "HEADER", "META_KEY", "NOTE_PREFIX", "digest", "parse", "render", "markdown_cells",
    "skeleton", "zh_target", "rewrite_links", "zh_note", "is_zh_note", "zh_lesson", "zh_student_copy",
    "generate", "write_zh", "check_zh", "add_parser", "ZH_PROMPT_COMMENT", "ZH_CHECK_NOTE",
]

HEADER = re.compile(r"^<!-- cell (?P<id>[A-Za-z0-9_-]+) en:(?P<digest>[0-9a-f]{12}) -->$")
_TITLE = "<!-- fp16lab translation of notebooks/{name} into Chinese (zh). One block per markdown cell. -->"
ZH = "zh"  # notebooks/zh/: the Chinese lessons, translations/ and student/
META_KEY = "fp16lab_zh"  # notebook metadata: this is the Chinese edition, made from the English
MADE_BY = "python -m fp16lab translations write"
NOTE_PREFIX = "已存输出："  # how the first output of a Chinese lesson starts (its reference note, in Chinese)
# Repository files that have a Chinese counterpart (paths from the root): a link to one goes there.
COUNTERPARTS = {"notebooks/README.md": "notebooks/zh/README.md", "README.md": "README.zh-CN.md"}
_LESSON_FILE = re.compile(r"^notebooks/(?:student/)?\d\d_[^/]*\.ipynb$")  # the zh edition has each one beside it
_LINK = re.compile(r"""(?P<head>\]\(\s*|\b(?:href|src)\s*=\s*["']|^ {0,3}\[[^\]\n]+\]:[ \t]*)(?P<target>[^)\s"'<>]+)""",
                   re.M)
_EXTERNAL = re.compile(r"^(?:[A-Za-z][A-Za-z0-9+.-]*:|[#/])")  # a URL, mailto:, an anchor, an absolute path
_STUDENT_BANNER = (
    "> **学生版**：课程 [`{name}`](../{name}) 的练习版，由 `" + MADE_BY + "` 生成（请勿直接编辑："
    "修改英文课程或译文后重新生成）。本课共有 {n} 个练习：把每处 `None  # 在这里写你的答案` 换成你的答案，"
    "再运行它下方的检查单元格；答案正确之前，检查会抛出 `AssertionError` 并给出提示。*运行 → 运行所有单元格*"
    " 会运行整节课，并停在第一个还没作答的检查处；通过之后，用 *运行 → 运行选中的单元格及以下所有* 继续。"
    "参考答案在课程本身里：`notebooks/zh/{name}`。"
)


@dataclass(frozen=True)
class Entry:
    """One translated cell: the English cell's id, the digest of the English it came from, the Chinese."""

    cell_id: str
    en_digest: str
    text: str


_WHY = {
    "stale": "stale, the English changed after it was translated",
    "missing": "missing, no translation",
    "untranslated": "untranslated, its block still holds the English",
    "orphan": "translated, but the lesson has no such markdown cell now (remove the block)",
}


@dataclass(frozen=True)
class Gap:
    """A markdown cell that the Chinese edition shows in English, and why: what a translator redoes."""

    lesson: str  # the lesson's file stem
    cell_id: str
    why: str  # one of _WHY's keys
    english: str  # the first words of the English ("" for an orphan)

    def __str__(self) -> str:
        words = f": {self.english}" if self.english else ""
        return f"{self.lesson} cell {self.cell_id}: {_WHY[self.why]}{words}"


def digest(source: str) -> str:
    """12 hex digits of SHA-256 of a cell's English source: enough to notice any change."""
    return hashlib.sha256(checks.text("source", source).encode("utf-8")).hexdigest()[:12]


def parse(text: str) -> dict[str, Entry]:
    """The entries of one translation file, by cell id (the title line and blank edges ignored)."""
    checks.text("text", text)
    entries: dict[str, Entry] = {}
    current: tuple[str, str] | None = None
    body: list[str] = []

    def close() -> None:
        if current is not None:
            if current[0] in entries:
                raise ValueError(f"cell {current[0]!r} is translated twice")
            entries[current[0]] = Entry(current[0], current[1], "\n".join(body).strip("\n"))

    for n, line in enumerate(text.splitlines(), 1):
        m = HEADER.match(line)
        if m:
            close()
            current, body = (m["id"], m["digest"]), []
        elif line.lstrip().startswith("<!-- cell "):
            raise ValueError(f"line {n} looks like a block header but is not one: {line!r}; a header is exactly "
                             "'<!-- cell ID en:DIGEST -->' (12 hex digits), as the skeleton writes it")
        elif current is not None:
            body.append(line)
    close()
    return entries


def _entry(name: str, value: Any) -> Entry:
    return checks.instance(name, value, Entry, "a translations.Entry")


def render(name: str, entries: Sequence[Entry]) -> str:
    """The file text for ``entries`` (one per markdown cell, at least one) in the given order (the lesson's cell order)."""
    checks.text("name", name)
    items = checks.sequence_of("entries", entries, example="[Entry(...)]", item=_entry)
    blocks = [_TITLE.format(name=name)]
    blocks += [f"<!-- cell {e.cell_id} en:{e.en_digest} -->\n{e.text.strip()}" for e in items]
    return "\n\n".join(blocks) + "\n"


def markdown_cells(notebook: "str | Path") -> list[tuple[str, str]]:
    """(id, source) of each markdown cell of an English lesson, in order (a cell without an id is refused)."""
    p = _paths.notebook_path("notebook", notebook)
    nb = _paths.read_json("notebook", p, "a notebook")
    if not (isinstance(nb, dict) and isinstance(nb.get("cells"), list)
            and all(isinstance(c, dict) and "cell_type" in c and "source" in c for c in nb["cells"])):
        raise ValueError(f"notebook: {str(p)!r} is not a notebook (no list of cells)")
    cells = []
    for i, c in enumerate(nb["cells"]):
        if c["cell_type"] == "markdown":
            if not c.get("id"):
                raise ValueError(f"notebook {str(p)!r}: markdown cell {i} has no id (nbformat 4.5 gives each cell "
                                 "one): open and save the lesson in JupyterLab to add them")
            src = c["source"]
            cells.append((c["id"], src if isinstance(src, str) else "".join(src)))
    return cells


def _first_words(source: str, n: int = 10) -> str:
    words = source.split()
    return " ".join(words[:n]) + (" …" if len(words) > n else "")


def _fresh(entry: Entry | None, source: str) -> str | None:
    """None when ``entry`` translates ``source`` now, else why not (a key of _WHY)."""
    if entry is None:
        return "missing"
    if entry.en_digest != digest(source):
        return "stale"
    if entry.text.strip() == source.strip():
        return "untranslated"
    return None


def skeleton(notebook: "str | Path", existing: str | None = None) -> str:
    """A translation file for ``notebook``: fresh entries of ``existing`` kept, the English in every other block.

    The English in a block is a placeholder: it counts as untranslated until it is replaced.
    """
    p = checks.path("notebook", notebook)
    old = parse(checks.text("existing", existing)) if existing is not None else {}
    cells = markdown_cells(p)
    if not cells:
        raise ValueError(f"notebook: {str(p)!r} has no markdown cell, so nothing to translate")
    entries = []
    for cid, src in cells:
        kept = old.get(cid)
        entries.append(kept if kept is not None and _fresh(kept, src) is None else Entry(cid, digest(src), src))
    return render(p.name, entries)


def zh_target(target: str) -> str:
    """A link target of an English lesson as seen from notebooks/zh/ (URLs and anchors unchanged).

    A lesson or student copy is beside it in the Chinese edition; the start page and the README have
    Chinese counterparts (:data:`COUNTERPARTS`); any other file gets the ``../`` it needs.
    """
    checks.text("target", target)
    if not target or _EXTERNAL.match(target):
        return target
    m = re.match(r"([^#?]*)(.*)", target, re.S)
    assert m is not None  # the pattern matches every string
    path, tail = m[1], m[2]
    if not path:
        return target
    repo = posixpath.normpath(posixpath.join("notebooks", path))
    repo = COUNTERPARTS.get(repo, repo)
    if _LESSON_FILE.match(repo):
        repo = f"notebooks/{ZH}/{repo.removeprefix('notebooks/')}"
    return posixpath.relpath(repo, f"notebooks/{ZH}") + tail


def rewrite_links(text: str) -> str:
    """Markdown of an English lesson with every relative link target (markdown, HTML, reference) for notebooks/zh/."""
    checks.text("text", text)
    return _LINK.sub(lambda m: m["head"] + zh_target(m["target"]), text)


def zh_note(meta: dict[str, Any]) -> str:
    """Where a Chinese lesson's stored outputs were measured, in Chinese (plain text): the first thing its reader sees.

    The note of :func:`fp16lab.course.outputs.note_text` in Chinese, for the read-only reference: the outputs
    come from the English lesson's run (same code), and the learner's own copy is in notebooks/work/zh/.
    """
    checks.instance("meta", meta, dict, "a lesson's run metadata (its metadata['fp16lab'], a dict)")
    from fp16lab.course.outputs import note_text

    return note_text(meta, lang=ZH)[1]


def is_zh_note(output: dict[str, Any]) -> bool:
    """True for the Chinese reference note that :func:`zh_lesson` puts first (in place of the English one)."""
    checks.instance("output", output, dict, "a notebook output (a dict)")
    from fp16lab.course.outputs import is_reference_note

    text = output.get("data", {}).get("text/plain", "")
    text = text if isinstance(text, str) else "".join(text)
    return is_reference_note(output) and text.startswith(NOTE_PREFIX)


def _source(cell: Any) -> str:
    return cell.source if isinstance(cell.source, str) else "".join(cell.source)


def _by_id(entries: Sequence[Entry]) -> dict[str, Entry]:
    items = checks.sequence_of("entries", entries, example="list(parse(text).values())", item=_entry,
                               allow_empty=True)
    found: dict[str, Entry] = {}
    for e in items:
        if e.cell_id in found:
            raise ValueError(f"entries translate cell {e.cell_id!r} twice")
        found[e.cell_id] = e
    return found


def zh_lesson(nb: Any, entries: Sequence[Entry], *, name: str = "lesson.ipynb") -> tuple[Any, list[Gap]]:
    """The Chinese edition of English lesson ``nb`` (``nb`` unchanged) and the cells left in English.

    Code cells are copied as they are, except that the first one's reference note is in Chinese
    (:func:`zh_note`, when the lesson has its run stamp). Each markdown cell takes its fresh translation,
    else keeps the English;
    either way its relative links are rewritten for notebooks/zh/. ``name``: the lesson's file name.
    """
    checks.notebook("nb", nb)
    by_id = _by_id(entries)
    checks.text("name", name)
    from fp16lab.course.outputs import KEY, is_reference_note, reference_note

    stem, out, gaps = Path(name).stem, copy.deepcopy(nb), []
    markdown = [c for c in out.cells if c.cell_type == "markdown"]
    for cell in markdown:
        src, cid = _source(cell), cell.get("id", "")
        why = _fresh(by_id.get(cid), src)
        if why is not None:
            gaps.append(Gap(stem, cid, why, _first_words(src)))
        cell.source = rewrite_links(src if why is not None else by_id[cid].text)
    known = {c.get("id") for c in markdown}
    gaps += [Gap(stem, cid, "orphan", "") for cid in by_id if cid not in known]
    first = next((c for c in out.cells if c.cell_type == "code"), None)
    stamp = nb.metadata.get(KEY)
    if first is not None and isinstance(stamp, dict) and stamp:  # one note, in Chinese, in place of the English one
        note = reference_note(dict(stamp), lang=ZH)
        first.outputs = [note, *(o for o in first.outputs if not is_reference_note(o))]
    out.metadata[META_KEY] = {
        "edition": "zh-CN", "generated_from": f"notebooks/{name}", "made_by": MADE_BY,
        "markdown_cells": len(markdown), "translated": len(markdown) - sum(g.why != "orphan" for g in gaps),
    }
    return out, gaps


# The two comments the student-copy generator adds (fp16lab.course.student), in Chinese. They are the generator's
# words, not the lesson's: the code under them stays the English lesson's, byte for byte.
ZH_PROMPT_COMMENT = "  # 在这里写你的答案"
ZH_CHECK_NOTE = (
    "# NBVAL_RAISES_EXCEPTION\n"
    "# 检查：在你把上面的 None 换成答案之前，这里会抛出 AssertionError 并给出提示。\n"
    "# 在那之前，“运行所有单元格”会停在这里；通过之后，用“运行 → 运行选中的单元格及以下所有”继续。\n"
)


def zh_student_copy(nb: Any, *, name: str = "lesson.ipynb") -> Any:
    """The student copy of Chinese lesson ``nb``: :func:`~fp16lab.course.student.make_student_copy`, its words in Chinese.

    The banner, each prompt's ``# your code here`` and each check cell's heading comment (after
    ``# NBVAL_RAISES_EXCEPTION``, which stays) are Chinese; every line of the lesson's code is as it is.
    """
    checks.notebook("nb", nb)
    checks.text("name", name)
    from fp16lab.course import student

    out = student.make_student_copy(nb, name=name)
    info = out.metadata[student.META_KEY]
    out.cells[0].source = _STUDENT_BANNER.format(name=name, n=info["exercises"])  # the banner make_student_copy adds
    english_prompt = student.prompt_source(["x"]).removeprefix("x = None")  # "  # your code here"
    for cell in out.cells:
        tags, src = student.cell_tags(cell), student.cell_source(cell)
        if student.PROMPT_TAG in tags:
            cell.source = "\n".join(line.removesuffix(english_prompt) + ZH_PROMPT_COMMENT
                                    if line.endswith(english_prompt) else line for line in src.split("\n"))
        elif student.CHECK_TAG in tags and src.startswith(student.CHECK_NOTE):
            cell.source = ZH_CHECK_NOTE + src.removeprefix(student.CHECK_NOTE)
    info["made_by"] = MADE_BY
    return out


def _shown(p: Path) -> str:
    """``p`` as a reader finds it: relative to the current folder when it is below it."""
    try:
        return str(p.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(p)


def _files(lesson: Path) -> tuple[Path, Path, Path]:
    """(translation file, Chinese lesson, its student copy) of an English lesson: all under notebooks/zh/."""
    zh = lesson.parent / ZH
    return zh / "translations" / f"{lesson.stem}.md", zh / lesson.name, zh / "student" / lesson.name


def _has_exercises(nb: Any) -> bool:
    from fp16lab.course.student import SOLUTION_TAG, cell_tags

    return any(c.cell_type == "code" and SOLUTION_TAG in cell_tags(c) for c in nb.cells)


def generate(lesson: "str | Path") -> tuple[dict[Path, str], list[Gap]]:
    """What ``write`` makes of one English lesson with a translation file: file text by path, and the gaps.

    The paths are the Chinese lesson and (when the lesson has exercises) its student copy.
    """
    import nbformat

    lesson = _paths.notebook_path("lesson", lesson)
    tfile, zh_path, student_path = _files(lesson)
    if not tfile.is_file():
        raise FileNotFoundError(f"lesson {str(lesson)!r} has no translation file {_shown(tfile)} yet; start one with "
                                f"`python -m fp16lab translations skeleton {lesson.stem[:2]} --write`")
    try:
        entries = parse(tfile.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ValueError(f"{str(tfile)!r}: {exc}") from None
    zh, gaps = zh_lesson(_paths.read_notebook("lesson", lesson), list(entries.values()), name=lesson.name)
    texts = {zh_path: nbformat.writes(zh) + "\n"}
    if _has_exercises(zh):
        texts[student_path] = nbformat.writes(zh_student_copy(zh, name=lesson.name)) + "\n"
    return texts, gaps


def _translated(paths: "Sequence[str | Path] | None") -> list[Path]:
    """The lessons of ``paths``, default: every lesson that has a translation file."""
    if paths is None:
        return [p for p in _paths.lessons() if _files(p)[0].is_file()]
    return _paths.lesson_files("paths", paths)


def write_zh(paths: "Sequence[str | Path] | None" = None) -> tuple[list[Path], list[Gap]]:
    """(Re)write notebooks/zh/ for each lesson of ``paths`` with a translation (default: every lesson that has one).

    Returns the files written and the cells left in English. All are made before any is written.
    """
    built = [generate(p) for p in _translated(paths)]
    written = []
    for texts, _ in built:
        for dest, text in texts.items():
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(text, encoding="utf-8")
            written.append(dest)
    return written, [g for _, gaps in built for g in gaps]


def _orphans(folder: Path, translated: list[Path]) -> list[str]:
    """Chinese files in ``folder`` (notebooks/) that no English lesson with a translation accounts for."""
    lessons = {p.stem for p in _paths.lessons(folder)}
    made = {p.stem for p in translated}
    zh = folder / ZH
    out = [f"{_shown(p)}: a translation of {p.stem}, which is not a lesson (renamed? move or remove the file)"
           for p in sorted((zh / "translations").glob("*.md")) if p.stem not in lessons]
    generated = [p for d in (zh, zh / "student") if d.is_dir() for p in _paths.lessons(d)]
    out += [f"{_shown(p)}: generated, but {p.stem} has no translation file now (remove it)"
            for p in generated if p.stem not in made]
    return out


def check_zh(paths: "Sequence[str | Path] | None" = None) -> list[str]:
    """What is out of step in the Chinese edition, one line each (empty: all current).

    Each stale, missing or orphan cell of a translation; each Chinese lesson or student copy that is
    missing or not what :func:`write_zh` makes; with no ``paths``, Chinese files left without a lesson.
    """
    lessons = _translated(paths)
    problems = []
    for lesson in lessons:
        texts, gaps = generate(lesson)
        problems += [str(g) for g in gaps]
        for dest, text in texts.items():
            if not dest.is_file():
                problems.append(f"{_shown(dest)}: missing (run `{MADE_BY}`)")
            elif dest.read_text(encoding="utf-8") != text:
                problems.append(f"{_shown(dest)}: not what the generator makes now (run `{MADE_BY}`)")
    if paths is None:
        problems += _orphans(_paths.notebooks_dir(), lessons)
    return problems


# ------------------------------------------------------------------------------ command line


def _resolve(value: str) -> Path:
    """A lesson named on the command line: its number (02), its name (02_amp_training_loop) or its path."""
    lessons = _paths.lessons()
    text = value.strip()
    hits = [p for p in lessons if text in (p.stem[:2], p.stem, p.name)
            or (text.endswith(".ipynb") and Path(text).resolve() == p.resolve())]
    if len(hits) == 1:
        return hits[0]
    raise ValueError(f"lesson must be an English lesson's number, name or path, e.g. 02, 02_amp_training_loop or "
                     f"notebooks/02_amp_training_loop.ipynb; got {value!r}. "
                     f"Allowed numbers: {', '.join(p.stem[:2] for p in lessons)}")


def _untranslated() -> str:
    missing = [p.stem for p in _paths.lessons() if not _files(p)[0].is_file()]
    return f"no translation file yet (not generated): {', '.join(missing)}" if missing else ""


def _write(args: argparse.Namespace) -> int:
    written, gaps = write_zh([_resolve(v) for v in args.lessons] or None)
    for p in written:
        print(f"wrote {_shown(p)}")
    for g in gaps:
        print(f"English kept: {g}")
    if not args.lessons and (todo := _untranslated()):
        print(todo)
    return 0


def _check(args: argparse.Namespace) -> int:
    problems = check_zh([_resolve(v) for v in args.lessons] or None)
    for p in problems:
        print(f"STALE {p}")
    if not args.lessons and (todo := _untranslated()):
        print(todo)
    return 1 if problems else 0


def _skeleton(args: argparse.Namespace) -> int:
    import sys

    lesson = _resolve(args.lesson)
    tfile = _files(lesson)[0]
    text = skeleton(lesson, tfile.read_text(encoding="utf-8") if tfile.is_file() else None)
    entries = parse(text)
    todo = [cid for cid, src in markdown_cells(lesson) if _fresh(entries[cid], src) is not None]
    if args.write:
        tfile.parent.mkdir(parents=True, exist_ok=True)
        tfile.write_text(text, encoding="utf-8")
        print(f"wrote {_shown(tfile)}", file=sys.stderr)
    else:
        print(text, end="")
    print(f"{len(todo)} of {len(entries)} cells to translate (new, changed or still English): {', '.join(todo)}. "
          "The previous translation of a changed cell stays in git (git diff shows it).", file=sys.stderr)
    return 0


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Register ``translations`` as a subcommand of ``python -m fp16lab``."""
    p = sub.add_parser("translations", help="the Chinese edition: generate notebooks/zh/, check it is in step",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    cmds = p.add_subparsers(dest="translations_command", required=True, metavar="COMMAND")
    lessons_help = "lessons by number, name or path (default: every lesson with a translation file)"
    w = cmds.add_parser("write", help="(re)generate notebooks/zh/NN_*.ipynb and notebooks/zh/student/")
    w.add_argument("lessons", nargs="*", metavar="LESSON", help=lessons_help)
    w.set_defaults(func=_write)
    c = cmds.add_parser("check", help="list stale or missing cells and out-of-date Chinese notebooks (exit 1 if any)")
    c.add_argument("lessons", nargs="*", metavar="LESSON", help=lessons_help)
    c.set_defaults(func=_check)
    s = cmds.add_parser("skeleton", help="a lesson's translation file: fresh translations kept, the English "
                                         "in each block still to translate")
    s.add_argument("lesson", metavar="LESSON", help="the lesson: number (02), name or path")
    s.add_argument("--write", action="store_true",
                   help="write notebooks/zh/translations/<lesson>.md instead of printing it")
    s.set_defaults(func=_skeleton)
