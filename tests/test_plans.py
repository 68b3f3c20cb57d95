"""The one-day and two-day plans: built from the lessons and the measured run times, in both languages."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fp16lab.course import plans
from fp16lab.course.paths import lessons

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("plan", list(plans.PLANS))
def test_every_section_a_plan_skips_is_one_heading_of_its_lesson(plan):
    """A renamed or removed section fails here, naming it (the plan names sections by heading fragments)."""
    for day in plans.plan_blocks(plan, root=ROOT):
        for b in day:
            assert len(b["skip"]) == len(b["block"].skip)


def test_a_fragment_that_matches_no_or_two_headings_is_refused():
    with pytest.raises(ValueError, match="matches 0 headings"):
        plans._resolve("no such section", ["1 · Setup", "2 · Range"])
    with pytest.raises(ValueError, match="matches 2 headings"):
        plans._resolve("e", ["1 · Setup", "2 · Range"])


def test_the_plans_use_the_measured_run_times_and_add_up(tmp_path):
    timings = {"02_amp_training_loop.ipynb": {"title": "02", "quick": {"seconds": 610.0}, "full": {"seconds": 59.0}}}
    text = plans.plan_table("one-day", timings=timings, root=ROOT)
    row = next(line for line in text.splitlines() if "(02_amp_training_loop.ipynb)" in line)
    assert "| 11 / 1 min |" in row, "seconds rounded up to minutes, laptop / GPU"
    times = [int(h) * 60 + int(m) for h, m in re.findall(r"^\| (\d\d):(\d\d) \|", text, flags=re.M)]
    assert times == sorted(times) and times[0] == plans.DAY_START
    b = plans.PLANS["one-day"][0][2]
    i = [line for line in text.splitlines() if re.match(r"^\| \d\d:\d\d \|", line)].index(row)
    start, nxt = times[i], times[i + 1]
    assert nxt - start == b.talk + 11 + b.exercises, "a block lasts talk + the longer run + exercises"


def test_every_lesson_is_in_the_two_day_plan_and_the_one_day_plan_names_what_it_leaves_out():
    two = {b.lesson for day in plans.PLANS["two-day"] for b in day}
    assert two == {p.stem for p in lessons(ROOT / "notebooks")}
    one = plans.plan_table("one-day", root=ROOT)
    left = [p.stem for p in lessons(ROOT / "notebooks") if p.stem not in {b.lesson for b in plans.PLANS["one-day"][0]}]
    assert left and all(stem in one.splitlines()[-1] for stem in left)
    assert "sm_89" in plans.plan_table("two-day", root=ROOT) and "two GPUs" in plans.plan_table("two-day", root=ROOT)


def test_the_chinese_plan_is_chinese():
    zh = plans.plan_table("two-day", lang="zh", root=ROOT)
    assert "第 2 天" in zh and "午餐" in zh and "分钟" in zh
    plain = re.sub(r"`[^`]*`|\([^)]*\.ipynb\)|sm_\d+|[A-Z][\w./+-]*|\d+", "", zh)
    assert not re.search(r"\b[a-z]{3,}\s+[a-z]{3,}\b", plain), "no English phrase of the plan's own"


def test_the_guides_carry_the_current_plans():
    assert plans.plan_problems(ROOT) == []


def test_workshop_agenda_prints_a_plan_in_both_languages(capsys):
    from fp16lab.__main__ import main

    for lang, word in (("en", "One-day plan"), ("zh", "一天的日程")):
        assert main(["workshop", "agenda", "--plan", "one-day", "--lang", lang]) == 0
        assert word in capsys.readouterr().out
    assert main(["workshop", "agenda", "--lang", "fr"]) == 2 and "'fr'" in capsys.readouterr().err
