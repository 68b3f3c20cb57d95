"""The workshop agenda: each lesson's measured run time, and the table in the instructor guide.

Run times come from the lessons' own metadata (``metadata.fp16lab.seconds``, written by
``python -m fp16lab outputs run``) and, for lessons whose outputs come from a GPU run, from a
quick-mode run here (:func:`time_quick_mode`). They are kept in notebooks/student/timings.json
and rendered between the agenda markers of notebooks/INSTRUCTORS.md.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fp16lab.checks import existing_path, file_to_write, positive_int, sequence_of
from fp16lab.course import paths as _paths
from fp16lab.course.student import cell_source, exercises

__all__ = [
    "AGENDA_START",
    "AGENDA_END",
    "record_timings",
    "time_quick_mode",
    "agenda_table",
    "update_agenda",
    "agenda_problems",
]

AGENDA_START, AGENDA_END = "<!-- agenda:start -->", "<!-- agenda:end -->"

def _title(nb: Any, fallback: str) -> str:
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            m = re.search(r"^#\s+(.+)$", cell_source(cell), flags=re.M)
            if m:
                return m.group(1).strip()
    return fallback


def _load_timings(path: Path, name: str = "timings_file") -> dict[str, Any]:
    """The timings file's table ({} while it does not exist yet); another file is refused naming ``name``."""
    table = _paths.read_json(name, path, "a timings file (notebooks/student/timings.json)", missing={})
    if not isinstance(table, dict):
        raise ValueError(f"{name}: {str(path)!r} is not a timings file (a JSON object of lessons)")
    return table


def _lesson_files(paths: object) -> list[Path]:
    """``paths`` of :func:`record_timings` and :func:`time_quick_mode`: existing lesson notebooks."""
    return sequence_of("paths", paths, example="['notebooks/02_amp_training_loop.ipynb']",
                       item=_paths.notebook_path)


def record_timings(
    paths: "Sequence[str | Path] | None" = None, timings_file: "str | Path | None" = None
) -> dict[str, Any]:
    """Copy each lesson's measured run time (``metadata.fp16lab.seconds``) into the timings file.

    The file keeps one entry per lesson and mode ("quick"/"full"), so the quick-mode CPU time
    survives when the lesson's outputs are later replaced by a full-mode GPU run.
    Default file: notebooks/student/timings.json (created with its folder when missing). Default
    ``paths=None``: every lesson (and lessons no longer there are dropped). Returns the updated table.
    """
    tfile = _paths.timings_file() if timings_file is None else file_to_write("timings_file", timings_file)
    table = _load_timings(tfile)
    todo = _lesson_files(paths) if paths is not None else _paths.lessons()
    notebooks = [_paths.read_notebook(f"paths[{i}]", lesson) for i, lesson in enumerate(todo)]  # all, before writing
    if not paths:  # forget lessons that no longer exist
        table = {k: v for k, v in table.items() if k in {p.name for p in todo}}
    for lesson, nb in zip(todo, notebooks, strict=True):
        meta = nb.metadata.get("fp16lab") or {}
        entry = table.setdefault(lesson.name, {})
        entry["title"] = _title(nb, lesson.stem)
        try:
            entry["answers"] = [", ".join(ex.names) for ex in exercises(nb, name=lesson.name)]
        except ValueError:
            entry["answers"] = []
        entry.pop("exercises", None)
        if meta.get("seconds") is not None and meta.get("mode") in ("quick", "full"):
            entry[meta["mode"]] = {k: meta.get(k) for k in ("seconds", "device", "torch", "date")}
    tfile.parent.mkdir(parents=True, exist_ok=True)
    tfile.write_text(json.dumps(table, indent=1, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")
    return table


def time_quick_mode(
    paths: "Sequence[str | Path] | None" = None, timings_file: "str | Path | None" = None, *, timeout: int = 1200
) -> dict[str, float]:
    """Run each lesson top to bottom in quick mode here (not saved) and record how long it took.

    For lessons whose committed outputs come from a full-mode GPU run, so that the agenda
    still shows what a laptop needs. The lesson file is not changed; the kernel runs in the
    lesson's folder with ``FP16LAB_QUICK=1``. Raises AssertionError if a cell fails.
    Default (``paths=None``): every lesson, 1200 s a cell. Returns {lesson name: seconds}.
    """
    import os
    import time

    import nbformat
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    from fp16lab.labs.runtime.metadata import run_metadata

    lessons = _paths.lessons() if paths is None else _lesson_files(paths)
    tfile = _paths.timings_file() if timings_file is None else file_to_write("timings_file", timings_file)
    _load_timings(tfile)  # a file that is not a timings table is refused now, not after the first run
    timeout = positive_int("timeout", timeout)  # all checked before the first (long) run
    measured: dict[str, float] = {}
    old = os.environ.get("FP16LAB_QUICK")
    os.environ["FP16LAB_QUICK"] = "1"  # inherited by the kernel
    try:
        for lesson in lessons:
            nb = nbformat.read(lesson, as_version=4)
            client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                                    resources={"metadata": {"path": str(lesson.parent)}})
            load_before = _load()
            t0 = time.perf_counter()
            try:
                client.execute()
            except CellExecutionError as exc:
                raise AssertionError(f"{lesson.name} failed in quick mode:\n{exc}") from None
            measured[lesson.name] = round(time.perf_counter() - t0, 1)
            meta = run_metadata()
            table = _load_timings(tfile)
            # how busy the machine was: the 1-minute load average before and after, against its cores
            # (a run on a loaded machine is slower; the agenda says so next to the time)
            table.setdefault(lesson.name, {})["quick"] = {
                "seconds": measured[lesson.name], "device": meta["device"], "torch": meta["torch"],
                "date": meta["date"], "cpus": os.cpu_count(), "load": max(load_before, _load())}
            tfile.parent.mkdir(parents=True, exist_ok=True)
            tfile.write_text(json.dumps(table, indent=1, sort_keys=True, ensure_ascii=False) + "\n",
                             encoding="utf-8")
    finally:
        if old is None:
            os.environ.pop("FP16LAB_QUICK", None)
        else:
            os.environ["FP16LAB_QUICK"] = old
    return measured


def _load() -> float:
    """The 1-minute load average (0.0 where the system has none, e.g. Windows)."""
    import os

    try:
        return round(os.getloadavg()[0], 1)
    except (AttributeError, OSError):
        return 0.0


def _fmt(run: dict[str, Any] | None) -> str:
    if not run:
        return "not measured yet"
    secs = float(run["seconds"])
    when = str(run.get("date") or "")[:10]
    busy = f", {run['cpus']} CPUs at load {run['load']}" if run.get("cpus") and run.get("load") is not None else ""
    return f"{secs:.0f} s ({run.get('device')}{busy}, torch {run.get('torch')}, {when})"


def agenda_table(timings_file: "str | Path | None" = None, *, lang: str = "en") -> str:
    """The agenda as a markdown table: lesson, measured quick-mode and full-mode run times.

    A missing timings file is an error (a wrong path must not read as "not measured yet").
    Default: notebooks/student/timings.json. ``lang="zh"``: the headings in Chinese (the cells' data stay as recorded).
    """
    from fp16lab.checks import existing_path
    from fp16lab.labs.runtime.i18n import check_lang

    table = _load_timings(existing_path("timings_file", _paths.timings_file() if timings_file is None
                                        else timings_file, kind="file"))
    head = ("| Lesson | Exercises (answer variables) | Quick mode: run all, measured | Full mode: run all, measured |"
            if check_lang(lang) == "en" else "| 课程 | 练习（答案变量） | 快速模式：运行所有单元格，实测 | 完整模式：运行所有单元格，实测 |")
    rows = [head, "| --- | --- | --- | --- |"]
    total = {"quick": 0.0, "full": 0.0}
    count = {"quick": 0, "full": 0}
    for name in sorted(table):
        e = table[name]
        for m in total:
            if e.get(m):
                total[m] += float(e[m]["seconds"])
                count[m] += 1
        answers = "; ".join(f"{k}. `{a}`" for k, a in enumerate(e.get("answers", []), 1)) or "none"
        rows.append(f"| [{e.get('title', name)}]({name}) | {answers} "
                    f"| {_fmt(e.get('quick'))} | {_fmt(e.get('full'))} |")
    def tot(m: str) -> str:
        if not count[m]:
            return "not measured yet"
        part = "" if count[m] == len(table) else f" ({count[m]} of {len(table)} lessons)"
        return f"{total[m] / 60:.1f} min{part}"

    rows.append(f"| **All lessons** | | {tot('quick')} | {tot('full')} |")
    return "\n".join(rows)


def update_agenda(guide: "str | Path | None" = None, timings_file: "str | Path | None" = None) -> bool:
    """Rewrite the table between the agenda markers of the instructor guide; True if it changed.

    Defaults: notebooks/INSTRUCTORS.md and notebooks/student/timings.json; both must exist.
    """
    g = _paths.instructors_guide() if guide is None else existing_path("guide", guide, kind="file")
    table = agenda_table(timings_file)
    return _paths.replace_block(g, AGENDA_START, AGENDA_END, table, name="guide")


def agenda_problems(root: "str | Path | None" = None) -> list[str]:
    """Why the recorded timings or the guide's agenda are out of date (one line each)."""
    import nbformat

    tfile, guide = _paths.timings_file(root), _paths.instructors_guide(root)  # root checked by paths
    problems = []
    table = _load_timings(tfile)
    for lesson in _paths.lessons(_paths.notebooks_dir(root)):
        meta = nbformat.read(lesson, as_version=4).metadata.get("fp16lab") or {}
        mode, secs = meta.get("mode"), meta.get("seconds")
        got = (table.get(lesson.name) or {}).get(mode or "") or {}
        if secs is not None and got.get("seconds") != secs:
            problems.append(f"{lesson.name}: its {mode}-mode run time {secs} s is not in {tfile.name}")
    if not tfile.is_file():
        problems.append(f"{tfile.name}: missing (it records each lesson's measured run times)")
    elif not guide.exists():
        problems.append(f"{guide.name}: missing (the agenda lives between {AGENDA_START} and {AGENDA_END})")
    elif f"{AGENDA_START}\n{agenda_table(tfile)}\n{AGENDA_END}" not in guide.read_text(encoding="utf-8"):
        problems.append(f"{guide.name}: agenda table differs from {tfile.name}")
    return [p + " (run `python -m fp16lab workshop write`)" for p in problems]
