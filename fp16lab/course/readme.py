"""README tables generated from committed results files, so the README never types a measured number."""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any

from fp16lab import checks
from fp16lab.course import paths

__all__ = ["TARGET_FILES", "targets_table"]

# The reference-run targets of the newer lessons: (lesson, results file stem).
TARGET_FILES: tuple[tuple[str, str], ...] = (
    ("07 transformers", "transformers_targets"),
    ("08 inference", "infer_targets"),
    ("09 FP8", "fp8_targets"),
)


def _num(v: Any) -> str:
    if isinstance(v, bool) or v is None or (isinstance(v, float) and math.isnan(v)):
        return "" if v is None else str(v)
    return f"{v:.3g}" if isinstance(v, (int, float)) else str(v)


def _lesson_and_stem(name: str, value: object) -> tuple[str, str]:
    if isinstance(value, tuple) and len(value) == 2 and all(isinstance(v, str) for v in value):
        return value
    raise ValueError(f"{name} must be a (lesson, results stem) pair of str, got {value!r}")


def targets_table(files: Sequence[tuple[str, str]] = TARGET_FILES) -> str:
    """One markdown table of every target row in ``results/<stem>.json``, with where it was measured."""
    files = checks.sequence_of("files", files, example="[('07 transformers', 'transformers_targets')]",
                               item=_lesson_and_stem)
    lines = ["| lesson | target | measured | goal | met | measured on |", "|---|---|---|---|---|---|"]
    for lesson, stem in files:
        payload = json.loads((paths.repo_root() / "results" / f"{stem}.json").read_text(encoding="utf-8"))
        meta = payload["metadata"]
        where = f"{meta.get('device')}, {meta.get('date')}, torch {meta.get('torch')}"
        for r in payload["rows"]:
            measured = r.get("measured", r.get("value"))
            goal = r.get("goal", f">= {r['threshold']:g}" if isinstance(r.get("threshold"), (int, float)) else "")
            met = "met" if r.get("met") else "missed"
            lines.append(f"| {lesson} | {r['target']} | {_num(measured)} | {goal} | {met} | {where} |")
    return "\n".join(lines)
