"""Pinned installs: constraints.txt is what this environment runs, and the wheelhouse commands for each platform.

The real download and offline install run in CI's CPU-only lane (.ci/cpu-lane.sh): a test downloads nothing.
"""

from __future__ import annotations

import importlib.metadata as md
import re
import sys
from pathlib import Path

import pytest
import torch
from packaging.markers import Marker
from packaging.requirements import Requirement

from fp16lab.course import wheelhouse

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "constraints.txt"


def _pins() -> list[Requirement]:
    return [Requirement(line) for line in LOCK.read_text().splitlines() if line.strip() and not line.startswith("#")]


def test_every_pin_is_exact_and_every_direct_dependency_is_pinned():
    pins = _pins()
    assert all(len(r.specifier) == 1 and next(iter(r.specifier)).operator == "==" for r in pins)
    names = {r.name.lower().replace("_", "-") for r in pins}
    for req in wheelhouse.requirements(ROOT):
        name = Requirement(req).name.lower().replace("_", "-")
        assert name in names, f"{name} (a dependency in pyproject.toml) has no tested version in constraints.txt"
        pin = next(r for r in pins if r.name.lower().replace("_", "-") == name)
        assert next(iter(pin.specifier)).version in Requirement(req).specifier, f"{pin} breaks pyproject's {req}"


def test_this_environment_runs_the_pinned_versions():
    """What the constraints pin is what these tests run on (in the CPU-only lane, less its own torch)."""
    try:
        md.version("fp16lab")
    except md.PackageNotFoundError:  # a bare checkout on someone else's Python (a lent GPU with its own torch)
        pytest.skip("fp16lab is not pip-installed here, so this is not make setup's environment the pins describe")
    cpu_lane = torch.version.cuda is None
    wrong = []
    for r in _pins():
        if r.marker is not None and not r.marker.evaluate():
            continue
        if cpu_lane and r.name in ("torch", "torchvision"):
            continue
        try:
            have = md.version(r.name)
        except md.PackageNotFoundError:
            continue  # e.g. the CUDA libraries beside a CPU-only torch
        if have.split("+")[0] not in r.specifier:
            wrong.append(f"{r.name}: installed {have}, pinned {r.specifier}")
    assert not wrong, "constraints.txt does not match the tested environment: " + "; ".join(wrong)


def test_setup_the_wheelhouse_and_ci_install_from_the_constraints():
    make = (ROOT / "Makefile").read_text()
    assert "LOCK   ?= constraints.txt" in make and "$(PIN) -e '.[dev]'" in make and "$(PIN) torch torchvision" in make
    lane = (ROOT / ".ci" / "cpu-lane.sh").read_text()
    assert "-c $V/constraints-cpu.txt -r $V/requirements.txt" in lane and "--no-deps -c $V/constraints-cpu.txt -e ." in lane
    assert 'project["optional-dependencies"]["dev"]' in lane and "workshop wheelhouse" in lane and "--no-index" in lane
    assert all(wheelhouse.wheelhouse_commands("w", p, root=ROOT)[-1].count("-c") == 1 for p in wheelhouse.PLATFORMS)
    assert Marker('python_version >= "3.11"').evaluate() == (sys.version_info >= (3, 11))


@pytest.mark.parametrize("platform,tag,index", [
    ("linux", "manylinux_2_28_x86_64", None),
    ("linux-cpu", "manylinux_2_28_x86_64", "https://download.pytorch.org/whl/cpu"),
    ("windows", "win_amd64", None),
    ("macos", "macosx_14_0_arm64", None),
])
def test_a_wheelhouse_for_another_platform(platform, tag, index, tmp_path):
    cmds = wheelhouse.wheelhouse_commands(tmp_path / "w", platform, python="3.12", root=ROOT)
    for cmd in cmds:
        assert cmd[1:4] == ["-m", "pip", "download"] and str(tmp_path / "w") in cmd
        assert ["--platform", tag] == cmd[cmd.index("--platform"):cmd.index("--platform") + 2]
        assert "--only-binary=:all:" in cmd and ["--python-version", "3.12"] == cmd[cmd.index("--python-version"):][:2]
        assert "cp312" in cmd
    assert "setuptools>=64" in cmds[0], "the editable install's build step works offline"
    last = cmds[-1]
    assert str(ROOT / "constraints.txt") in last and any(r.startswith("jupyterlab") for r in last)
    if index:
        assert cmds[1][cmds[1].index("--index-url") + 1] == index and "--find-links" in last, \
            "torch from the CPU index first; the rest finds it in the wheelhouse"
    else:
        assert not any("--index-url" in c for c in cmds)


def test_the_wheelhouse_refuses_before_downloading(tmp_path):
    with pytest.raises(ValueError, match="platform must be one of"):
        wheelhouse.wheelhouse_commands(tmp_path, "solaris", root=ROOT)
    with pytest.raises(ValueError, match="python must be a version such as '3.11'"):
        wheelhouse.wheelhouse_commands(tmp_path, "windows", python="3", root=ROOT)
    with pytest.raises(ValueError, match="needs a --platform other than 'current'"):
        wheelhouse.wheelhouse_commands(tmp_path, "current", python="3.9", root=ROOT)
    with pytest.raises(FileNotFoundError, match="constraints: .*none.txt' does not exist"):
        wheelhouse.wheelhouse_commands(tmp_path, "linux", constraints=tmp_path / "none.txt", root=ROOT)
    assert not any(tmp_path.iterdir())


def test_students_install_commands_per_platform():
    assert any("--no-index --find-links wheelhouse" in c and c.startswith(".venv\\Scripts\\python")
               for c in wheelhouse.install_commands("wheelhouse", "windows"))
    assert any(c.startswith("touch .venv/.fp16lab-installed") for c in wheelhouse.install_commands("wh", "linux"))


def test_the_wheelhouse_command_line_dry_run(tmp_path, capsys):
    from fp16lab.__main__ import main

    assert main(["workshop", "wheelhouse", str(tmp_path / "w"), "--platform", "windows", "--python", "3.11",
                 "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert len(out.splitlines()) == 2 and "win_amd64" in out and not (tmp_path / "w").exists()
    assert re.search(r"-c \S+constraints.txt", out)
