"""A room of learners: one lab per student on a shared server, and the room's benchmark results in one table.

``python -m fp16lab workshop classroom DEST --students 12`` prepares, on a lab server, one folder per
student (``DEST/student01``, ...: the course files, the student's own ``work/``), a random token each,
a port each (``--base-port`` + n), a GPU each (round-robin over ``--gpus``) and writes

- ``start.sh``: starts every student's ``python -m fp16lab lab --ip ... --port ... --no-browser`` in the
  background (the token in ``JUPYTER_TOKEN``, never on a command line; ``FP16LAB_SHARED_GPU`` says how many
  share each GPU, which the doctor and :func:`fp16lab.course.gpushare.gpu_sharing` report), a log and a pid file
  in each student's folder;
- ``stop.sh``: stops them;
- ``roster.csv``: student, port, GPU and the URL with its token, to hand out (keep it private).

Every lab runs as the account that ran ``start.sh``: the folders keep the students' work apart, not the
students (any lab can run code that reads the others' folders). For separate accounts, use JupyterHub
(notebooks/INSTRUCTORS.md, "A lab server for the room").

``python -m fp16lab workshop bench-merge FILES...`` reads the result files that students' ``python -m fp16lab
bench`` runs wrote (JSON: ``{"metadata": {...}, "rows": [...]}``, the format of
:func:`fp16lab.labs.runtime.results.save_results`) and puts the room's GPUs in one table and one plot.
"""

from __future__ import annotations

import csv
import json
import os
import shlex
import socket
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fp16lab import checks
from fp16lab.course import paths as _paths
from fp16lab.labs.runtime.i18n import check_lang

__all__ = ["Seat", "classroom", "read_bench", "merge_bench", "plot_room", "room_summary"]


@dataclass(frozen=True)
class Seat:
    """One student's lab: folder, port, GPU (or None: the lab does not choose) and token."""

    name: str
    folder: Path
    port: int
    gpu: str | None
    token: str

    def url(self, host: str) -> str:
        return f"http://{host}:{self.port}/lab?token={self.token}"


def classroom(
    dest: "str | Path",
    students: int,
    *,
    ip: str = "0.0.0.0",
    base_port: int = 9000,
    gpus: Sequence[str] | None = None,
    lang: str = "en",
    solutions: bool = False,
    host: str | None = None,
    root: "str | Path | None" = None,
) -> list[Seat]:
    """Prepare one lab per student in ``dest`` (new or empty) and write start.sh, stop.sh and roster.csv.

    Student n (1-based) gets port ``base_port + n`` and GPU ``gpus[(n - 1) % len(gpus)]`` (default: no
    GPU choice, every lab sees every GPU). ``solutions=False`` (default) gives each student the hand-out
    (:func:`fp16lab.course.handout.handout`: student copies only); ``True`` the full lessons as well.
    ``host`` is the name in the roster's URLs (default: this machine's name). Nothing is started.
    """
    from fp16lab.course.handout import handout
    from fp16lab.course.lab import check_bind, new_token

    n = checks.positive_int("students", students)
    port0 = checks.positive_int("base_port", base_port)
    if port0 + n > 65535:
        raise ValueError(f"base_port must leave room for {n} ports below 65536, got {base_port!r}")
    gpu_list = [checks.text("gpus[]", g).strip() for g in checks.sequence_of("gpus", gpus, example="['0', '1']")] \
        if gpus is not None else []
    lang = check_lang(lang)
    solutions = checks.boolean("solutions", solutions)
    host = checks.text("host", host) if host is not None else None
    check_bind(ip, new_token(), allow_env_token=False)  # the address itself (every lab gets a token)
    target = checks.path("dest", dest)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise ValueError(f"dest must be a new or empty folder (nothing is overwritten), got {str(target)!r}")
    base = checks.path("root", root) if root is not None else _paths.repo_root()
    where = host if host is not None else (socket.getfqdn() if ip in ("", "0.0.0.0", "::") else ip)
    target.mkdir(parents=True, exist_ok=True)
    os.chmod(target, 0o700)  # the tokens are inside
    seats = []
    for k in range(1, n + 1):
        name = f"student{k:02d}"
        handout(target / name, base, solutions=solutions)
        gpu = gpu_list[(k - 1) % len(gpu_list)] if gpu_list else None
        seats.append(Seat(name, target / name, port0 + k, gpu, new_token()))
    per_gpu = {g: sum(s.gpu == g for s in seats) for g in gpu_list}
    shared = max(per_gpu.values()) if per_gpu else n
    _write_scripts(target, seats, ip=ip, lang=lang, per_gpu=per_gpu, shared_all=shared)
    with open(target / "roster.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["student", "port", "gpu", "url"])
        for s in seats:
            w.writerow([s.name, s.port, s.gpu if s.gpu is not None else "", s.url(where)])
    os.chmod(target / "roster.csv", 0o600)
    return seats


def _write_scripts(target: Path, seats: list[Seat], *, ip: str, lang: str, per_gpu: dict[str, int],
                   shared_all: int) -> None:
    py = shlex.quote(sys.executable)
    lines = [
        "#!/bin/sh",
        "# Written by `python -m fp16lab workshop classroom`: one JupyterLab per student, in the background.",
        "# Tokens are passed in JUPYTER_TOKEN (not on a command line). Logs: studentNN/lab.log. Stop: ./stop.sh",
        "set -e",
        'cd "$(dirname "$0")"',
        "start() {  # folder port gpu token sharing",
        '  (',
        '    if [ -n "$3" ]; then export CUDA_VISIBLE_DEVICES="$3"; fi',
        '    export FP16LAB_ROOT="$PWD/$1" JUPYTER_TOKEN="$4" FP16LAB_SHARED_GPU="$5"',
        f'    exec nohup {py} -m fp16lab lab --ip {shlex.quote(ip)} --port "$2" --no-browser --lang {lang} \\',
        '      > "$1/lab.log" 2>&1 < /dev/null',
        '  ) &',
        '  echo $! > "$1/lab.pid"',
        '  echo "started $1 on port $2${3:+ (GPU $3)}"',
        "}",
    ]
    for s in seats:
        share = per_gpu.get(s.gpu, shared_all) if s.gpu is not None else shared_all
        lines.append(f"start {s.name} {s.port} {shlex.quote(s.gpu or '')} {shlex.quote(s.token)} {share}")
    lines.append('echo "URLs with their tokens: roster.csv"')
    start = target / "start.sh"
    start.write_text("\n".join(lines) + "\n", encoding="utf-8")
    os.chmod(start, 0o700)
    stop = target / "stop.sh"
    stop.write_text("\n".join([
        "#!/bin/sh",
        "# Stops the labs that start.sh started (by the pid in each studentNN/lab.pid).",
        'cd "$(dirname "$0")"',
        "for f in student*/lab.pid; do",
        '  [ -f "$f" ] || continue',
        '  pid=$(cat "$f"); kill "$pid" 2>/dev/null && echo "stopped ${f%/lab.pid} ($pid)"; rm -f "$f"',
        "done",
    ]) + "\n", encoding="utf-8")
    os.chmod(stop, 0o700)


# ---------------------------------------------------------------------------------------------- the room's bench


def read_bench(path: "str | Path") -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(metadata, rows) of one ``python -m fp16lab bench`` result file (JSON); a clear error for anything else."""
    p = checks.existing_path("path", path, kind="file")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"path {str(p)!r} is not a bench result file (JSON with metadata and rows): {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("metadata"), dict) or not isinstance(data.get("rows"),
                                                                                                     list):
        raise ValueError(f"path {str(p)!r} is not a bench result file: expected {{'metadata': {{...}}, 'rows': [...]}}")
    return data["metadata"], [r for r in data["rows"] if isinstance(r, dict)]


def merge_bench(paths: Sequence["str | Path"], names: Sequence[str] | None = None) -> Any:
    """One DataFrame of the room: a row per (student, configuration) with the GPU, mode and median images/s.

    ``names`` (default: each file's stem) says whose file is whose. Rows that did not run (status other
    than ok) keep their status; a file measured in quick mode or on a CPU is marked ``speed_comparable=False``:
    its images/s is not a GPU speed.
    """
    import pandas as pd

    files = checks.sequence_of("paths", paths, example="['alice.json', 'bob.json']", item=checks.path)
    if not files:
        raise ValueError("paths must name at least one bench result file, got none")
    who = [checks.text("names[]", n) for n in checks.sequence_of("names", names, example="['alice']")] \
        if names is not None else [Path(f).stem for f in files]
    if len(who) != len(files):
        raise ValueError(f"names must give one name per file: {len(files)} file(s), got {len(who)} name(s)")
    out = []
    for name, f in zip(who, files, strict=False):
        meta, rows = read_bench(f)
        comparable = meta.get("device_type") == "cuda" and meta.get("mode") == "full"
        groups: dict[tuple[Any, ...], list[dict[str, Any]]] = {}
        for r in rows:
            groups.setdefault((r.get("config"), r.get("batch_size")), []).append(r)
        for (config, batch), rs in groups.items():
            ok = [float(r["img_per_s"]) for r in rs if r.get("status") == "ok" and r.get("img_per_s") is not None]
            mem = [float(r["peak_mem_gb"]) for r in rs if r.get("status") == "ok" and r.get("peak_mem_gb") is not None]
            out.append({
                "student": name, "gpu": meta.get("real_device") or meta.get("device"),
                "capability": meta.get("capability"), "memory_gib": meta.get("memory_gib"),
                "torch": meta.get("torch"), "mode": meta.get("mode"), "date": meta.get("date"),
                "config": config, "label": rs[0].get("label", config), "batch_size": batch,
                "status": "ok" if ok else str(rs[0].get("status")),
                "img_per_s": float(pd.Series(ok).median()) if ok else float("nan"),
                "runs": len(ok), "peak_mem_gb": max(mem) if mem else float("nan"),
                "speed_comparable": comparable,
            })
    return pd.DataFrame(out)


def _check_room(frame: Any) -> None:
    import pandas as pd

    need = {"student", "gpu", "mode", "config", "status", "img_per_s", "speed_comparable"}
    if not isinstance(frame, pd.DataFrame) or not need <= set(frame.columns):
        raise TypeError(f"frame must be the DataFrame merge_bench returns (columns {sorted(need)}), "
                        f"got {type(frame).__name__}")


def room_summary(frame: Any, config: str = "fp16_cl_fused", baseline: str = "article") -> Any:
    """Per student: GPU, ``config``'s images/s and its speed-up over ``baseline`` (the article's loop)."""
    _check_room(frame)
    have = tuple(sorted(map(str, frame["config"].unique())))
    config = checks.one_of("config", config, have)
    baseline = checks.one_of("baseline", baseline, have)
    import pandas as pd

    rows = []
    for student, g in frame.groupby("student", sort=False):
        def speed(c: str, g: Any = g) -> float:
            hit = g[(g["config"] == c) & (g["status"] == "ok")]
            return float(hit["img_per_s"].max()) if len(hit) else float("nan")

        rows.append({"student": student, "gpu": g["gpu"].iloc[0], "mode": g["mode"].iloc[0],
                     f"{config} img/s": speed(config), f"{baseline} img/s": speed(baseline),
                     "speed-up": speed(config) / speed(baseline) if speed(baseline) > 0 else float("nan"),
                     "speed_comparable": bool(g["speed_comparable"].iloc[0])})
    return pd.DataFrame(rows)


_IMAGE_SUFFIXES = (".png", ".svg", ".pdf")


def plot_room(frame: Any, path: "str | Path") -> Path:
    """A bar chart of images/s per configuration, one group per student's GPU; quick-mode/CPU files left out."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    _check_room(frame)
    out = checks.path("path", path)
    if out.suffix.lower() not in _IMAGE_SUFFIXES:
        raise ValueError(f"path {str(out)!r} must name an image file ({', '.join(_IMAGE_SUFFIXES)})")
    if not out.parent.is_dir():
        raise ValueError(f"path {str(out)!r}: its folder does not exist")
    data = frame[(frame["speed_comparable"]) & (frame["status"] == "ok")]
    fig, ax = plt.subplots(figsize=(10, 4.5))
    if data.empty:
        ax.text(0.5, 0.5, "no GPU result in full mode yet", ha="center", va="center")
        ax.set_axis_off()
    else:
        table = data.pivot_table(index=data["student"] + " · " + data["gpu"].astype(str), columns="config",
                                 values="img_per_s", aggfunc="max")
        table.plot.bar(ax=ax)
        ax.set_ylabel("images/s (median of the student's runs)")
        ax.set_xlabel("")
        ax.set_title("The room's GPUs: python -m fp16lab bench")
        ax.tick_params(axis="x", labelrotation=20)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=110)
    plt.close(fig)
    return out
