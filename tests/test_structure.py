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


CALLBACK_CLASSES = {"Evaluate", "Checkpoint", "Schedule", "DivergenceGuard", "ProgressBar"}


def _names_used(tree: ast.AST) -> set[str]:
    """Every name a module's code uses: variables, attributes, imported names (docstrings and comments are not code)."""
    out: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Name):
            out.add(n.id)
        elif isinstance(n, ast.Attribute):
            out.add(n.attr)
        elif isinstance(n, ast.alias):
            out.add((n.asname or n.name).rpartition(".")[2])
    return out


def test_fit_names_no_callback_class_and_its_plan_and_run_are_defined_once():
    import inspect
    from collections import Counter

    import fp16lab.train.callbacks as cbs
    import fp16lab.train.loop as loop

    classes = {n for n, o in vars(cbs).items() if isinstance(o, type) and issubclass(o, cbs.Callback)} - {"Callback"}
    assert classes == CALLBACK_CLASSES, classes
    # fit, the helpers it calls in loop.py and the run it drives (run.py) name no callback class anywhere, not
    # even in an import: each callback's work is its own (Schedule steps, Checkpoint resumes and saves)
    for mod in ("loop", "run"):
        used = _names_used(ast.parse((PKG / "train" / f"{mod}.py").read_text(encoding="utf-8")))
        assert not used & classes, f"fp16lab.train.{mod} names {sorted(used & classes)}: the callbacks own their work"
    # the one default, in one line of fit_callbacks, and documented in fit's docstring
    src = inspect.getsource(cbs.fit_callbacks)
    assert [ln.strip() for ln in src.splitlines() if "DivergenceGuard()" in ln and "append" in ln] == \
        ["given.append(DivergenceGuard())  # the guard always runs"]
    assert "DivergenceGuard" in (loop.fit.__doc__ or "") and "fit_callbacks" in (loop.fit.__doc__ or "")
    defs = Counter(node.name for p in (PKG / "train").glob("*.py")
                   for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))) if isinstance(node, ast.ClassDef))
    assert defs["Plan"] == defs["Run"] == 1 and defs["_Plan"] == defs["_Run"] == 0, defs
    protocols = [f"{p.name}:{node.lineno}" for p in (PKG / "train").glob("*.py")
                 for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))) if isinstance(node, ast.ClassDef)
                 and any("Protocol" in ast.unparse(b) for b in node.bases)]
    assert not protocols, f"a second spelling of fit's Plan/Run as a Protocol: {protocols}"


# ---- issue 42: one AMP step, public and sync-free, the only place a scaler is driven

SCALER_DRIVES = {"scale", "unscale_", "step", "update"}
# the bare recipe quoted verbatim elsewhere (see VERBATIM): the subject of lessons 02 and 06, and lesson 02's answer
DRIVES_VERBATIM = {
    "fp16lab.labs.benchmark.steps": "the article's loop, line for line (lesson 06 times it as written)",
    "fp16lab.labs.amp_loop": "lesson 02's five-line hand-written AMP step, the baseline train_step is measured against",
    "fp16lab.course.answers.l02": "lesson 02's exercise answer: the loop a learner writes",
}


def _scaler_calls(path: Path) -> list[tuple[str, int]]:
    """Calls that drive a GradScaler: ``<...scaler...>.scale/step/update(...)`` and any ``.unscale_(...)``."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in SCALER_DRIVES:
            owner = ast.unparse(node.func.value).lower()
            if node.func.attr == "unscale_" or "scaler" in owner:
                out.append((f"{owner}.{node.func.attr}", node.lineno))
    return out


def test_only_amp_step_drives_a_scaler():
    import inspect

    import fp16lab.train.step as step

    lo, hi = inspect.getsourcelines(step.amp_step)[1], None
    hi = lo + len(inspect.getsourcelines(step.amp_step)[0]) - 1
    readers = inspect.getsourcelines(step._scale_tensor)  # reads the scale (scale() of a 1): drives nothing
    reader_lines = range(readers[1], readers[1] + len(readers[0]))
    where = []
    for m, p in _modules().items():
        if m in DRIVES_VERBATIM:
            continue
        for call, line in _scaler_calls(p):
            inside = m == "fp16lab.train.step" and (lo <= line <= hi or (line in reader_lines and call.endswith(".scale")))
            if not inside:
                where.append(f"{m}:{line} {call}")
    assert not where, f"a GradScaler is driven only by fp16lab.train.step.amp_step; also at: {where}"
    assert {c.rpartition(".")[2] for c, line in _scaler_calls(PKG / "train" / "step.py") if lo <= line <= hi} == \
        SCALER_DRIVES  # and amp_step does drive it: scale, unscale_, step, update


def test_the_amp_step_is_public_short_and_never_reads_the_device():
    import inspect

    import fp16lab
    import fp16lab.train
    import fp16lab.train.step as step

    assert "amp_step" in fp16lab.__all__ and "amp_step" in fp16lab.train.__all__
    node = ast.parse(inspect.getsource(step.amp_step)).body[0]
    body = node.body[1:] if isinstance(node.body[0], ast.Expr) else node.body  # without the docstring
    lines = {ln for stmt in body for ln in range(stmt.lineno, (stmt.end_lineno or stmt.lineno) + 1)}
    assert len(lines) <= 15, f"amp_step's body has {len(lines)} lines: the recipe fits on one screen (about a dozen)"
    # a host read of a device value (a sync): .item(), .tolist(), .cpu(), float()/int()/bool() of a tensor,
    # the scaler's get_scale(), an explicit synchronize
    reads = {"item", "tolist", "cpu", "numpy", "get_scale", "_get_scale_async", "synchronize", "float", "int", "bool"}
    calls = {ast.unparse(n.func).rpartition(".")[2] for stmt in body for n in ast.walk(stmt) if isinstance(n, ast.Call)}
    assert not calls & reads, f"amp_step reads the device back: {sorted(calls & reads)}"
    # train_step checks once and leaves the step to amp_step (through parsed_step, fit's path too)
    checked = inspect.getsource(step.parsed_step)
    assert "amp_step(" in checked and "split_batch(" not in checked and "check_" not in checked.replace("_check_loss", "")


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


def test_the_bench_command_line_is_built_from_the_options_fields():
    import argparse
    import inspect
    from dataclasses import fields

    from fp16lab.labs.benchmark import cli
    from fp16lab.labs.benchmark.configs import BenchSettings
    from fp16lab.labs.benchmark.options import BenchOptions

    parser = argparse.ArgumentParser()
    cli.add_bench_parser(parser.add_subparsers(dest="command"))
    bench = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["bench"]
    dests = {a.dest for a in bench._actions} - {"help"}
    fielded = {f.metadata["flag"].dest(f.name): f.name for cls in (BenchOptions, BenchSettings) for f in fields(cls)
               if "flag" in f.metadata}
    # every option but settings (its own fields have flags) is on the command line, under the field's name
    assert {f.name for f in fields(BenchOptions) if "flag" not in f.metadata} == {"settings"}
    assert dests == set(fielded) | set(cli.CLI_FLAGS), dests ^ (set(fielded) | set(cli.CLI_FLAGS))
    # and no flag is spelled a second time in the command line's module
    src = inspect.getsource(cli)
    for f in [*(f.metadata["flag"] for cls in (BenchOptions, BenchSettings) for f in fields(cls) if "flag" in f.metadata)]:
        assert f"{f.spelling}\"" not in src and f"{f.spelling}'" not in src, f"cli.py spells {f.spelling} again"
    assert "add_argument(\"--" not in src and "a(\"--" not in src


# ---- issue 42: one direction between the areas (library <- labs <- course), no private wiring

def _dynamic_imports(path: Path) -> list[tuple[str, int]]:
    """Modules imported by name at run time: ``importlib.import_module("...")``, ``__import__("...")`` (an
    f-string counts by its constant start), and names in a module-level tuple/list passed to such an import."""
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and ast.unparse(node.func).rpartition(".")[2] in ("import_module", "__import__") \
                and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
                out.append((str(arg.values[0].value), node.lineno))
            elif isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                out.append((arg.value, node.lineno))
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("fp16lab.") \
                and node.value.replace(".", "").replace("_", "").isalnum():
            out.append((node.value, node.lineno))  # a dotted module name as data (e.g. a preload list)
    return out


def test_labs_never_import_course():
    mods = _modules()
    bad = {name for name, path in mods.items() if name.startswith("fp16lab.labs")
           and any(d.startswith("fp16lab.course") for d in _imports(name, path, set(mods)))}
    assert not bad, (f"labs import the course: {sorted(bad)}; what both need belongs in fp16lab.labs.runtime "
                     "(the course imports labs, never the reverse)")
    dynamic = [f"{name}:{line} {target}" for name, path in mods.items() if name.startswith("fp16lab.labs")
               for target, line in _dynamic_imports(path) if target.startswith("fp16lab.course")]
    assert not dynamic, f"labs import the course by name at run time: {dynamic}"
    lib = [f"{name}:{line} {target}" for name, path in _library().items() if name != "fp16lab"
           for target, line in _dynamic_imports(path) if target.startswith(APART)]
    assert not lib, f"the library imports labs or course by name at run time: {lib}"


def _private(part: str) -> bool:
    return part.startswith("_") and not part.startswith("__")


def _private_imports(name: str, path: Path, known: set[str]) -> list[str]:
    """Private names of another fp16lab module reached from ``name``: ``from fp16lab.x import _y`` (also relative:
    ``from ._y import z``, ``from . import _y``), ``import fp16lab.x._y``, and ``mod._y`` where ``mod`` is an
    imported fp16lab module (``import fp16lab.debug as d; d._common``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    pkg = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out, modules = [], {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                up = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                base = ".".join(up + ([base] if base else []))
            if not base.startswith("fp16lab"):
                continue
            if any(_private(p) for p in base.split(".")):
                out.append(base)
            for a in node.names:
                if _private(a.name):
                    out.append(f"{base}.{a.name}")
                if f"{base}.{a.name}" in known:
                    modules[a.asname or a.name] = f"{base}.{a.name}"
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("fp16lab"):
                    if any(_private(p) for p in a.name.split(".")):
                        out.append(a.name)
                    modules[a.asname or "fp16lab"] = a.name if a.asname else "fp16lab"
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            chain, f = [], node.value
            while isinstance(f, ast.Attribute):
                chain.append(f.attr)
                f = f.value
            if isinstance(f, ast.Name) and f.id in modules:
                owner = ".".join([modules[f.id], *reversed(chain)])
                if owner != name:
                    out.append(f"{owner}.{node.attr}")
    return out


def test_nothing_imports_a_private_name_of_another_module():
    mods = _modules()
    found = {name: hits for name, path in mods.items() if (hits := _private_imports(name, path, set(mods)))}
    assert not found, f"private names imported across modules (make them public, or keep the code in one module): {found}"


def test_the_private_name_rule_sees_every_spelling(tmp_path: Path):
    # the rule's own check: each way of reaching another module's private name is caught
    known = {"fp16lab.debug", "fp16lab.debug._common", "fp16lab.train", "fp16lab.train.step", "fp16lab.labs.memory",
             "fp16lab.labs.memory.sweep"}
    spellings = ["from fp16lab.train.step import _scan", "from fp16lab.debug._common import x",
                 "import fp16lab.debug._common", "from ..debug import _common",
                 "from fp16lab.train import step\nstep._scan", "import fp16lab.train.step as s\ns._walk",
                 "import fp16lab\nfp16lab.train.step._scan"]
    for code in spellings:
        f = tmp_path / "sweep.py"
        f.write_text(code + "\n", encoding="utf-8")
        assert _private_imports("fp16lab.labs.memory.sweep", f, known), code
    f.write_text("from fp16lab.train.step import amp_step\nimport torch\ntorch._scaled_mm\n", encoding="utf-8")
    assert _private_imports("fp16lab.labs.memory.sweep", f, known) == []


# ---- issue 42, "done when": the walks of a model through fit and of `python -m fp16lab bench` to the timer go
# between modules through public names only (a traced run: every call that enters another fp16lab module)


def _walk(run) -> tuple[set[tuple[str, str, str]], set[tuple[str, str, str]]]:
    """(every cross-module hop (caller module, callee module, callee qualname), those into a private name)."""
    import sys

    hops: set[tuple[str, str, str]] = set()

    def prof(frame, event, arg):
        if event != "call" or not frame.f_globals.get("__name__", "").startswith("fp16lab"):
            return
        caller = frame.f_back
        while caller is not None and not caller.f_globals.get("__name__", "").startswith("fp16lab"):
            caller = caller.f_back  # through torch and the standard library
        if caller is not None and caller.f_globals["__name__"] != frame.f_globals["__name__"]:
            hops.add((caller.f_globals["__name__"], frame.f_globals["__name__"], frame.f_code.co_qualname))

    sys.setprofile(prof)
    try:
        run()
    finally:
        sys.setprofile(None)
    private = {h for h in hops if any(_private(p) for p in h[2].split(".") if p != "<locals>")}
    return hops, private


@pytest.mark.skipif(__import__("sys").version_info < (3, 11), reason="co_qualname needs Python 3.11")
def test_the_walks_of_fit_and_bench_cross_modules_by_public_names(tmp_path: Path):
    import torch
    from torch import nn

    from fp16lab.__main__ import main
    from fp16lab.train import Checkpoint, Evaluate, Schedule, fit

    def through_fit() -> None:
        torch.manual_seed(0)
        m = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 3))
        x, y = torch.randn(32, 8), torch.randint(0, 3, (32,))
        batches = [(x[i : i + 8], y[i : i + 8]) for i in range(0, 32, 8)]
        o = torch.optim.SGD(m.parameters(), lr=0.1)
        for steps, resume in ((2, False), (4, True)):
            fit(m, batches, o, precision="fp16", steps=steps, accum_steps=1, clip_grad_norm=1.0, callbacks=[
                Schedule(torch.optim.lr_scheduler.StepLR(o, 1)), Evaluate(batches[:1]),
                Checkpoint(tmp_path / "c.pt", resume=resume)])

    hops, private = _walk(through_fit)
    assert ("fp16lab.train.step", "fp16lab.precision", "parsed_autocast") in hops  # it did reach the step
    assert ("fp16lab.train.run", "fp16lab.train.callbacks", "Checkpoint.before_fit") in hops
    assert not private, f"fit's walk enters private names of other modules: {sorted(private)}"

    def through_bench() -> None:
        main(["bench", "--model", "resnet18", "--configs", "fp32_default", "--repeat", "fp32_default", "--rounds",
              "1", "--windows", "1", "--steps", "1", "--warmup", "1", "--image-size", "16", "--batch-sizes", "2",
              "--device", "cpu", "--no-progress", "--output", str(tmp_path / "b.json")])

    hops, private = _walk(through_bench)
    assert ("fp16lab.labs.benchmark.measure", "fp16lab.timing", "time_windows") in hops  # down to the timer
    assert any(h[1:] == ("fp16lab.train.step", "amp_step") for h in hops)  # the bench's hand step is amp_step
    assert not private, f"the bench's walk enters private names of other modules: {sorted(private)}"
