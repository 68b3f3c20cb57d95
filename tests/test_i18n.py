"""What a learner's run prints, in Chinese under FP16LAB_LANG=zh: hints, verdicts, banners, the doctor.

The catalogue (fp16lab/course/i18n.py) is checked against the code: every entry is a message some
``tr("...")`` call passes (no dead entries), every message passed has an entry, each entry keeps its
English's ``{fields}``, each call fills exactly its message's fields, and no entry uses a term the
glossary (notebooks/zh/README.md, column 不要用) rules out.
"""

from __future__ import annotations

import ast
import os
import re
import string
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from fp16lab.course import i18n
from fp16lab.course.i18n import ZH, tr

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "fp16lab"
HAN = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture
def zh(monkeypatch):
    """The learner's run in the Chinese lab."""
    monkeypatch.setenv(i18n.LANG_ENV, "zh")


# ---- the switch ---------------------------------------------------------------------------------

def test_english_is_the_default_and_the_fallback(monkeypatch):
    monkeypatch.delenv(i18n.LANG_ENV, raising=False)
    assert tr("correct") == "correct"
    for value in ("fr", "", "chinese", "EN"):  # an unknown value: English, never an error
        monkeypatch.setenv(i18n.LANG_ENV, value)
        assert tr("correct") == "correct"
    monkeypatch.setenv(i18n.LANG_ENV, "zh")
    assert tr("correct") == "正确"
    monkeypatch.setenv(i18n.LANG_ENV, "zh_CN")  # the locale spelling selects Chinese too
    assert tr("correct") == "正确"


def test_a_message_without_translation_falls_back_to_english(zh):
    msgid = "a message nobody translated: {n} items"
    assert msgid not in ZH
    assert tr(msgid, n=3) == "a message nobody translated: 3 items"
    assert tr("no fields, {literal braces} kept") == "no fields, {literal braces} kept"


def test_fields_fill_the_same_values_in_both_languages(monkeypatch):
    msgid = "Hint: normalise_lean allocated {used:.1f} times its input's size: create one new tensor, " \
            "then update it with in-place ops (their names end in an underscore)"
    assert "allocated 2.5 times" in tr(msgid, used=2.49)
    monkeypatch.setenv(i18n.LANG_ENV, "zh")
    assert "2.5 倍" in tr(msgid, used=2.49)
    assert tr(msgid, lang="en", used=2.49).startswith("Hint:"), "an explicit lang wins over the switch"


def test_an_explicit_language_is_checked():
    with pytest.raises(ValueError, match=r"lang must be one of 'en', 'zh'; got 'fr'"):
        i18n.check_lang("fr")
    assert i18n.check_lang("zh", "--lang") == "zh"
    with pytest.raises(TypeError, match="msgid must be a str"):
        tr(None)  # type: ignore[arg-type]


# ---- hints and verdicts -------------------------------------------------------------------------

def test_a_wrong_answer_gets_the_chinese_hint(zh, capsys):
    from fp16lab.course.answers import l00, l01

    with pytest.raises(AssertionError, match="^提示：把一个芯片名称的集合赋给 pays_on$"):
        l00.check_fp16_accumulation(None, ["NVIDIA H100 SXM"])
    ranges = {"pixel values": 256, "GPT-2 token ids": 50257}
    with pytest.raises(AssertionError, match=r"^提示：\['GPT-2 token ids'\] 会改变数值：范围不等于精度"):
        l01.check_storage({"pixel values": "fp16", "GPT-2 token ids": "fp16"}, ranges)
    l01.check_storage({"pixel values": "fp16", "GPT-2 token ids": "fp32"}, ranges)
    assert capsys.readouterr().out == "✓ 正确\n"


def test_the_english_hint_is_unchanged_without_the_switch(monkeypatch):
    from fp16lab.course.answers import l00

    monkeypatch.delenv(i18n.LANG_ENV, raising=False)
    with pytest.raises(AssertionError, match="^Hint: assign a set of chip names to pays_on$"):
        l00.check_fp16_accumulation(None, ["NVIDIA H100 SXM"])


def test_a_check_that_raises_from_the_learners_code_explains_in_chinese(zh):
    from fp16lab.course.answers import l09

    def broken(x: torch.Tensor):
        return x, torch.ones(3)[None, :] * x  # a shape that does not broadcast

    with pytest.raises(AssertionError, match=r"^my_rowwise 抛出了 RuntimeError（.*）：每行一个缩放因子"):
        l09.check_rowwise(broken)


# ---- banners ------------------------------------------------------------------------------------

META = {"device": "NVIDIA H200", "mode": "full", "torch": "2.11.0", "date": "2026-12-01"}


def test_the_stored_outputs_note_in_chinese():
    from fp16lab.course.outputs import note_text

    md, plain = note_text(META, copy=True, lang="zh")
    assert md.startswith("**已存输出：来自英文版课程在 NVIDIA H200（完整模式，torch 2.11.0，2026-12-01）上的运行，")
    assert "*运行 → 运行所有单元格*" in md and "`notebooks/zh/`" in md
    assert plain.startswith("已存输出：来自英文版课程在 NVIDIA H200（完整模式，torch 2.11.0，2026-12-01）上的运行")
    assert "full" not in md + plain and "mode" not in md + plain, "the mode in Chinese, not 'full mode'"
    reference_md, _ = note_text(META, lang="zh")
    assert "`notebooks/work/zh/`" in reference_md and "--lang zh" in reference_md
    english, _ = note_text(META, copy=True)
    assert english.startswith("**Stored outputs from NVIDIA H200 (full mode)** (torch 2.11.0, 2026-12-01), ")
    with pytest.raises(ValueError, match="lang must be one of 'en', 'zh'; got 'de'"):
        note_text(META, lang="de")


def test_the_mode_and_reference_banners_in_chinese(zh, monkeypatch, capsys):
    from fp16lab.course.runtime.quick import mode
    from fp16lab.course.runtime.results import load_reference

    monkeypatch.setenv("FP16LAB_QUICK", "1")
    m = mode()
    assert str(m).startswith("快速模式（FP16LAB_QUICK=1）：问题规模已缩小") and "快速模式" in m._repr_html_()
    assert load_reference("never_recorded_zh") == (None, None)
    assert capsys.readouterr().out.startswith("尚无 GPU 参考结果：results/never_recorded_zh.json 还没有在 GPU 上记录")


# ---- the doctor ---------------------------------------------------------------------------------

def test_the_doctor_in_chinese_keeps_ok_warn_fail(zh, fake_gpu):
    from fp16lab.course.env import report

    fake_gpu("pascal", arch_list=["sm_60", "sm_70"])
    text = str(report())
    assert "[WARN] 原生 BF16" in text and "[OK  ] Python" in text, "labels in Chinese, status words as they are"
    assert "修复：请用 fp16 加 GradScaler" in text
    assert text.splitlines()[-1] == "结论：没有 FAIL 行"
    assert "<th>检查项</th>" in report()._repr_html_()


def test_cli_doctor_prints_chinese():
    env = {**os.environ, i18n.LANG_ENV: "zh"}
    out = subprocess.run([sys.executable, "-m", "fp16lab", "doctor"], capture_output=True, text=True, env=env,
                         cwd=ROOT)
    assert "结论：" in out.stdout, out.stdout + out.stderr
    assert re.search(r"^\[(OK  |WARN|FAIL)\] ", out.stdout, re.M), "the status words stay as they are"


# ---- the catalogue against the code -------------------------------------------------------------

def _tr_calls() -> list[tuple[str, str, set[str] | None]]:
    """(where, msgid, keyword fields or None when the call passes none) for every tr("...") in fp16lab/."""
    calls = []
    for path in sorted(PKG.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "tr":
                where = f"{path.relative_to(ROOT)}:{node.lineno}"
                first = node.args[0] if node.args else None
                assert isinstance(first, ast.Constant) and isinstance(first.value, str), \
                    f"{where}: tr() takes its message as a literal string (so this test can see it)"
                names = {k.arg for k in node.keywords if k.arg and k.arg != "lang"}
                calls.append((where, first.value, names or None))
    return calls


def _fields(text: str) -> list[tuple[str, str, str | None]]:
    """The replacement fields of a format string: (name, format spec, conversion), in order of name."""
    return sorted((f, spec or "", conv) for _, f, spec, conv in string.Formatter().parse(text) if f is not None)


def test_every_catalogue_entry_is_used_and_every_message_has_one():
    used = {msgid for _, msgid, _ in _tr_calls()}
    dead = sorted(set(ZH) - used)
    assert not dead, f"catalogue entries no tr() call passes (remove them or fix the English key): {dead}"
    missing = sorted(used - set(ZH))
    assert not missing, f"messages without a Chinese entry in fp16lab/course/i18n.py's ZH: {missing}"


def test_every_entry_keeps_the_fields_of_its_english():
    for msgid, text in ZH.items():
        assert _fields(text) == _fields(msgid), f"{msgid!r}: the Chinese has other fields: {text!r}"
        assert text != msgid, f"{msgid!r} is not translated"


def test_every_call_fills_exactly_its_messages_fields():
    for where, msgid, names in _tr_calls():
        if names is None:
            continue  # no fields: the text is shown as it is (literal braces allowed)
        wanted = {re.split(r"[.\[]", f)[0] for f, _, _ in _fields(msgid)}
        assert names == wanted, f"{where}: tr({msgid[:50]!r}...) fills {sorted(names)}, the message has {sorted(wanted)}"


def _glossary() -> tuple[list[str], list[str]]:
    """The glossary's (中文 terms, 不要用 terms) (notebooks/zh/README.md)."""
    allowed, banned = [], []
    for line in (ROOT / "notebooks" / "zh" / "README.md").read_text(encoding="utf-8").splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[1] != "中文" and HAN.search(cells[1]):
            allowed += [t.strip() for t in re.split(r"[、,，/（）()]", cells[1]) if HAN.search(t)]
            banned += [t.strip() for t in re.split(r"[、,，]", cells[2]) if t.strip()]
    return sorted(allowed, key=len, reverse=True), banned


def test_the_catalogue_follows_the_glossary():
    allowed, banned = _glossary()
    assert "内核" in banned and "批量大小" in banned, "the glossary's 不要用 column was not read"
    for msgid, text in ZH.items():
        rest = text
        for term in allowed:  # 张量核心 is the term; 张量核 alone is ruled out
            rest = rest.replace(term, "")
        hits = [t for t in banned if t in rest]
        assert not hits, f"{msgid!r}: the glossary rules out {hits}: {text!r}"
