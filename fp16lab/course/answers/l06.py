"""Lesson 06 (benchmarking): the exercise checks. Each computes its answer from the run it is given.

Why here: a check cell calls one of these and shows only the verdict or a hint, so the learner
never reads the expected value in the lesson.
"""

from __future__ import annotations

import math
from typing import Any

import pandas as pd

from fp16lab.course.answers import WrongAnswer, require, verdict
from fp16lab.labs.benchmark import COMPILED, CONFIGS, RECOMMENDED
from fp16lab.labs.benchmark.analysis import ratio_values, summarise
from fp16lab.labs.runtime.i18n import tr

__all__ = ["eager_candidates", "check_like_for_like", "check_round_ratio", "check_compile_decision"]



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


def check_like_for_like(choice: Any, ratio: Any, spread: Any, frame: pd.DataFrame) -> None:
    """Exercise 1: ``bf16_cl`` against ``fp16_cl`` (they differ in precision alone), judged against the rounds' spread."""
    require(choice is not None and ratio is not None and spread is not None,
          tr("assign choice (fp16_cl, bf16_cl or tie), ratio and spread (numbers)"))
    require(not (isinstance(choice, str) and choice in CONFIGS and choice not in ("fp16_cl", "bf16_cl")),
          tr("like for like: that row also changes the optimizer, the layout, the loop or adds a compile; "
             "compare the two rows that differ in precision alone"))
    values, source = ratio_values(frame, "bf16_cl", "fp16_cl")
    require(source == "interleaved rounds",
          tr("this run has no interleaved rounds of both {num} and {den}", num="bf16_cl", den="fp16_cl"))
    med, sp, _ = summarise(values)
    if not _close(ratio, med, 1e-6):
        inverse = [1 / v for v in values]
        hint = (tr("ratio: upside down: bf16_cl's images/s over fp16_cl's in each round")
                if _close(ratio, summarise(inverse)[0], 1e-6) else
                tr("ratio: the median of the per-round ratios bf16_cl / fp16_cl of the interleaved rounds "
                   "(part 'repeat'), not one run's figures"))
        raise WrongAnswer(hint)
    require(_close(spread, sp, 1e-6) or (sp == 0 and spread == 0),
          tr("spread: the largest |round ratio - median| of those ratios"))
    expected = "tie" if abs(med - 1) <= sp else ("bf16_cl" if med > 1 else "fp16_cl")
    hint = (tr("the difference is inside the spread: call it a tie") if expected == "tie" else
            tr("the difference is larger than the spread: that is not a tie") if choice == "tie" else
            tr("measure, do not follow the guide: the faster of the two is the one whose images/s is higher "
               "in the rounds"))
    verdict(choice == expected, hint)


def check_round_ratio(ratio_median: Any, ratio_spread: Any, frame: pd.DataFrame, num: str, den: str) -> None:
    """Exercise 2: the median of the per-round ratios ``num / den`` and its spread."""
    require(ratio_median is not None and ratio_spread is not None, tr("assign ratio_median and ratio_spread"))
    values, source = ratio_values(frame, num, den)
    require(source == "interleaved rounds", tr("this run has no interleaved rounds of both {num} and {den}",
                                                num=num, den=den))
    med, spread, _ = summarise(values)
    if not _close(ratio_median, med, 1e-9):
        rep = frame[(frame["part"] == "repeat") & (frame["status"] == "ok")].groupby("config")["img_per_s"].median()
        hint = (tr("ratio_median: that is the ratio of the two medians; take the median of the per-round ratios")
                if _close(ratio_median, float(rep[num] / rep[den]), 1e-9) else
                tr("ratio_median: divide num by den within each round, then take the median (not the mean) of "
                   "those ratios"))
        raise WrongAnswer(hint)
    verdict(_close(ratio_spread, spread, 1e-9) or (spread == 0 and ratio_spread == 0),
            tr("ratio_spread: the largest |round ratio - median| (not the standard deviation, not max - min)"))


def _break_even(frame: pd.DataFrame) -> tuple[float, int]:
    """Steps after which the compiled recipe's faster steps have paid for its longer first step."""
    comp = _comparison(frame)
    for name in (RECOMMENDED, COMPILED):
        require(name in comp.index, tr("this run has no {name} row: use the lesson's `evidence`", name=name))
    batch = int(comp.loc[RECOMMENDED, "batch_size"])
    saved = batch / float(comp.loc[RECOMMENDED, "img_per_s"]) - batch / float(comp.loc[COMPILED, "img_per_s"])
    extra = float(comp.loc[COMPILED, "first_step_s"]) - float(comp.loc[RECOMMENDED, "first_step_s"])
    return (math.inf if saved <= 0 else extra / saved), batch


def check_compile_decision(break_even_steps: Any, compile_short: Any, compile_long: Any, frame: pd.DataFrame,
                           short_steps: int, long_steps: int) -> None:
    """Exercise 3: the compiled recipe's break-even in steps, and whether to compile each job."""
    require(None not in (break_even_steps, compile_short, compile_long),
            tr("assign break_even_steps (a number), compile_short and compile_long (True or False)"))
    steps, _ = _break_even(frame)
    require(isinstance(compile_short, bool) and isinstance(compile_long, bool),
            tr("compile_short and compile_long are decisions: True or False"))
    if math.isinf(steps):
        require(break_even_steps == math.inf, tr("the compiled recipe is not faster per step here: it never breaks even "
                                              "(break_even_steps = math.inf)"))
    else:
        require(_close(break_even_steps, steps, 1e-6),
                tr("break_even_steps: (compiled first step s - recipe first step s) / (seconds a step saves), "
                "with a step's seconds = batch / images per second; both first steps count"))
    verdict(compile_short == (short_steps > steps) and compile_long == (long_steps > steps),
            tr("compile a job only when it runs more steps than the break-even"))

