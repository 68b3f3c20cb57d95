"""The package's shape: no import cycles (lazy imports inside functions count too), small modules and functions."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "fp16lab"
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80
# Modules and functions allowed past the limits, each with the reason (keep this list short).
LONG_MODULES: dict[str, str] = {}
LONG_FUNCTIONS: dict[str, str] = {}


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(PKG.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imports(name: str, path: Path, known: set[str]) -> set[str]:
    """Every fp16lab module ``name`` imports, at any depth (a lazy import is still a dependency)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            targets = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for t in targets:
            while t and t not in known:
                t = t.rpartition(".")[0]
            if t and t != name and t != "fp16lab":
                found.add(t)
    return found


def test_no_import_cycles():
    mods = _modules()
    graph = {m: _imports(m, p, set(mods)) for m, p in mods.items()}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(m: str) -> None:
        state[m] = 1
        stack.append(m)
        for dep in sorted(graph[m]):
            if state.get(dep) == 1:
                cycle = stack[stack.index(dep):] + [dep]
                pytest.fail("import cycle: " + " -> ".join(cycle))
            if dep not in state:
                visit(dep)
        stack.pop()
        state[m] = 2

    for m in mods:
        if m not in state:
            visit(m)


def test_bottom_layer_imports_nothing_of_fp16lab():
    mods = _modules()
    for bottom in ("fp16lab.device", "fp16lab.checks"):
        assert _imports(bottom, mods[bottom], set(mods)) == set(), bottom
    assert _imports("fp16lab.hardware", mods["fp16lab.hardware"], set(mods)) == {"fp16lab.device"}


def test_only_the_hardware_seam_asks_torch_for_gpu_facts():
    asks = ("get_device_properties", "get_device_capability", "get_device_name", "mem_get_info")
    for name, path in _modules().items():
        if name == "fp16lab.hardware":
            continue
        text = path.read_text(encoding="utf-8")
        for a in asks:
            assert f"cuda.{a}" not in text, f"{name} calls torch.cuda.{a}: read fp16lab.hardware.gpu_facts instead"


def test_modules_and_functions_are_small():
    problems = []
    for name, path in _modules().items():
        lines = path.read_text(encoding="utf-8").splitlines()
        if len(lines) > MAX_MODULE_LINES and name not in LONG_MODULES:
            problems.append(f"{name}: {len(lines)} lines (> {MAX_MODULE_LINES})")
        for node in ast.walk(ast.parse("\n".join(lines))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = (node.end_lineno or node.lineno) - node.lineno + 1
                key = f"{name}.{node.name}"
                if n > MAX_FUNCTION_LINES and key not in LONG_FUNCTIONS:
                    problems.append(f"{key}: {n} lines (> {MAX_FUNCTION_LINES})")
    assert not problems, "split these (or add them with a reason to LONG_*):\n" + "\n".join(problems)
