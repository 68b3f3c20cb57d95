"""The "On your card" box: which of the series' chip-dependent conclusions hold on this machine.

Built only from :mod:`fp16lab.hardware` facts (capability rule, cited peaks, the active
profile), so the box says the same thing as the lessons' checks. Under a hardware profile it
speaks of the profile's card and says which chip really runs; without a CUDA GPU it says what
quick mode means. Every word goes through the catalogue (:mod:`fp16lab.labs.runtime.i18n`), so the box
is Chinese in the Chinese lab (``FP16LAB_LANG=zh``).
"""

from __future__ import annotations

import re
import unicodedata

from fp16lab import checks
from fp16lab.hardware import GPUFacts
from fp16lab.labs.runtime.i18n import check_lang, tr

__all__ = ["card_notes", "card_box", "cited_source"]


def cited_source(source: str, lang: str | None = None) -> str:
    """A cited peak's source (:attr:`fp16lab.hardware.Peak.source`) in the reader's language.

    A figure derived from a document ("Ada whitepaper, 4090 scaled to 114 SMs") is fp16lab's own sentence, and the
    kind of document ("NVIDIA H200 datasheet", "NVIDIA Ada GPU architecture whitepaper") is said in the reader's
    language as the lessons say it ("NVIDIA H200 规格书"), the names in it as they are: all through the catalogue.
    In English it is ``source`` itself; ``lang`` as for :func:`~fp16lab.labs.runtime.i18n.tr` (None: ``FP16LAB_LANG``),
    or "en" or "zh".
    """
    checks.text("source", source)
    if lang is not None:
        check_lang(lang)
    if m := re.fullmatch(r"(\S+) whitepaper, (\d+) scaled to (\d+) SMs", source):
        return tr("{paper} whitepaper, {model} scaled to {sms} SMs", lang=lang, paper=m[1], model=m[2], sms=m[3])
    laptop = " max boost (laptop clocks vary with power limit)"
    if m := re.fullmatch(r"(\S+) whitepaper per-SM rates x (\d+) SMs x (\d+) MHz" + re.escape(laptop), source):
        return tr("{paper} whitepaper per-SM rates x {sms} SMs x {mhz} MHz max boost (laptop clocks vary with power "
                  "limit)", lang=lang, paper=m[1], sms=m[2], mhz=m[3])
    if m := re.fullmatch(r"(\S+) whitepaper per-SM rates x (\d+) SMs x (\d+) MHz", source):
        return tr("{paper} whitepaper per-SM rates x {sms} SMs x {mhz} MHz", lang=lang, paper=m[1], sms=m[2],
                  mhz=m[3])
    if m := re.fullmatch(r"(.+) datasheet", source):
        return tr("{gpu} datasheet", lang=lang, gpu=m[1])
    if m := re.fullmatch(r"(.+) datasheet \((.+)\)", source):  # "NVIDIA H100 datasheet (NVL)": one of its variants
        return tr("{gpu} datasheet ({variant})", lang=lang, gpu=m[1], variant=m[2])
    if source == "NVIDIA Ada GPU architecture whitepaper":
        return tr("NVIDIA Ada GPU architecture whitepaper", lang=lang)
    if source == "NVIDIA H100 Tensor Core GPU Architecture whitepaper (SXM5, dense)":
        return tr("NVIDIA H100 Tensor Core GPU Architecture whitepaper (SXM5, dense)", lang=lang)
    if m := re.fullmatch(r"(NVIDIA \S+ \S+) whitepaper", source):  # "NVIDIA Ampere GA102 whitepaper"
        return tr("{paper} whitepaper", lang=lang, paper=m[1])
    return source


def _quick_rows() -> list[tuple[str, str]]:
    return [
        ("GPU", tr("none: the lessons run in quick mode (small sizes, few steps) on this device")),
        (tr("speed claims"), tr("not measured here: the lessons show the committed GPU reference results, labelled "
                                "with the GPU that made them, and assert no speed")),
        (tr("FP16 / BF16 here"), tr("CPUs have no Tensor Cores; many convert FP16 to FP32 and back, so FP16 can be "
                                    "slower than FP32: numerics are the same, speed is not")),
        (tr("autocast here"), tr("CPU autocast uses BF16 and has its own op lists (section 5b)")),
    ]


def _accumulate_note(facts: GPUFacts) -> str:
    """FP16 accumulation pays only where the chip runs it faster: GeForce yes, data-center no."""
    peak = facts.peak
    if peak is None or peak.fp16 is None or peak.fp16_acc16 is None:
        kind = tr("GeForce parts usually run it at twice the FP32-accumulate rate") if facts.geforce else \
            tr("data-center parts run it at the FP32-accumulate rate")
        return tr("no cited peak for this chip in fp16lab.hardware.PEAK_TFLOPS; {kind}: measure it (section 6)",
                  kind=kind)
    gain = peak.fp16_acc16 / peak.fp16
    cited = tr("(cited, {source}: {fp16:g} vs {acc16:g} TFLOP/s)", source=cited_source(peak.acc16_source or peak.source), fp16=peak.fp16,
               acc16=peak.fp16_acc16)
    if gain >= 1.5:
        return tr("raises the FP16 Tensor Core peak {gain:.0f}x {cited}, at an accuracy cost (lesson 03): "
                  "worth trying for inference and for matmul-bound layers", gain=gain, cited=cited)
    return tr("same peak as FP32 accumulation {cited}: no speed-up on paper; keep FP32 accumulation unless "
              "section 6 measures a gain worth its accuracy cost (lesson 03)", cited=cited)


def card_notes(facts: GPUFacts | None) -> list[tuple[str, str]]:
    """(topic, what applies here) rows for ``facts`` (``gpu_facts()``), or the quick-mode rows for None.

    In the learner's language (``FP16LAB_LANG``; English by default, where the topics are the keys
    the tests and lessons use: "card", "FP16 Tensor Cores", "native BF16", "TF32", "FP8", ...).
    """
    if facts is None:
        return _quick_rows()
    if not isinstance(facts, GPUFacts):
        raise TypeError(f"facts must be a GPUFacts from fp16lab.hardware.gpu_facts() or None, got {type(facts).__name__}")
    f = facts.features
    rows = [(tr("card"), tr("{name} ({sm}, {gib:.0f} GiB)", name=facts.name, sm=facts.sm, gib=facts.memory_gib))]
    if facts.profile is not None:
        rows.append((tr("hardware profile"), tr("{profile}: memory and code path of this card; every speed printed "
                                                "is the real {real}'s, so speed ratios are reported, not asserted",
                                                profile=facts.profile, real=facts.real_name)))
    rows.append((tr("FP16 Tensor Cores"), tr("yes: FP16 autocast runs matmuls and convolutions on them (sm_70+)")
                 if f["fp16_tensor_cores"] else
                 tr("no (before Volta, or a GTX 16xx): FP16 saves memory here, not time; stay in FP32 for speed")))
    rows.append((tr("native BF16"), tr("yes (sm_80+): BF16 autocast needs no GradScaler") if f["bf16_native"] else
                 tr("no (needs sm_80+): torch may still accept BF16 through slow emulation; train in FP16 with a "
                    "GradScaler")))
    rows.append(("TF32", tr("yes: cuDNN convolutions use it by default, matmuls do not (section 4); say which "
                            "'FP32' you measure") if f["tf32"] else tr("no (needs sm_80+): FP32 here is true FP32")))
    rows.append(("FP8", tr("yes (sm_89+): lesson 09 trains with it here") if f["fp8"] else
                 tr("no (needs sm_89+): lesson 09 shows its committed reference results")))
    if f["fp16_tensor_cores"]:
        rows.append((tr("FP16 accumulation"), _accumulate_note(facts)))
    return rows


def _width(text: str) -> int:
    """Columns ``text`` takes in a terminal or a notebook's output: a Chinese character takes two."""
    return sum(2 if unicodedata.east_asian_width(ch) in ("W", "F") else 1 for ch in text)


def card_box(facts: GPUFacts | None) -> str:
    """The rows of :func:`card_notes` as an aligned text box, for ``print`` (aligned in Chinese too)."""
    rows = card_notes(facts)
    width = max(_width(topic) for topic, _ in rows)
    title = tr("On your card") if facts is not None else tr("On this machine (no CUDA GPU)")
    return "\n".join([title, "-" * _width(title)]
                     + [f"{topic}{' ' * (width - _width(topic))}  {text}" for topic, text in rows])
