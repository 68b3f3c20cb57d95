"""The post-test's keys are the facts the lessons check: each recomputed here with PyTorch where it can be."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch
from torch import nn

from fp16lab.course.posttest import QUESTIONS, grade, render

ROOT = Path(__file__).resolve().parent.parent
KEY = ",".join(f"{k}{q.answer}" for k, q in enumerate(QUESTIONS, 1))


def _choice(k: int) -> str:
    q = QUESTIONS[k - 1]
    return q.choices[ord(q.answer) - 97][0]


def test_fp16_range_and_spacing_keys():
    assert float(_choice(1)) == torch.finfo(torch.float16).max
    two = torch.tensor(2048.0, dtype=torch.float16)
    assert float(_choice(2)) == (two + 1).item()


def _clip_after(order_right: bool) -> float:
    torch.manual_seed(0)
    model = nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    scaler = torch.amp.GradScaler("cpu", init_scale=2.0**16)
    loss = (model(torch.randn(4, 8)) * 100).sum()
    scaler.scale(loss).backward()
    if order_right:
        scaler.unscale_(opt)
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    else:
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.unscale_(opt)
    return float(torch.linalg.vector_norm(torch.cat([p.grad.flatten() for p in model.parameters()])))


def test_the_amp_order_key_clips_the_real_gradient():
    assert "unscale_, clip" in _choice(3) or "unscale_、裁剪" in QUESTIONS[2].choices[1][1]
    assert _clip_after(True) == pytest.approx(1.0, rel=1e-4), "unscale_ then clip: the norm is max_norm"
    assert _clip_after(False) < 1e-3, "clip then unscale_: the scaled norm was clipped, the real one is tiny"


def test_an_inf_gradient_skips_the_step_and_lowers_the_scale():
    model = nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=1.0)
    scaler = torch.amp.GradScaler("cpu", init_scale=1024.0)
    before = [p.detach().clone() for p in model.parameters()]
    scaler.scale(model(torch.tensor([[float("inf"), 1.0]])).sum()).backward()
    scaler.step(opt)
    scaler.update()
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))
    assert scaler.get_scale() < 1024.0 and _choice(4).startswith("skips")


def test_autocast_runs_a_linear_layer_in_the_lower_dtype():
    with torch.autocast("cpu", dtype=torch.bfloat16):  # the CPU's autocast: the same lower-precision list idea
        out = nn.Linear(4, 4)(torch.randn(2, 4))
    assert out.dtype == torch.bfloat16 and _choice(5) == "float16"


def test_the_alignment_key_is_the_librarys_rule():
    from fp16lab.align.sizes import alignment_for

    assert int(_choice(6)) == alignment_for("fp16") == alignment_for("bf16")


def test_bf16_is_for_range_not_precision():
    assert torch.finfo(torch.bfloat16).max > 1e38 > torch.finfo(torch.float16).max
    assert torch.finfo(torch.bfloat16).eps > torch.finfo(torch.float16).eps, "less precision than FP16"
    assert _choice(8).startswith("its range")


def test_grading_names_the_wrong_ones_without_giving_the_answer():
    right, lines = grade(KEY)
    assert right == len(QUESTIONS) and lines == [f"{len(QUESTIONS)} of {len(QUESTIONS)} right"]
    wrong = KEY.replace("1b", "1a")
    right, lines = grade(wrong)
    assert right == len(QUESTIONS) - 1 and "question 1: 1a is not right; see lesson 01_fp16_numerics" in lines
    assert not any("65504" in line for line in lines), "the hint names the lesson, not the answer"
    right, lines = grade("1b", lang="zh")
    assert right == 1 and "第 2 题：没有作答" in lines
    for bad in ("9a", "1z", "b1", "1b;2"):
        with pytest.raises(ValueError, match="answers"):
            grade(bad)


def test_every_question_has_both_languages_and_four_choices():
    for q in QUESTIONS:
        assert all(t.strip() for t in q.text) and len(q.choices) == 4 and q.answer in "abcd"
        assert (ROOT / "notebooks" / f"{q.lesson}.ipynb").is_file()
    assert "课后测验" in render("zh") and "Post-test" in render("en")


def test_the_posttest_command(capsys):
    from fp16lab.__main__ import main

    assert main(["workshop", "posttest", "--lang", "zh"]) == 0 and "8." in capsys.readouterr().out
    assert main(["workshop", "posttest", "--answers", KEY]) == 0
    assert f"{len(QUESTIONS)} of {len(QUESTIONS)} right" in capsys.readouterr().out
    assert main(["workshop", "posttest", "--answers", "x"]) == 2 and "'x'" in capsys.readouterr().err


# ---- the talk tracks: slides by nbconvert -------------------------------------------------------------

def test_a_talk_track_has_a_slide_per_section_with_the_reference_figures():
    from fp16lab.course.plans import section_headings
    from fp16lab.course.slides import talk_track

    lesson = ROOT / "notebooks" / "03_tensor_core_alignment.ipynb"
    nb = talk_track(lesson)
    slides = [c for c in nb.cells if c.metadata.get("slideshow", {}).get("slide_type") == "slide"]
    heads = [h for h in section_headings(lesson) if not h.startswith(("Further", "What you", "Prereq"))]
    assert [c.source.splitlines()[0] for c in slides[1:]] == [
        f"## {h}" + (" (self-study in the one-day plan)" if any(f.lower() in h.lower() for b in
                     __import__("fp16lab.course.plans", fromlist=["PLANS"]).PLANS["one-day"][0]
                     if b.lesson == lesson.stem for f in b.skip) else "") for h in heads]
    figures = [c for c in nb.cells if c.cell_type == "code"]
    assert figures and all(len(c.outputs) == 1 for c in figures), "one stored reference output per figure"
    zh = talk_track(lesson, lang="zh")
    assert "你将学到" in zh.cells[0].source and "（一天的日程中留作自学）" in "".join(c.source for c in zh.cells)


def test_the_slides_command_renders_with_nbconvert(tmp_path):
    out = subprocess.run([sys.executable, "-m", "fp16lab", "workshop", "slides",
                          str(ROOT / "notebooks" / "04_pitfalls_numerics.ipynb"), "--out", str(tmp_path)],
                         cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    html = (tmp_path / "04_pitfalls_numerics.talk.slides.html").read_text(encoding="utf-8")
    assert "reveal" in html and html.count("<section") >= 8 and "Overflow to inf/NaN" in html
    assert (tmp_path / "04_pitfalls_numerics.talk.ipynb").is_file()
