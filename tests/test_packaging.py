"""pyproject.toml and environment.yml name the same packages, so they cannot drift."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

import fp16lab

tomllib = pytest.importorskip("tomllib", reason="tomllib is in the standard library from Python 3.11")

ROOT = Path(__file__).resolve().parent.parent
CONDA_TO_PIP = {"pytorch": "torch"}  # conda-forge names that differ from PyPI's
CONDA_ONLY = {"python", "pip"}


def _name(req: str) -> str:
    return re.split(r"[<>=!~ \[;]", req.strip(), maxsplit=1)[0].lower().replace("_", "-")


def pyproject_packages(extras: tuple[str, ...] = ("dev",)) -> set[str]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    reqs = list(data["dependencies"])
    for extra in extras:
        reqs += list(data["optional-dependencies"][extra])
    return {_name(r) for r in reqs}


def environment_packages() -> set[str]:
    """Conda packages (as PyPI names) and the pip section's packages (PyPI-only ones such as torchao)."""
    names, in_deps = set(), False
    for line in (ROOT / "environment.yml").read_text().splitlines():
        if line.startswith("dependencies:"):
            in_deps = True
            continue
        m = re.match(r"^  - ([A-Za-z0-9_.\-]+)", line) or re.match(r"^      - ([A-Za-z][A-Za-z0-9_.\-]*)", line)
        if in_deps and m and not line.strip().startswith("- pip:"):
            names.add(CONDA_TO_PIP.get(m.group(1).lower(), m.group(1).lower()))
    return names - CONDA_ONLY


def _extras() -> tuple[str, ...]:
    return tuple(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])


def test_same_packages_in_both_files():
    """environment.yml installs the dependencies and every extra (dev, fp8, site), nothing else."""
    py, conda = pyproject_packages(_extras()), environment_packages()
    assert py == conda, f"only in pyproject: {sorted(py - conda)}; only in environment.yml: {sorted(conda - py)}"


def test_every_optional_extra_is_in_the_conda_environment():
    extras = _extras()
    assert {"fp8", "site"} <= set(extras)  # lesson 09's torchao; the website's tools (make site)
    missing = pyproject_packages(extras) - environment_packages()
    assert not missing, f"extras not installed by environment.yml: {sorted(missing)}"


def test_environment_installs_this_repo():
    assert "- -e .[dev]" in (ROOT / "environment.yml").read_text()


def test_version_and_typed_marker():
    assert re.fullmatch(r"\d+\.\d+\.\d+", fp16lab.__version__)
    assert (ROOT / "fp16lab" / "py.typed").exists()


def test_the_curated_top_level_imports_every_name():
    """``from fp16lab import fit`` works for each curated name, and ``fp16lab.<submodule>`` loads lazily."""
    names = set(fp16lab.__all__) - {"__version__"}
    assert 15 <= len(names) <= 40
    for name in names:
        assert getattr(fp16lab, name) is not None, name
    assert fp16lab.train.fit is fp16lab.fit
    out = subprocess.run([sys.executable, "-c", "import fp16lab, sys; print('torch' in sys.modules)"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", "import fp16lab must stay light (names load on first use)"
    with pytest.raises(AttributeError, match="no attribute 'bench'"):
        fp16lab.bench  # noqa: B018  (the labs are fp16lab.labs.*)


def test_course_tooling_is_apart():
    """The course tools live in fp16lab.course; the learner library does not import them."""
    import fp16lab.course

    course = {p.stem for p in (ROOT / "fp16lab" / "course").glob("*.py") if not p.stem.startswith("_")}
    assert set(fp16lab.course.__all__) == course


def test_license_matches_pyproject():
    assert (ROOT / "LICENSE").read_text().startswith("MIT License")
    assert 'license = { text = "MIT" }' in (ROOT / "pyproject.toml").read_text()


def test_ci_calls_the_readme_test_command():
    readme = (ROOT / "README.md").read_text()
    assert "make test" in readme.split("## ", 2)[1]  # the Quickstart section
    assert "make test" in (ROOT / ".ci" / "run").read_text()
