"""The "On your card" box says what the hardware facts say, for the real card and under a profile."""

import pytest

from fp16lab.course.card import card_box, card_notes
from fp16lab.hardware import PROFILES, GPUFacts, chip_features, peak_for


def _facts(name: str, cap: tuple[int, int], profile: str | None = None) -> GPUFacts:
    return GPUFacts(0, name, "NVIDIA H200", cap, 40, 16 * 2**30, 141 * 2**30, peak_for(name),
                    chip_features(cap, name), profile)


def test_quick_mode_box_says_what_quick_mode_means():
    text = card_box(None)
    assert "quick mode" in text and "reference" in text and "no CUDA GPU" in text


def test_geforce_profile_gains_from_fp16_accumulation_and_names_the_real_chip():
    p = PROFILES["rtx4090d"]
    notes = dict(card_notes(_facts(p.name, p.capability, p.key)))
    assert "NVIDIA H200" in notes["hardware profile"] and "not asserted" in notes["hardware profile"]
    assert notes["FP16 accumulation"].startswith("raises the FP16 Tensor Core peak 2x")
    assert notes["FP8"].startswith("yes") and notes["native BF16"].startswith("yes")


def test_data_center_card_gains_nothing_from_fp16_accumulation():
    notes = dict(card_notes(_facts("NVIDIA H200", (9, 0))))
    assert "hardware profile" not in notes
    assert notes["FP16 accumulation"].startswith("same peak as FP32 accumulation")
    # equal cited peaks promise no speed-up; whether a measured one is worth the accuracy cost is section 6's question
    assert "no speed-up on paper" in notes["FP16 accumulation"] and "section 6 measures" in notes["FP16 accumulation"]
    # the H200 datasheet gives no FP16-accumulate figure: the equal rate is credited to the H100 whitepaper
    assert "H100 Tensor Core GPU Architecture whitepaper" in notes["FP16 accumulation"]
    assert "H200 datasheet" not in notes["FP16 accumulation"]


def test_the_report_credits_each_peak_to_its_document():
    from fp16lab.course.env import _peak_check
    value = _peak_check("NVIDIA H200").value
    assert "(cited: NVIDIA H200 datasheet; FP16-accumulate: NVIDIA H100 Tensor Core GPU" in value
    assert "FP16-accumulate:" not in _peak_check("NVIDIA A100-SXM4-40GB").value


@pytest.mark.parametrize(("name", "cap", "topic", "start"), [
    ("Tesla T4", (7, 5), "native BF16", "no"),
    ("Tesla T4", (7, 5), "TF32", "no"),
    ("NVIDIA GeForce GTX 1660 Ti", (7, 5), "FP16 Tensor Cores", "no"),
    ("NVIDIA A100-SXM4-40GB", (8, 0), "FP8", "no"),
])
def test_rows_follow_the_capability_rule(name, cap, topic, start):
    assert dict(card_notes(_facts(name, cap)))[topic].startswith(start)


def test_a_chip_without_a_cited_peak_is_told_to_measure():
    notes = dict(card_notes(_facts("NVIDIA GeForce RTX 2080", (7, 5))))
    assert "no cited peak" in notes["FP16 accumulation"] and "twice" in notes["FP16 accumulation"]


def test_refuses_what_is_not_gpu_facts():
    with pytest.raises(TypeError, match=r"facts must be a GPUFacts .* got dict"):
        card_notes({"name": "H200"})  # type: ignore[arg-type]
