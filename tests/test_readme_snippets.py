"""Every ```python block of README.md runs, so the reuse guide cannot rot; README.zh-CN.md shows the same blocks."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
README_ZH = ROOT / "README.zh-CN.md"  # the Chinese README: its python blocks are README.md's, verbatim
FENCE = re.compile(r"^```python[ \t]*\n(.*?)^```[ \t]*$", re.M | re.S)
HEADING = re.compile(r"^#{2,4}\s+(.+)$", re.M)


def snippets(text: str) -> list[tuple[str, str]]:
    """(id, code) of each ```python block, the id naming the heading above it."""
    out: list[tuple[str, str]] = []
    for m in FENCE.finditer(text):
        heads = HEADING.findall(text, 0, m.start())
        where = re.sub(r"[^a-z0-9]+", "-", heads[-1].lower()).strip("-") if heads else "top"
        line = text.count("\n", 0, m.start()) + 1
        out.append((f"L{line}-{where}", m.group(1)))
    return out


SNIPPETS = snippets(README.read_text(encoding="utf-8"))


def test_extraction_finds_python_blocks_only():
    text = "## A\n```python\nx = 1\n```\n```bash\nls\n```\n### B c\n```python\ny = 2\n```\n"
    assert snippets(text) == [("L2-a", "x = 1\n"), ("L9-b-c", "y = 2\n")]


def code_tokens(code: str) -> list[tuple[int, str]]:
    """The tokens of ``code`` less its comments (and the line ends they leave): what runs."""
    skip = (tokenize.COMMENT, tokenize.NL)
    return [(t.type, t.string) for t in tokenize.generate_tokens(io.StringIO(code).readline) if t.type not in skip]


def test_the_chinese_readme_shows_the_same_snippets():
    """README.zh-CN.md says its code is README.md's, run by this file: it is, block for block, token for token (only
    the prose and the comments are Chinese), so the blocks run here are the ones a Chinese reader copies."""
    zh = [code for _, code in snippets(README_ZH.read_text(encoding="utf-8"))]
    en = [code for _, code in SNIPPETS]
    assert len(zh) == len(en), f"README.zh-CN.md has {len(zh)} python blocks, README.md {len(en)}"
    for n, (z, e) in enumerate(zip(zh, en, strict=True), 1):
        assert code_tokens(z) == code_tokens(e), \
            f"python block {n} of README.zh-CN.md differs from README.md's:\n{z}\n--- README.md\n{e}"
        english = [t.string for t in tokenize.generate_tokens(io.StringIO(z).readline)
                   if t.type == tokenize.COMMENT and not re.search(r"[\u4e00-\u9fff]", t.string)
                   and re.search(r"[A-Za-z]{2,} [A-Za-z]{2,}", t.string)]
        assert not english, f"python block {n} of README.zh-CN.md has English comments: {english}"


def test_the_chinese_readme_says_what_it_is():
    """What README.zh-CN.md says about itself holds: its code is README.md's token for token with Chinese comments
    (the test above), and its list of what stays English names nothing fp16lab now says in Chinese (tests/test_i18n.py:
    audit's summary and fix column, argument errors, WorkerError)."""
    text = README_ZH.read_text(encoding="utf-8")
    assert "只有注释译成了中文" in text and "注释因此保持英文" not in text, "its comments are Chinese"
    still = text[text.index("目前仍保持英文的有："):]
    still = still[:still.index("。")]
    for said in ("`audit` 的报告", "`WorkerError`", "fp16lab 的参数错误信息"):
        assert said not in still, f"README.zh-CN.md lists {said} as English, but it speaks Chinese now: {still}"


def test_comments_do_not_count_as_code():
    assert code_tokens("x = f(1)  # one\n# two\ny = 2\n") == code_tokens("x = f(1)  # 一\ny = 2\n")
    assert code_tokens("x = 1\n") != code_tokens("x = 2  # 1\n")


def test_readme_has_snippets():
    assert len(SNIPPETS) >= 5, "the reuse guide in README.md should show a snippet for each task"


@pytest.mark.parametrize("code", [c for _, c in SNIPPETS], ids=[i for i, _ in SNIPPETS])
def test_snippet_runs(code, tmp_path):
    """Each block runs on its own, in a fresh interpreter, in quick mode, in an empty folder."""
    env = dict(os.environ, FP16LAB_QUICK="1", MPLBACKEND="Agg", FP16LAB_RESULTS_DIR=str(tmp_path / "results"))
    (tmp_path / "results").mkdir()
    run = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, f"README snippet failed:\n{code}\n--- stdout\n{run.stdout[-3000:]}\n--- stderr\n{run.stderr[-3000:]}"
    # a printed table shows what the text around it promises: pandas elides columns (and says
    # "[n rows x m columns]") when a frame is wider than the terminal
    assert not re.search(r"\[\d+ rows x \d+ columns\]", run.stdout), f"a printed table is cut short:\n{run.stdout[-2000:]}"
