"""A wrong exercise answer shows the hint alone in Jupyter: never the checker's source, which holds the answer."""

from __future__ import annotations

import nbformat
import pytest
from nbclient import NotebookClient

from fp16lab.course.answers import WrongAnswer, cannot_check, require, verdict


def test_require_and_verdict_raise_the_hint(capsys):
    with pytest.raises(WrongAnswer, match="the hint"):
        require(False, "the hint")
    require(True, "unused")
    assert capsys.readouterr().out == ""  # a part that holds prints nothing: no ✓ before a later part fails
    verdict(True, "unused")
    assert capsys.readouterr().out.startswith("✓ ")
    with pytest.raises(AssertionError):  # WrongAnswer is an AssertionError: plain asserts' handlers still apply
        verdict(False, "no")


def test_cannot_check_fails_and_says_why():
    with pytest.raises(WrongAnswer, match="cannot run here: no reference"):
        cannot_check("no reference")


def test_a_kernel_shows_the_hint_alone(tmp_path):
    source = ("from fp16lab.course.answers import verdict\n"
              "secret_expected = 42  # the checker's code: must not be shown\n"
              "verdict(secret_expected == 41, 'Hint: count the bias too')")
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(source)])
    NotebookClient(nb, timeout=120, allow_errors=True, resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [o for o in nb.cells[0].outputs if o.output_type == "error"]
    assert len(errors) == 1 and errors[0].ename == "WrongAnswer"
    assert errors[0].traceback == ["✗ Hint: count the bias too"]
    assert "secret_expected" not in str(nb.cells[0].outputs)


def test_no_check_raises_a_plain_assertion_error():
    """A plain ``AssertionError`` raised by a check prints a traceback through the checker, answer and all.

    (Bare ``assert`` statements there only narrow types for mypy after a ``require`` has checked the same.)
    """
    import ast
    from pathlib import Path

    import fp16lab.course.answers as answers

    found = []
    for path in sorted(Path(answers.__file__).parent.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call) and \
                    getattr(node.exc.func, "id", None) == "AssertionError":
                found.append(f"{path.name}:{node.lineno} raise AssertionError")
    assert not found, f"use require/verdict/WrongAnswer so a wrong answer shows its hint alone: {found}"
