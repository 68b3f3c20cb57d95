"""The "On your card" box: which of the series' chip-dependent conclusions hold on this machine.

Built only from :mod:`fp16lab.hardware` facts (capability rule, cited peaks, the active
profile), so the box says the same thing as the lessons' checks. Under a hardware profile it
speaks of the profile's card and says which chip really runs; without a CUDA GPU it says what
quick mode means.
"""

from __future__ import annotations

from fp16lab.hardware import GPUFacts

__all__ = ["card_notes", "card_box"]

_QUICK = [
    ("GPU", "none: the lessons run in quick mode (small sizes, few steps) on this device"),
    ("speed claims", "not measured here: the lessons show the committed GPU reference results, labelled "
                     "with the GPU that made them, and assert no speed"),
    ("FP16 / BF16 here", "CPUs have no Tensor Cores; many convert FP16 to FP32 and back, so FP16 can be "
                         "slower than FP32: numerics are the same, speed is not"),
    ("autocast here", "CPU autocast uses BF16 and has its own op lists (section 5b)"),
]


def _accumulate_note(facts: GPUFacts) -> str:
    """FP16 accumulation pays only where the chip runs it faster: GeForce yes, data-center no."""
    peak = facts.peak
    if peak is None or peak.fp16 is None or peak.fp16_acc16 is None:
        kind = "GeForce parts usually run it at twice the FP32-accumulate rate" if facts.geforce else \
            "data-center parts run it at the FP32-accumulate rate"
        return f"no cited peak for this chip in fp16lab.hardware.PEAK_TFLOPS; {kind}: measure it (section 6)"
    gain = peak.fp16_acc16 / peak.fp16
    cited = f"(cited, {peak.source}: {peak.fp16:g} vs {peak.fp16_acc16:g} TFLOP/s)"
    if gain >= 1.5:
        return (f"raises the FP16 Tensor Core peak {gain:.0f}x {cited}, at an accuracy cost (lesson 03): "
                "worth trying for inference and for matmul-bound layers")
    return f"same peak as FP32 accumulation {cited}: no speed to gain, keep FP32 accumulation"


def card_notes(facts: GPUFacts | None) -> list[tuple[str, str]]:
    """(topic, what applies here) rows for ``facts`` (``gpu_facts()``), or the quick-mode rows for None."""
    if facts is None:
        return list(_QUICK)
    if not isinstance(facts, GPUFacts):
        raise TypeError(f"facts must be a GPUFacts from fp16lab.hardware.gpu_facts() or None, got {type(facts).__name__}")
    f = facts.features
    rows = [("card", f"{facts.name} ({facts.sm}, {facts.memory_gib:.0f} GiB)")]
    if facts.profile is not None:
        rows.append(("hardware profile", f"{facts.profile}: memory and code path of this card; every speed "
                                         f"printed is the real {facts.real_name}'s, so speed ratios are "
                                         "reported, not asserted"))
    rows.append(("FP16 Tensor Cores", "yes: FP16 autocast runs matmuls and convolutions on them (sm_70+)"
                 if f["fp16_tensor_cores"] else
                 "no (before Volta, or a GTX 16xx): FP16 saves memory here, not time; stay in FP32 for speed"))
    rows.append(("native BF16", "yes (sm_80+): BF16 autocast needs no GradScaler" if f["bf16_native"] else
                 "no (needs sm_80+): torch may still accept BF16 through slow emulation; train in FP16 with a "
                 "GradScaler"))
    rows.append(("TF32", "yes: cuDNN convolutions use it by default, matmuls do not (section 4); say which "
                         "'FP32' you measure" if f["tf32"] else "no (needs sm_80+): FP32 here is true FP32"))
    rows.append(("FP8", "yes (sm_89+): lesson 09 trains with it here" if f["fp8"] else
                 "no (needs sm_89+): lesson 09 shows its committed reference results"))
    if f["fp16_tensor_cores"]:
        rows.append(("FP16 accumulation", _accumulate_note(facts)))
    return rows


def card_box(facts: GPUFacts | None) -> str:
    """The rows of :func:`card_notes` as an aligned text box, for ``print``."""
    rows = card_notes(facts)
    width = max(len(topic) for topic, _ in rows)
    title = "On your card" if facts is not None else "On this machine (no CUDA GPU)"
    return "\n".join([title, "-" * len(title)] + [f"{topic:<{width}}  {text}" for topic, text in rows])
