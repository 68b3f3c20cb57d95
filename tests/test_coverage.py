"""The guides stay in step with the lessons: the article's coverage table and the start page."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from fp16lab.course import paths

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
LESSONS = paths.lessons(NOTEBOOKS)
GUIDE = paths.instructors_guide(ROOT).read_text(encoding="utf-8")
START = paths.start_page(ROOT).read_text(encoding="utf-8")


def _coverage() -> str:
    m = re.search(r"<!-- coverage:start -->\n(.*?)<!-- coverage:end -->", GUIDE, flags=re.S)
    assert m, "notebooks/INSTRUCTORS.md lacks the <!-- coverage:start --> ... <!-- coverage:end --> table"
    return m.group(1)


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.name)
def test_coverage_table_lists_every_lesson(lesson):
    assert f"`{lesson.name}`" in _coverage(), f"the article's coverage table does not name {lesson.name}"


@pytest.mark.parametrize("name", paths.CURRICULUM[4:])
def test_coverage_table_names_the_planned_lessons(name):
    assert f"`{name}.ipynb`" in _coverage()


@pytest.mark.parametrize("name", paths.CURRICULUM)
def test_start_page_lists_the_whole_curriculum(name):
    assert f"(work/{name}.ipynb)" in START


@pytest.mark.parametrize("claim", [
    "CUDA 11.7", "1.12", "2.10", "1200", "2200", "8.5 GB", "4.2 GB", "8 的倍数", "cudnn.benchmark",
    "原地操作", "empty_cache()", "实验不同批处理大小", "clip_grad_norm_", "强制使用 FP32", "瓶颈操作",
    "Tensor Core 的要求", "梯度累积", "pin_memory", "num_workers", "torch.cuda.amp", "autocast()", "GradScaler",
    "运行简单的 FP16 计算测试", "cuDNN", "在自己的模型上", "梯度消失或溢出", "并非所有操作都支持 FP16",
])
def test_coverage_table_has_every_claim_of_the_article(claim):
    assert claim in _coverage(), f"the coverage table has no row for the article's {claim!r}"


def test_coverage_rows_say_where_or_why_not():
    rows = [r for r in _coverage().splitlines() if re.match(r"^\| \d+ \|", r)]
    assert len(rows) >= 25
    for r in rows:
        cells = [c.strip() for c in r.strip("|").split("|")]
        assert len(cells) == 6 and all(cells), f"a row needs all six columns filled: {r[:120]}"
        assert ".ipynb" in cells[3], f"row {cells[0]} names no lesson: {r[:120]}"
        assert re.match(r"^(measured|shown|planned)", cells[4]), f"row {cells[0]}: unknown status {cells[4]!r}"


@pytest.mark.parametrize("lesson", LESSONS, ids=lambda p: p.name)
def test_start_page_leads_to_every_lesson(lesson):
    assert f"(work/{lesson.name})" in START, f"notebooks/README.md has no link to your copy of {lesson.name}"


@pytest.mark.parametrize("term", ["Tensor Core", "sm_XY", "TF32", "loss scale", "channels_last", "MFU",
                                  "autocast", "master weights"])
def test_start_page_glossary(term):
    glossary = START.split("## Glossary", 1)[1].split("\n## ", 1)[0]
    assert f"**{term}" in glossary


def test_start_page_introduces_the_article_and_what_next():
    for section in ["背景与痛点", "环境配置", "核心实现", "性能优化", "避坑指南", "性能测试", "结语"]:
        assert section in START
    for heading in ["## What next", "## Which precision? A decision guide", "## The same switches in other frameworks"]:
        assert heading in START
    for switch in ["fp16=True", "bf16=True", "tf32=True", 'mixed_precision="fp16"', 'precision="16-mixed"',
                   'precision="bf16-mixed"']:
        assert switch in START
    assert "INSTRUCTORS.md" in START and "README.md" in (ROOT / "README.md").read_text()
