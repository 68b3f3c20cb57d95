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


def test_table_marks_older_code_and_missing_runs(tmp_path):
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
    lesson = tmp_path / "02_x.ipynb"
    nbformat.write(nb, lesson)
    frame = portability.load_matrix(tmp_path / "none.json")
    frame.loc[0] = _row("02_x", "none", digest=code_digest(nb), seconds=12.0)
    frame.loc[1] = _row("02_x", "t4", "failed", digest="old")
    table = portability.matrix_table(frame, [lesson])
    assert "| 02_x | passed, 12 s | not run |" in table
    assert "**failed** (older code)" in table


def test_bad_input_is_refused_before_any_run(tmp_path):
    with pytest.raises(ValueError, match="unknown profile 'h100'"):
        portability.run_matrix([lessons()[0]], ["h100"], save=False)
    with pytest.raises(ValueError, match="jobs must be an int >= 1"):
        portability.run_matrix([lessons()[0]], ["t4"], jobs=0, save=False)
    with pytest.raises(ValueError, match="not a notebook file"):
        portability.run_matrix([tmp_path / "nope.ipynb"], ["t4"], save=False)
    with pytest.raises(ValueError, match="lessons is empty"):
        portability.run_matrix([], ["t4"], save=False)


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
