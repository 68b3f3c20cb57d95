"""Student copies of the lessons: each solution replaced by a prompt, each check kept.

A lesson's exercise is a markdown prompt, a code cell tagged ``solution`` that assigns the
answer to named variables, then a code cell tagged ``check`` whose asserts accept the
solution and reject ``None``/an empty answer (see CONTRIBUTING.md). A *student copy* is the
lesson with every output cleared, each ``solution`` cell replaced by
``name = None  # your code here`` and each ``check`` cell kept, headed by the comment
``# NBVAL_RAISES_EXCEPTION``: nbval (``make test``) accepts the unanswered copy, while
JupyterLab's Run All stops at the first unanswered check, as a learner expects. (A
``raises-exception`` tag would make JupyterLab run on past it.)
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fp16lab import checks
from fp16lab.course import paths as _paths

__all__ = [
    "SOLUTION_TAG",
    "CHECK_TAG",
    "PROMPT_TAG",
    "RAISES_TAG",
    "RAISES_MARKER",
    "CHECK_NOTE",
    "BANNER_ID",
    "META_KEY",
    "Exercise",
    "cell_source",
    "cell_tags",
    "assigned_names",
    "answer_names",
    "prompt_source",
    "exercises",
    "make_student_copy",
    "student_path",
    "write_student_copies",
    "stale_student_copies",
]

SOLUTION_TAG = "solution"
CHECK_TAG = "check"
PROMPT_TAG = "exercise"  # the tag a solution cell's replacement carries in the student copy
RAISES_TAG = "raises-exception"  # nbval, nbclient and JupyterLab: "an error here is expected, go on"
RAISES_MARKER = "# NBVAL_RAISES_EXCEPTION"  # nbval only: JupyterLab's Run All still stops here

BANNER_ID = "fp16lab-student-banner"
CHECK_NOTE = (
    f"{RAISES_MARKER}\n"
    "# Check: raises AssertionError until you replace None above with your answer.\n"
    "# Run All stops here until then; once it passes, go on with Run > Run Selected Cell and All Below.\n"
)
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
    wrong: tuple[str, ...] = ()  # plausible wrong answers (solution-cell metadata ``wrong_answers``)


def cell_source(cell: Any) -> str:
    """A cell's source as one string (nbformat may store a list of lines)."""
    checks.notebook_cell("cell", cell)
    return cell.source if isinstance(cell.source, str) else "".join(cell.source)


def cell_tags(cell: Any) -> list[str]:
    """A cell's tags (empty when it has none)."""
    checks.notebook_cell("cell", cell)
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
    checks.text("source", source)
    checks.text("where", where)
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
    checks.text("solution", solution), checks.text("check", check), checks.text("where", where)
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
    names = checks.sequence_of("names", names, example="['answer']", item=checks.text)
    return "\n".join(f"{n} = None  # your code here" for n in names)


WRONG_KEY = "wrong_answers"


def wrong_answers(cell: Any, *, where: str = "solution cell") -> tuple[str, ...]:
    """The plausible wrong answers kept in a solution cell's metadata (``wrong_answers``: a list of sources)."""
    value = cell.get("metadata", {}).get(WRONG_KEY, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ValueError(f"{where}: metadata {WRONG_KEY!r} must be a list of non-empty code strings, got {value!r:.80}")
    return tuple(value)


def exercises(nb: Any, *, name: str = "notebook") -> list[Exercise]:
    """Find the exercises of ``nb``: each ``solution`` cell and the ``check`` cell after it.

    Raises ValueError naming the notebook when it has no ``solution`` cell at all, when a
    solution is not followed by a ``check`` code cell (before the next solution), or when a
    check cell has no solution before it.
    """
    checks.notebook("nb", nb)
    checks.text("name", name)
    found: list[Exercise] = []
    pending: int | None = None  # index of a solution cell still waiting for its check
    for i, cell in enumerate(nb.cells):
        tags = cell_tags(cell)
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
            assigned_names(cell_source(cell), where=f"{name}: solution cell {i}")  # refuse early
            pending = i
        elif CHECK_TAG in tags:
            if pending is None:
                raise ValueError(f"{name}: check cell {i} has no '{SOLUTION_TAG}' cell before it")
            s = pending
            names = answer_names(cell_source(nb.cells[s]), cell_source(cell), where=f"{name}: exercise {len(found) + 1}")
            found.append(Exercise(len(found) + 1, s, i, names, cell_source(nb.cells[s]), cell_source(cell),
                                  wrong_answers(nb.cells[s], where=f"{name}: solution cell {s}")))
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
    ``exercise``, check cells keep their asserts under :data:`CHECK_NOTE` (which starts with
    ``# NBVAL_RAISES_EXCEPTION``; a ``raises-exception`` tag is removed so that Run All stops
    there); a banner cell says where the copy came from. ``name`` is the lesson's file name.
    """
    checks.notebook("nb", nb)
    checks.text("name", name)
    import nbformat

    found = exercises(nb, name=name)
    out = copy.deepcopy(nb)
    for ex in found:
        sol = out.cells[ex.solution_index]
        sol.source = prompt_source(ex.names)
        sol.metadata["tags"] = [PROMPT_TAG if t == SOLUTION_TAG else t for t in cell_tags(sol)]
        sol.metadata.pop(WRONG_KEY, None)  # the verifier reads them from the lesson
        chk = out.cells[ex.check_index]
        chk.source = CHECK_NOTE + ex.check
        chk.metadata["tags"] = [t for t in cell_tags(chk) if t != RAISES_TAG]
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
        "made_by": "python -m fp16lab workshop write",
    }
    n = len(found)
    banner = nbformat.v4.new_markdown_cell(
        f"> **Student copy** of [`{name}`](../{name}), made by `python -m fp16lab workshop write` "
        f"(do not edit it: edit the lesson and regenerate). It has {n} exercise{'s' if n != 1 else ''}: "
        "replace each `None  # your code here` with your answer, then run the check cell below it; "
        "a check raises `AssertionError` with a hint until your answer is right. *Run All* runs the "
        "lesson and stops at the first check you have not answered yet; once it passes, continue with "
        "*Run → Run Selected Cell and All Below*. The solutions are in the lesson itself, "
        f"`notebooks/{name}`."
    )
    if (out.nbformat, out.nbformat_minor) >= (4, 5):
        banner.id = BANNER_ID  # fixed, so that regenerating gives the same file
    else:
        banner.pop("id", None)
    out.cells.insert(0, banner)
    return out


def _lesson_paths(paths: object) -> list[Path]:
    """Lessons given as a list of paths, or every lesson when None (a bare string is refused)."""
    if paths is None:
        return _paths.lessons()
    return _paths.lesson_files("paths", paths)  # each an existing notebook: a typo is refused, never "no copy"


def _folder(student_dir: object) -> Path:
    """``student_dir`` (default notebooks/student/): a folder, or a path where one can be made (not a file)."""
    if student_dir is None:
        return _paths.student_dir()
    folder = checks.path("student_dir", student_dir)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"student_dir: {str(folder)!r} is a file, not a folder")
    return folder


def student_path(lesson: "str | Path", student_dir: "str | Path | None" = None) -> Path:
    """Where the student copy of ``lesson`` (an existing lesson) lives (default folder: notebooks/student/).

    ``student_dir`` need not exist yet (:func:`write_student_copies` makes it).
    """
    name = _paths.notebook_path("lesson", lesson).name
    return _folder(student_dir) / name


def _render(lesson: Path) -> str:
    import nbformat

    nb = nbformat.read(lesson, as_version=4)
    return nbformat.writes(make_student_copy(nb, name=lesson.name)) + "\n"


def write_student_copies(
    paths: "Sequence[str | Path] | None" = None, student_dir: "str | Path | None" = None
) -> list[Path]:
    """(Re)write the student copy of each lesson in ``paths`` (default: every lesson).

    Default folder: notebooks/student/ (made when missing). All copies are rendered before any is written.
    """
    targets = _lesson_paths(paths)
    _folder(student_dir)
    if not targets:
        raise ValueError(f"no lessons given and none found in {str(_paths.notebooks_dir())!r}")
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

    Covers missing and outdated copies, and copies whose lesson no longer exists. Default
    ``paths=None``: every lesson; ``student_dir=None``: notebooks/student/ (a folder not made yet
    has no copies: each is reported missing). A lesson that does not exist is refused (a typo must
    not read as "no student copy").
    """
    targets = _lesson_paths(paths)
    folder = _folder(student_dir)
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
    return [p + " (run `python -m fp16lab workshop write`)" for p in problems]

