"""Lesson 06 (benchmarking): the exercise checks. Each computes its answer from the run it is given.

Why here: a check cell calls one of these and shows only the verdict or a hint, so the learner
never reads the expected value in the lesson.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from fp16lab.course.answers import verdict
from fp16lab.course.i18n import tr
from fp16lab.labs.benchmark import COMPILED, CONFIGS, RECOMMENDED
from fp16lab.labs.benchmark.analysis import ratio_values, summarise

__all__ = ["eager_candidates", "check_eager_pick", "check_round_ratio", "check_compile_decision"]


def _need(ok: bool, hint: str) -> None:
    """Stop with ``hint`` when a step of the answer is wrong (the verdict is printed once, at the end)."""
    if not ok:
        raise AssertionError(hint)


def _close(a: object, b: float, rel: float = 1e-3) -> bool:
    """``a`` is a real number within ``rel`` of ``b``."""
    try:
        a = float(a)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return False
    return math.isfinite(a) and math.isfinite(b) and abs(a - b) <= rel * abs(b)


def _comparison(frame: pd.DataFrame) -> pd.DataFrame:
    f = frame[(frame["part"] == "comparison") & (frame["status"] == "ok")] if "part" in frame else frame
    return f.set_index("config")


def eager_candidates(frame: pd.DataFrame) -> pd.Series:
    """Images/s of the comparison rows that ran without torch.compile or a CUDA graph (the article's loop excluded)."""
    comp = _comparison(frame)
    keep = [c for c in comp.index if c in CONFIGS and c != "article"
            and not CONFIGS[c].compile and not CONFIGS[c].cuda_graph]
    return comp.loc[keep, "img_per_s"].astype(float)


def check_eager_pick(choice: Any, advantage: Any, frame: pd.DataFrame) -> None:
    """Exercise 1: the fastest eager configuration of the run, and its images/s over ``bf16_cl``'s."""
    _need(choice is not None and advantage is not None, tr("assign choice (a configuration name) and advantage (a number)"))
    rates = eager_candidates(frame)
    _need("bf16_cl" in rates.index, tr("this run has no bf16_cl row to compare with: use the lesson's `evidence`"))
    _need(not (isinstance(choice, str) and choice in CONFIGS and CONFIGS[choice].compile),
            tr("eager only: torch.compile costs a compile per model and shape, which the colleague did not ask for"))
    _need(isinstance(choice, str) and choice in rates.index,
            tr("choice: one configuration name from the run's comparison rows that ran eagerly (not the article's loop)"))
    best = str(rates.idxmax())
    _need(choice != "bf16_cl" or best == "bf16_cl",
            tr("measure, do not follow the guide: compare bf16_cl's images/s with every other eager row"))
    _need(choice == best, tr("compare every eager row, not only the two precisions: the layout and the optimizer "
                          "change images/s too"))
    verdict(_close(advantage, float(rates[best] / rates["bf16_cl"])),
            tr("advantage: your choice's images/s divided by bf16_cl's (above 1 when your choice is faster)"))


def check_round_ratio(ratio_median: Any, ratio_spread: Any, frame: pd.DataFrame, num: str, den: str) -> None:
    """Exercise 2: the median of the per-round ratios ``num / den`` and its spread."""
    _need(ratio_median is not None and ratio_spread is not None, tr("assign ratio_median and ratio_spread"))
    values, source = ratio_values(frame, num, den)
    _need(source == "interleaved rounds", tr("this run has no interleaved rounds of both {num} and {den}",
                                                num=num, den=den))
    med, spread, _ = summarise(values)
    if not _close(ratio_median, med, 1e-9):
        rep = frame[(frame["part"] == "repeat") & (frame["status"] == "ok")].groupby("config")["img_per_s"].median()
        hint = (tr("ratio_median: that is the ratio of the two medians; take the median of the per-round ratios")
                if _close(ratio_median, float(rep[num] / rep[den]), 1e-9) else
                tr("ratio_median: divide num by den within each round, then take the median (not the mean) of "
                   "those ratios"))
        raise AssertionError(hint)
    verdict(_close(ratio_spread, spread, 1e-9) or (spread == 0 and ratio_spread == 0),
            tr("ratio_spread: the largest |round ratio - median| (not the standard deviation, not max - min)"))


def _break_even(frame: pd.DataFrame) -> tuple[float, int]:
    """Steps after which the compiled recipe's faster steps have paid for its longer first step."""
    comp = _comparison(frame)
    for name in (RECOMMENDED, COMPILED):
        _need(name in comp.index, tr("this run has no {name} row: use the lesson's `evidence`", name=name))
    batch = int(comp.loc[RECOMMENDED, "batch_size"])
    saved = batch / float(comp.loc[RECOMMENDED, "img_per_s"]) - batch / float(comp.loc[COMPILED, "img_per_s"])
    extra = float(comp.loc[COMPILED, "first_step_s"]) - float(comp.loc[RECOMMENDED, "first_step_s"])
    return (math.inf if saved <= 0 else extra / saved), batch


def check_compile_decision(break_even_steps: Any, compile_short: Any, compile_long: Any, frame: pd.DataFrame,
                           short_steps: int, long_steps: int) -> None:
    """Exercise 3: the compiled recipe's break-even in steps, and whether to compile each job."""
    _need(None not in (break_even_steps, compile_short, compile_long),
            tr("assign break_even_steps (a number), compile_short and compile_long (True or False)"))
    steps, _ = _break_even(frame)
    _need(isinstance(compile_short, bool) and isinstance(compile_long, bool),
            tr("compile_short and compile_long are decisions: True or False"))
    if math.isinf(steps):
        _need(break_even_steps == math.inf, tr("the compiled recipe is not faster per step here: it never breaks even "
                                              "(break_even_steps = math.inf)"))
    else:
        _need(_close(break_even_steps, steps, 1e-6),
                tr("break_even_steps: (compiled first step s - recipe first step s) / (seconds a step saves), "
                "with a step's seconds = batch / images per second; both first steps count"))
    verdict(compile_short == (short_steps > steps) and compile_long == (long_steps > steps),
            tr("compile a job only when it runs more steps than the break-even"))

