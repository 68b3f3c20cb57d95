"""One command line: ``python -m fp16lab <command>``, --help for each, old entry points as aliases."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fp16lab.__main__ import SUBCOMMANDS, build_parser, main
from fp16lab.course import paths

ROOT = Path(__file__).resolve().parent.parent
COMMANDS = [name for name, _ in SUBCOMMANDS]


def _run(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], capture_output=True, text=True, cwd=cwd, timeout=300)


def test_help_lists_every_subcommand():
    out = _run("fp16lab", "--help")
    assert out.returncode == 0, out.stderr
    for name in ["doctor", "lab", "workspace", "bench", "outputs", "workshop"]:
        assert name in COMMANDS
        assert f"\n    {name}" in out.stdout, f"`python -m fp16lab --help` does not list {name}:\n{out.stdout}"


@pytest.mark.parametrize("name", COMMANDS)
def test_each_subcommand_has_help(name, capsys):
    with pytest.raises(SystemExit, match="^0$") as exit_:  # argparse exits with the code as its message
        main([name, "--help"])
    assert exit_.value.code == 0
    text = capsys.readouterr().out
    assert text.startswith(f"usage: python -m fp16lab {name}") and len(text.splitlines()) > 3


@pytest.mark.parametrize(("name", "sub"), [("outputs", "run"), ("outputs", "check"), ("outputs", "note"),
                                          ("workshop", "write"), ("workshop", "check"), ("workshop", "verify"),
                                          ("workshop", "agenda"), ("workshop", "time-quick"), ("workshop", "lint"),
                                          ("translations", "write"), ("translations", "check"),
                                          ("translations", "skeleton")])
def test_nested_commands_have_help(name, sub, capsys):
    with pytest.raises(SystemExit, match="^0$") as exit_:
        main([name, sub, "--help"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: python -m fp16lab {name} {sub}")


def test_a_command_is_required(capsys):
    with pytest.raises(SystemExit, match="^2$") as exit_:
        build_parser().parse_args([])
    assert exit_.value.code == 2 and "COMMAND" in capsys.readouterr().err


@pytest.mark.parametrize("module", ["fp16lab.outputs", "fp16lab.workshop", "fp16lab.bench", "fp16lab.distributed"])
def test_one_command_line_no_module_entry_points(module):
    """``python -m fp16lab <command>`` is the one entry point: the old per-module ones are gone."""
    out = _run(module, "--help")
    assert out.returncode != 0 and "No module named" in out.stderr


def test_outputs_check_runs_from_a_subfolder():
    """The tools find the repository themselves, wherever they are started inside it."""
    out = _run("fp16lab", "outputs", "check", cwd=ROOT / "notebooks" / "student")
    assert out.returncode == 0, out.stdout + out.stderr


def test_refused_input_is_exit_2_with_the_reason(capsys, tmp_path):
    assert main(["workspace", "--reset", "99"]) == 2
    err = capsys.readouterr().err
    assert "error: name must be a lesson number or name" in err and "'99'" in err
    assert main(["lab", "--dry-run", "--port", "0"]) == 2
    assert "--port must be 1..65535, got 0" in capsys.readouterr().err


def test_a_lab_command_refuses_like_the_others(capsys):
    """Every command ends in the same place: a refused input is exit 2 with the reason, no traceback."""
    assert main(["bench", "--batch-sizes", "0"]) == 2
    assert "batch_sizes[0] must be an int >= 1, got 0" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [
    ["outputs", "note", "{missing}"], ["outputs", "check", "{text}"], ["outputs", "run", "{folder}"],
    ["workshop", "write", "{missing}"], ["workshop", "verify", "{text}"],
    ["portability", "run", "{missing}", "--profiles", "t4"],
])
def test_a_notebook_argument_must_be_an_existing_notebook(argv, tmp_path, capsys):
    """Checked when the command line is read: nothing runs, nothing is written, the value is quoted."""
    (tmp_path / "notes.txt").write_text("not a notebook")
    (tmp_path / "lessons.ipynb").mkdir()
    values = {"{missing}": str(tmp_path / "nope.ipynb"), "{text}": str(tmp_path / "notes.txt"),
              "{folder}": str(tmp_path / "lessons.ipynb")}
    argv = [values.get(a, a) for a in argv]
    with pytest.raises(SystemExit, match="^2$") as exc:
        build_parser().parse_args(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and repr(argv[2]) in err and "notebooks/02_amp_training_loop.ipynb" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lessons.ipynb", "notes.txt"]


@pytest.mark.parametrize("timeout", ["0", "-5", "1.5", "soon"])
@pytest.mark.parametrize("command", [["outputs", "run"], ["portability", "run"]])
def test_a_time_limit_must_be_whole_positive_seconds(command, timeout, capsys):
    lesson = str(ROOT / "notebooks" / "00_setup_and_verify.ipynb")
    with pytest.raises(SystemExit, match="^2$"):
        build_parser().parse_args([*command, lesson, "--timeout", timeout])
    assert f"must be a whole number of seconds >= 1, got {timeout!r}" in capsys.readouterr().err


# ---- the repository root, found in one place ------------------------------------------------

def test_repo_root_from_anywhere_inside(tmp_path, monkeypatch):
    monkeypatch.delenv(paths.ROOT_ENV, raising=False)
    assert paths.repo_root(ROOT / "notebooks" / "student") == ROOT
    assert paths.repo_root(ROOT / "fp16lab" / "course" / "paths.py") == ROOT
    monkeypatch.chdir(ROOT / "tests")
    assert paths.repo_root() == ROOT
    assert paths.notebooks_dir() == ROOT / "notebooks" and paths.work_dir() == ROOT / "notebooks" / "work"


def test_repo_root_needs_fp16labs_pyproject(tmp_path, monkeypatch):
    monkeypatch.delenv(paths.ROOT_ENV, raising=False)
    other = tmp_path / "other"
    (other / "sub").mkdir(parents=True)
    (other / "pyproject.toml").write_text('[tool.x]\nname = "fp16lab"\n\n[project]\nname = "something-else"\n')
    with pytest.raises(FileNotFoundError, match=r"no fp16lab repository found above .*other/sub.*FP16LAB_ROOT"):
        paths.repo_root(other / "sub")
    mine = tmp_path / "mine"
    (mine / "notebooks").mkdir(parents=True)
    (mine / "pyproject.toml").write_text('[build-system]\nrequires = []\n\n[project]\nname = "fp16lab"\n')
    assert paths.repo_root(mine / "notebooks") == mine.resolve()
    monkeypatch.setenv(paths.ROOT_ENV, str(other))
    with pytest.raises(FileNotFoundError, match="FP16LAB_ROOT=.* is not the fp16lab repository"):
        paths.repo_root()
    monkeypatch.setenv(paths.ROOT_ENV, str(mine))
    assert paths.repo_root(other) == mine.resolve()  # the variable wins over the search


def test_replace_block_rewrites_only_between_its_markers(tmp_path):
    guide = tmp_path / "guide.md"
    guide.write_text("intro\n<!-- a -->\nold\n<!-- b -->\nafter <!-- a -->\n")
    assert paths.replace_block(guide, "<!-- a -->", "<!-- b -->", "new") is True
    assert guide.read_text() == "intro\n<!-- a -->\nnew\n<!-- b -->\nafter <!-- a -->\n"
    assert paths.replace_block(guide, "<!-- a -->", "<!-- b -->", "new") is False
    before = guide.read_text()
    for start, end in (("<!-- c -->", "<!-- b -->"), ("<!-- b -->", "<!-- a -->x")):
        with pytest.raises(ValueError, match="lacks the markers"):
            paths.replace_block(guide, start, end, "x")
    assert guide.read_text() == before


def test_help_is_plain_text_for_every_command(capsys):
    """No Sphinx markup (``x``, :func:`y`) reaches the terminal, in any command's help."""
    from fp16lab.__main__ import SUBCOMMANDS

    for name, _ in SUBCOMMANDS:
        with pytest.raises(SystemExit, match="^0$"):
            main([name, "--help"])
        out = capsys.readouterr().out
        assert "``" not in out and ":func:" not in out and ":mod:" not in out, (name, out[:400])


@pytest.mark.parametrize("argv", [["doctor"], ["--help"]])
def test_a_python_without_the_dependencies_is_told_which_python_to_use(argv):
    """The README's commands from a fresh clone with the system python: one line naming the venv's python."""
    hide = (f"import sys, runpy; sys.modules['pandas'] = None; sys.argv[1:] = {argv!r}; "
            "runpy.run_module('fp16lab', run_name='__main__')")
    out = subprocess.run([sys.executable, "-c", hide], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 1, out.stdout + out.stderr
    assert "Traceback" not in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
    assert f".venv/bin/python -m fp16lab {' '.join(argv)}`" in out.stderr and "'pandas'" in out.stderr
