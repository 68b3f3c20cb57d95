"""The portability matrix: every lesson run under every hardware profile, recorded with its code digest.

A hardware profile (:mod:`fp16lab.hardware`) makes the reference GPU report a smaller card's
facts and caps its memory, so a lesson takes that card's code path in that card's memory.
``python -m fp16lab portability run`` executes lessons under profiles on a *copy* (the
committed lessons are never touched), in a profile smoke run (``FP16LAB_SMOKE=1``: full
sizes and code paths, fewer steps and repeats), and records one row per lesson and profile
in ``results/portability.json``: the lesson's file stem, the digest of its code cells (the
same digest its outputs stamp records, so a row is tied to the code it ran), the profile,
passed/failed, seconds, the real device, the torch version and ``jobs``, how many lessons shared
the GPU (a speed assert that fails with ``jobs > 1`` may be the neighbours, not the profile).
``python -m fp16lab portability table`` prints the matrix as the instructor guide shows it.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pandas as pd

from fp16lab import checks
from fp16lab.checks import (
    boolean,
    existing_path,
    instance,
    one_of,
    positive_float,
    positive_int,
    sequence_of,
    text,
)
from fp16lab.course import paths
from fp16lab.course.outputs import code_digest

__all__ = ["PROFILE_KEYS", "matrix_path", "load_matrix", "record", "run_one", "run_matrix", "matrix_table",
           "update_guide", "add_parser", "configure"]

PROFILE_KEYS = ("none", "rtx4090d", "rtx3060", "rtx4060-laptop", "t4", "a100-40gb")
COLUMNS = ("lesson", "profile", "status", "seconds", "code_sha256", "device", "torch", "mode", "date", "error",
           "jobs")


def matrix_path() -> Path:
    """``results/portability.json`` in the repository."""
    return paths.repo_root() / "results" / "portability.json"


def load_matrix(path: "str | os.PathLike[str] | None" = None) -> pd.DataFrame:
    """The recorded rows (an empty table with the columns when nothing is recorded yet).

    Default ``path=None``: results/portability.json, which may not exist yet; a ``path`` you
    name must exist (a typo is an error, never an empty matrix).
    """
    if path is None:
        return _read_matrix("path", matrix_path(), missing_ok=True)
    return _read_matrix("path", existing_path("path", path, kind="file"), missing_ok=False)


def _read_matrix(name: str, p: Path, *, missing_ok: bool) -> pd.DataFrame:
    empty: dict[str, Any] = {"rows": []}
    payload = paths.read_json(name, p, "a portability matrix (results/portability.json)",
                              missing=empty if missing_ok else None)
    if not isinstance(payload, dict) or not isinstance(payload.get("rows"), list):
        raise ValueError(f"{name}: {str(p)!r} is not a portability matrix (needs a 'rows' list)")
    return pd.DataFrame(payload["rows"], columns=list(COLUMNS))


def record(rows: Sequence[dict[str, Any]], path: "str | os.PathLike[str] | None" = None) -> Path:
    """Add ``rows`` (at least one) to the matrix, replacing earlier rows of the same lesson and profile.

    Default ``path=None``: results/portability.json; a new file (and its folder) is created.
    """
    p = checks.file_to_write("path", path) if path is not None else matrix_path()
    given = sequence_of("rows", rows, example="[run_one('notebooks/02_amp_training_loop.ipynb', 't4')]", item=_row)
    old = _read_matrix("path", p, missing_ok=True)
    new = pd.DataFrame(given, columns=list(COLUMNS))
    keys = set(zip(new["lesson"], new["profile"], strict=True))
    keep = old[[(lesson, prof) not in keys for lesson, prof in zip(old["lesson"], old["profile"], strict=True)]]
    merged = pd.concat([keep, new], ignore_index=True) if len(keep) else new
    merged = merged.sort_values(["lesson", "profile"], key=_profile_order).reset_index(drop=True)
    payload = {
        "metadata": {"what": "lessons x hardware profiles; see fp16lab.course.portability"},
        "rows": json.loads(merged.to_json(orient="records")),
    }
    p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(payload, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, p)
    return p


def _profile_order(col: pd.Series) -> pd.Series:
    if col.name == "profile":
        return col.map(lambda v: PROFILE_KEYS.index(v) if v in PROFILE_KEYS else len(PROFILE_KEYS))
    return col


_ROW_KEYS = COLUMNS[:-1]  # "jobs" came later: older rows lack it
_TABLE_KEYS = ("lesson", "profile", "status", "seconds", "code_sha256", "jobs")  # what matrix_table reads


def _row(name: str, value: object) -> dict[str, Any]:
    """One matrix row as :func:`run_one` returns it: every column, a known profile and status."""
    row: Any = instance(name, value, dict, "a matrix row (a dict, as run_one returns)")
    missing = [k for k in _ROW_KEYS if k not in row]
    if missing:
        raise ValueError(f"{name} lacks {', '.join(missing)}: a matrix row has {', '.join(COLUMNS)} (as run_one returns)")
    text(f"{name}['lesson']", row["lesson"])
    one_of(f"{name}['profile']", row["profile"], PROFILE_KEYS)
    one_of(f"{name}['status']", row["status"], ("passed", "failed"))
    return row


def _lesson(name: str, value: object) -> Path:
    """An existing lesson file (``.ipynb``) that reads as a notebook; a missing one is an error, never an empty answer."""
    p = paths.notebook_path(name, value)
    paths.read_notebook(name, p)  # a garbled file is refused now, not in the child process
    return p


def _lessons(lessons: object) -> list[Path]:
    return sequence_of("lessons", lessons, example="['notebooks/02_amp_training_loop.ipynb']", item=_lesson)


def _check_profile(profile: object, name: str = "profile") -> str:
    return one_of(name, profile, PROFILE_KEYS)


def run_one(lesson: "str | Path", profile: str, *, smoke: bool = True, timeout: int = 900,
            threads: int | None = None, keep: "str | os.PathLike[str] | None" = None) -> dict[str, Any]:
    """Execute a copy of ``lesson`` under ``profile`` in a fresh process; return its matrix row.

    ``threads`` caps the CPU threads of the lesson's kernel (``OMP_NUM_THREADS``: lessons run side
    by side share the cores instead of oversubscribing them); ``keep`` is a folder
    that receives the executed copy as ``<stem>.<profile>.ipynb``, passed or failed, with nbclient's
    per-cell timings in its metadata.
    """
    src = _lesson("lesson", lesson)
    _check_profile(profile)
    smoke = boolean("smoke", smoke)
    timeout = positive_int("timeout", timeout)
    if threads is not None:
        threads = positive_int("threads", threads)
    return _run_one(src, profile, smoke, timeout, threads, _keep_dir(keep), jobs=1)


def _run_one(src: Path, profile: str, smoke: bool, timeout: int, threads: int | None, keep_dir: Path | None,
             *, jobs: int) -> dict[str, Any]:
    """:func:`run_one` on checked arguments; ``jobs`` is recorded in the row."""
    import nbformat

    nb = nbformat.read(src, as_version=4)
    env = dict(os.environ, FP16LAB_QUICK="0", PYTHONUNBUFFERED="1")
    if threads is not None:
        env["OMP_NUM_THREADS"] = env["MKL_NUM_THREADS"] = str(threads)
    env.pop("FP16LAB_REFERENCE_RUN", None)  # a profile run never writes the committed results
    env["FP16LAB_PROFILE"] = "" if profile == "none" else profile
    env["FP16LAB_SMOKE"] = "1" if smoke else "0"
    limit = _run_limit(nb, timeout)
    with tempfile.TemporaryDirectory(prefix=f"fp16lab-{src.stem}-{profile}-") as tmp:
        copy = Path(tmp) / src.name
        shutil.copy2(src, copy)
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(
                [sys.executable, "-m", "fp16lab.course.portability", "_execute", str(copy), str(timeout)],
                env=env, capture_output=True, text=True, timeout=limit, check=False,
            )
            ok, meta = proc.returncode == 0, _last_json(proc.stdout)
            error = "" if ok else (meta.get("error") or (proc.stderr.strip().splitlines() or ["?"])[-1])
        except subprocess.TimeoutExpired:  # a hung kernel: a failed row, and the other runs go on
            ok, meta = False, {}
            error = f"the whole run passed its limit of {limit} s ({timeout} s per code cell + 120 s)"
        seconds = time.perf_counter() - t0
        if keep_dir is not None:
            shutil.copy2(copy, keep_dir / f"{src.stem}.{profile}.ipynb")
    return {
        "lesson": src.stem,
        "profile": profile,
        "status": "passed" if ok else "failed",
        "seconds": round(seconds, 1),
        "code_sha256": code_digest(nb),
        "device": meta.get("device", ""),
        "torch": meta.get("torch", ""),
        "mode": "full-smoke" if smoke else "full",
        "date": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d"),
        "error": str(error)[:300],
        "jobs": jobs,
    }


def _run_limit(nb: Any, timeout: int) -> int:
    """Seconds the child may run in all: ``timeout`` per code cell, plus start-up."""
    return timeout * max(1, sum(c.cell_type == "code" for c in nb.cells)) + 120


def _keep_dir(keep: "str | os.PathLike[str] | None") -> Path | None:
    if keep is None:
        return None
    k = checks.path("keep", keep)
    if k.exists() and not k.is_dir():
        raise ValueError(f"keep {str(keep)!r} is a file; give a folder for the executed copies")
    k.mkdir(parents=True, exist_ok=True)
    return k


def _last_json(text: str) -> dict[str, Any]:
    for line in reversed(text.strip().splitlines()):
        if line.startswith("{"):
            try:
                return dict(json.loads(line))
            except ValueError:
                continue
    return {}


def _execute(copy: str, timeout: int) -> int:
    """In the child process: run the notebook copy; print one JSON line with device and error."""
    import nbformat
    import torch
    from nbclient import NotebookClient
    from nbclient.exceptions import CellExecutionError

    from fp16lab.hardware import gpu_facts

    nb = nbformat.read(copy, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3",
                            resources={"metadata": {"path": str(Path(copy).parent)}})
    facts = gpu_facts()
    info = {"torch": torch.__version__, "device": facts.real_name if facts else "CPU"}
    try:
        client.execute()
    except CellExecutionError as exc:
        lines = [ln for ln in str(exc).splitlines() if ln.strip()]
        info["error"] = (lines[-1] if lines else "cell failed")[:300]
    except Exception as exc:  # a dead kernel (killed, out of host memory), a cell past its timeout
        info["error"] = f"{type(exc).__name__}: {exc}".splitlines()[0][:300]
    nbformat.write(nb, copy)  # the executed copy, for run_one's ``keep``
    print(json.dumps(info))
    return 1 if "error" in info else 0


def run_matrix(
    lessons: Sequence["str | Path"], profiles: Sequence[str] = PROFILE_KEYS[1:], *,
    smoke: bool = True, jobs: int = 1, timeout: int = 900, save: bool = True,
    keep: "str | os.PathLike[str] | None" = None, stop_after: float | None = None, missing: bool = False,
) -> pd.DataFrame:
    """Run every lesson under every profile (``jobs`` at a time) and record each row as it finishes.

    Lessons run side by side share the CPU cores evenly (see :func:`run_one`'s ``threads``).
    ``stop_after``: seconds after which no new run starts (runs in flight finish), for a GPU
    lent by the hour; the runs left out are listed at the end and recorded nowhere.
    ``missing``: leave out each lesson and profile whose recorded row already passed with the
    lesson's current code (for a full run, a full-mode row), so a run resumes where the last stopped.
    """
    files = _lessons(lessons)
    profiles = sequence_of("profiles", profiles, example="['t4']", item=lambda name, p: _check_profile(p, name))
    smoke, save = boolean("smoke", smoke), boolean("save", save)
    jobs = positive_int("jobs", jobs)
    timeout = positive_int("timeout", timeout)
    if stop_after is not None:
        stop_after = positive_float("stop_after", stop_after)
    missing = boolean("missing", missing)
    keep_dir = _keep_dir(keep)
    threads = max(1, (os.cpu_count() or 1) // jobs) if jobs > 1 else None
    work = [(lesson, p) for lesson in files for p in profiles]
    if missing:
        done = _passed_with_current_code(work, smoke)
        work = [lp for lp in work if lp not in done]
        if done:
            print("already passed with the current code, not run again: "
                  + ", ".join(f"{lesson.stem} {p}" for lesson, p in done), flush=True)
    rows: list[dict[str, Any]] = []
    skipped: list[str] = []
    lock = threading.Lock()
    t0 = time.monotonic()

    def one(lesson: Path, profile: str) -> None:
        if stop_after is not None and time.monotonic() - t0 > stop_after:
            with lock:
                skipped.append(f"{lesson.stem} {profile}")
            return
        row = _run_one(lesson, profile, smoke, timeout, threads, keep_dir, jobs=jobs)
        with lock:  # saved as soon as it finishes: a run cut short later loses only itself
            rows.append(row)
            print(f"{row['lesson']:<32} {row['profile']:<15} {row['status']:<7} {row['seconds']:>6.1f} s "
                  f"{row['error']}", flush=True)
            if save:
                record([row])

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        list(pool.map(lambda lp: one(*lp), work))
    if skipped:
        print(f"not started (stop_after={stop_after:g} s): " + ", ".join(skipped), flush=True)
    order = {lp: i for i, lp in enumerate((lp[0].stem, lp[1]) for lp in work)}
    rows.sort(key=lambda r: order[(r["lesson"], r["profile"])])
    return pd.DataFrame(rows, columns=list(COLUMNS))


def _passed_with_current_code(work: list[tuple[Path, str]], smoke: bool) -> list[tuple[Path, str]]:
    """The (lesson, profile) pairs of ``work`` whose recorded row passed with the lesson's code as it is now."""
    import nbformat

    m = load_matrix()
    ok = m[m["status"] == "passed"]
    if not smoke:
        ok = ok[ok["mode"] == "full"]
    passed = set(zip(ok["lesson"], ok["profile"], ok["code_sha256"], strict=True))
    digests = {lesson: code_digest(nbformat.read(lesson, as_version=4)) for lesson in {lp[0] for lp in work}}
    return [(lesson, p) for lesson, p in work if (lesson.stem, p, digests[lesson]) in passed]


def matrix_table(frame: pd.DataFrame | None = None, lessons: Sequence["str | Path"] | None = None) -> str:
    """The matrix as markdown: one row per lesson, one column per profile; a stale row says so."""
    import nbformat

    m = load_matrix() if frame is None else _matrix_frame(frame)
    files = _lessons(lessons) if lessons is not None else paths.lessons()
    digests = {f.stem: code_digest(nbformat.read(f, as_version=4)) for f in files}
    head = "| lesson | " + " | ".join(PROFILE_KEYS) + " |"
    lines = [head, "|" + "---|" * (len(PROFILE_KEYS) + 1)]
    for stem, digest in digests.items():
        cells = []
        for prof in PROFILE_KEYS:
            hit = m[(m["lesson"] == stem) & (m["profile"] == prof)]
            if hit.empty:
                cells.append("not run")
                continue
            r = hit.iloc[-1]
            mark = "passed" if r["status"] == "passed" else "**failed**"
            if r["code_sha256"] != digest:
                mark += " (older code)"
            shared = int(r["jobs"]) if pd.notna(r["jobs"]) else 1
            cells.append(f"{mark}, {float(r['seconds']):.0f} s" + (f" ({shared} at once)" if shared > 1 else ""))
        lines.append(f"| {stem} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _matrix_frame(frame: object) -> pd.DataFrame:
    """A matrix as :func:`load_matrix` reads it: a DataFrame with the columns the table reads."""
    f: pd.DataFrame = instance("frame", frame, pd.DataFrame, "a portability matrix (load_matrix()) or None")
    missing = [c for c in _TABLE_KEYS if c not in f.columns]
    if missing:
        raise ValueError(f"frame lacks the column(s) {', '.join(missing)} of a portability matrix (load_matrix())")
    return f


GUIDE_START = "<!-- portability:start -->"
GUIDE_END = "<!-- portability:end -->"


def update_guide(guide: "str | os.PathLike[str] | None" = None) -> bool:
    """Write :func:`matrix_table` between the markers of the instructor guide; True when it changed.

    Default ``guide=None``: notebooks/INSTRUCTORS.md; a guide you name must exist.
    """
    p = existing_path("guide", guide, kind="file") if guide is not None else paths.instructors_guide()
    return paths.replace_block(p, GUIDE_START, GUIDE_END, matrix_table(), name="guide")


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Register ``portability`` as a subcommand of ``python -m fp16lab``."""
    p = sub.add_parser("portability", help="run lessons under hardware profiles; the matrix in results/",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    configure(p)


def configure(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Sub-commands ``run`` and ``table`` (``python -m fp16lab portability ...``)."""
    sub = parser.add_subparsers(dest="portability_command", required=True)
    r = sub.add_parser("run", help="run lessons under hardware profiles on a CUDA GPU and record the rows")
    r.add_argument("lessons", nargs="+", type=paths.notebook_file, help="lesson notebooks")
    r.add_argument("--profiles", nargs="+", default=list(PROFILE_KEYS[1:]), choices=PROFILE_KEYS,
                   help="profiles to run (default: all but 'none')")
    r.add_argument("--full", action="store_true", help="full steps instead of a profile smoke run")
    r.add_argument("--jobs", type=int, default=1, help="lessons run at once (default 1)")
    r.add_argument("--timeout", type=paths.positive_seconds, default=900, help="seconds a cell (default 900); a whole run gets that per code cell, plus 120 s")
    r.add_argument("--stop-after", metavar="SECONDS", type=paths.positive_seconds, default=None,
                   help="start no new run after this many seconds (runs in flight finish)")
    r.add_argument("--missing", action="store_true",
                   help="leave out rows that already passed with the lesson's current code (resume a matrix)")
    r.add_argument("--keep", metavar="DIR", default=None,
                   help="write each executed copy (passed or failed, with per-cell timings) into DIR")
    r.set_defaults(func=lambda a: _cli_run(a))
    t = sub.add_parser("table", help="print the matrix as markdown (--write: into the instructor guide)")
    t.add_argument("--write", action="store_true", help="update the matrix in notebooks/INSTRUCTORS.md")
    t.set_defaults(func=_cli_table)
    return parser


def _cli_table(args: argparse.Namespace) -> int:
    if args.write:
        print("updated the instructor guide" if update_guide() else "the instructor guide is up to date")
    else:
        print(matrix_table())
    return 0


def _cli_run(args: argparse.Namespace) -> int:
    import torch

    if not torch.cuda.is_available():
        print("error: hardware profiles emulate a card on a real CUDA GPU; none is visible here", file=sys.stderr)
        return 2
    frame = run_matrix(args.lessons, args.profiles, smoke=not args.full, jobs=args.jobs, timeout=args.timeout,
                       keep=args.keep, stop_after=args.stop_after, missing=args.missing)
    return 0 if (frame["status"] == "passed").all() else 1


if __name__ == "__main__":  # the child process of one run: python -m fp16lab.course.portability _execute NB TIMEOUT
    if sys.argv[1:2] != ["_execute"] or len(sys.argv) != 4:
        sys.exit("this module is run by `python -m fp16lab portability`; use that command")
    sys.exit(_execute(sys.argv[2], int(sys.argv[3])))
