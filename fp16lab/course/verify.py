"""Prove a student copy: every check rejects the unanswered prompt and accepts the solution.

:func:`verify_student_copy` runs the copy top to bottom in one kernel; at each exercise it
runs the check on ``None`` (must raise AssertionError), on an empty value of the answer's type
(must be rejected too), on each plausible wrong answer kept in the solution cell's metadata
(``wrong_answers``: each must be rejected), then puts the lesson's own solution in (the check
must pass), so that later cells see a correct answer.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fp16lab import checks
from fp16lab.course import paths as _paths
from fp16lab.course.student import (
    CHECK_TAG,
    META_KEY,
    PROMPT_TAG,
    RAISES_MARKER,
    RAISES_TAG,
    Exercise,
    cell_source,
    cell_tags,
    exercises,
)

__all__ = ["ExerciseCheck", "verify_student_copy"]

@dataclass(frozen=True)
class ExerciseCheck:
    """What happened to one exercise's check cell in :func:`verify_student_copy`."""

    number: int
    names: tuple[str, ...]
    rejects_none: str  # the exception the check raised on ``None`` (e.g. "AssertionError: ...")
    rejects_empty: str | None  # the same for an empty value of the answer's type; None: not tried
    accepts_solution: bool
    rejects_wrong: tuple[str, ...] = ()  # the check's message for each plausible wrong answer


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


def _expects_error(cell: Any) -> bool:
    """Tagged ``raises-exception`` or marked ``# NBVAL_RAISES_EXCEPTION``: an error is expected."""
    marked = any(line.strip() == RAISES_MARKER for line in cell_source(cell).splitlines())
    return RAISES_TAG in cell_tags(cell) or marked


# How a check rejects an answer: WrongAnswer (fp16lab.course.answers, a hint without a traceback) or a bare assert.
_REJECTED = ("WrongAnswer", "AssertionError")


def _error(cell: Any) -> dict[str, Any] | None:
    for o in cell.get("outputs", []):
        if o.get("output_type") == "error":
            return o
    return None


def _describe(err: dict[str, Any]) -> str:
    return f"{err.get('ename')}: {err.get('evalue')}"


def _traceback(err: dict[str, Any]) -> str:
    return _ANSI.sub("", "\n".join(err.get("traceback", [])))


def _prove(ex: Exercise, err: dict[str, Any] | None, run: Callable[[str, int], Any], i: int, where: str,
           lesson_name: str) -> ExerciseCheck:
    """Prove one exercise whose check just ran on the prompt's ``None`` and gave ``err``.

    The check must have raised AssertionError; with an empty answer of the solution's type it must
    fail too; with the lesson's solution (which stays in the kernel for later cells) it must pass.
    ``run(source, index)`` executes a cell in the kernel and returns it with its outputs.
    """
    if err is None or err.get("ename") not in _REJECTED:
        got = "it passed" if err is None else f"it raised {_describe(err)}"
        raise AssertionError(f"{where}: the check must raise AssertionError on None, but {got}. Start it "
                             f"with e.g. `assert {ex.names[0]} is not None, '...'`. Check cell:\n{ex.check}")
    sol_err = _error(run(ex.solution, ex.solution_index))
    if sol_err:
        raise AssertionError(f"{where}: the solution from {lesson_name} failed:\n{ex.solution}\n"
                             f"{_traceback(sol_err)}")
    probe = run(_EMPTY_SNIPPET.format(names=list(ex.names)), i)
    emptied = "".join(o.get("text", "") for o in probe.outputs if o.get("output_type") == "stream")
    empty_err: str | None = None
    if "emptied: []" not in emptied:
        e = _error(run(ex.check, i))
        if e is None:
            raise AssertionError(f"{where}: the check accepts an empty answer ({emptied.strip()}). "
                                 f"Check cell:\n{ex.check}")
        empty_err = _describe(e)
        run("globals().update(_fp16lab_saved)", i)
    wrong = tuple(_reject_wrong(ex, run, i, where))
    if wrong:
        sol_err = _error(run(ex.solution, ex.solution_index))  # later cells see the right answer again
        if sol_err:
            raise AssertionError(f"{where}: the solution failed after the wrong answers:\n{_traceback(sol_err)}")
    ok_err = _error(run(ex.check, i))
    if ok_err:
        raise AssertionError(f"{where}: the check rejects the lesson's own solution:\n{ex.solution}\n"
                             f"{_traceback(ok_err)}")
    return ExerciseCheck(ex.number, ex.names, _describe(err), empty_err, True, wrong)


def _reject_wrong(ex: Exercise, run: Callable[[str, int], Any], i: int, where: str) -> list[str]:
    """Run each plausible wrong answer, then the check: it must raise AssertionError every time."""
    messages = []
    for k, src in enumerate(ex.wrong, 1):
        bad = _error(run(src, ex.solution_index))
        if bad:
            raise AssertionError(f"{where}: wrong answer {k} does not even run (it must assign the answer):\n{src}\n"
                                 f"{_traceback(bad)}")
        e = _error(run(ex.check, i))
        if e is None or e.get("ename") not in _REJECTED:
            got = "it passed" if e is None else f"it raised {_describe(e)}"
            raise AssertionError(f"{where}: the check must reject wrong answer {k} with AssertionError, but {got}. "
                                 f"Wrong answer:\n{src}\nCheck cell:\n{ex.check}")
        messages.append(_describe(e))
    return messages


def verify_student_copy(
    student: "str | Path", lesson: "str | Path", *, timeout: int = 600
) -> list[ExerciseCheck]:
    """Run ``student`` top to bottom in one kernel and prove every exercise works both ways.

    For each exercise: the prompt (``name = None``) runs and its check must raise
    ``AssertionError``; an empty value of the solution's type (str, list, dict, DataFrame, ...)
    must be rejected too; then the solution from ``lesson`` runs and the check must pass, so
    later cells see a correct answer. Every other cell must run without error (cells tagged
    ``raises-exception`` or marked ``# NBVAL_RAISES_EXCEPTION`` excepted). Raises AssertionError
    quoting the cell and traceback.
    The kernel's working folder is the student copy's folder. Default timeout: 600 s a cell.
    """
    import nbformat
    from nbclient import NotebookClient

    spath, lpath = _paths.notebook_path("student", student), _paths.notebook_path("lesson", lesson)
    timeout = checks.positive_int("timeout", timeout)
    nb, source = _paths.read_notebook("student", spath), _paths.read_notebook("lesson", lpath)
    copy_of = (nb.metadata.get(META_KEY) or {}).get("student_copy_of")
    if copy_of is not None and copy_of != lpath.name:
        raise ValueError(f"student: {spath.name!r} is the student copy of {copy_of!r}, not of lesson {lpath.name!r}")
    solutions = exercises(source, name=lpath.name)
    prompts = [i for i, c in enumerate(nb.cells) if PROMPT_TAG in cell_tags(c)]
    if len(prompts) != len(solutions):
        raise AssertionError(f"{spath.name} has {len(prompts)} exercise cells but {lpath.name} has "
                             f"{len(solutions)} solutions: regenerate with `python -m fp16lab workshop write`")
    by_prompt = dict(zip(prompts, solutions, strict=True))
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", allow_errors=True,
                            resources={"metadata": {"path": str(spath.parent)}})
    client.reset_execution_trackers()
    results: list[ExerciseCheck] = []
    current: Exercise | None = None

    def run(src: str, index: int) -> Any:
        cell = nbformat.v4.new_code_cell(src)
        client.execute_cell(cell, index)
        return cell

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
                                         f"{cell_source(cell)}\n{_traceback(err)}")
                continue
            if CHECK_TAG in cell_tags(cell) and current is not None:
                where = f"{spath.name}, exercise {current.number} (answer {', '.join(current.names)})"
                results.append(_prove(current, err, run, i, where, lpath.name))
                current = None
                continue
            if err and not _expects_error(cell):
                raise AssertionError(f"{spath.name}: cell {i} failed:\n{cell_source(cell)}\n{_traceback(err)}")
    if len(results) != len(solutions):
        raise AssertionError(f"{spath.name}: checked {len(results)} of {len(solutions)} exercises")
    return results


