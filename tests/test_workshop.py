"""Student copies: generated from the lessons, current, and their checks work both ways."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from fp16lab.course import agenda, paths, student, verify

ROOT = Path(__file__).resolve().parent.parent
LESSONS = paths.lessons()
STUDENT_COPIES = sorted(paths.student_dir().glob("[0-9][0-9]_*.ipynb"))


def _lesson(*, check: str = "assert answer is not None, 'fill in answer'\nassert answer == [1, 2, 3]",
            solution: str = "data = [3, 1, 2]\nanswer = sorted(data)", tags: bool = True):
    v4 = nbformat.v4
    nb = v4.new_notebook()
    sol = v4.new_code_cell(solution, metadata={"tags": ["solution"]} if tags else {})
    chk = v4.new_code_cell(check, metadata={"tags": ["check"]} if tags else {})
    nb.cells = [
        v4.new_markdown_cell("# Tiny lesson\n\n## Exercises"),
        v4.new_code_cell("base = 10", outputs=[v4.new_output("execute_result", {"text/plain": "1"},
                                                              execution_count=1)], execution_count=1),
        v4.new_markdown_cell("**Exercise 1.** Sort `data` into `answer`."),
        sol,
        chk,
        v4.new_code_cell("after = base + 1  # cells after an exercise must not need its answer\nassert after == 11"),
    ]
    nb.metadata["fp16lab"] = {"seconds": 1.0, "mode": "quick"}
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    return nb


def _write(nb, folder: Path, name: str = "90_tiny.ipynb") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / name
    nbformat.write(nb, p)
    return p


# ---- the generator ------------------------------------------------------------------------

@pytest.mark.parametrize(("src", "names"), [
    ("answer = 1", ("answer",)),
    ("x = 2\nanswer = x * 3", ("x", "answer")),
    ("a, (b, c) = 1, (2, 3)", ("a", "b", "c")),
    ("best: int = 4\nprint(best)", ("best",)),
    ("import math\nfirst = second = math.pi", ("first", "second")),
    ("t = 1\nif t:\n    ratio = 2.0\nelse:\n    ratio = float('nan')", ("t", "ratio")),
    ("try:\n    v = int('x')\nexcept ValueError:\n    v = -1\nfor i in range(2):\n    w = i", ("v", "w")),
])
def test_assigned_names(src, names):
    assert student.assigned_names(src) == names


@pytest.mark.parametrize("src", ["print(1)", "x.attr = 3", "def f():\n    y = 1", "class C:\n    z = 1", "answer ="])
def test_assigned_names_refuses_cells_without_an_answer(src):
    with pytest.raises(ValueError, match="solution cell"):
        student.assigned_names(src)


def test_answer_names_are_what_the_check_reads():
    sol = "p = peak('a')\nratio_a = p * 2\nratio_b = ratio_a / 3\nprint(ratio_b)"
    assert student.answer_names(sol, "assert ratio_a is not None and ratio_b is not None") == ("ratio_a", "ratio_b")
    with pytest.raises(ValueError, match=r"reads none of the variables the solution assigns \(p, ratio_a, ratio_b\)"):
        student.answer_names(sol, "assert True")


def test_student_copy_replaces_solutions_and_keeps_checks():
    lesson = _lesson()
    before = nbformat.writes(lesson)
    copy = student.make_student_copy(lesson, name="90_tiny.ipynb")
    assert nbformat.writes(lesson) == before, "the lesson itself must not change"
    nbformat.validate(copy)
    assert copy.cells[0].id == student.BANNER_ID and "90_tiny.ipynb" in copy.cells[0].source
    prompt, check = copy.cells[4], copy.cells[5]
    assert prompt.source == "answer = None  # your code here"
    assert prompt.metadata["tags"] == ["exercise"]
    assert "sorted" not in json.dumps(copy), "the solution leaked into the student copy"
    assert check.source.endswith(lesson.cells[4].source)
    # nbval accepts the unanswered check through the comment; without a raises-exception tag,
    # JupyterLab's Run All stops there (tests/test_browser.py checks that in a real lab)
    assert check.source.splitlines()[0] == "# NBVAL_RAISES_EXCEPTION"
    assert check.metadata["tags"] == ["check"]
    code = [c for c in copy.cells if c.cell_type == "code"]
    assert all(c.outputs == [] and c.execution_count is None for c in code)
    assert "fp16lab" not in copy.metadata and copy.metadata["fp16lab_workshop"]["exercises"] == 1


def test_rerunning_a_lesson_elsewhere_keeps_its_student_copy_current(tmp_path):
    """Only the lesson's content matters: outputs and run metadata (GPU run, Python) do not."""
    lesson = _write(_lesson(), tmp_path)
    student.write_student_copies([lesson], tmp_path / "student")
    nb = nbformat.read(lesson, as_version=4)
    nb.metadata["fp16lab"] = {"seconds": 80.0, "mode": "full", "device": "NVIDIA H200"}
    nb.metadata["language_info"] = {"name": "python", "version": "3.12.3"}
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", name="stdout", text="on the GPU\n")]
    nb.cells[1].execution_count = 7
    nbformat.write(nb, lesson)
    assert student.stale_student_copies([lesson], tmp_path / "student") == []


def test_generation_is_deterministic(tmp_path):
    lesson = _write(_lesson(), tmp_path)
    a = student.write_student_copies([lesson], tmp_path / "s1")[0].read_text()
    b = student.write_student_copies([lesson], tmp_path / "s2")[0].read_text()
    assert a == b
    assert student.stale_student_copies([lesson], tmp_path / "s1") == []


def test_refuses_a_notebook_without_solution_markers(tmp_path):
    lesson = _write(_lesson(tags=False), tmp_path, "91_no_markers.ipynb")
    with pytest.raises(ValueError, match=r"91_no_markers\.ipynb: no exercise found .*'solution'"):
        student.write_student_copies([lesson], tmp_path / "student")
    assert not (tmp_path / "student").exists(), "nothing may be written for a refused lesson"
    cli = subprocess.run([sys.executable, "-m", "fp16lab", "workshop", "write", str(lesson),
                          "--out", str(tmp_path / "student")], capture_output=True, text=True)
    assert cli.returncode == 2 and "91_no_markers.ipynb: no exercise found" in cli.stderr


def test_refuses_a_solution_without_check():
    nb = _lesson()
    nb.cells[4].metadata["tags"] = []
    with pytest.raises(ValueError, match=r"t\.ipynb: solution cell 3 has no 'check' cell after it"):
        student.make_student_copy(nb, name="t.ipynb")
    nb = _lesson()
    nb.cells[3].metadata["tags"] = []
    with pytest.raises(ValueError, match=r"t\.ipynb: check cell 4 has no 'solution' cell before it"):
        student.make_student_copy(nb, name="t.ipynb")


def test_stale_copies_are_reported(tmp_path):
    lesson = _write(_lesson(), tmp_path)
    out = tmp_path / "student"
    assert "no student copy" in student.stale_student_copies([lesson], out)[0]
    student.write_student_copies([lesson], out)
    nb = _lesson(solution="data = [3, 1, 2]\nanswer = sorted(data)  # edited")
    nb.cells[2].source += " Changed wording."
    nbformat.write(nb, lesson)
    (why,) = student.stale_student_copies([lesson], out)
    assert "differs" in why and "python -m fp16lab workshop write" in why


# ---- proving the checks both ways, in a real kernel ---------------------------------------

def test_verify_accepts_a_good_exercise(tmp_path):
    lesson = _write(_lesson(), tmp_path)
    (handout,) = student.write_student_copies([lesson], tmp_path / "student")
    (res,) = verify.verify_student_copy(handout, lesson)
    assert res.names == ("answer",) and res.accepts_solution
    assert res.rejects_none.startswith("AssertionError: fill in answer")
    assert res.rejects_empty is not None and res.rejects_empty.startswith("AssertionError")


def test_verify_proves_each_wrong_answer_is_rejected(tmp_path):
    nb = _lesson()
    nb.cells[3].metadata["wrong_answers"] = ["answer = data", "answer = sorted(data, reverse=True)"]
    lesson = _write(nb, tmp_path)
    (handout,) = student.write_student_copies([lesson], tmp_path / "student")
    assert "wrong_answers" not in nbformat.read(handout, as_version=4).cells[4].metadata  # not in the copy
    (res,) = verify.verify_student_copy(handout, lesson)
    assert len(res.rejects_wrong) == 2 and all(m.startswith("AssertionError") for m in res.rejects_wrong)
    # a check too weak for one of its wrong answers is caught, and named
    nb.cells[4].source = "assert answer is not None, 'fill in answer'\nassert sorted(answer) == [1, 2, 3]"
    lesson = _write(nb, tmp_path)
    (handout,) = student.write_student_copies([lesson], tmp_path / "student")
    with pytest.raises(AssertionError, match="must reject wrong answer 1 with AssertionError, but it passed"):
        verify.verify_student_copy(handout, lesson)


def test_wrong_answers_must_be_a_list_of_code():
    nb = _lesson()
    nb.cells[3].metadata["wrong_answers"] = "answer = data"
    with pytest.raises(ValueError, match="metadata 'wrong_answers' must be a list of non-empty code strings"):
        student.exercises(nb, name="90_tiny.ipynb")


@pytest.mark.parametrize(("check", "why"), [
    ("assert answer == [1, 2, 3]", "must raise AssertionError on None, but it passed"),
    ("assert len(answer) == 3", "must raise AssertionError on None, but it raised TypeError"),
    ("assert answer is not None\nassert answer == [1, 2, 3] or answer == []", "accepts an empty answer"),
    ("assert answer is not None\nassert answer == [3, 2, 1]", "rejects the lesson's own solution"),
])
def test_verify_catches_bad_checks(tmp_path, check, why):
    if why.endswith("passed"):
        check = "print(answer)"  # a check that accepts None
    lesson = _write(_lesson(check=check), tmp_path)
    (handout,) = student.write_student_copies([lesson], tmp_path / "student")
    with pytest.raises(AssertionError, match=why.replace("(", r"\(").replace(")", r"\)")):
        verify.verify_student_copy(handout, lesson)


def test_plain_nbval_passes_a_student_copy(tmp_path):
    """An instructor may run a student copy under plain nbval: the expected AssertionError must not fail it."""
    lesson = _write(_lesson(), tmp_path)
    (handout,) = student.write_student_copies([lesson], tmp_path / "student")
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax",
                          "--nbval-current-env", "-o", "addopts=", "--rootdir", str(tmp_path), str(handout)],
                         capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-2000:]
    assert "passed" in run.stdout and "failed" not in run.stdout


def test_time_quick_mode_records_a_measured_time(tmp_path):
    lesson = _write(_lesson(check="assert answer is not None\nimport os\nassert os.environ['FP16LAB_QUICK'] == '1'"),
                    tmp_path)
    before = lesson.read_bytes()
    tfile = tmp_path / "timings.json"
    tfile.write_text(json.dumps({lesson.name: {"full": {"seconds": 9.0, "device": "NVIDIA H200"}}}))
    (secs,) = agenda.time_quick_mode([lesson], tfile).values()
    table = json.loads(tfile.read_text())[lesson.name]
    assert table["quick"]["seconds"] == secs > 0 and table["full"]["seconds"] == 9.0
    assert table["quick"]["cpus"] == os.cpu_count() and table["quick"]["load"] >= 0, "how busy the machine was"
    assert f"{os.cpu_count()} CPUs at load {table['quick']['load']}" in agenda.agenda_table(tfile)
    assert lesson.read_bytes() == before, "timing a lesson must not rewrite it"
    assert "| 9 s (NVIDIA H200" in agenda.agenda_table(tfile)
    bad = _write(_lesson(solution="answer = 1 / 0"), tmp_path, "92_bad.ipynb")
    with pytest.raises(AssertionError, match="92_bad.ipynb failed in quick mode"):
        agenda.time_quick_mode([bad], tfile)



@pytest.mark.parametrize(("kw", "match"), [
    ({"paths": "notebooks/02_amp_training_loop.ipynb"}, r"paths must be a list, got '.*' \(str\): pass a list"),
    ({"paths": []}, "paths is empty"),
    ({"paths": ["nope.ipynb"]}, r"paths\[0\]: 'nope.ipynb' does not exist"),
    ({"timings_file": 3}, r"timings_file must be a path \(str or os.PathLike\), got 3"),
    ({"timeout": 0}, "timeout must be an int >= 1, got 0"),
])
def test_time_quick_mode_refuses_bad_input_before_running_anything(kw, match, monkeypatch):
    monkeypatch.setattr("nbclient.NotebookClient.execute", lambda self: pytest.fail("a lesson ran"))
    with pytest.raises((ValueError, FileNotFoundError), match=match):
        agenda.time_quick_mode(**{"paths": [paths.lessons()[0]], **kw})


# ---- the committed student copies of the real lessons -------------------------------------

def test_committed_student_copies_are_current():
    problems = student.stale_student_copies()
    assert not problems, "\n".join(problems)


def test_agenda_quotes_the_measured_times():
    problems = agenda.agenda_problems()
    assert not problems, "\n".join(problems)
    for lesson in LESSONS:
        assert f"]({lesson.name})" in paths.instructors_guide().read_text(), f"agenda lacks {lesson.name}"


@pytest.mark.student_copies  # each runs a whole lesson again: CI's second lane runs them, `make test` leaves them out
@pytest.mark.parametrize("copy", STUDENT_COPIES, ids=lambda p: p.name)
def test_student_copy_checks_work_both_ways(copy):
    """Each check rejects None, an empty answer and every plausible wrong answer the lesson keeps; it accepts the solution."""
    results = verify.verify_student_copy(copy, paths.notebooks_dir() / copy.name)
    assert results and all(r.accepts_solution and r.rejects_none.startswith(("WrongAnswer", "AssertionError"))
                           for r in results)


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.name)
def test_every_exercise_keeps_two_wrong_answers(lesson):
    """So the check is proved against the mistakes a learner makes, not only against None."""
    found = student.exercises(nbformat.read(lesson, as_version=4), name=lesson.name)
    weak = [ex.number for ex in found if len(ex.wrong) < 2]
    assert not weak, f"{lesson.name}: exercise(s) {weak} keep fewer than 2 wrong answers (metadata 'wrong_answers')"


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.name)
def test_every_lesson_has_at_least_three_exercises(lesson):
    found = student.exercises(nbformat.read(lesson, as_version=4), name=lesson.name)
    assert len(found) >= 3, f"{lesson.name} has {len(found)} exercises; the series promises at least 3 a lesson"
