"""What a learner's run prints, in Chinese under FP16LAB_LANG=zh: hints, verdicts, banners, the doctor.

The catalogue (fp16lab/labs/runtime/i18n.py) is checked against the code: every entry is a message some
``tr("...")`` call passes (no dead entries), every message passed has an entry, each entry keeps its
English's ``{fields}``, each call fills exactly its message's fields, and no entry uses a term the
glossary (notebooks/zh/README.md, column 不要用) rules out.
"""

from __future__ import annotations

import ast
import math
import os
import re
import string
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from fp16lab.labs.runtime import i18n
from fp16lab.labs.runtime.i18n import ZH, tr

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

    with pytest.raises(AssertionError, match="^提示：定义一个函数 pays_off\\(name\\)，返回 True 或 False$"):
        l00.check_fp16_accumulation(None, ["NVIDIA H100 SXM"])
    def smallest_exact(count):
        ints = torch.arange(count, dtype=torch.float64)
        return next(f for f, d in (("fp16", torch.float16), ("fp32", torch.float32))
                    if torch.equal(ints.to(d).double(), ints))

    right = {"pixel values": "fp16", "ImageNet labels": "fp16", "positions in a 4096-token context": "fp32",
             "GPT-2 token ids": "fp32"}
    with pytest.raises(AssertionError, match=r"^提示：\['GPT-2 token ids'\] 会改变数值：范围不等于精度"):
        l01.check_storage({**right, "GPT-2 token ids": "fp16"}, smallest_exact)
    l01.check_storage(right, smallest_exact)
    assert capsys.readouterr().out.startswith("✓ 正确")


def test_the_english_hint_is_unchanged_without_the_switch(monkeypatch):
    from fp16lab.course.answers import l00

    monkeypatch.delenv(i18n.LANG_ENV, raising=False)
    with pytest.raises(AssertionError, match=r"^Hint: define a function pays_off\(name\) that returns True or False$"):
        l00.check_fp16_accumulation(None, ["NVIDIA H100 SXM"])


def test_a_check_that_raises_from_the_learners_code_explains_in_chinese(zh):
    from fp16lab.course.answers import l09

    def broken(x: torch.Tensor):
        return x, torch.ones(3)[None, :] * x  # a shape that does not broadcast

    with pytest.raises(AssertionError, match=r"^提示：my_rowwise 抛出了 RuntimeError（.*）：每行一个缩放因子"):
        l09.check_rowwise(broken)


def test_every_lessons_hint_starts_with_the_same_prefix_in_chinese(monkeypatch):
    """Lessons 00-05 write "Hint: " in English, 06-10 do not: in Chinese every hint starts with 提示：, once;
    the English stays as it is."""
    from fp16lab.course.answers import cannot_check, l00, l10

    monkeypatch.setenv(i18n.LANG_ENV, "zh")
    with pytest.raises(AssertionError, match="^提示：choice 取 'fp32'、'fp16'、'bf16' 之一$"):
        l10.check_wire_dtype("fp17", 1.0, params=1e6, bf16_measured=True)
    with pytest.raises(AssertionError, match="^提示：定义一个函数 pays_off"):  # not 提示：提示：
        l00.check_fp16_accumulation(None, ["NVIDIA H100 SXM"])
    with pytest.raises(AssertionError) as info:
        cannot_check("x")
    assert not str(info.value).startswith("提示："), "a check that cannot run is no hint"
    monkeypatch.delenv(i18n.LANG_ENV)
    with pytest.raises(AssertionError, match="^choice is one of 'fp32', 'fp16', 'bf16'$"):
        l10.check_wire_dtype("fp17", 1.0, params=1e6, bf16_measured=True)


# ---- banners ------------------------------------------------------------------------------------

META = {"device": "NVIDIA H200", "mode": "full", "torch": "2.11.0", "date": "2026-12-01"}


def test_the_stored_outputs_note_in_chinese():
    from fp16lab.course.outputs import note_text

    md, plain = note_text(META, copy=True, lang="zh")
    # a short bold line, then a plain sentence (no parenthesis inside a parenthesis); the doctor is named
    assert md.startswith("**已存输出：英文版课程在 NVIDIA H200（完整模式，torch 2.11.0，2026-12-01）上的运行结果，"
                         "不是在你的电脑上得到的。** 所以这些输出是英文；在中文 lab 里运行后，提示、横幅、环境检查（doctor）、")
    assert md.count("**") == 2 and "环境检查（doctor）" in plain
    assert "*运行 → 运行所有单元格*" in md and "`notebooks/zh/`" in md
    assert plain.startswith("已存输出：英文版课程在 NVIDIA H200（完整模式，torch 2.11.0，2026-12-01）上的运行结果，"
                            "不是在你的电脑上得到的。所以这些输出是英文；")
    assert "运行 → 运行所有单元格" in plain and "运行 > " not in md + plain, "one way to write a menu path"
    assert "full" not in md + plain and "mode" not in md + plain, "the mode in Chinese, not 'full mode'"
    reference_md, _ = note_text(META, lang="zh")
    assert "`notebooks/work/zh/`" in reference_md and "--lang zh" in reference_md
    english, _ = note_text(META, copy=True)
    assert english.startswith("**Stored outputs from NVIDIA H200 (full mode)** (torch 2.11.0, 2026-12-01), ")
    with pytest.raises(ValueError, match="lang must be one of 'en', 'zh'; got 'de'"):
        note_text(META, lang="de")


def test_the_mode_and_reference_banners_in_chinese(zh, monkeypatch, capsys):
    from fp16lab.labs.runtime.quick import mode
    from fp16lab.labs.runtime.results import load_reference

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
    """(where, msgid, keyword fields or None when the call passes none) for every tr("...") in fp16lab/, and every
    say("...") (the learner library's messages, fp16lab.checks.say: tr() once the catalogue is installed)."""
    calls = []
    for path in sorted(PKG.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("tr", "say"):
                where = f"{path.relative_to(ROOT)}:{node.lineno}"
                first = node.args[0] if node.args else None
                assert isinstance(first, ast.Constant) and isinstance(first.value, str), \
                    f"{where}: {node.func.id}() takes its message as a literal string (so this test can see it)"
                names = {k.arg for k in node.keywords if k.arg and k.arg != "lang"}
                calls.append((where, first.value, names or None))
    return calls


def _fields(text: str) -> list[tuple[str, str, str | None]]:
    """The replacement fields of a format string: (name, format spec, conversion), in order of name."""
    # the spec less its grouping option: English writes 10,000,000 ({calls:,}), Chinese 10000000 (the glossary's rule)
    return sorted((f, re.sub(r"[,_]", "", spec or ""), conv)
                  for _, f, spec, conv in string.Formatter().parse(text) if f is not None)


def test_every_catalogue_entry_is_used_and_every_message_has_one():
    used = {msgid for _, msgid, _ in _tr_calls()}
    dead = sorted(set(ZH) - used)
    assert not dead, f"catalogue entries no tr() call passes (remove them or fix the English key): {dead}"
    missing = sorted(used - set(ZH))
    assert not missing, f"messages without a Chinese entry in fp16lab/labs/runtime/i18n.py's ZH: {missing}"


def test_every_entry_keeps_the_fields_of_its_english():
    for msgid, text in ZH.items():
        assert _fields(text) == _fields(msgid), f"{msgid!r}: the Chinese has other fields: {text!r}"
        grouped = [f"{{{f}:{spec}}}" for _, f, spec, _ in string.Formatter().parse(text) if f is not None and spec
                   and re.search(r"[,_]", spec)]
        assert not grouped, f"{text!r}: Chinese numbers have no group separators (10000000): {grouped}"
        assert text != msgid, f"{msgid!r} is not translated"


def test_every_call_fills_exactly_its_messages_fields():
    for where, msgid, names in _tr_calls():
        if names is None:
            continue  # no fields: the text is shown as it is (literal braces allowed)
        wanted = {re.split(r"[.\[]", f)[0] for f, _, _ in _fields(msgid)}
        assert names == wanted, f"{where}: tr({msgid[:50]!r}...) fills {sorted(names)}, the message has {sorted(wanted)}"


def _glossary() -> tuple[list[str], list[str]]:
    """The glossary's (中文 terms, 不要用 terms): the table under "## 术语表" of notebooks/zh/README.md. Its heading
    rows ("(heading)") name a lesson's fixed section titles and ban nothing elsewhere."""
    allowed, banned, inside = [], [], False
    for line in (ROOT / "notebooks" / "zh" / "README.md").read_text(encoding="utf-8").splitlines():
        if line.startswith("## "):
            inside = line.startswith("## 术语表")
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if inside and line.startswith("|") and len(cells) == 3 and cells[0] not in ("English", "---"):
            allowed += [t.strip() for t in re.split(r"[、,，/（）()“”]", cells[1]) if HAN.search(t)]
            if not cells[0].endswith("(heading)"):
                banned += [t.strip() for t in re.split(r"[、,，]", cells[2]) if t.strip()]
    return sorted(allowed, key=len, reverse=True), banned


def test_the_catalogue_follows_the_glossary():
    allowed, banned = _glossary()
    assert {"内核", "批量大小", "笔记本", "数据类型", "冲刷为零", "做 unscale", "文章"} <= set(banned), \
        "the glossary's 不要用 column was not read"
    assert "设置" not in banned, "a heading row bans nothing outside the headings"
    for msgid, text in ZH.items():
        rest = text
        for term in allowed:  # 张量核心 is the term; 张量核 alone is ruled out
            rest = rest.replace(term, "")
        hits = [t for t in banned if t in rest]
        assert not hits, f"{msgid!r}: the glossary rules out {hits}: {text!r}"


# ---- a Chinese run, end to end: no English sentence of fp16lab's own ------------------------------------------
#
# What a learner in the Chinese lab reads from fp16lab itself (the card box, the doctor, the mode banner, the
# stored-outputs note, what `make lab LAB_LANG=zh` prints, a lesson's first cells, fp16lab's own warnings) must be
# Chinese: no run of three or more English words. What may stay as it is: code and API names (`...`, dotted names,
# flags, paths), quoted messages of other programs (torch's “...”), units, column names, the product and document
# names of ALLOWED (the peak table's sources say the kind of document in Chinese, "NVIDIA H200 规格书", and a figure
# derived from one is a sentence, in Chinese), and in a lesson the lesson's own words (its code cells are the English
# lesson's, byte for byte).

_WORDS = re.compile(r"\b[A-Za-z]{2,}(?:(?:[,:;]? |'|-)[A-Za-z]{2,}){2,}\b")  # three or more English words in a row

# Runs of English words that may stay in a Chinese run, each with its reason. Keep it short: anything else is
# fp16lab's own words and belongs in the catalogue (fp16lab/labs/runtime/i18n.py).
ALLOWED = {
    "NVIDIA GeForce RTX": "a GPU's product name, as the driver reports it (GPUFacts.name)",
    "NVIDIA GeForce GTX": "a GPU's product name, as the driver reports it (GPUFacts.name)",
    "NVIDIA H100 Tensor Core GPU": "the name in a cited document's title (NVIDIA H100 Tensor Core GPU 架构白皮书)",
    "NVIDIA Ada GPU": "the name in a cited document's title (NVIDIA Ada GPU 架构白皮书)",
}


def test_a_figure_derived_from_a_whitepaper_is_cited_in_chinese():
    from fp16lab.course.card import cited_source
    from fp16lab.hardware import PEAK_TFLOPS

    assert cited_source("Ada whitepaper, 4090 scaled to 114 SMs", lang="zh") == "Ada 白皮书，由 RTX 4090 按 114 个 SM 折算"
    assert cited_source(PEAK_TFLOPS["RTX 4060 Laptop"].source, lang="zh") == \
        "Ada 白皮书的每 SM 速率 × 24 个 SM × 2370 MHz 最高加速频率（笔记本电脑的频率随功耗上限而变）"
    assert cited_source("NVIDIA H200 datasheet", lang="zh") == "NVIDIA H200 规格书", "as the lessons say it"
    assert cited_source("NVIDIA H100 datasheet (NVL)", lang="zh") == "NVIDIA H100 规格书（NVL）"
    assert cited_source("NVIDIA Ada GPU architecture whitepaper", lang="zh") == "NVIDIA Ada GPU 架构白皮书"
    for peak in PEAK_TFLOPS.values():
        assert cited_source(peak.source, lang="en") == peak.source, "the English is the table's own text"
        zh = cited_source(peak.source, lang="zh")
        assert HAN.search(zh) and "datasheet" not in zh and "whitepaper" not in zh, (peak.source, zh)
        assert not english_sentences(zh), f"{peak.source!r}: cited as {zh!r}"


def english_sentences(text: str, allowed: str = "") -> list[str]:
    """Runs of three or more English words in ``text`` that are not code, quotes, names of ALLOWED or in ``allowed``."""
    t = re.sub(r"<code>.*?</code>|<style.*?</style>", " ", text, flags=re.S)  # code, a rendered table's CSS
    t = re.sub(r"<[^>]+>", "\n", t)  # HTML tags (a rendered table or banner) end a run of words
    t = re.sub(r"`[^`\n]*`|“[^”\n]*”|\"[^\"\n]*\"|https?://\S+", " ", t)  # code spans, quoted messages, URLs
    for name in ALLOWED:  # before the identifiers go: "TFLOP/s（引用：NVIDIA H100 …" is one token with a slash
        t = t.replace(name, " ")
    t = re.sub(r"\S*[_./=()\[\]{}<>|\\]\S*", " ", t)  # identifiers, paths, versions, flags, markup
    return [m for m in _WORDS.findall(t) if m not in allowed]


def test_the_detector_finds_english_and_lets_code_and_quotes_pass():
    assert english_sentences("显卡  none: the lessons run in quick mode on this device") == \
        ["none: the lessons run in quick mode on this device"]
    assert english_sentences("结论：没有 FAIL 行；`pip install torch --index-url x` 和“Found no NVIDIA driver on "
                             "your system”、NVIDIA H100 Tensor Core GPU 架构白皮书（SXM5，稠密）") == []
    assert english_sentences("print the lesson's own words here", allowed="print the lesson's own words here") == []
    assert english_sentences("模式  full, fewer steps") == ["full, fewer steps"], "three words are a sentence"
    assert english_sentences("显卡  NVIDIA GeForce RTX 4090 D（sm_89，24 GiB）；FP16 Tensor Core 可用") == []
    # a cited title glued to a unit by the Chinese punctuation (the H100's peak line in the doctor's table)
    assert english_sentences("989.4 dense TFLOP/s（引用：NVIDIA H100 Tensor Core GPU 架构白皮书（SXM5，稠密））") == []


def test_the_card_box_and_the_mode_speak_chinese(zh, monkeypatch, fake_gpu):
    from fp16lab.course.card import card_box
    from fp16lab.hardware import PROFILES, GPUFacts, chip_features, peak_for
    from fp16lab.labs.runtime.quick import mode

    def facts(name, cap, profile=None):
        return GPUFacts(0, name, "NVIDIA H200", cap, 40, 16 * 2**30, 141 * 2**30, peak_for(name),
                        chip_features(cap, name), profile)

    p = PROFILES["rtx4090d"]
    boxes = [card_box(None), card_box(facts(p.name, p.capability, p.key)), card_box(facts("NVIDIA H200", (9, 0))),
             card_box(facts("Tesla T4", (7, 5))), card_box(facts("NVIDIA GeForce GTX 1660 Ti", (7, 5))),
             card_box(facts("NVIDIA GeForce RTX 2080", (7, 5))), card_box(facts("NVIDIA A100-SXM4-40GB", (8, 0))),
             card_box(facts("NVIDIA GeForce RTX 4090 Laptop GPU", (8, 9))), card_box(facts("NVIDIA GeForce RTX 3060", (8, 6)))]
    for box in boxes:
        assert HAN.search(box.splitlines()[0]) and not english_sentences(box), box
    assert boxes[0].startswith("在这台机器上（没有 CUDA GPU）")
    assert "（引用：Ada 白皮书，由 RTX 4090 按 114 个 SM 折算，147 对 294 TFLOP/s）" in boxes[1], boxes[1]
    fake_gpu("none")  # the last mode below is the one a machine without a CUDA GPU reports, on any machine
    for env in ({"FP16LAB_QUICK": "1"}, {"FP16LAB_QUICK": "", "CI": "true"}, {"FP16LAB_QUICK": "", "CI": ""}):
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        m = mode()
        for text in (str(m), m._repr_html_()):
            assert not english_sentences(text) and "no CUDA GPU" not in text and "CI is set" not in text, text
    assert str(m).startswith("快速模式（没有 CUDA GPU）：")
    fake_gpu("hopper")
    monkeypatch.setenv("FP16LAB_PROFILE", "rtx4090d")
    for env in ({"FP16LAB_QUICK": "0", "FP16LAB_SMOKE": "1"}, {"FP16LAB_QUICK": "", "FP16LAB_SMOKE": ""}):
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        m = mode()
        for text in (str(m), m._repr_html_()):
            assert not english_sentences(text) and "profile" not in text, text
    assert str(m).startswith("完整模式（CUDA GPU：NVIDIA GeForce RTX 4090 D 硬件配置档（rtx4090d），实际运行在 NVIDIA H200 上")
    monkeypatch.setenv(i18n.LANG_ENV, "en")
    assert m.gpu is not None and str(m).startswith(f"FULL MODE (CUDA GPU: {m.gpu.label}): "), \
        "the English is GPUFacts.label, as it was"


def test_the_card_box_lines_up_in_chinese(zh):
    import unicodedata

    from fp16lab.course.card import card_box

    def columns(text: str) -> int:  # a Chinese character takes two columns on screen
        return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)

    rows = card_box(None).splitlines()[2:]
    starts = {columns(r[:len(r) - len(r.split("  ", 1)[1].lstrip())]) for r in rows}  # where each row's text starts
    assert len(starts) == 1, rows


@pytest.mark.parametrize("kind", ["none", "pascal", "turing", "ada", "hopper", "gtx1660", "volta", "profile",
                                  "cpu-wheel", "old-driver"])
def test_the_doctor_speaks_chinese_on_every_kind_of_machine(zh, fake_gpu, monkeypatch, kind):
    from fp16lab.course import env
    from fp16lab.course.env import report

    if kind == "cpu-wheel":  # a CPU-only torch: "torch CUDA build" warns
        fake_gpu("none", cuda_build=None)
    elif kind == "old-driver":  # a CUDA 13 wheel on a CUDA 12.2 driver: the driver row fails, with its fix
        fake_gpu("none", cuda_build="13.0")
        monkeypatch.setattr(env, "driver_version", lambda: "535.104.05")
        monkeypatch.setattr(env, "driver_cuda_version", lambda: (12, 2))
        monkeypatch.setattr(env, "cuda_unavailable_reason", lambda: "The NVIDIA driver on your system is too old "
                            "(found version 12020). Please update your GPU driver")
    else:
        fake_gpu("hopper" if kind == "profile" else kind)
    if kind == "profile":  # an H200 playing an RTX 4090 D: the row that says which chip really runs
        monkeypatch.setenv("FP16LAB_PROFILE", "rtx4090d")
    rep = report()
    if kind == "cpu-wheel":
        assert rep["torch CUDA build"].value == "仅 CPU 的 wheel", rep["torch CUDA build"]
    if kind == "old-driver":
        assert rep["driver"].status.value == "FAIL" and "驱动太旧" in rep["driver"].value, rep["driver"]
    if kind == "profile":
        assert rep["hardware profile"].value.startswith("NVIDIA GeForce RTX 4090 D 硬件配置档（rtx4090d），实际运行在 "
                                                        "NVIDIA H200 上"), rep["hardware profile"].value
    for text in (str(rep), rep._repr_html_()):
        assert not english_sentences(text), text
    assert str(rep).splitlines()[-1].startswith("结论：")
    assert "Tensor Cores" not in str(rep) and "mode" not in str(rep), "row labels in Chinese too"


def test_the_reference_notes_speak_chinese(zh, capsys):
    from fp16lab.course.outputs import note_text
    from fp16lab.labs.runtime.results import load_reference

    for meta in (META, {**META, "outputs_from": "NVIDIA H200 (full mode)"}, {"device": "CPU", "mode": "quick"},
                 {**META, "mode": "full-smoke"}):
        for copy in (False, True):
            md, plain = note_text(meta, copy=copy, lang="zh")
            assert not english_sentences(md + "\n" + plain) and "mode" not in md + plain, (md, plain)
    load_reference("align_sweep")
    load_reference("never_recorded_zh")
    out = capsys.readouterr().out
    assert out.startswith("已提交的 GPU 参考结果") and not english_sentences(out) and " mode" not in out, out


def test_lesson_09s_status_lines_and_banner_speak_chinese(zh, monkeypatch, capsys, tmp_path):
    """Lesson 09's first cell prints fp16lab's FP8 and torchao status; a GPU without FP8 gets the NOT MEASURED
    banner. The reason stays English in the object (its errors quote it); what is printed is Chinese."""
    import fp16lab.labs.fp8.matmul as matmul_mod
    import fp16lab.labs.fp8.training as training_mod
    import fp16lab.labs.runtime.quick as quick
    import fp16lab.labs.runtime.results as results
    from fp16lab.hardware import GPUFacts, chip_features
    from fp16lab.labs.fp8 import TorchaoStatus, fp8_capable, fp8_measure, summarize_import_noise

    def facts(cap):
        return GPUFacts(0, "NVIDIA GeForce RTX 3060", "NVIDIA GeForce RTX 3060", cap, 28, 2**33, 2**33, None,
                        chip_features(cap, "NVIDIA GeForce RTX 3060"), None)

    lines = [str(fp8_capable("cpu")), str(fp8_capable("mps")), str(TorchaoStatus(True, "0.18.0", "")),
             str(TorchaoStatus(False, None, "ImportError: No module named 'torchao'")),
             summarize_import_noise([], [], "some output")]
    for cap in ((8, 9), (8, 6)):
        monkeypatch.setattr(matmul_mod, "gpu_facts", lambda dev, cap=cap: facts(cap))
        lines.append(str(fp8_capable("cuda")))
    no_fp8 = fp8_capable("cuda")  # sm_86
    assert lines[-2].startswith("FP8：支持。") and lines[-1].startswith("FP8：不支持。NVIDIA GeForce RTX 3060 是 sm_86；")
    assert no_fp8.reason.startswith("NVIDIA GeForce RTX 3060 is sm_86;"), "the object keeps the English reason"
    monkeypatch.setattr(results, "RESULTS_DIR", tmp_path)
    results.save_results(pd.DataFrame({"x": [1.0]}), tmp_path / "fp8_zh.json",
                         {"device": "NVIDIA H200", "device_type": "cuda"})
    monkeypatch.setattr(quick, "live_gpu", lambda: True)
    monkeypatch.setattr(training_mod, "fp8_capable", lambda dev: no_fp8)
    fp8_measure("fp8_zh", lambda: pd.DataFrame(), device="cpu")
    banner = capsys.readouterr().out
    assert banner.startswith("此处未测量：NVIDIA GeForce RTX 3060 是 sm_86；") and "改为显示已提交的参考结果。" in banner
    for text in [*lines, banner]:
        assert HAN.search(text) and not english_sentences(text), text


def test_lesson_10s_worker_timeout_speaks_chinese(zh):
    """The timeout lesson 10 shows, from the pool's own wait (no process starts: nothing answers in 0 s)."""
    import queue

    from fp16lab.labs.multi_gpu.launcher import Workers, WorkerTimeout

    pool = Workers.__new__(Workers)  # only what _collect reads
    pool.world = type("World", (), {"world_size": 2})()
    pool._outbox, pool._procs, pool._abort = queue.Queue(), [], lambda: None
    with pytest.raises(WorkerTimeout) as info:
        pool._collect(1, "task 'hang'", 0.0, said=tr("task {name!r}", name="hang"))
    text = str(info.value)
    assert text.startswith("rank 0、1 没有在 0 秒的超时时间内完成任务 'hang'（2 个 rank 中有 0 个响应）"), text
    assert info.value.task == "task 'hang'" and not english_sentences(text), text


def test_the_lab_and_the_workspace_commands_speak_chinese(zh, monkeypatch, tmp_path, capsys):
    """What `make lab LAB_LANG=zh` (``python -m fp16lab lab --lang zh``) and ``workspace --lang zh --reset``
    print before JupyterLab takes over: the workspace, the start line, a fresh copy; in a small repository."""
    import argparse

    import nbformat

    from fp16lab.course import lab, workspace
    from fp16lab.course.outputs import stamp

    zh_dir = tmp_path / "notebooks" / "zh"
    (zh_dir / "student").mkdir(parents=True)
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "fp16lab"\n')
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# 第一课"), nbformat.v4.new_code_cell("x = 1")])
    stamp(nb)
    nbformat.write(nb, zh_dir / "00_first.ipynb")
    nbformat.write(nbformat.v4.new_notebook(), zh_dir / "student" / "00_first.ipynb")
    (zh_dir / "README.md").write_text("# 从这里开始\n", encoding="utf-8")
    monkeypatch.setenv("FP16LAB_ROOT", str(tmp_path))
    started: list[list[str]] = []
    monkeypatch.setattr(lab.os, "execve", lambda path, cmd, env: started.append(cmd))  # JupyterLab never starts
    monkeypatch.setattr(lab.subprocess, "call", lambda cmd, env: started.append(cmd) or 0)

    def run(module, argv):
        args = module.configure(argparse.ArgumentParser()).parse_args(argv)
        assert args.func(args) in (0, None)
        return capsys.readouterr().out

    out = run(lab, ["--lang", "zh", "--no-browser"])
    assert started and out.startswith("你的工作区：") and "新副本：" in out and "正在启动 JupyterLab，课程目录为 " in out, out
    assert "、" in out.split("新副本：")[1].splitlines()[0] and ".ipynb, " not in out, "names joined with 、"
    out += run(lab, ["--lang", "zh", "--no-browser", "--ip", "0.0.0.0", "--token", "auto"])
    assert "其他机器可以访问：" in out and "保持原样（你的成果）：2 个文件" in out, out
    work = tmp_path / "notebooks" / "work" / "zh" / "00_first.ipynb"
    work.write_text(work.read_text(encoding="utf-8").replace("x = 1", "x = 2"), encoding="utf-8")  # the learner's work
    reset = run(workspace, ["--lang", "zh", "--reset", "00"])
    assert reset.startswith("全新副本：") and "（你之前的副本：" in reset, reset
    out += reset + run(workspace, ["--lang", "zh"])
    assert not english_sentences(out), out


@pytest.mark.skipif(not __import__("shutil").which("make"), reason="no make here")
def test_makes_set_up_speaks_chinese_under_lab_lang_zh(tmp_path):
    """The first `make lab LAB_LANG=zh` sets up .venv first: its own lines (not pip's) in Chinese."""
    def said(*extra: str) -> list[str]:
        out = subprocess.run(["make", "--no-print-directory", "-n", "setup", f"VENV={tmp_path / 'venv'}", *extra],
                             cwd=ROOT, capture_output=True, text=True, check=True).stdout
        return re.findall(r'echo "([^"]*)"', out)

    for cpu in ((), ("CPU=1",)):
        lines = said("LAB_LANG=zh", *cpu)
        assert len(lines) >= 4 and all(HAN.search(line) for line in lines), lines
        assert not english_sentences("\n".join(lines)), lines
    english = said()
    assert english[0].startswith("==> [1/3] Python environment in ") and not any(HAN.search(x) for x in english)


def _first_cells(lesson: Path) -> list:
    """The lesson's code cells up to and including the one that prints the card box (lesson 00's setup part)."""
    import nbformat

    code = [c for c in nbformat.read(lesson, as_version=4).cells if c.cell_type == "code"]
    last = next((i for i, c in enumerate(code[:12]) if "card_box(" in c.source), None)
    assert last is not None, f"{lesson.name} prints no card box in its first 12 code cells: pick the cells to run"
    return code[:last + 1]


def _text(output: dict) -> str:
    if output.get("output_type") == "stream":
        text = output.get("text", "")
    elif output.get("output_type") == "error":
        text = f"{output.get('ename')}: {output.get('evalue')}"
    else:
        data = output.get("data", {})
        text = "\n".join(v if isinstance(v, str) else "".join(v) for k, v in data.items()
                         if k in ("text/markdown", "text/html", "text/plain"))
    return text if isinstance(text, str) else "".join(text)


def test_a_lessons_first_cells_speak_chinese_in_the_chinese_lab(monkeypatch, tmp_path):
    """Lesson 00's setup part (the mode banner, the doctor in and out of the kernel, the card box) run in a
    kernel of the Chinese lab, in quick mode: fp16lab prints no English sentence of its own."""
    import nbformat
    from nbclient import NotebookClient

    from fp16lab.course.lab import lab_env

    lesson = ROOT / "notebooks" / "zh" / "00_setup_and_verify.ipynb"
    cells = _first_cells(lesson)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c.source) for c in cells])
    for key, value in lab_env("zh", {"FP16LAB_QUICK": "1", "PYTHONPATH": str(ROOT)}).items():
        monkeypatch.setenv(key, value)  # the kernel inherits what `python -m fp16lab lab --lang zh` sets
    NotebookClient(nb, timeout=300, kernel_name="python3", allow_errors=True,
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    bad, seen = [], ""
    for cell in nb.cells:
        for out in cell.outputs:
            text = _text(out)
            seen += text
            assert out.get("output_type") != "error", f"{cell.source[:80]!r} raised: {text}"
            bad += [f"{cell.source[:40]!r}: {s!r}" for s in english_sentences(text, allowed=cell.source)]
    for part in ("快速模式（FP16LAB_QUICK=1）：", "结论：", "在这台机器上（没有 CUDA GPU）" if not torch.cuda.is_available()
                 else "在你的显卡上"):
        assert part in seen, f"{part!r} not among the outputs"
    assert not bad, "English sentences of fp16lab's own in a Chinese run:\n" + "\n".join(bad)


# ---- fp16lab's own warnings, under each lesson's filters ------------------------------------------------------------

def _lesson_filters(lesson: str) -> list[str]:
    """The ``warnings.filterwarnings(...)`` lines of a lesson's code cells (the same in both languages)."""
    import nbformat

    nb = nbformat.read(ROOT / "notebooks" / f"{lesson}.ipynb", as_version=4)
    return [line.strip() for c in nb.cells if c.cell_type == "code" for line in c.source.splitlines()
            if line.strip().startswith("warnings.filterwarnings(")]


def _shown_warnings(filters: list[str], monkeypatch) -> list[str]:
    """What a fresh session shows under ``filters`` (each warning that passes them, formatted as the warnings module
    prints it): fit's precision check, twice, and a CPU fp16 sweep."""
    import warnings

    from fp16lab import precision
    from fp16lab.align import matmul_sweep

    monkeypatch.setattr(precision, "_WARNED_CPU", set())  # a new session
    monkeypatch.setattr(warnings, "onceregistry", {})  # "once" filters start afresh
    with warnings.catch_warnings(record=True) as passed:
        warnings.resetwarnings()
        for line in filters:
            exec(line, {"warnings": warnings})  # the lesson's own filter, as its first cells set it
        for _ in range(2):  # fit() checks the precision on every call
            precision.check_precision_supported("fp16", "cpu")
        matmul_sweep([8], "fp16", "cpu", min_run_time=0.001, progress=False)
    shown = [warnings.formatwarning(w.message, w.category, w.filename, w.lineno) for w in passed]
    return [text.split("Warning: ", 1)[1].splitlines()[0] for text in shown]


@pytest.mark.parametrize("lesson", ["04_pitfalls_numerics", "05_pitfalls_speed_memory", "02_amp_training_loop",
                                    "07_transformers", "09_fp8"])
def test_fp16labs_own_warnings_speak_chinese_under_the_lessons_filters(lesson, monkeypatch):
    """Lessons 04 and 05 show fp16lab's CPU warnings (once); 02, 07 and 09 silence the precision one. Their filters
    match the English text (code cells are the same in both labs), so the Chinese lab must show exactly what the
    English lab shows, in Chinese. In-process, with the lesson's own filter lines: no notebook runs."""
    filters = _lesson_filters(lesson)
    assert any("on the CPU runs" in f for f in filters), f"{lesson} no longer filters fp16lab's CPU warning: {filters}"
    monkeypatch.setenv(i18n.LANG_ENV, "en")
    english = _shown_warnings(filters, monkeypatch)
    monkeypatch.setenv(i18n.LANG_ENV, "zh")
    chinese = _shown_warnings(filters, monkeypatch)
    assert len(chinese) == len(english), (english, chinese)
    if lesson.startswith(("04", "05")):
        assert english[0].startswith("fp16 on the CPU runs, but is slow") and len(english) == 2, english
        assert chinese[0].startswith("fp16 可以在 CPU 上运行") and chinese[1].startswith("CPU 上的 fp16/bf16 矩阵乘法很慢")
    else:
        assert english == ["fp16/bf16 matmuls on the CPU are slow and use no Tensor Cores; these are not FP16 speed "
                           "figures"], "the lesson silences the precision warning, not the sweep's"
    for text in chinese:
        assert HAN.search(text) and not english_sentences(text), text


# ---- the learner library's own reports and errors (fp16lab.checks.say) ---------------------------------------------

def _diverged_messages() -> list[str]:
    """DivergenceGuard's message for each way a run stops: bad data, a non-finite loss (bf16; fp16 three times in a
    row), a non-finite gradient norm, the fp16 scale below min_scale (with a finite and an infinite loss)."""
    from fp16lab.precision import Precision
    from fp16lab.train.callbacks import DivergenceGuard
    from fp16lab.train.step import StepResult

    def step(loss=1.0, grad_norm=1.0, scale=1.0):
        return StepResult(loss, None, 4, grad_norm, scale, scale, False, 0.1)

    x, y = torch.ones(4, 2), torch.zeros(4)
    rows = [{"loss": math.inf, "skipped": True}] * 3
    cases = [(DivergenceGuard(), Precision.FP16, step(loss=math.nan), [(x.clone().fill_(math.nan), y)], rows[:1]),
             (DivergenceGuard(), Precision.BF16, step(loss=math.inf), [(x, y)], rows[:1]),
             (DivergenceGuard(min_scale=None), Precision.FP16, step(loss=math.inf), [(x, y)], rows),
             (DivergenceGuard(), Precision.FP32, step(grad_norm=math.inf), [(x, y)], rows[:1]),
             (DivergenceGuard(), Precision.FP16, step(scale=0.5), [(x, y)], rows[:1]),
             (DivergenceGuard(), Precision.FP16, step(loss=math.inf, scale=0.5), [(x, y)], rows[:1])]
    out = []
    for guard, p, result, micro, seen in cases:
        why = guard.diagnose(p, 7, result, micro, seen)
        assert why is not None, (p, result)
        out.append(why[2])
    return out


def test_the_librarys_reports_and_errors_speak_chinese(zh):
    """What the library itself says in a lesson (fit stopping a run in lessons 02 and 04, first_nonfinite in 04, 07
    and 08, bit_view in 01) goes through fp16lab.checks.say, which the catalogue takes over on import."""
    from fp16lab.debug import first_nonfinite
    from fp16lab.numerics import bit_view

    texts = _diverged_messages()
    assert texts[0].startswith("第 7 步：损失为 nan，因为数据不是有限值（第 1 个微批次（共 1 个）：它的输入含有 8 个 NaN"), texts[0]
    assert texts[4].startswith("第 7 步：fp16 的损失缩放因子降到 0.5，低于 min_scale=1") and "可以尝试：降低学习率；" in texts[4]
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.ReLU())
    texts += [str(first_nonfinite(model, torch.full((1, 2), math.inf), "fp32", "cpu")),
              str(first_nonfinite(model, torch.ones(1, 2), "fp32", "cpu"))]
    views = [bit_view(math.pi, "fp16"), bit_view(1e-6, "fp16"), bit_view(0.0, "fp16"), bit_view(1e6, "fp16"),
             bit_view(1000.0, "fp8_e4m3"),
             bit_view(math.nan, "fp16"), bit_view(math.nan, "fp8_e4m3")]
    texts += [str(v) for v in views] + [v._repr_html_() for v in views]
    assert str(views[0]).startswith("fp16：3.141592653589793 存储为 3.140625（正规数）"), str(views[0])
    from fp16lab.align import audit

    for model in (torch.nn.Sequential(torch.nn.Linear(8, 8)), torch.nn.Sequential(torch.nn.Linear(8, 10))):
        rep = audit(model, torch.zeros(8, 8), "fp16")
        summary = rep.summary()
        texts += [summary, re.sub(r"<table.*?</table>", "", rep._repr_html_(), flags=re.S)]  # the table is data
        assert summary.startswith("按 fp16（8 的倍数）检查了 1 个层："), summary
    assert "pad_layers(model, ['0']) 可以修正" in summary
    for text in texts:
        assert HAN.search(text) and not english_sentences(text), text


def test_the_librarys_messages_stay_english_without_the_switch(monkeypatch):
    from fp16lab.numerics import bit_view

    monkeypatch.delenv(i18n.LANG_ENV, raising=False)
    texts = _diverged_messages()
    assert texts[4].startswith("step 7: the fp16 loss scale fell to 0.5, below min_scale=1 (1 of the last 1 steps") \
        and texts[4].endswith("Try: a lower learning rate; gradient clipping (clip_grad_norm=1.0); keeping the unstable "
                              "op in an FP32 island (fp16lab.precision.autocast('fp32', device)); bf16 instead of fp16 "
                              "(fp32's range, no scaler needed).")
    assert str(bit_view(math.pi, "fp16")).startswith("fp16: 3.141592653589793 is stored as 3.140625 (normal)")
    assert not any(HAN.search(t) for t in texts)


def _argument_errors() -> list[str]:
    """The argument errors a learner meets in exercises: fit's precision, checks' int/float/choice/flag, the audit's
    fix column (a layer the model must change, and the rows: batch × tokens)."""
    from fp16lab import checks
    from fp16lab.align import audit
    from fp16lab.precision import parse_precision

    out = []
    for call in (lambda: parse_precision("fp17"), lambda: parse_precision("float16"),
                 lambda: checks.positive_int("batch", -1), lambda: checks.positive_float("lr", 0),
                 lambda: checks.positive_float("lr", -1, allow_zero=True),
                 lambda: checks.one_of("precision", "fp17", ("fp32", "fp16")), lambda: checks.boolean("x", 3)):
        with pytest.raises(ValueError) as info:
            call()
        out.append(str(info.value))
    rep = audit(torch.nn.Sequential(torch.nn.Linear(7, 8), torch.nn.Linear(8, 10)), torch.zeros(6, 7), "fp16")
    fixes = list(dict.fromkeys(f.fix for f in rep.findings if not f.paddable))
    assert len(fixes) == 2, fixes  # a width the model must change, and the rows (batch × tokens)
    return out + fixes


def test_argument_errors_and_the_audits_fix_column_speak_chinese(zh):
    texts = _argument_errors()
    assert texts[0] == "precision：未知的精度 'fp17'；可选值：'fp32'、'tf32'、'fp16'、'bf16'", texts[0]
    assert texts[2] == "batch 必须是不小于 1 的整数，实际为 -1", texts[2]
    assert texts[-1] == "把 批处理大小 × token 数 取为 8 的倍数", texts[-1]
    for text in texts:
        assert HAN.search(text) and not english_sentences(text), text


def test_argument_errors_stay_english_without_the_switch(monkeypatch):
    monkeypatch.delenv(i18n.LANG_ENV, raising=False)
    assert _argument_errors() == [
        "precision: unknown precision 'fp17'; allowed: 'fp32', 'tf32', 'fp16', 'bf16'",
        "precision: unknown precision 'float16'; allowed: 'fp32', 'tf32', 'fp16', 'bf16' (a precision name, not a "
        "dtype: e.g. torch.float16 is 'fp16')",
        "batch must be an int >= 1, got -1",
        "lr must be a finite number > 0, got 0",
        "lr must be a finite number >= 0, got -1",
        "precision must be one of 'fp32', 'fp16'; got 'fp17' (str)",
        "x must be True or False, got 3",
        "change the model: the layer before must produce 8 features (e.g. the hidden size in its config)",
        "choose a batch size × tokens that is a multiple of 8",
    ]


def test_a_failed_rank_speaks_chinese_and_english_is_unchanged(monkeypatch):
    """WorkerError, from the pool's own collect: a rank answers with an error (no process starts)."""
    import queue

    from fp16lab.labs.multi_gpu.launcher import WorkerError, Workers

    def fail(lang: str) -> str:
        monkeypatch.setenv(i18n.LANG_ENV, lang)
        pool = Workers.__new__(Workers)
        pool.world = type("World", (), {"world_size": 1})()
        pool._outbox, pool._procs, pool._abort = queue.Queue(), [], lambda: None
        pool._outbox.put((7, 0, "error", "ValueError: boom", "Traceback ..."))
        with pytest.raises(WorkerError) as info:
            pool._collect(7, "task 'step'", 5.0, said=tr("task {name!r}", name="step"))
        assert info.value.task == "task 'step'" and info.value.rank == 0
        return str(info.value)

    assert fail("en") == ("rank 0 failed in task 'step': ValueError: boom; all workers were stopped.\n"
                          "--- traceback of rank 0 ---\nTraceback ...")
    text = fail("zh")
    assert text.startswith("rank 0 在任务 'step'中失败：ValueError: boom；所有工作进程都已停止。"), text
    assert not english_sentences(text.split("\n")[0], allowed="ValueError: boom"), text


def test_the_audits_reason_column_speaks_chinese_and_english_is_unchanged(monkeypatch):
    from fp16lab.align import audit

    def reasons(lang: str) -> list[str]:
        monkeypatch.setenv(i18n.LANG_ENV, lang)
        model = torch.nn.Sequential(torch.nn.Conv2d(3, 10, 3), torch.nn.Conv2d(10, 10, 3, groups=10))
        rep = audit(model, precision="fp16")
        return [f.reason for f in rep.findings] + [s.reason for s in rep.skipped]

    assert reasons("en") == [
        "C of the input: K of the implicit GEMM (cuDNN Tensor Core kernels want C % 8 == 0); fp16 Tensor Cores want "
        "multiples of 8 (an RGB/grey first layer is usual: cuDNN pads small C itself; one layer of many)",
        "K filters: N of the implicit GEMM; fp16 Tensor Cores want multiples of 8",
        "depthwise convolution: memory-bound, not a Tensor Core GEMM; alignment does not apply",
    ]
    texts = reasons("zh")
    assert texts[1] == "K 个卷积核：隐式 GEMM 的 N；fp16 的 Tensor Core 要求 8 的倍数", texts[1]
    for text in texts:
        assert HAN.search(text) and not english_sentences(text), text
