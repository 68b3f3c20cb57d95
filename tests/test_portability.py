"""The portability matrix: rows merge by lesson and profile, stale code is marked, the guide stays in step."""

from __future__ import annotations

import json
import subprocess
import sys

import nbformat
import pytest

from fp16lab.course import portability
from fp16lab.course.outputs import code_digest
from fp16lab.course.paths import instructors_guide, lessons, repo_root


def _row(lesson, profile, status="passed", digest="x", seconds=1.0):
    return {"lesson": lesson, "profile": profile, "status": status, "seconds": seconds, "code_sha256": digest,
            "device": "NVIDIA H200", "torch": "2.11.0", "mode": "full-smoke", "date": "2026-12-03", "error": ""}


def test_record_replaces_the_same_lesson_and_profile(tmp_path):
    path = tmp_path / "portability.json"
    portability.record([_row("02_x", "t4", "failed"), _row("02_x", "rtx3060")], path)
    portability.record([_row("02_x", "t4", "passed", seconds=5.0)], path)
    m = portability.load_matrix(path)
    assert len(m) == 2
    t4 = m[(m.lesson == "02_x") & (m.profile == "t4")].iloc[0]
    assert t4.status == "passed" and t4.seconds == 5.0
    assert list(m.profile) == ["rtx3060", "t4"]  # the matrix's column order, not alphabetical
    assert json.loads(path.read_text())["rows"][0]["lesson"] == "02_x"


def _empty_matrix(tmp_path):
    """A recorded matrix with no rows yet (a path that does not exist is refused, never read as empty)."""
    path = tmp_path / "empty.json"
    path.write_text('{"rows": []}')
    return path


def test_a_named_matrix_must_exist_and_be_a_matrix(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"path: '.*none\.json' does not exist"):
        portability.load_matrix(tmp_path / "none.json")
    (tmp_path / "bad.json").write_text("not json")
    with pytest.raises(ValueError, match=r"path: '.*bad\.json' is not a portability matrix"):
        portability.load_matrix(tmp_path / "bad.json")
    with pytest.raises(ValueError, match="rows is empty"):
        portability.record([], tmp_path / "new.json")
    assert not (tmp_path / "new.json").exists()


def test_table_marks_older_code_and_missing_runs(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
    lesson = tmp_path / "02_x.ipynb"
    nbformat.write(nb, lesson)
    frame = portability.load_matrix(_empty_matrix(tmp_path))
    frame.loc[0] = _row("02_x", "none", digest=code_digest(nb), seconds=12.0)
    frame.loc[1] = _row("02_x", "t4", "failed", digest="old")
    table = portability.matrix_table(frame, [lesson])
    assert "| 02_x | passed, 12 s | not run |" in table
    assert "**failed** (older code)" in table


def test_bad_input_is_refused_before_any_run(tmp_path):
    with pytest.raises(ValueError, match=r"profiles\[0\] must be one of 'none', 'rtx4090d'.*; got 'h100'"):
        portability.run_matrix([lessons()[0]], ["h100"], save=False)
    with pytest.raises(ValueError, match=r"profiles must be a list, got 't4' \(str\): pass a list, e.g. \['t4'\]"):
        portability.run_matrix([lessons()[0]], "t4", save=False)  # type: ignore[arg-type]  # not 't', then '4'
    with pytest.raises(ValueError, match="jobs must be an int >= 1"):
        portability.run_matrix([lessons()[0]], ["t4"], jobs=0, save=False)
    with pytest.raises(FileNotFoundError, match=r"lessons\[0\]: .*nope.ipynb' does not exist"):
        portability.run_matrix([tmp_path / "nope.ipynb"], ["t4"], save=False)
    with pytest.raises(ValueError, match="lessons is empty"):
        portability.run_matrix([], ["t4"], save=False)
    with pytest.raises(ValueError, match=r"lessons must be a list, got '.*00_setup_and_verify.ipynb' \(str\)"):
        portability.run_matrix(str(lessons()[0]), ["t4"], save=False)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="save must be True or False, got 1"):
        portability.run_matrix([lessons()[0]], ["t4"], save=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"lesson: .*README.md' is not a notebook \(.ipynb\)"):
        portability.run_one(repo_root() / "README.md", "t4")
    with pytest.raises(ValueError, match="profile must be one of 'none'"):
        portability.run_one(lessons()[0], "h100")
    with pytest.raises(ValueError, match="smoke must be True or False, got 'yes'"):
        portability.run_one(lessons()[0], "t4", smoke="yes")  # type: ignore[arg-type]


def test_record_and_table_refuse_what_is_not_a_matrix(tmp_path):
    path = tmp_path / "portability.json"
    with pytest.raises(ValueError, match=r"rows must be a list, got \{'lesson'"):
        portability.record(_row("02_x", "t4"), path)  # type: ignore[arg-type]  # one row, not a list of rows
    with pytest.raises(ValueError, match=r"rows\[0\] lacks status, seconds: a matrix row has lesson, profile"):
        portability.record([{"lesson": "02_x", "profile": "t4", "code_sha256": "x", "device": "", "torch": "",
                             "mode": "", "date": "", "error": ""}], path)
    with pytest.raises(ValueError, match=r"rows\[1\]\['profile'\] must be one of 'none'.*; got 'h100'"):
        portability.record([_row("02_x", "t4"), _row("02_x", "h100")], path)
    assert not path.exists()  # a refused call writes nothing
    with pytest.raises(ValueError, match=r"frame must be a portability matrix \(load_matrix\(\)\) or None"):
        portability.matrix_table([_row("02_x", "t4")], [lessons()[0]])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="frame lacks the column.s. jobs of a portability matrix"):
        portability.matrix_table(portability.load_matrix(_empty_matrix(tmp_path)).drop(columns=["jobs"]), [lessons()[0]])
    with pytest.raises(ValueError, match=r"lessons must be a list, got '02_x.ipynb' \(str\)"):
        portability.matrix_table(portability.load_matrix(_empty_matrix(tmp_path)), "02_x.ipynb")  # type: ignore[arg-type]


def test_cli_run_without_a_gpu_says_why(monkeypatch):
    import torch

    if torch.cuda.is_available():
        pytest.skip("checks the refusal on a machine without CUDA")
    out = subprocess.run([sys.executable, "-m", "fp16lab", "portability", "run", str(lessons()[0]),
                          "--profiles", "t4"], capture_output=True, text=True, cwd=repo_root())
    assert out.returncode == 2 and "real CUDA GPU" in out.stderr


def test_the_committed_matrix_is_well_formed_and_the_guide_shows_it():
    m = portability.load_matrix()
    assert set(m.profile) <= set(portability.PROFILE_KEYS)
    assert set(m.status) <= {"passed", "failed"}
    assert set(m.lesson) <= {p.stem for p in lessons()}
    guide = instructors_guide().read_text(encoding="utf-8")
    block = guide.split(portability.GUIDE_START, 1)[1].split(portability.GUIDE_END, 1)[0].strip()
    assert block == portability.matrix_table(), "run `python -m fp16lab portability table --write`"


def test_table_says_when_lessons_shared_the_gpu(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
    lesson = tmp_path / "02_x.ipynb"
    nbformat.write(nb, lesson)
    frame = portability.load_matrix(_empty_matrix(tmp_path))
    frame.loc[0] = _row("02_x", "none", digest=code_digest(nb)) | {"jobs": 1}
    frame.loc[1] = _row("02_x", "t4", "failed", digest=code_digest(nb)) | {"jobs": 5}
    frame.loc[2] = _row("02_x", "rtx3060", digest=code_digest(nb))  # recorded before the column: one at a time
    table = portability.matrix_table(frame, [lesson])
    assert "| 02_x | passed, 1 s | not run | passed, 1 s | not run | **failed**, 1 s (5 at once) | not run |" in table


class _FakeChild:
    """Stands in for the child process: 'executes' the copy by adding an output, records its env."""

    def __init__(self, fail=False):
        self.envs, self.fail = [], fail

    def __call__(self, cmd, env, **kw):
        copy = cmd[-2]
        nb = nbformat.read(copy, as_version=4)
        nb.cells[0].outputs = [nbformat.v4.new_output("stream", text="ran\n")]
        nbformat.write(nb, copy)
        self.envs.append(env)
        info = {"torch": "2.11.0", "device": "NVIDIA H200"} | ({"error": "AssertionError: 0.94"} if self.fail else {})
        return subprocess.CompletedProcess(cmd, 1 if self.fail else 0, stdout=json.dumps(info) + "\n", stderr="")


def _lesson(tmp_path):
    lesson = tmp_path / "02_x.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")]), lesson)
    return lesson


def test_run_one_caps_threads_and_keeps_the_executed_copy(tmp_path, monkeypatch):
    child = _FakeChild(fail=True)
    monkeypatch.setattr(portability.subprocess, "run", child)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    lesson = _lesson(tmp_path)
    row = portability.run_one(lesson, "t4", threads=4, keep=tmp_path / "kept")
    assert child.envs[0]["OMP_NUM_THREADS"] == "4" and child.envs[0]["FP16LAB_PROFILE"] == "t4"
    assert row["status"] == "failed" and row["error"] == "AssertionError: 0.94" and row["jobs"] == 1
    kept = nbformat.read(tmp_path / "kept" / "02_x.t4.ipynb", as_version=4)
    assert kept.cells[0].outputs[0]["text"] == "ran\n"  # the executed copy, failed runs too
    assert nbformat.read(lesson, as_version=4).cells[0].outputs == []  # the lesson itself is untouched
    portability.run_one(lesson, "t4")
    assert "OMP_NUM_THREADS" not in child.envs[1]  # no cap asked: none set


def test_run_matrix_shares_the_cores_and_records_jobs(tmp_path, monkeypatch):
    child = _FakeChild()
    monkeypatch.setattr(portability.subprocess, "run", child)
    monkeypatch.setattr(portability.os, "cpu_count", lambda: 16)
    frame = portability.run_matrix([_lesson(tmp_path)], ["t4", "rtx3060", "a100-40gb"], jobs=3, save=False)
    assert {e["OMP_NUM_THREADS"] for e in child.envs} == {"5"}
    assert list(frame["jobs"]) == [3, 3, 3] and (frame["status"] == "passed").all()


def test_run_bad_threads_and_keep_are_refused_before_any_run(tmp_path, monkeypatch):
    child = _FakeChild()
    monkeypatch.setattr(portability.subprocess, "run", child)
    lesson = _lesson(tmp_path)
    with pytest.raises(ValueError, match="threads"):
        portability.run_one(lesson, "t4", threads=0)
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(ValueError, match="keep '.*afile' is a file"):
        portability.run_matrix([lesson], ["t4"], keep=afile, save=False)
    assert child.envs == []


def test_a_hung_run_is_a_failed_row_and_the_matrix_goes_on(tmp_path, monkeypatch):
    limits = []

    def hung(cmd, timeout, **kw):
        limits.append(timeout)
        raise subprocess.TimeoutExpired(cmd, timeout)

    monkeypatch.setattr(portability.subprocess, "run", hung)
    frame = portability.run_matrix([_lesson(tmp_path)], ["t4", "a100-40gb"], timeout=30, save=False)
    assert list(frame["status"]) == ["failed", "failed"]
    assert limits == [30 * 1 + 120] * 2  # 30 s for its one code cell, plus start-up
    assert "passed its limit of 150 s" in frame["error"].iloc[0]
    with pytest.raises(ValueError, match="timeout"):
        portability.run_one(_lesson(tmp_path), "t4", timeout=0)


def test_a_dead_kernel_is_reported_and_the_copy_kept(tmp_path, capsys):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("print('before')"),
                                         nbformat.v4.new_code_cell("import os; os._exit(3)")])
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    copy = tmp_path / "dies.ipynb"
    nbformat.write(nb, copy)
    assert portability._execute(str(copy), 60) == 1
    info = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert info["error"].startswith("DeadKernelError"), info
    ran = nbformat.read(copy, as_version=4)
    assert ran.cells[0].outputs[0]["text"] == "before\n"  # the executed copy is written, for --keep


def test_stop_after_starts_no_new_run_and_lists_the_rest(tmp_path, monkeypatch, capsys):
    child = _FakeChild()
    monkeypatch.setattr(portability.subprocess, "run", child)
    clock = iter(range(0, 1000, 10))  # every look at the clock: 10 s later
    monkeypatch.setattr(portability.time, "monotonic", lambda: next(clock))
    frame = portability.run_matrix([_lesson(tmp_path)], ["t4", "rtx3060", "a100-40gb"], stop_after=15, save=False)
    assert list(frame["profile"]) == ["t4"] and len(child.envs) == 1
    assert "not started (stop_after=15 s): 02_x rtx3060, 02_x a100-40gb" in capsys.readouterr().out
    with pytest.raises(ValueError, match="stop_after must be"):
        portability.run_matrix([_lesson(tmp_path)], ["t4"], stop_after=-1, save=False)
    assert len(child.envs) == 1


def test_missing_runs_only_rows_not_yet_passed_with_the_current_code(tmp_path, monkeypatch, capsys):
    child = _FakeChild()
    monkeypatch.setattr(portability.subprocess, "run", child)
    matrix = tmp_path / "portability.json"
    monkeypatch.setattr(portability, "matrix_path", lambda: matrix)
    lesson = _lesson(tmp_path)
    now = code_digest(nbformat.read(lesson, as_version=4))
    portability.record([_row("02_x", "t4", digest=now), _row("02_x", "rtx3060", "failed", digest=now),
                        _row("02_x", "a100-40gb", digest="older"), _row("02_x", "rtx4090d", digest=now)])
    frame = portability.run_matrix([lesson], ["t4", "rtx3060", "a100-40gb", "rtx4060-laptop"], missing=True)
    assert list(frame["profile"]) == ["rtx3060", "a100-40gb", "rtx4060-laptop"] and len(child.envs) == 3
    assert "not run again: 02_x t4" in capsys.readouterr().out
    m = portability.load_matrix(matrix)
    assert set(m[m.status == "passed"].profile) == {"t4", "rtx3060", "a100-40gb", "rtx4060-laptop", "rtx4090d"}
    again = portability.run_matrix([lesson], ["t4", "rtx3060"], missing=True)  # now all passed: nothing runs
    assert again.empty and len(child.envs) == 3
    portability.run_matrix([lesson], ["t4"], missing=True, smoke=False)  # a full run: smoke rows do not count
    assert len(child.envs) == 4 and child.envs[-1]["FP16LAB_SMOKE"] == "0"
    with pytest.raises(ValueError, match="missing"):
        portability.run_matrix([lesson], ["t4"], missing="yes")
    assert len(child.envs) == 4
