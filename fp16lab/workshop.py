"""Classroom kit: student copies of the lessons and the workshop agenda, from one source.

A lesson's exercise is a markdown prompt, a code cell tagged ``solution`` that assigns the
answer to a named variable, then a code cell tagged ``check`` whose asserts accept the
solution and reject ``None``/an empty answer (see CONTRIBUTING.md). A *student copy* is the
lesson with every output cleared, each ``solution`` cell replaced by
``name = None  # your code here`` (the variable the solution assigns) and each ``check``
cell kept and tagged ``raises-exception`` (so nbval and nbclient expect its
``AssertionError`` until the student answers).

Command line (from the repository root)::

    python -m fp16lab.workshop write     # (re)generate notebooks/student/ and the agenda
    python -m fp16lab.workshop check     # exit 1 when a student copy or the agenda is stale
    python -m fp16lab.workshop agenda    # print the agenda table (measured lesson times)
    python -m fp16lab.workshop verify    # prove each exercise: None is rejected, the solution passes
    python -m fp16lab.workshop time-quick NOTEBOOK  # time a GPU-stamped lesson in quick mode here
"""

from __future__ import annotations

import argparse
import ast
import copy
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "SOLUTION_TAG",
    "CHECK_TAG",
    "PROMPT_TAG",
    "NOTEBOOKS_DIR",
    "STUDENT_DIR",
    "TIMINGS_FILE",
    "Exercise",
    "assigned_names",
    "answer_names",
    "prompt_source",
    "exercises",
    "make_student_copy",
    "student_path",
    "lessons",
    "write_student_copies",
    "stale_student_copies",
    "ExerciseCheck",
    "verify_student_copy",
    "record_timings",
    "time_quick_mode",
    "agenda_table",
    "update_agenda",
    "main",
]

SOLUTION_TAG = "solution"
CHECK_TAG = "check"
PROMPT_TAG = "exercise"  # the tag a solution cell's replacement carries in the student copy
RAISES_TAG = "raises-exception"  # understood by nbval, nbclient and papermill

NOTEBOOKS_DIR = Path(__file__).resolve().parent.parent / "notebooks"
STUDENT_DIR = NOTEBOOKS_DIR / "student"
TIMINGS_FILE = STUDENT_DIR / "timings.json"
GUIDE_FILE = NOTEBOOKS_DIR / "README.md"
AGENDA_START, AGENDA_END = "<!-- agenda:start -->", "<!-- agenda:end -->"

BANNER_ID = "fp16lab-student-banner"
CHECK_NOTE = "# Check: raises AssertionError until you replace None above with your answer.\n"
META_KEY = "fp16lab_workshop"


@dataclass(frozen=True)
class Exercise:
    """One exercise of a lesson: where its solution and check cells are, and its answer names."""

    number: int
    solution_index: int
    check_index: int
    names: tuple[str, ...]
    solution: str
    check: str


def _src(cell: Any) -> str:
    return cell.source if isinstance(cell.source, str) else "".join(cell.source)


def _tags(cell: Any) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def _targets(node: ast.expr) -> list[str]:
    if isinstance(node, ast.Name):
        return [node.id]
    if isinstance(node, (ast.Tuple, ast.List)):
        return [n for elt in node.elts for n in _targets(elt)]
    if isinstance(node, ast.Starred):
        return _targets(node.value)
    return []


def _parse(source: str, where: str) -> ast.Module:
    try:
        return ast.parse(source)
    except SyntaxError as exc:
        raise ValueError(f"{where} is not valid Python ({exc.msg}, line {exc.lineno}):\n{source}") from None


def assigned_names(source: str, *, where: str = "solution cell") -> tuple[str, ...]:
    """Every variable the cell's assignments bind (also inside if/for/with/try), in order.

    ``x = 2; answer = x * 3`` gives ``("x", "answer")``; ``a, b = ...`` gives ``("a", "b")``;
    assignments inside functions and classes are local and do not count.
    Raises ValueError (quoting the cell) when the cell assigns no plain variable.
    """
    names: list[str] = []

    def visit(body: list[ast.stmt]) -> None:
        for stmt in body:
            if isinstance(stmt, ast.Assign):
                for t in stmt.targets:
                    names.extend(_targets(t))
            elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
                names.extend(_targets(stmt.target))
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue  # their assignments are local
            for field in ("body", "orelse", "finalbody"):  # if/for/while/with/try blocks
                visit(getattr(stmt, field, []) or [])
            for handler in getattr(stmt, "handlers", []) or []:
                visit(handler.body)

    visit(_parse(source, where).body)
    if not names:
        raise ValueError(
            f"{where} assigns no variable at top level; an exercise's solution must assign its "
            f"answer, e.g. `answer = ...`. The cell was:\n{source}"
        )
    return tuple(dict.fromkeys(names))


def answer_names(solution: str, check: str, *, where: str = "exercise") -> tuple[str, ...]:
    """The answer variables: those the solution assigns and its check cell reads.

    Helpers the solution computes on the way (and the check does not read) stay the
    student's business. Raises ValueError when the check reads none of them.
    """
    assigned = assigned_names(solution, where=f"{where}: solution cell")
    read = {n.id for n in ast.walk(_parse(check, f"{where}: check cell"))
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    names = tuple(n for n in assigned if n in read)
    if not names:
        raise ValueError(
            f"{where}: the check cell reads none of the variables the solution assigns "
            f"({', '.join(assigned)}), so it cannot check the answer. Check cell:\n{check}"
        )
    return names


def prompt_source(names: Sequence[str]) -> str:
    """What a student sees in place of a solution: ``name = None  # your code here``."""
    return "\n".join(f"{n} = None  # your code here" for n in names)


def exercises(nb: Any, *, name: str = "notebook") -> list[Exercise]:
    """Find the exercises of ``nb``: each ``solution`` cell and the ``check`` cell after it.

    Raises ValueError naming the notebook when it has no ``solution`` cell at all, when a
    solution is not followed by a ``check`` code cell (before the next solution), or when a
    check cell has no solution before it.
    """
    found: list[Exercise] = []
    pending: int | None = None  # index of a solution cell still waiting for its check
    for i, cell in enumerate(nb.cells):
        tags = _tags(cell)
        if cell.cell_type != "code":
            if SOLUTION_TAG in tags or CHECK_TAG in tags:
                raise ValueError(f"{name}: cell {i} is a {cell.cell_type} cell tagged {tags}; "
                                 f"'{SOLUTION_TAG}'/'{CHECK_TAG}' belong on code cells")
            continue
        if SOLUTION_TAG in tags and CHECK_TAG in tags:
            raise ValueError(f"{name}: cell {i} is tagged both '{SOLUTION_TAG}' and '{CHECK_TAG}'; "
                             "put the answer and its asserts in two cells")
        if SOLUTION_TAG in tags:
            if pending is not None:
                raise ValueError(f"{name}: solution cell {pending} has no '{CHECK_TAG}' cell "
                                 f"before the next solution (cell {i})")
            assigned_names(_src(cell), where=f"{name}: solution cell {i}")  # refuse early
            pending = i
        elif CHECK_TAG in tags:
            if pending is None:
                raise ValueError(f"{name}: check cell {i} has no '{SOLUTION_TAG}' cell before it")
            s = pending
            names = answer_names(_src(nb.cells[s]), _src(cell), where=f"{name}: exercise {len(found) + 1}")
            found.append(Exercise(len(found) + 1, s, i, names, _src(nb.cells[s]), _src(cell)))
            pending = None
    if pending is not None:
        raise ValueError(f"{name}: solution cell {pending} has no '{CHECK_TAG}' cell after it")
    if not found:
        raise ValueError(
            f"{name}: no exercise found (no code cell tagged '{SOLUTION_TAG}'); a lesson's "
            f"exercises are a code cell tagged '{SOLUTION_TAG}' followed by one tagged "
            f"'{CHECK_TAG}' (see CONTRIBUTING.md)"
        )
    return found


def make_student_copy(nb: Any, *, name: str = "lesson.ipynb") -> Any:
    """Return the student copy of lesson ``nb`` (the lesson itself is not changed).

    Outputs and execution counts are cleared, solution cells become prompt cells tagged
    ``exercise``, check cells keep their asserts and are tagged ``raises-exception``; a
    banner cell says where the copy came from. ``name`` is the lesson's file name.
    """
    import nbformat

    found = exercises(nb, name=name)
    out = copy.deepcopy(nb)
    for ex in found:
        sol = out.cells[ex.solution_index]
        sol.source = prompt_source(ex.names)
        sol.metadata["tags"] = [PROMPT_TAG if t == SOLUTION_TAG else t for t in _tags(sol)]
        chk = out.cells[ex.check_index]
        chk.source = CHECK_NOTE + ex.check
        if RAISES_TAG not in _tags(chk):
            chk.metadata["tags"] = _tags(chk) + [RAISES_TAG]
    for cell in out.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
        for k in ("execution", "ExecuteTime", "collapsed", "scrolled"):
            cell.metadata.pop(k, None)
    for k in ("fp16lab", "widgets", "language_info"):  # where/how the lesson last ran: not the copy's
        out.metadata.pop(k, None)
    out.metadata[META_KEY] = {
        "student_copy_of": name,
        "exercises": len(found),
        "made_by": "python -m fp16lab.workshop write",
    }
    banner = nbformat.v4.new_markdown_cell(
        f"> **Student copy** of [`{name}`](../{name}), made by `python -m fp16lab.workshop write` "
        f"(do not edit it: edit the lesson and regenerate). It has {len(found)} exercise"
        f"{'s' if len(found) != 1 else ''}: replace each `None  # your code here` with your "
        "answer, then run the check cell below it; a check raises `AssertionError` until your "
        f"answer is right. The solutions are in the lesson itself, `notebooks/{name}`."
    )
    if (out.nbformat, out.nbformat_minor) >= (4, 5):
        banner.id = BANNER_ID  # fixed, so that regenerating gives the same file
    else:
        banner.pop("id", None)
    out.cells.insert(0, banner)
    return out


def student_path(lesson: "str | Path", student_dir: "str | Path | None" = None) -> Path:
    """Where the student copy of ``lesson`` lives (default folder: notebooks/student/)."""
    return Path(student_dir or STUDENT_DIR) / Path(lesson).name


def lessons(notebooks_dir: "str | Path | None" = None) -> list[Path]:
    """The lesson notebooks ``NN_name.ipynb`` in ``notebooks_dir`` (default notebooks/), in order."""
    return sorted(Path(notebooks_dir or NOTEBOOKS_DIR).glob("[0-9][0-9]_*.ipynb"))


def _render(lesson: Path) -> str:
    import nbformat

    nb = nbformat.read(lesson, as_version=4)
    return nbformat.writes(make_student_copy(nb, name=lesson.name)) + "\n"


def write_student_copies(
    paths: "Sequence[str | Path] | None" = None, student_dir: "str | Path | None" = None
) -> list[Path]:
    """(Re)write the student copy of each lesson in ``paths`` (default: every lesson)."""
    targets = [Path(p) for p in paths] if paths else lessons()
    if not targets:
        raise ValueError(f"no lessons given and none found in {str(NOTEBOOKS_DIR)!r}")
    rendered = [(student_path(p, student_dir), _render(p)) for p in targets]  # all or nothing
    written = []
    for dest, text in rendered:
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(text, encoding="utf-8")
        written.append(dest)
    return written


def stale_student_copies(
    paths: "Sequence[str | Path] | None" = None, student_dir: "str | Path | None" = None
) -> list[str]:
    """Why student copies are out of date (one line each); empty when all are current.

    Covers missing and outdated copies, and copies whose lesson no longer exists.
    """
    targets = [Path(p) for p in paths] if paths else lessons()
    folder = Path(student_dir or STUDENT_DIR)
    problems = []
    for lesson in targets:
        dest = student_path(lesson, folder)
        if not dest.exists():
            problems.append(f"{dest.name}: no student copy in {folder}")
        elif dest.read_text(encoding="utf-8") != _render(lesson):
            problems.append(f"{dest.name}: student copy differs from what {lesson.name} gives now")
    if not paths:
        names = {p.name for p in targets}
        problems += [f"{p.name}: student copy of a lesson that no longer exists"
                     for p in sorted(folder.glob("*.ipynb")) if p.name not in names]
    return [p + " (run `python -m fp16lab.workshop write`)" for p in problems]


# ---- proving a student copy: checks reject the prompt and accept the solution --------

@dataclass(frozen=True)
class ExerciseCheck:
    """What happened to one exercise's check cell in :func:`verify_student_copy`."""

    number: int
    names: tuple[str, ...]
    rejects_none: str  # the exception the check raised on ``None`` (e.g. "AssertionError: ...")
    rejects_empty: str | None  # the same for an empty value of the answer's type; None: not tried
    accepts_solution: bool


_ANSI = re.compile(r"\x1b\[[0-9;]*m")

_EMPTY_SNIPPET = """\
_fp16lab_saved = {{n: globals()[n] for n in {names!r}}}
_fp16lab_emptied = []
for _fp16lab_n, _fp16lab_v in _fp16lab_saved.items():
    if isinstance(_fp16lab_v, (str, bytes, list, tuple, dict, set, frozenset)) or type(_fp16lab_v).__name__ in ("DataFrame", "Series"):
        try:
            globals()[_fp16lab_n] = type(_fp16lab_v)()
            _fp16lab_emptied.append(_fp16lab_n)
        except TypeError:
            pass
print("emptied:", _fp16lab_emptied)
"""


def _error(cell: Any) -> dict[str, Any] | None:
    for o in cell.get("outputs", []):
        if o.get("output_type") == "error":
            return o
    return None


def _describe(err: dict[str, Any]) -> str:
    return f"{err.get('ename')}: {err.get('evalue')}"


def _traceback(err: dict[str, Any]) -> str:
    return _ANSI.sub("", "\n".join(err.get("traceback", [])))


def verify_student_copy(
    student: "str | Path", lesson: "str | Path", *, timeout: int = 600
) -> list[ExerciseCheck]:
    """Run ``student`` top to bottom in one kernel and prove every exercise works both ways.

    For each exercise: the prompt (``name = None``) runs and its check must raise
    ``AssertionError``; an empty value of the solution's type (str, list, dict, DataFrame, ...)
    must be rejected too; then the solution from ``lesson`` runs and the check must pass, so
    later cells see a correct answer. Every other cell must run without error (cells tagged
    ``raises-exception`` excepted). Raises AssertionError quoting the cell and traceback.
    The kernel's working folder is the student copy's folder. Default timeout: 600 s a cell.
    """
    import nbformat
    from nbclient import NotebookClient

    spath, lpath = Path(student), Path(lesson)
    nb = nbformat.read(spath, as_version=4)
    source = nbformat.read(lpath, as_version=4)
    solutions = exercises(source, name=lpath.name)
    prompts = [i for i, c in enumerate(nb.cells) if PROMPT_TAG in _tags(c)]
    if len(prompts) != len(solutions):
        raise AssertionError(f"{spath.name} has {len(prompts)} exercise cells but {lpath.name} has "
                             f"{len(solutions)} solutions: regenerate with `python -m fp16lab.workshop write`")
    by_prompt = dict(zip(prompts, solutions, strict=True))
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(spath.parent)}})
    client.reset_execution_trackers()
    results: list[ExerciseCheck] = []
    current: Exercise | None = None

    def run(src: str, index: int) -> dict[str, Any] | None:
        cell = nbformat.v4.new_code_cell(src)
        client.execute_cell(cell, index)
        return _error(cell)

    with client.setup_kernel():
        for i, cell in enumerate(nb.cells):
            if cell.cell_type != "code":
                continue
            client.execute_cell(cell, i)
            err = _error(cell)
            if i in by_prompt:
                current = by_prompt[i]
                if err:
                    raise AssertionError(f"{spath.name}: exercise {current.number}'s prompt cell failed:\n"
                                         f"{_src(cell)}\n{_traceback(err)}")
                continue
            if CHECK_TAG in _tags(cell) and current is not None:
                ex, current = current, None
                where = f"{spath.name}, exercise {ex.number} (answer {', '.join(ex.names)})"
                if err is None or err.get("ename") != "AssertionError":
                    got = "it passed" if err is None else f"it raised {_describe(err)}"
                    raise AssertionError(f"{where}: the check must raise AssertionError on None, but "
                                         f"{got}. Start it with e.g. `assert {ex.names[0]} is not None, "
                                         f"'...'`. Check cell:\n{ex.check}")
                none_err = _describe(err)
                sol_err = run(ex.solution, ex.solution_index)
                if sol_err:
                    raise AssertionError(f"{where}: the solution from {lpath.name} failed:\n"
                                         f"{ex.solution}\n{_traceback(sol_err)}")
                probe = nbformat.v4.new_code_cell(_EMPTY_SNIPPET.format(names=list(ex.names)))
                client.execute_cell(probe, i)
                emptied = "".join(o.get("text", "") for o in probe.outputs if o.get("output_type") == "stream")
                empty_err: str | None = None
                if "emptied: []" not in emptied:
                    e = run(ex.check, i)
                    if e is None:
                        raise AssertionError(f"{where}: the check accepts an empty answer ({emptied.strip()}). "
                                             f"Check cell:\n{ex.check}")
                    empty_err = _describe(e)
                    run("globals().update(_fp16lab_saved)", i)
                ok_err = run(ex.check, i)
                if ok_err:
                    raise AssertionError(f"{where}: the check rejects the lesson's own solution:\n"
                                         f"{ex.solution}\n{_traceback(ok_err)}")
                results.append(ExerciseCheck(ex.number, ex.names, none_err, empty_err, True))
                continue
            if err and RAISES_TAG not in _tags(cell):
                raise AssertionError(f"{spath.name}: cell {i} failed:\n{_src(cell)}\n{_traceback(err)}")
    if len(results) != len(solutions):
        raise AssertionError(f"{spath.name}: checked {len(results)} of {len(solutions)} exercises")
    return results


# ---- agenda: measured lesson times ------------------------------------------------------

def _title(nb: Any, fallback: str) -> str:
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            m = re.search(r"^#\s+(.+)$", _src(cell), flags=re.M)
            if m:
                return m.group(1).strip()
    return fallback


def _load_timings(path: Path) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}


def record_timings(
    paths: "Sequence[str | Path] | None" = None, timings_file: "str | Path | None" = None
) -> dict[str, Any]:
    """Copy each lesson's measured run time (``metadata.fp16lab.seconds``) into the timings file.

    The file keeps one entry per lesson and mode ("quick"/"full"), so the quick-mode CPU time
    survives when the lesson's outputs are later replaced by a full-mode GPU run.
    Default file: notebooks/student/timings.json. Returns the updated table.
    """
    import nbformat

    tfile = Path(timings_file or TIMINGS_FILE)
    table = _load_timings(tfile)
    todo = [Path(p) for p in paths] if paths else lessons()
    if not paths:  # forget lessons that no longer exist
        table = {k: v for k, v in table.items() if k in {p.name for p in todo}}
    for lesson in todo:
        nb = nbformat.read(lesson, as_version=4)
        meta = nb.metadata.get("fp16lab") or {}
        entry = table.setdefault(lesson.name, {})
        entry["title"] = _title(nb, lesson.stem)
        try:
            entry["answers"] = [", ".join(ex.names) for ex in exercises(nb, name=lesson.name)]
        except ValueError:
            entry["answers"] = []
        entry.pop("exercises", None)
        if meta.get("seconds") is not None and meta.get("mode") in ("quick", "full"):
            entry[meta["mode"]] = {k: meta.get(k) for k in ("seconds", "device", "torch", "date")}
    tfile.parent.mkdir(parents=True, exist_ok=True)
    tfile.write_text(json.dumps(table, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    return table


def time_quick_mode(
    paths: "Sequence[str | Path] | None" = None, timings_file: "str | Path | None" = None, *, timeout: int = 1200
) -> dict[str, float]:
    """Run each lesson top to bottom in quick mode here (not saved) and record how long it took.

    For lessons whose committed outputs come from a full-mode GPU run, so that the agenda
    still shows what a laptop needs. The lesson file is not changed; the kernel runs in the
    lesson's folder with ``FP16LAB_QUICK=1``. Raises AssertionError if a cell fails.
    Default: every lesson, 1200 s a cell. Returns {lesson name: seconds}.
    """
    import os
    import time

    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    from fp16lab.env import run_metadata

    tfile = Path(timings_file or TIMINGS_FILE)
    measured: dict[str, float] = {}
    old = os.environ.get("FP16LAB_QUICK")
    os.environ["FP16LAB_QUICK"] = "1"  # inherited by the kernel
    try:
        for lesson in [Path(p) for p in paths] if paths else lessons():
            nb = nbformat.read(lesson, as_version=4)
            client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                                    resources={"metadata": {"path": str(lesson.parent)}})
            t0 = time.perf_counter()
            try:
                client.execute()
            except CellExecutionError as exc:
                raise AssertionError(f"{lesson.name} failed in quick mode:\n{exc}") from None
            measured[lesson.name] = round(time.perf_counter() - t0, 1)
            meta = run_metadata()
            table = _load_timings(tfile)
            table.setdefault(lesson.name, {})["quick"] = {
                "seconds": measured[lesson.name], "device": meta["device"], "torch": meta["torch"],
                "date": meta["date"]}
            tfile.parent.mkdir(parents=True, exist_ok=True)
            tfile.write_text(json.dumps(table, indent=1, sort_keys=True, ensure_ascii=False) + "\n",
                             encoding="utf-8")
    finally:
        if old is None:
            os.environ.pop("FP16LAB_QUICK", None)
        else:
            os.environ["FP16LAB_QUICK"] = old
    return measured


def _fmt(run: dict[str, Any] | None) -> str:
    if not run:
        return "not measured yet"
    secs = float(run["seconds"])
    when = str(run.get("date") or "")[:10]
    return f"{secs:.0f} s ({run.get('device')}, torch {run.get('torch')}, {when})"


def agenda_table(timings_file: "str | Path | None" = None) -> str:
    """The agenda as a markdown table: lesson, measured quick-mode and full-mode run times."""
    table = _load_timings(Path(timings_file or TIMINGS_FILE))
    rows = [
        "| Lesson | Exercises (answer variables) | Quick mode: run all, measured | Full mode: run all, measured |",
        "| --- | --- | --- | --- |",
    ]
    total = {"quick": 0.0, "full": 0.0}
    count = {"quick": 0, "full": 0}
    for name in sorted(table):
        e = table[name]
        for m in total:
            if e.get(m):
                total[m] += float(e[m]["seconds"])
                count[m] += 1
        answers = "; ".join(f"{k}. `{a}`" for k, a in enumerate(e.get("answers", []), 1)) or "none"
        rows.append(f"| [{e.get('title', name)}]({name}) | {answers} "
                    f"| {_fmt(e.get('quick'))} | {_fmt(e.get('full'))} |")
    def tot(m: str) -> str:
        if not count[m]:
            return "not measured yet"
        part = "" if count[m] == len(table) else f" ({count[m]} of {len(table)} lessons)"
        return f"{total[m] / 60:.1f} min{part}"

    rows.append(f"| **All lessons** | | {tot('quick')} | {tot('full')} |")
    return "\n".join(rows)


def update_agenda(guide: "str | Path | None" = None, timings_file: "str | Path | None" = None) -> bool:
    """Rewrite the table between the agenda markers of the instructor guide; True if it changed."""
    g = Path(guide or GUIDE_FILE)
    text = g.read_text(encoding="utf-8")
    if AGENDA_START not in text or AGENDA_END not in text:
        raise ValueError(f"{str(g)!r} lacks the markers {AGENDA_START!r} and {AGENDA_END!r}")
    head, rest = text.split(AGENDA_START, 1)
    _, tail = rest.split(AGENDA_END, 1)
    new = f"{head}{AGENDA_START}\n{agenda_table(timings_file)}\n{AGENDA_END}{tail}"
    if new != text:
        g.write_text(new, encoding="utf-8")
    return new != text


def _agenda_problems() -> list[str]:
    import nbformat

    problems = []
    table = _load_timings(TIMINGS_FILE)
    for lesson in lessons():
        meta = nbformat.read(lesson, as_version=4).metadata.get("fp16lab") or {}
        mode, secs = meta.get("mode"), meta.get("seconds")
        got = (table.get(lesson.name) or {}).get(mode or "") or {}
        if secs is not None and got.get("seconds") != secs:
            problems.append(f"{lesson.name}: its {mode}-mode run time {secs} s is not in {TIMINGS_FILE.name}")
    if GUIDE_FILE.exists() and f"{AGENDA_START}\n{agenda_table()}\n{AGENDA_END}" not in GUIDE_FILE.read_text(encoding="utf-8"):
        problems.append(f"{GUIDE_FILE.name}: agenda table differs from {TIMINGS_FILE.name}")
    return [p + " (run `python -m fp16lab.workshop write`)" for p in problems]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fp16lab.workshop", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    w = sub.add_parser("write", help="write student copies (and, for all lessons, the agenda)")
    w.add_argument("notebooks", nargs="*", help="lessons (default: every notebooks/NN_*.ipynb)")
    w.add_argument("--out", default=None, help="folder for the copies (default notebooks/student)")
    c = sub.add_parser("check", help="exit 1 when a student copy or the agenda is out of date")
    c.add_argument("notebooks", nargs="*")
    sub.add_parser("agenda", help="print the agenda table from the recorded timings")
    t = sub.add_parser("time-quick", help="run lessons in quick mode here (unsaved) and record their run time")
    t.add_argument("notebooks", nargs="*", help="lessons (default: every notebooks/NN_*.ipynb)")
    v = sub.add_parser("verify", help="run student copies in a kernel: checks reject None, accept the solution")
    v.add_argument("notebooks", nargs="*", help="lessons (default: every notebooks/NN_*.ipynb)")
    args = parser.parse_args(argv)
    try:
        if args.command == "write":
            for p in write_student_copies(args.notebooks or None, args.out):
                print(f"wrote {p}")
            if not args.notebooks and args.out is None:
                record_timings()
                if GUIDE_FILE.exists() and update_agenda():
                    print(f"updated the agenda in {GUIDE_FILE}")
            return 0
        if args.command == "check":
            problems = stale_student_copies(args.notebooks or None)
            if not args.notebooks:
                problems += _agenda_problems()
            for p in problems:
                print(f"STALE {p}")
            return 1 if problems else 0
        if args.command == "time-quick":
            for name, secs in time_quick_mode(args.notebooks or None).items():
                print(f"{name}: {secs:.1f} s in quick mode")
            if GUIDE_FILE.exists() and update_agenda():
                print(f"updated the agenda in {GUIDE_FILE}")
            return 0
        if args.command == "verify":
            failed = 0
            for lesson in [Path(p) for p in args.notebooks] or lessons():
                try:
                    for r in verify_student_copy(student_path(lesson), lesson):
                        print(f"{lesson.name} exercise {r.number} ({', '.join(r.names)}): rejects None "
                              f"({r.rejects_none}), accepts the solution")
                except AssertionError as exc:
                    failed += 1
                    print(f"FAILED {exc}")
            return 1 if failed else 0
        print(agenda_table())
        return 0
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
