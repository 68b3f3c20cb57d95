"""Workshop plans: a one-day and a two-day schedule built on the agenda's measured run times.

Each block is one lesson: the instructor's talk, the learners' "Run All" (the measured quick-mode time
of a laptop and full-mode time of a GPU, from notebooks/student/timings.json, :mod:`fp16lab.course.agenda`),
the exercises, and which sections to leave for self-study. Talk and exercise minutes are the plan's
settings (what an instructor allots), not measurements; run times are measured and say where.

``python -m fp16lab workshop agenda --plan one-day --lang zh`` prints a plan; ``workshop write`` puts
both into notebooks/INSTRUCTORS.md (and notebooks/zh/INSTRUCTORS.md in Chinese), and ``workshop check``
fails when they are stale. Sections are named by a fragment of their heading and resolved against the
lesson when the plan is made: a renamed section fails tests/test_plans.py, never silently.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fp16lab import checks
from fp16lab.course import paths as _paths
from fp16lab.labs.runtime.i18n import check_lang

__all__ = ["Block", "PLANS", "GPU_NEEDS", "plan_blocks", "plan_table", "plan_problems", "section_headings",
           "PLANS_START", "PLANS_END"]

PLANS_START, PLANS_END = "<!-- plans:start -->", "<!-- plans:end -->"


@dataclass(frozen=True)
class Block:
    """One lesson in a plan: minutes of talk and of exercises (settings), sections left for self-study."""

    lesson: str  # file stem, e.g. "02_amp_training_loop"
    talk: int
    exercises: int
    skip: tuple[str, ...] = ()  # heading fragments of sections to leave for self-study


# What each lesson needs to run live (the rest of the room reads the committed GPU reference outputs).
GPU_NEEDS: dict[str, tuple[str, str]] = {
    "00_setup_and_verify": ("any; a GPU shows its own numbers", "任意；有 GPU 时显示它自己的数字"),
    "01_fp16_numerics": ("none (the same on a CPU)", "不需要（CPU 上结果相同）"),
    "02_amp_training_loop": ("none for the numerics; a GPU for the speed section", "数值部分不需要；测速小节需要 GPU"),
    "03_tensor_core_alignment": ("NVIDIA GPU sm_70+ (Tensor Cores)", "NVIDIA GPU sm_70+（Tensor Core）"),
    "04_pitfalls_numerics": ("none (the same on a CPU)", "不需要（CPU 上结果相同）"),
    "05_pitfalls_speed_memory": ("NVIDIA GPU (speed and memory)", "NVIDIA GPU（速度和显存）"),
    "06_benchmarking": ("NVIDIA GPU; batch 128 on a 24 GB card, the reference run's 256 from 39 GiB usable "
                        "(the article names no batch size)",
                        "NVIDIA GPU；24 GB 的显卡上批处理大小为 128，参考运行的 256 需要至少 39 GiB 可用显存"
                        "（原文没有给出批处理大小）"),
    "07_transformers": ("NVIDIA GPU sm_80+ for BF16", "BF16 需要 NVIDIA GPU sm_80+"),
    "08_inference": ("NVIDIA GPU", "NVIDIA GPU"),
    "09_fp8": ("sm_89+ (RTX 40xx, L4, H100/H200) for FP8", "FP8 需要 sm_89+（RTX 40 系列、L4、H100/H200）"),
    "10_multi_gpu": ("two GPUs for the multi-GPU parts (NCCL); CPU processes (gloo) in quick mode",
                     "多卡部分需要两块 GPU（NCCL）；快速模式下用 CPU 进程（gloo）"),
}

# The plans: settings an instructor can change. A day is about six and a half hours of teaching.
PLANS: dict[str, list[list[Block]]] = {
    "one-day": [[
        Block("00_setup_and_verify", 20, 10, ("Sidebar for TensorFlow",)),
        Block("01_fp16_numerics", 25, 15, ("Summation error",)),
        Block("02_amp_training_loop", 30, 20, ("packaged loop cost",)),
        Block("04_pitfalls_numerics", 25, 15, ("What autocast keeps in FP32", "loss scale collapsing")),
        Block("03_tensor_core_alignment", 25, 15, ("FP16 accumulation", "A torchvision model", "profiler")),
        Block("05_pitfalls_speed_memory", 25, 15, ("In-place operations", "caching allocator")),
        Block("06_benchmarking", 30, 20, ("FLOPs per image", "Model FLOP utilisation", "from the command line")),
    ]],
    "two-day": [[
        Block("00_setup_and_verify", 20, 15),
        Block("01_fp16_numerics", 30, 20),
        Block("02_amp_training_loop", 35, 25),
        Block("03_tensor_core_alignment", 35, 20),
        Block("04_pitfalls_numerics", 30, 20),
        Block("05_pitfalls_speed_memory", 30, 20),
    ], [
        Block("06_benchmarking", 35, 25),
        Block("07_transformers", 30, 20, ("Vocabulary padding",)),
        Block("08_inference", 25, 20, ("A BF16-trained model run in FP16",)),
        Block("09_fp8", 25, 20),
        Block("10_multi_gpu", 30, 20, ("When a rank fails",)),
    ]],
}
BREAKS = {"one-day": [(2, 15), (4, 60), (6, 15)], "two-day": [(2, 15), (3, 60), (5, 15)]}  # (after block n, minutes)
DAY_START = 9 * 60  # 09:00
CLOSE = 20  # minutes at the end of the last day: the post-test and the room's bench table

_TITLES = {"en": {"one-day": "One-day plan", "two-day": "Two-day plan"}, "zh": {"one-day": "一天的日程", "two-day": "两天的日程"}}
_TEXT: dict[str, dict[str, str]] = {
    "en": {
           "head": "| Time | Block | Talk | Run All: laptop (quick) / GPU (full), measured | Exercises | Leave for self-study | Runs live on |",
           "day": "Day {n}", "break": "break", "lunch": "lunch", "close": "post-test, the room's bench table, questions",
           "none": "none", "min": "min", "self": "Not in this plan (self-study, or a second day): {lessons}.",
           "unmeasured": "not measured"},
    "zh": {
           "head": "| 时间 | 环节 | 讲解 | 运行所有单元格：笔记本电脑（快速模式）/ GPU（完整模式），实测 | 练习 | 留作自学 | 现场运行需要 |",
           "day": "第 {n} 天", "break": "休息", "lunch": "午餐", "close": "课后测验、全班基准测试汇总表、答疑",
           "none": "无", "min": "分钟", "self": "本日程不包含（自学或第二天）：{lessons}。",
           "unmeasured": "未测"},
}


def section_headings(lesson: "str | Path") -> list[str]:
    """The ``## `` headings of a lesson, in order (the plan's sections are named by fragments of them)."""
    from fp16lab.course.paths import read_notebook

    nb = read_notebook("lesson", lesson)
    return [line[3:].strip() for c in nb.cells if c.cell_type == "markdown"
            for line in c.source.splitlines() if line.startswith("## ")]


def _resolve(fragment: str, headings: list[str]) -> int:
    hits = [i for i, h in enumerate(headings) if fragment.lower() in h.lower()]
    if len(hits) != 1:
        raise ValueError(f"section {fragment!r} matches {len(hits)} headings of the lesson (need exactly one): "
                         f"{headings}")
    return hits[0]


def _section(heading: str) -> str:
    return re.sub(r"^(\d+)\s*[·.]\s*", r"§\1 ", heading)


def _minutes(seconds: float | None) -> int | None:
    return None if seconds is None else max(1, math.ceil(seconds / 60))


def plan_blocks(plan: str, timings: dict[str, Any] | None = None,
                root: "str | Path | None" = None) -> list[list[dict[str, Any]]]:
    """The plan's days, each a list of blocks with resolved sections and measured run minutes."""
    import json

    plan = checks.one_of("plan", plan, tuple(PLANS))
    if timings is not None and not isinstance(timings, dict):
        raise TypeError(f"timings must be a dict of lesson file -> recorded times (timings.json) or None, "
                        f"got {type(timings).__name__}")
    nbdir = _paths.notebooks_dir(root)
    if timings is None:
        tfile = _paths.timings_file(root)
        timings = json.loads(tfile.read_text(encoding="utf-8")) if tfile.is_file() else {}
    days = []
    for day in PLANS[plan]:
        out = []
        for b in day:
            lesson = nbdir / f"{b.lesson}.ipynb"
            heads = section_headings(lesson)
            entry = timings.get(lesson.name) or {}
            quick, full = (entry.get(m) or {} for m in ("quick", "full"))
            zh = lesson.parent / "zh" / lesson.name
            zh_heads = section_headings(zh) if zh.is_file() else []
            found = [_resolve(f, heads) for f in b.skip]
            out.append({"block": b, "lesson": lesson, "title": entry.get("title", b.lesson),
                        "skip": [_section(heads[i]) for i in found],
                        "skip_zh": [_section(zh_heads[i] if len(zh_heads) == len(heads) else heads[i]) for i in found],
                        "quick_min": _minutes(quick.get("seconds")), "full_min": _minutes(full.get("seconds")),
                        "quick": quick, "full": full})
        days.append(out)
    return days


def _zh_title(lesson: Path, fallback: str) -> str:
    """The Chinese lesson's title (notebooks/zh/NN_x.ipynb), or the English one while there is none."""
    import nbformat

    zh = lesson.parent / "zh" / lesson.name
    if zh.is_file():
        for c in nbformat.read(zh, as_version=4).cells:
            m = re.search(r"^#\s+(.+)$", c.source, flags=re.M) if c.cell_type == "markdown" else None
            if m:
                return m.group(1).strip()
    return fallback


def _clock(m: int) -> str:
    return f"{m // 60:02d}:{m % 60:02d}"


def plan_table(plan: str, *, lang: str = "en", timings: dict[str, Any] | None = None,
               root: "str | Path | None" = None) -> str:
    """A plan as markdown: per day, a table of blocks with start times (talk + run + exercises each)."""
    lang = check_lang(lang)
    if timings is not None and not isinstance(timings, dict):
        raise TypeError(f"timings must be a dict of lesson file -> recorded times (timings.json) or None, "
                        f"got {type(timings).__name__}")
    t = _TEXT[lang]
    days = plan_blocks(plan, timings, root)
    out = [f"#### {_TITLES[lang][plan]}", ""]
    planned = set()
    for n, day in enumerate(days, 1):
        if len(days) > 1:
            out += [f"**{t['day'].format(n=n)}**", ""]
        out += [t["head"], "|---|---|---|---|---|---|---|"]
        clock = DAY_START
        breaks = dict(BREAKS[plan])
        for k, b in enumerate(day, 1):
            blk: Block = b["block"]
            planned.add(blk.lesson)
            run = max(b["quick_min"] or 0, b["full_min"] or 0)
            runs = (f"{b['quick_min'] or t['unmeasured']} / {b['full_min'] or t['unmeasured']} {t['min']}")
            need = GPU_NEEDS.get(blk.lesson, ("", ""))[0 if lang == "en" else 1]
            skip = ("; " if lang == "en" else "；").join(b["skip"] if lang == "en" else b["skip_zh"]) or t["none"]
            title = b["title"] if lang == "en" else _zh_title(b["lesson"], b["title"])
            out.append(f"| {_clock(clock)} | [{title}]({blk.lesson}.ipynb) | {blk.talk} {t['min']} | {runs} "
                       f"| {blk.exercises} {t['min']} | {skip} | {need} |")
            clock += blk.talk + run + blk.exercises
            if k in breaks:
                word = t["lunch"] if breaks[k] >= 45 else t["break"]
                out.append(f"| {_clock(clock)} | *{word}* | {breaks[k]} {t['min']} | | | | |")
                clock += breaks[k]
        if n == len(days):
            out.append(f"| {_clock(clock)} | *{t['close']}* | {CLOSE} {t['min']} | | | | |")
            clock += CLOSE
        out.append(f"| {_clock(clock)} | | | | | | |")
        out.append("")
    rest = [p.stem for p in _paths.lessons(_paths.notebooks_dir(root)) if p.stem not in planned]
    if rest:
        out.append(t["self"].format(lessons=(", " if lang == "en" else "、").join(rest)))
    return "\n".join(out).rstrip() + "\n"


def plans_block(lang: str = "en", timings: dict[str, Any] | None = None, root: "str | Path | None" = None) -> str:
    """Both plans, as they stand between the plan markers of the instructor guide."""
    return "\n".join(plan_table(p, lang=lang, timings=timings, root=root) for p in PLANS).rstrip()


def guides(root: "str | Path | None" = None) -> dict[str, Path]:
    """The instructor guides that carry the plans: {lang: path}."""
    nbdir = _paths.notebooks_dir(root)
    return {"en": nbdir / "INSTRUCTORS.md", "zh": nbdir / "zh" / "INSTRUCTORS.md"}


def update_plans(root: "str | Path | None" = None) -> list[Path]:
    """Rewrite the plans in each instructor guide that has the markers; the guides that changed."""
    changed = []
    for lang, guide in guides(root).items():
        if guide.is_file() and PLANS_START in guide.read_text(encoding="utf-8"):
            if _paths.replace_block(guide, PLANS_START, PLANS_END, plans_block(lang, root=root)):
                changed.append(guide)
    return changed


def plan_problems(root: "str | Path | None" = None) -> list[str]:
    """Why a guide's plans are stale or missing (one line each)."""
    problems = []
    for lang, guide in guides(root).items():
        if not guide.is_file():
            problems.append(f"{guide.name} ({lang}): missing")
            continue
        text = guide.read_text(encoding="utf-8")
        try:
            block = plans_block(lang, root=root)
        except ValueError as exc:  # a section the plans name is gone or renamed
            problems.append(f"fp16lab/course/plans.py: {exc}")
            break
        if f"{PLANS_START}\n{block}\n{PLANS_END}" not in text:
            problems.append(f"{guide.relative_to(_paths.notebooks_dir(root))}: the plans differ from the lessons "
                            "and timings (run `python -m fp16lab workshop write`)")
    return problems
