"""The package's shape: no import cycles (lazy imports inside functions count too), small modules and functions."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parent.parent / "fp16lab"
MAX_MODULE_LINES = 600
MAX_FUNCTION_LINES = 80
# Modules and functions allowed past the limits, each with the reason (keep this list short).
LONG_MODULES: dict[str, str] = {
    "fp16lab.labs.runtime.i18n_hints": "a catalogue of translated strings, one block per lesson: data, no code",
}
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


# ---- the three areas (issue "small again"): the learner library, fp16lab.labs, fp16lab.course

MAX_LIBRARY_LINES = 7000
MAX_LIBRARY_MODULES = 14
APART = ("fp16lab.labs", "fp16lab.course")


def _library() -> dict[str, Path]:
    """The learner library: every module outside labs/ and course/ (the command line's entry excluded)."""
    return {m: p for m, p in _modules().items()
            if not m.startswith(APART) and m not in ("fp16lab", "fp16lab.__main__")}


def test_the_library_imports_neither_labs_nor_course():
    mods = _modules()
    for name, path in _library().items():
        bad = {d for d in _imports(name, path, set(mods)) if d.startswith(APART)}
        assert not bad, f"{name} imports {sorted(bad)}: labs and course may import the library, never the reverse"


def test_the_library_stays_small():
    lib = _library()
    lines = sum(len(p.read_text(encoding="utf-8").splitlines()) for p in lib.values())
    top = {m.split(".")[1] for m in lib}
    assert lines <= MAX_LIBRARY_LINES, f"the learner library has {lines} lines (> {MAX_LIBRARY_LINES})"
    assert len(top) <= MAX_LIBRARY_MODULES, f"{len(top)} top-level modules (> {MAX_LIBRARY_MODULES}): {sorted(top)}"


def _calls(path: Path) -> list[tuple[str, int]]:
    """Dotted names of every call and every ``from X import Y`` in a module, with their lines."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            parts, f = [], node.func
            while isinstance(f, ast.Attribute):
                parts.append(f.attr)
                f = f.value
            if isinstance(f, ast.Name):
                out.append((".".join([f.id, *reversed(parts)]), node.lineno))
        elif isinstance(node, ast.ImportFrom) and node.module:
            out += [(f"{node.module}.{a.name}", node.lineno) for a in node.names]
    return out


# Code quoted verbatim from elsewhere, allowed past a choke point (keep this list short, with the reason).
VERBATIM = {
    ("fp16lab.labs.benchmark.steps", "torch.cuda.amp.autocast"):
        "the article's training loop, line for line, deprecated API and all (lesson 06 times it as written)",
    ("fp16lab.labs.amp_loop", "torch.autocast"):
        "lesson 02's five-line hand-written AMP step, the baseline that fp16lab.train_step's price is measured against",
    ("fp16lab.labs.benchmark.steps", "GradScaler"): "the article's loop: its GradScaler() line as written",
    ("fp16lab.labs.benchmark.steps", "torch.cuda.amp.GradScaler"): "the article's loop: its import, as written",
    ("fp16lab.labs.amp_loop", "torch.amp.GradScaler"): "lesson 02's hand-written AMP step (as above)",
    ("fp16lab.course.answers.l02", "torch.amp.GradScaler"): "lesson 02's exercise answer: the loop a learner writes",
}


@pytest.mark.parametrize(("what", "names", "home"), [
    ("torch.autocast", {"torch.autocast", "torch.amp.autocast", "torch.cuda.amp.autocast", "torch.cpu.amp.autocast",
                        "torch.amp.autocast_mode.autocast"}, "fp16lab.precision"),
    ("the profiler", {"torch.profiler.profile", "torch.autograd.profiler.profile"}, "fp16lab.timing"),
    ("a GradScaler", {"torch.amp.GradScaler", "torch.cuda.amp.GradScaler", "torch.amp.grad_scaler.GradScaler",
                      "GradScaler"}, "fp16lab.train.step"),
])
def test_one_choke_point(what, names, home):
    where = [f"{m}:{line}" for m, p in _modules().items() if m != home
             for call, line in _calls(p) if call in names and (m, call) not in VERBATIM]
    assert not where, f"{what} is built only in {home}; also in: {', '.join(where)}"


# ---- issue 42: callbacks own their work; fit's plan and run are defined once


def test_fit_names_no_callback_class_and_its_plan_and_run_are_defined_once():
    import inspect
    from collections import Counter

    import fp16lab.train.callbacks as cbs
    import fp16lab.train.loop as loop

    classes = {n for n, o in vars(cbs).items() if isinstance(o, type) and issubclass(o, cbs.Callback)}
    body = ast.parse(inspect.getsource(loop.fit)).body[0].body  # the statements, not the annotations
    used = {n.id for stmt in body for n in ast.walk(stmt) if isinstance(n, ast.Name)}
    assert not used & classes, f"fit's body names {sorted(used & classes)}: the callbacks own their work"
    defs = Counter(node.name for p in (PKG / "train").glob("*.py")
                   for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))) if isinstance(node, ast.ClassDef))
    assert defs["Plan"] == defs["Run"] == 1 and defs["_Plan"] == defs["_Run"] == 0, defs


# ---- issue 42: the benchmark's options are spelled once (BenchOptions), read by the CLI, the plan and the report

def test_the_benchmarks_options_are_one_dataclass():
    import inspect

    from fp16lab.labs.benchmark import cli, report, run
    from fp16lab.labs.benchmark.options import OPTION_NAMES, BenchOptions

    assert list(inspect.signature(run.make_plan).parameters) == ["options"]       # the plan reads BenchOptions
    params = inspect.signature(run.run_benchmark).parameters
    named = [n for n, p in params.items() if p.kind is not p.VAR_KEYWORD]
    assert named[:3] == list(OPTION_NAMES[:3]) and len(named) <= 7, named          # the rest are **options
    assert isinstance(cli.REFERENCE, BenchOptions) and "BenchOptions" in inspect.getsource(cli._options)
    assert "res.options()" in inspect.getsource(cli._report) and hasattr(report.BenchResult, "options")
    plan = run.make_plan(BenchOptions("resnet18", ["fp32_default"], [2], device="cpu"))
    # what a run records (and the report reads back) under the same names; settings are stored flat,
    # the device with the run's metadata, precisions as the configurations they kept
    assert set(plan.recorded()) >= set(OPTION_NAMES) - {"settings", "device", "precisions"}


# ---- issue 42: one direction between the areas (library <- labs <- course), no private wiring

def test_labs_never_import_course():
    mods = _modules()
    bad = {name for name, path in mods.items() if name.startswith("fp16lab.labs")
           and any(d.startswith("fp16lab.course") for d in _imports(name, path, set(mods)))}
    assert not bad, (f"labs import the course: {sorted(bad)}; what both need belongs in fp16lab.labs.runtime "
                     "(the course imports labs, never the reverse)")


def _private_imports(path: Path) -> list[str]:
    """``from fp16lab.x import _name`` and imports of a private module (``fp16lab.debug._common``)."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("fp16lab"):
            parts = [*(node.module or "").split("."), *(a.name for a in node.names)]
            out += [f"{node.module}.{a.name}" for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
            if any(p.startswith("_") and not p.startswith("__") for p in parts[:-len(node.names)]):
                out.append(str(node.module))
        elif isinstance(node, ast.Import):
            out += [a.name for a in node.names if a.name.startswith("fp16lab")
                    and any(p.startswith("_") and not p.startswith("__") for p in a.name.split("."))]
    return out


def test_nothing_imports_a_private_name_of_another_module():
    found = {name: hits for name, path in _modules().items() if (hits := _private_imports(path))}
    assert not found, f"private names imported across modules (make them public, or keep the code in one module): {found}"
