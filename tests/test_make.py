"""`make test` is the gate: it fails when the lint, the type check or the tests fail (fake tools)."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

FAKE_PYTHON = """#!/bin/sh
# a stand-in for .venv/bin/python: `-m mypy` and `-m pytest` exit as the test asks
case "$2" in
  mypy) echo "fake mypy"; exit "$MYPY_RC" ;;
  pytest) echo "fake pytest"; exit "$PYTEST_RC" ;;
  *) exit 0 ;;
esac
"""


@pytest.mark.parametrize("full", ["", "1"])
@pytest.mark.parametrize(("ruff", "mypy", "pytest_rc", "ok"), [
    (0, 0, 0, True), (0, 1, 0, False), (0, 0, 1, False), (1, 0, 0, False),
])
def test_make_test_fails_when_any_check_fails(tmp_path, ruff, mypy, pytest_rc, ok, full):
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    for name, text in (("python", FAKE_PYTHON), ("ruff", f"#!/bin/sh\nexit {ruff}\n")):
        tool = venv / "bin" / name
        tool.write_text(text)
        tool.chmod(0o755)
    stamp = venv / ".fp16lab-installed"
    stamp.touch()
    os.utime(stamp, (2**31, 2**31))  # newer than pyproject.toml: no set-up
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    env.update(MYPY_RC=str(mypy), PYTEST_RC=str(pytest_rc), FP16LAB_CHROMIUM="/nonexistent")
    run = subprocess.run(["make", "--no-print-directory", "test", f"VENV={venv}", f"FULL={full}"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=60)
    assert (run.returncode == 0) == ok, run.stdout + run.stderr
    if ruff == 0:
        assert "fake pytest" in run.stdout and "fake mypy" in run.stdout, run.stdout
    assert ("FULL=1: every lesson in full mode" in run.stdout) == bool(full) or ruff != 0, run.stdout
