"""README tables generated from committed results files, so the README never types a measured number."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import Any

from fp16lab import checks
from fp16lab.course import paths

__all__ = ["TARGET_FILES", "targets_table", "COMPILE_MODES_RESULTS", "compile_modes_block", "RESULTS_PAGE", "BLOCKS",
           "write_results_page", "REUSE_PAGE", "reuse_page", "write_pages"]

# The reference-run targets of the newer lessons: (lesson, results file stem).
TARGET_FILES: tuple[tuple[str, str], ...] = (
    ("08 inference", "infer_targets"),
)


def _num(v: Any) -> str:
    if isinstance(v, bool) or v is None or (isinstance(v, float) and math.isnan(v)):
        return "" if v is None else str(v)
    return f"{v:.3g}" if isinstance(v, (int, float)) else str(v)


def _lesson_and_stem(name: str, value: object) -> tuple[str, str]:
    if isinstance(value, tuple) and len(value) == 2 and all(isinstance(v, str) for v in value):
        return value
    raise ValueError(f"{name} must be a (lesson, results stem) pair of str, got {value!r}")


def _targets_file(name: str, stem: str) -> dict[str, Any]:
    """``results/<stem>.json``, a targets file (metadata and rows); a missing or other file names ``name``."""
    p = paths.repo_root() / "results" / f"{stem}.json"
    if not p.is_file():
        have = sorted(f.stem for f in p.parent.glob("*targets*.json"))
        raise FileNotFoundError(f"{name}: no results file {stem!r} ({str(p)!r} does not exist); targets files: {have}")
    payload = paths.read_json(name, p, "a targets results file")
    if not (isinstance(payload, dict) and isinstance(payload.get("metadata"), dict) and isinstance(payload.get("rows"), list)
            and all(isinstance(r, dict) and "target" in r for r in payload["rows"])):
        raise ValueError(f"{name}: {str(p)!r} is not a targets file (metadata, and rows with a 'target' each)")
    return payload


def targets_table(files: Sequence[tuple[str, str]] = TARGET_FILES) -> str:
    """One markdown table of every target row in ``results/<stem>.json``, with its note and where it was measured."""
    files = checks.sequence_of("files", files, example="[('07 transformers', 'transformers_targets')]",
                               item=_lesson_and_stem)
    lines = ["| lesson | target | measured | goal | met | how | measured on |", "|---|---|---|---|---|---|---|"]
    payloads = [_targets_file(f"files[{i}]", stem) for i, (_, stem) in enumerate(files)]  # all read first
    for (lesson, _), payload in zip(files, payloads, strict=True):
        meta = payload["metadata"]
        where = f"{meta.get('device')}, {meta.get('date')}, torch {meta.get('torch')}"
        for r in payload["rows"]:
            measured = r.get("measured", r.get("value"))
            goal = r.get("goal", f">= {r['threshold']:g}" if isinstance(r.get("threshold"), (int, float)) else "")
            met = "met" if r.get("met") else "missed"
            how = str(r.get("note") or "").replace("|", "\\|")  # which method or model the figure is of
            lines.append(f"| {lesson} | {r['target']} | {_num(measured)} | {goal} | {met} | {how} | {where} |")
    return "\n".join(lines)


# The compiled recipe's other torch.compile modes (lesson 06): a run of the command below, committed as this file.
COMPILE_MODES_RESULTS = "results/bench_compile_modes.json"
COMPILE_MODES_COMMAND = ("python -m fp16lab bench --configs article --compile-modes reduce-overhead --rounds 3 --sweep "
                         f"--output {COMPILE_MODES_RESULTS}")


def compile_modes_block(path: "str | os.PathLike[str] | None" = None) -> str:
    """The compile-modes table of a ``--compile-modes`` run (default :data:`COMPILE_MODES_RESULTS`), with where it
    ran; while no run is committed, a line that says so and gives the command."""
    from fp16lab.labs.benchmark import BenchResult

    if path is None:
        p = paths.repo_root() / COMPILE_MODES_RESULTS
        if not p.exists():
            return f"No compile-modes run is committed yet; on a GPU, `{COMPILE_MODES_COMMAND}` makes one."
    else:  # a file you name must exist: a typo is an error, not "no run yet"
        p = checks.existing_path("path", path, kind="file")
    try:
        res = BenchResult.load(p)
    except ValueError as exc:
        raise ValueError(f"path: {exc}") from None
    table = res.compile_modes()
    if table.empty:
        raise ValueError(f"path: {str(p)!r} has no compile-mode rows: make it with `{COMPILE_MODES_COMMAND}`")
    meta, bench = res.metadata, res.metadata["benchmark"]
    box = bench.get("compile_mode_timeout_s")
    box_text = f"each mode's compile time-boxed to {box:g} s" if box else "the compiles were not time-boxed"
    head = (f"Measured on {meta.get('device')}, {meta.get('date')}, torch {meta.get('torch')}: {bench['model']}, "
            f"batch {', '.join(str(b) for b in bench['batch_sizes'])}, {bench['rounds']} interleaved rounds with the "
            f"article's loop; {box_text} (`{COMPILE_MODES_COMMAND}`).")
    cols = ["mode", "status", "img/s", "x_article", "spread", "n", "x_default_mode", "first step s", "note"]
    lines = [head, "", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for _, r in table.iterrows():
        lines.append("| " + " | ".join(_num(r[c]).replace("|", "\\|") for c in cols) + " |")
    return "\n".join(lines)


RESULTS_PAGE = "results/README.md"
# (start marker, end marker, what builds the block) of the generated blocks on the results page
BLOCKS = (
    ("<!-- bench:start -->", "<!-- bench:end -->", "bench"),
    ("<!-- targets:start -->", "<!-- targets:end -->", "targets"),
    ("<!-- compile-modes:start -->", "<!-- compile-modes:end -->", "compile_modes"),
)


def _block(kind: str) -> str:
    if kind == "targets":
        return targets_table()
    if kind == "compile_modes":
        return compile_modes_block()
    from fp16lab.labs.benchmark import readme_section

    root = paths.repo_root()
    section = readme_section(root / "results" / "bench_live.json", root / "results" / "bench_live.png")
    return section.replace(str(root / "results") + "/", "").replace(str(root) + "/", "")


def write_results_page() -> bool:
    """Rebuild the generated blocks of ``results/README.md`` from the results files; True when it changed."""
    page = paths.repo_root() / RESULTS_PAGE
    changed = False
    for start, end, kind in BLOCKS:
        changed |= paths.replace_block(page, start, end, _block(kind))
    return changed


REUSE_PAGE = "notebooks/REUSE.md"  # the README's reuse guide, where the lab (rooted at notebooks/) can open it


def reuse_page() -> str:
    """The README's reuse guide as a page of its own, its links made to work from ``notebooks/``."""
    text = (paths.repo_root() / "README.md").read_text(encoding="utf-8")
    start, end = "<!-- reuse-guide:start -->", "<!-- reuse-guide:end -->"
    if start not in text or end not in text:
        raise ValueError(f"README.md lacks the markers {start!r} ... {end!r} around the reuse guide")
    body = text.split(start, 1)[1].split(end, 1)[0].strip("\n")
    body = body.replace("](notebooks/", "](").replace("](results/", "](../results/")
    return ("<!-- generated from the README's reuse guide by `python -m fp16lab workshop pages`: edit the README -->\n"
            + body.replace("## Use fp16lab in your own notebook", "# Use fp16lab in your own notebook", 1)
            + "\n\nBack to the [start page](README.md).\n")


def write_pages() -> list[str]:
    """Rebuild the generated pages (the results page's tables, the reuse guide's copy); the ones that changed."""
    changed = [RESULTS_PAGE] if write_results_page() else []
    reuse = paths.repo_root() / REUSE_PAGE
    new = reuse_page()
    if not reuse.exists() or reuse.read_text(encoding="utf-8") != new:
        reuse.write_text(new, encoding="utf-8")
        changed.append(REUSE_PAGE)
    return changed
