"""An offline wheelhouse for a room without internet: ``python -m fp16lab workshop wheelhouse DEST``.

On one machine with internet, pip downloads every wheel the course needs, at the tested versions of
``constraints.txt``, for the students' platform (pip's ``--platform``/``--python-version``, so a Linux
machine can prepare the Windows or macOS set):

- ``linux``: Linux x86-64 with PyPI's PyTorch, the CUDA build (its CUDA libraries come as wheels, a few GB);
- ``linux-cpu``: Linux x86-64 with the CPU-only PyTorch from download.pytorch.org/whl/cpu (much smaller);
- ``windows``: Windows x86-64 (PyPI's PyTorch for Windows is CPU-only; ``--torch-index`` with
  https://download.pytorch.org/whl/cu126 for NVIDIA GPUs);
- ``macos``: macOS on Apple silicon;
- ``current``: this machine's own platform and Python.

Students then install with the network off: ``python -m pip install --no-index --find-links DEST -e ".[dev]"``
from the checkout (the commands are written to ``DEST/INSTALL.txt``). pip, setuptools and wheel are
downloaded too, for the editable install's build step.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from fp16lab import checks
from fp16lab.course import paths as _paths

__all__ = ["PLATFORMS", "TORCH_CPU_INDEX", "requirements", "wheelhouse_commands", "install_commands",
           "build_wheelhouse"]

TORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"


@dataclass(frozen=True)
class Platform:
    tags: tuple[str, ...]  # pip --platform values (pip widens a manylinux or macOS tag to the older ones)
    torch_index: str | None = None  # where torch and torchvision come from (None: PyPI)
    note: str = ""


PLATFORMS: dict[str, Platform] = {
    "linux": Platform(("manylinux_2_28_x86_64",), None, "PyPI's PyTorch, CUDA build (a few GB)"),
    "linux-cpu": Platform(("manylinux_2_28_x86_64",), TORCH_CPU_INDEX, "CPU-only PyTorch"),
    "windows": Platform(("win_amd64",), None, "PyPI's PyTorch for Windows is CPU-only"),
    "macos": Platform(("macosx_14_0_arm64",), None, "Apple silicon"),
    "current": Platform((), None, "this machine's platform and Python"),
}
TORCH_FAMILY = ("torch", "torchvision")


def _array(text: str, key: str) -> list[str]:
    """The strings of a TOML array ``key = [...]`` (pyproject's dependency lists; no tomllib on Python 3.10)."""
    m = re.search(rf"^{re.escape(key)}\s*=\s*\[(.*?)^\]", text, flags=re.M | re.S)
    if not m:
        raise ValueError(f"pyproject.toml has no {key} = [...] list")
    return re.findall(r'^\s*"([^"]+)"', m.group(1), flags=re.M)


def requirements(root: "str | Path | None" = None, *, extra: str | None = "dev") -> list[str]:
    """The project's dependencies and its ``extra``'s (None: none), as pyproject.toml lists them."""
    base = checks.existing_path("root", root, kind="dir") if root is not None else _paths.repo_root()
    if not (base / "pyproject.toml").is_file():
        raise ValueError(f"root {str(base)!r} is not the repository: it has no pyproject.toml")
    text = (base / "pyproject.toml").read_text(encoding="utf-8")
    if extra is None:
        return _array(text, "dependencies")
    return [*_array(text, "dependencies"), *_array(text, checks.one_of("extra", extra, _extras(text)))]


def _extras(text: str) -> tuple[str, ...]:
    """The names of pyproject.toml's optional-dependency lists."""
    m = re.search(r"^\[project\.optional-dependencies\]\s*$(.*?)(?=^\[|\Z)", text, flags=re.M | re.S)
    return tuple(re.findall(r"^([A-Za-z0-9_.-]+)\s*=\s*\[", m.group(1), flags=re.M)) if m else ()


def _platform_args(platform: Platform, python: str) -> list[str]:
    if not platform.tags:
        return []
    abi = "cp" + python.replace(".", "")
    return [*(a for t in platform.tags for a in ("--platform", t)), "--python-version", python,
            "--implementation", "cp", "--abi", abi, "--abi", "abi3", "--abi", "none", "--only-binary=:all:"]


def wheelhouse_commands(dest: "str | Path", platform: str = "current", *, python: str | None = None,
                        constraints: "str | Path | None" = None, torch_index: str | None = None,
                        root: "str | Path | None" = None) -> list[list[str]]:
    """The pip commands that fill ``dest`` for ``platform`` (see :data:`PLATFORMS`), in order.

    ``python``: the students' Python as ``3.11`` (default: this one's); ``constraints``: default the
    repository's constraints.txt; ``torch_index``: where torch and torchvision come from (default: the
    platform's, PyPI for most). torch and torchvision come first, so the rest finds them in ``dest``.
    """
    name = checks.one_of("platform", platform, tuple(PLATFORMS))
    plat = PLATFORMS[name]
    py = checks.text("python", python) if python is not None else f"{sys.version_info[0]}.{sys.version_info[1]}"
    if not re.fullmatch(r"3\.\d{1,2}", py):
        raise ValueError(f"python must be a version such as '3.11', got {python!r}")
    if name == "current" and python is not None and py != f"{sys.version_info[0]}.{sys.version_info[1]}":
        raise ValueError(f"python {python!r} needs a --platform other than 'current' (current is this Python's)")
    base = checks.path("root", root) if root is not None else _paths.repo_root()
    lock = checks.existing_path("constraints", constraints if constraints is not None else base / "constraints.txt",
                                kind="file")
    index = checks.text("torch_index", torch_index) if torch_index is not None else plat.torch_index
    target = checks.path("dest", dest)
    if target.exists() and not target.is_dir():
        raise ValueError(f"dest {str(target)!r} is a file: name a folder for the wheels (made when missing)")
    out = str(target)
    pip = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--dest", out,
           *_platform_args(plat, py)]
    reqs = requirements(base)
    torch = [r for r in reqs if re.split(r"[<>=!~ ;\[]", r, maxsplit=1)[0] in TORCH_FAMILY]
    cmds = [[*pip, "pip", "setuptools>=64", "wheel"]]
    if index:
        cmds.append([*pip, "-c", str(lock), "--index-url", index, *torch])
    cmds.append([*pip, "-c", str(lock), "--find-links", out, *reqs])
    return cmds


def install_commands(wheelhouse: str = "wheelhouse", platform: str = "current") -> list[str]:
    """What students type, network off, from the repository root (POSIX or Windows paths)."""
    name = checks.one_of("platform", platform, tuple(PLATFORMS))
    wheelhouse = checks.text("wheelhouse", wheelhouse).strip()
    if not wheelhouse or any(c.isspace() for c in wheelhouse):
        raise ValueError(f"wheelhouse must be a folder name without spaces (it goes into the printed commands), "
                         f"got {wheelhouse!r}")
    if name == "windows":
        return ["py -m venv .venv",
                f'.venv\\Scripts\\python -m pip install --no-index --find-links {wheelhouse} -e ".[dev]"',
                ".venv\\Scripts\\python -m fp16lab doctor"]
    return ["python3 -m venv .venv",
            f".venv/bin/python -m pip install --no-index --find-links {wheelhouse} -e '.[dev]'",
            "touch .venv/.fp16lab-installed   # tells `make` that set-up is done",
            ".venv/bin/python -m fp16lab doctor"]


def build_wheelhouse(dest: "str | Path", platform: str = "current", *, python: str | None = None,
                     constraints: "str | Path | None" = None, torch_index: str | None = None,
                     dry_run: bool = False) -> list[list[str]]:
    """Run :func:`wheelhouse_commands` (or only list them with ``dry_run``); write DEST/INSTALL.txt."""
    cmds = wheelhouse_commands(dest, platform, python=python, constraints=constraints, torch_index=torch_index)
    if checks.boolean("dry_run", dry_run):
        return cmds
    out = Path(dest)
    out.mkdir(parents=True, exist_ok=True)
    for cmd in cmds:
        print("==> " + " ".join(cmd[2:]), flush=True)
        done = subprocess.run(cmd)
        if done.returncode != 0:
            raise RuntimeError(f"pip download failed (exit {done.returncode}): {' '.join(cmd[2:])}")
    (out / "INSTALL.txt").write_text(
        f"Offline install of fp16lab ({platform}: {PLATFORMS[platform].note}), from the repository root:\n\n"
        + "\n".join(install_commands(out.name, platform)) + "\n", encoding="utf-8")
    return cmds
