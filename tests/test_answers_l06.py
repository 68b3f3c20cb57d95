"""Lesson 06's exercise checks accept the lesson's solution and reject every wrong answer it lists.

The solutions and the wrong answers are the lesson's own cells (``wrong_answers`` in a solution cell's
metadata), run on the committed H200 run and on a small interleaved run, as the lesson runs them.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from fp16lab.course.answers import WrongAnswer, l06
from fp16lab.labs.benchmark import COMPILED, CONFIGS, RECOMMENDED, BenchResult, BenchSettings, run_benchmark

ROOT = Path(__file__).resolve().parent.parent
LESSON = json.loads((ROOT / "notebooks" / "06_benchmarking.ipynb").read_text())


def _solutions() -> list[dict]:
    return [c for c in LESSON["cells"] if "solution" in c["metadata"].get("tags", [])]


@pytest.fixture(scope="module")
def evidence() -> BenchResult:
    return BenchResult.load(ROOT / "results" / "bench_live.json")  # the lesson's committed H200 run


@pytest.fixture(scope="module")
def rounds() -> BenchResult:
    """A real (tiny, CPU) run with interleaved rounds, as the lesson's quick mode makes."""
    s = BenchSettings(image_size=16, warmup=1, steps=1, windows=2, cpu_threads=1, num_classes=10)
    return run_benchmark("resnet18", ["fp32_default", "bf16_cl"], [2], repeat=["fp32_default", "bf16_cl"], rounds=3,
                         settings=s, device="cpu", progress=False)


def _namespace(evidence: BenchResult, rounds: BenchResult) -> dict:
    return {"evidence": evidence, "live": rounds, "num": "bf16_cl", "den": "fp32_default", "CONFIGS": CONFIGS,
            "RECOMMENDED": RECOMMENDED, "COMPILED": COMPILED, "short_steps": 100, "long_steps": 90 * 1_281_167 // 256}


def _check(number: int, ns: dict) -> None:
    if number == 1:
        l06.check_like_for_like(ns["choice"], ns["ratio"], ns["spread"], ns["evidence"].frame)
    elif number == 2:
        l06.check_round_ratio(ns["ratio_median"], ns["ratio_spread"], ns["live"].frame, ns["num"], ns["den"])
    else:
        l06.check_compile_decision(ns["break_even_steps"], ns["compile_short"], ns["compile_long"],
                                   ns["evidence"].frame, ns["short_steps"], ns["long_steps"])


def test_the_lesson_lists_at_least_two_wrong_answers_per_exercise():
    sols = _solutions()
    assert len(sols) >= 3
    assert all(len(c["metadata"].get("wrong_answers", [])) >= 2 for c in sols)


@pytest.mark.parametrize("number", [1, 2, 3])
def test_the_solution_passes_and_says_only_correct(number, evidence, rounds, capsys):
    ns = _namespace(evidence, rounds)
    exec("".join(_solutions()[number - 1]["source"]), ns)
    _check(number, ns)
    assert capsys.readouterr().out == "✓ correct\n"


@pytest.mark.parametrize("number", [1, 2, 3])
def test_every_wrong_answer_is_rejected_with_a_hint(number, evidence, rounds):
    for wrong in _solutions()[number - 1]["metadata"]["wrong_answers"]:
        ns = _namespace(evidence, rounds)
        exec(wrong, ns)
        with pytest.raises(WrongAnswer, match=r"\w{4,}"):
            _check(number, ns)


def test_the_hints_name_the_mistakes(evidence, rounds):
    f = evidence.frame
    from fp16lab.labs.benchmark.analysis import ratio_values, summarise
    values = ratio_values(f, "bf16_cl", "fp16_cl")[0]
    med, sp, _ = summarise(values)
    inv = summarise([1 / v for v in values])[0]
    expected = "tie" if abs(med - 1) <= sp else ("bf16_cl" if med > 1 else "fp16_cl")
    with pytest.raises(WrongAnswer, match="like for like"):
        l06.check_like_for_like("fp16_cl_fused", med, sp, f)
    with pytest.raises(WrongAnswer, match="upside down"):
        l06.check_like_for_like(expected, inv, sp, f)
    with pytest.raises(WrongAnswer, match="call it a tie" if expected == "tie" else "not a tie"):
        l06.check_like_for_like("bf16_cl" if expected == "tie" else "tie", med, sp, f)
    if expected == "fp16_cl":
        with pytest.raises(WrongAnswer, match="do not follow the guide"):
            l06.check_like_for_like("bf16_cl", med, sp, f)
    with pytest.raises(WrongAnswer, match="assign choice"):
        l06.check_like_for_like(None, None, None, f)
    rep = rounds.frame[rounds.frame["part"] == "repeat"].pivot(index="round", columns="config", values="img_per_s")
    ratios = rep["bf16_cl"] / rep["fp32_default"]
    med = float(ratios.median())
    with pytest.raises(WrongAnswer, match="not the standard deviation"):
        l06.check_round_ratio(med, float(ratios.std()), rounds.frame, "bf16_cl", "fp32_default")
    medians = rep.median()
    if not math.isclose(medians["bf16_cl"] / medians["fp32_default"], med, rel_tol=1e-9):
        with pytest.raises(WrongAnswer, match="ratio of the two medians"):
            l06.check_round_ratio(medians["bf16_cl"] / medians["fp32_default"], 0.0, rounds.frame, "bf16_cl",
                                  "fp32_default")
    with pytest.raises(WrongAnswer, match="both first steps count"):
        l06.check_compile_decision(0.0, True, True, f, 100, 450_000)
    with pytest.raises(WrongAnswer, match="True or False"):
        l06.check_compile_decision(1.0, "yes", True, f, 100, 450_000)


def test_a_compile_that_is_not_faster_never_breaks_even(evidence):
    f = evidence.frame.copy()
    recipe = (f["config"] == RECOMMENDED) & (f["part"] == "comparison")
    compiled = (f["config"] == COMPILED) & (f["part"] == "comparison")
    f.loc[compiled, "img_per_s"] = float(f.loc[recipe, "img_per_s"].iloc[0]) * 0.9
    l06.check_compile_decision(math.inf, False, False, f, 100, 450_000)
    with pytest.raises(WrongAnswer, match="never breaks even"):
        l06.check_compile_decision(1000.0, False, True, f, 100, 450_000)
