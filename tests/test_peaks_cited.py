"""Every row of the peak table pinned to the figure its source prints (cited, dense TFLOP/s).

Each case names the document and writes the figure as that document gives it: a datasheet that
prints only the sparse Tensor Core figure (marked *) is halved here, in the open, so a row that
drifts from its source fails. Rows computed from per-SM rates (laptops, the 4090D, the 3060)
repeat the computation: Ada and GA10x per SM and clock: 256 FP32, 512 FP16-with-FP32-accumulate
(GeForce) and 1024 FP16-accumulate FLOPs.

Fields: fp32, tf32, fp16 (FP32 accumulate), bf16, fp16_acc16 (FP16 accumulate), fp8.
"""

from __future__ import annotations

import pytest

from fp16lab.hardware import PEAK_TFLOPS


def per_sm(sms: int, mhz: float, flops_per_clock: int) -> float:
    """TFLOP/s of ``sms`` SMs at ``mhz`` doing ``flops_per_clock`` each, rounded to 0.1 as the tables are."""
    return round(sms * mhz * 1e6 * flops_per_clock / 1e12, 1)


CITED = {
    # NVIDIA H200 Tensor Core GPU datasheet (SXM): FP32 67; TF32 989*, BF16 1,979*, FP16 1,979*, FP8 3,958*
    "H200": ("NVIDIA H200 datasheet", (67.0, 989 / 2, 1979 / 2, 1979 / 2, 1979 / 2, 3958 / 2)),
    # NVIDIA H100 Tensor Core GPU Architecture whitepaper, H100 SXM5 column (dense / sparse):
    # FP32 66.9; TF32 494.7 / 989.4; FP16 and BF16 (FP32 acc.) 989.4 / 1978.9; FP16 acc. 989.4; FP8 1978.9 / 3957.8
    "H100 SXM": ("whitepaper", (66.9, 494.7, 989.4, 989.4, 989.4, 1978.9)),
    # NVIDIA H100 datasheet, H100 NVL column: FP32 60; TF32 835*, BF16/FP16 1,671*, FP8 3,341*
    "H100 NVL": ("NVL", (60.0, 835 / 2, 1671 / 2, 1671 / 2, 1671 / 2, 3341 / 2)),
    # NVIDIA H100 datasheet, H100 PCIe column: FP32 51; TF32 756*, BF16/FP16 1,513*, FP8 3,026*
    "H100 PCIe": ("PCIe", (51.0, 756 / 2, 1513 / 2, 1513 / 2, 1513 / 2, 3026 / 2)),
    # NVIDIA A100 Tensor Core GPU datasheet: FP32 19.5; TF32 156 | 312*; BF16/FP16 312 | 624*; no FP8
    "A100": ("NVIDIA A100 datasheet", (19.5, 156.0, 312.0, 312.0, 312.0, None)),
    # NVIDIA A10 datasheet: FP32 31.2; TF32 62.5 | 125*; BF16/FP16 125 | 250*; no FP8
    "A10": ("NVIDIA A10 datasheet", (31.2, 62.5, 125.0, 125.0, 125.0, None)),
    # NVIDIA L40S datasheet: FP32 91.6; TF32 183 | 366*; BF16/FP16 362.05 | 733*; FP8 733 | 1,466*
    "L40S": ("NVIDIA L40S datasheet", (91.6, 183.0, 362.05, 362.05, 362.05, 733.0)),
    # NVIDIA L4 datasheet: FP32 30.3; TF32 120*; BF16/FP16 242*; FP8 485*
    "L4": ("NVIDIA L4 datasheet", (30.3, 120 / 2, 242 / 2, 242 / 2, 242 / 2, 485 / 2)),
    # NVIDIA Ada GPU architecture whitepaper, appendix, GeForce RTX 4090 (dense / sparse): FP32 82.6;
    # TF32 82.6 / 165.2; FP16 and BF16 with FP32 acc. 165.2 / 330.4; FP16 with FP16 acc. 330.3 / 660.6;
    # FP8 with FP32 acc. 330.3 / 660.6
    "RTX 4090": ("Ada GPU architecture whitepaper", (82.6, 82.6, 165.2, 165.2, 330.3, 330.3)),
    # The 4090 D (114 SMs, the 4090's clocks): the course design's facts, FP32 73.5, FP16 with FP32
    # acc. 147, FP16 acc. and FP8 294 (the whitepaper's per-SM rates on 114 SMs at 2520 MHz: 73.5, 147.1, 294.2)
    "RTX 4090D": ("114 SMs", (73.5, 73.5, 147.0, 147.0, 294.0, 294.0)),
    # NVIDIA Ampere GA102 GPU architecture whitepaper, GeForce RTX 3090 (dense): FP32 35.6; TF32 35.6;
    # FP16 and BF16 with FP32 acc. 71; FP16 with FP16 acc. 142; no FP8
    "RTX 3090": ("GA102 whitepaper", (35.6, 35.6, 71.0, 71.0, 142.0, None)),
    # NVIDIA T4 datasheet: FP32 8.1; mixed precision (FP16/FP32) 65; no TF32, BF16 or FP8
    "T4": ("NVIDIA T4 datasheet", (8.1, None, 65.0, None, 65.0, None)),
    # NVIDIA V100 datasheet, SXM2: FP32 15.7; Tensor Performance 125; no TF32, BF16 or FP8
    "V100": ("V100 datasheet (SXM2)", (15.7, None, 125.0, None, 125.0, None)),
}

# Rows computed from the Ada / GA102 whitepapers' per-SM rates: (SMs, boost MHz), source words.
COMPUTED = {
    "RTX 4090 Laptop": ((76, 2040), "76 SMs x 2040 MHz"),
    "RTX 4060 Laptop": ((24, 2370), "24 SMs x 2370 MHz"),
    "RTX 3060": ((28, 1777), "28 SMs x 1777 MHz"),
}
FIELDS = ("fp32", "tf32", "fp16", "bf16", "fp16_acc16", "fp8")


def test_every_row_is_pinned_here():
    assert set(PEAK_TFLOPS) == set(CITED) | set(COMPUTED)


@pytest.mark.parametrize("gpu", list(CITED))
def test_a_cited_row_is_its_source_figure(gpu: str):
    source, figures = CITED[gpu]
    row = PEAK_TFLOPS[gpu]
    assert row.gpu == gpu and source in row.source
    assert tuple(getattr(row, f) for f in FIELDS) == figures


@pytest.mark.parametrize("gpu", list(COMPUTED))
def test_a_computed_row_is_its_per_sm_arithmetic(gpu: str):
    (sms, mhz), source = COMPUTED[gpu]
    row = PEAK_TFLOPS[gpu]
    assert source in row.source
    fp8 = per_sm(sms, mhz, 1024) if "RTX 40" in gpu else None  # Ada has FP8 (FP32 acc. at the FP16-acc. rate)
    expected = (per_sm(sms, mhz, 256), per_sm(sms, mhz, 256), per_sm(sms, mhz, 512), per_sm(sms, mhz, 512),
                per_sm(sms, mhz, 1024), fp8)
    assert tuple(getattr(row, f) for f in FIELDS) == pytest.approx(expected, abs=0.051)


def test_the_4090d_is_the_4090_on_114_of_its_128_sms():
    full, cut = PEAK_TFLOPS["RTX 4090"], PEAK_TFLOPS["RTX 4090D"]
    for f in FIELDS:
        assert getattr(cut, f) == pytest.approx(getattr(full, f) * 114 / 128, abs=0.2), f
