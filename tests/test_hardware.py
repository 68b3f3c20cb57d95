"""The hardware seam on faked GPUs: peaks, features, profiles and the facts everything reads."""

from __future__ import annotations

import pytest
import torch

from fp16lab import hardware
from fp16lab.hardware import (
    PEAK_TFLOPS,
    PROFILES,
    chip_features,
    cuda_capability,
    gpu_facts,
    peak_for,
    use_profile,
)
from fp16lab.labs.runtime.quick import pick_for_memory
from fp16lab.precision import check_precision_supported


@pytest.mark.parametrize(
    "cap,expected",
    [
        ((6, 1), dict(fp16_tensor_cores=False, bf16_native=False, tf32=False, fp8=False)),
        ((7, 0), dict(fp16_tensor_cores=True, bf16_native=False, tf32=False, fp8=False)),
        ((8, 0), dict(fp16_tensor_cores=True, bf16_native=True, tf32=True, fp8=False)),
        ((8, 9), dict(fp16_tensor_cores=True, bf16_native=True, tf32=True, fp8=True)),
        ((9, 0), dict(fp16_tensor_cores=True, bf16_native=True, tf32=True, fp8=True)),
    ],
)
def test_chip_features(cap, expected):
    assert chip_features(cap) == expected


def test_gtx16_is_sm75_without_tensor_cores():
    assert chip_features((7, 5), "NVIDIA GeForce GTX 1650")["fp16_tensor_cores"] is False
    assert chip_features((7, 5), "Tesla T4")["fp16_tensor_cores"] is True


@pytest.mark.parametrize("bad", ["8.0", (8,), (8, 0, 1), (8.0, 0), None, (True, 0), [8, 0]])
def test_chip_features_refuses_bad_capability(bad):
    with pytest.raises(ValueError, match="capability"):
        chip_features(bad)


@pytest.mark.parametrize(
    "name,key",
    [
        ("NVIDIA GeForce RTX 4090", "RTX 4090"),
        ("NVIDIA GeForce RTX 4090 D", "RTX 4090D"),
        ("NVIDIA GeForce RTX 4090 Laptop GPU", "RTX 4090 Laptop"),
        ("NVIDIA GeForce RTX 4060 Laptop GPU", "RTX 4060 Laptop"),
        ("NVIDIA GeForce RTX 3090", "RTX 3090"),
        ("NVIDIA GeForce RTX 3060", "RTX 3060"),
        ("NVIDIA A100-SXM4-80GB", "A100"),
        ("NVIDIA A100-SXM4-40GB", "A100"),
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
        ("NVIDIA H100 NVL", "H100 NVL"),
        ("NVIDIA H200", "H200"),
        ("NVIDIA L4", "L4"),
        ("NVIDIA L40S", "L40S"),
        ("Tesla T4", "T4"),
        ("Tesla V100-SXM2-16GB", "V100"),
        ("NVIDIA A10", "A10"),
    ],
)
def test_peak_lookup(name, key):
    assert peak_for(name) is PEAK_TFLOPS[key]


@pytest.mark.parametrize("name", ["Some Future GPU", "NVIDIA GeForce RTX 3060 Ti", "NVIDIA GeForce RTX 3090 Ti",
                                  "NVIDIA GeForce RTX 3060 Laptop GPU", "NVIDIA GeForce GTX 1660"])
def test_peak_unknown_parts_are_not_guessed(name):
    assert peak_for(name) is None


@pytest.mark.parametrize("bad", [None, 4090, b"H200"])
def test_peak_for_refuses_non_strings(bad):
    with pytest.raises(ValueError, match="gpu_name"):
        peak_for(bad)


def test_peak_table_is_sane_and_cited():
    for p in PEAK_TFLOPS.values():
        assert p.fp32 > 0 and p.source
        if p.fp16 is not None:
            assert p.fp16 > p.fp32  # Tensor Cores are faster than plain FP32 everywhere listed
            assert p.fp16_acc16 is not None and p.fp16_acc16 >= p.fp16
        if p.fp8 is not None:
            assert p.fp8 >= (p.fp16 or 0)


def test_geforce_ada_half_rate_and_fp8_twice_bf16():
    d = PEAK_TFLOPS["RTX 4090D"]
    assert d.fp16 == pytest.approx(2 * d.fp32)
    assert d.fp16_acc16 == pytest.approx(2 * d.fp16)  # allow_fp16_accumulation: twice the rate
    assert d.fp8 == pytest.approx(2 * d.bf16) == pytest.approx(d.fp16_acc16)
    h = PEAK_TFLOPS["H200"]
    assert h.fp16_acc16 == h.fp16  # data-center parts run both accumulations at full rate


def test_every_profile_has_a_peak_row_and_matching_features():
    for key, prof in PROFILES.items():
        assert peak_for(prof.name) is not None, key
    assert chip_features(PROFILES["t4"].capability)["bf16_native"] is False


def test_no_gpu_means_no_facts(fake_gpu):
    fake_gpu("none")
    assert gpu_facts() is None
    with pytest.raises(ValueError, match="no CUDA GPU"):
        cuda_capability(0)


def test_facts_of_a_real_card(fake_gpu):
    fake_gpu("ada")
    f = gpu_facts()
    assert f.name == f.real_name == "NVIDIA GeForce RTX 4090 D" and f.profile is None
    assert f.sm == "sm_89" and f.sm_count == 114 and f.geforce
    assert f.peak is PEAK_TFLOPS["RTX 4090D"]
    assert f.supports("bf16") and f.supports("fp8")
    assert f.label == "NVIDIA GeForce RTX 4090 D"


@pytest.mark.parametrize("key", sorted(PROFILES))
def test_profile_reports_the_card_and_caps_memory(fake_gpu, monkeypatch, key):
    fake_gpu("hopper")
    monkeypatch.setenv("FP16LAB_PROFILE", key)
    prof = PROFILES[key]
    f = gpu_facts()
    assert (f.name, f.capability, f.sm_count) == (prof.name, prof.capability, prof.sm_count)
    assert f.real_name == "NVIDIA H200" and f.profile == key
    assert f.memory_bytes == prof.memory_bytes
    assert "NVIDIA H200" in f.label and "speed" in f.label
    fraction, index = fake_gpu.caps[-1]
    assert fraction == pytest.approx(prof.memory_bytes / (140 * 2**30)) and index == 0
    gpu_facts()
    assert len(fake_gpu.caps) == 1  # the cap is applied once


def test_t4_profile_refuses_bf16_like_a_t4(fake_gpu, monkeypatch):
    fake_gpu("hopper")
    monkeypatch.setenv("FP16LAB_PROFILE", "t4")
    assert cuda_capability(0) == (7, 5)
    assert not gpu_facts().supports("bf16")
    with pytest.raises(ValueError, match="sm_75"):
        check_precision_supported("bf16", "cuda")


def test_unknown_profile_lists_the_known_ones(fake_gpu, monkeypatch):
    fake_gpu("hopper")
    monkeypatch.setenv("FP16LAB_PROFILE", "rtx5090")
    with pytest.raises(ValueError, match="rtx4090d.*a100-40gb"):
        gpu_facts()
    with pytest.raises(ValueError, match="known"):
        use_profile("H200")


def test_profile_bigger_than_the_card_is_refused_and_changes_nothing(fake_gpu):
    fake_gpu("ada")  # 24 GiB
    with pytest.raises(ValueError, match="a100-40gb.*only shrink"):
        use_profile("a100-40gb")
    assert hardware.active_profile() is None and fake_gpu.caps == []
    assert gpu_facts().name == "NVIDIA GeForce RTX 4090 D"


def test_profile_without_a_gpu_says_so(fake_gpu, monkeypatch):
    fake_gpu("none")
    with pytest.raises(ValueError, match="no.*visible|none is visible"):
        use_profile("t4")
    monkeypatch.setenv("FP16LAB_PROFILE", "t4")
    with pytest.raises(ValueError, match="unset FP16LAB_PROFILE"):
        gpu_facts()


def test_use_profile_wins_over_env_and_none_resets(fake_gpu, monkeypatch):
    fake_gpu("hopper")
    monkeypatch.setenv("FP16LAB_PROFILE", "t4")
    use_profile("rtx3060")
    assert gpu_facts().name == "NVIDIA GeForce RTX 3060"
    use_profile(None)
    assert gpu_facts().name == "NVIDIA H200"


def test_pick_for_memory_uses_the_profile(fake_gpu, monkeypatch):
    fake_gpu("hopper")
    monkeypatch.setenv("FP16LAB_QUICK", "0")
    sizes = {7.5: 32, 11: 64, 23: 128, 39: 256, 100: 512}
    assert pick_for_memory(4, sizes) == 512
    for key, expected in (("rtx4060-laptop", 32), ("rtx3060", 64), ("t4", 64), ("rtx4090d", 128), ("a100-40gb", 256)):
        monkeypatch.setenv("FP16LAB_PROFILE", key)
        assert pick_for_memory(4, sizes) == expected, key
    with pytest.raises(ValueError, match="smallest size here needs 100"):
        pick_for_memory(4, {100: 1})
    monkeypatch.setenv("FP16LAB_QUICK", "1")
    assert pick_for_memory(4, sizes) == 4


@pytest.mark.parametrize("bad", [{}, [(8, 1)], {"8": 1}, {True: 1}, {-1: 1}])
def test_pick_for_memory_refuses_bad_tables(bad):
    with pytest.raises(ValueError, match="full"):
        pick_for_memory(1, bad)


def test_facts_index_checked(fake_gpu):
    fake_gpu("hopper")
    with pytest.raises(ValueError, match="out of range"):
        gpu_facts(3)
    with pytest.raises(ValueError, match="not a CUDA GPU"):
        gpu_facts("cpu")
    assert gpu_facts(torch.device("cuda", 0)).index == 0


# ------------------------------------------------------------ bad input: unlisted neighbours (audit)


def test_numpy_ints_are_ints_for_capabilities_and_device_indices(fake_gpu):
    import numpy as np

    assert chip_features((np.int64(8), np.int64(9))) == chip_features((8, 9))
    fake_gpu("ada")
    assert gpu_facts(np.int64(0)).name == "NVIDIA GeForce RTX 4090 D"


@pytest.mark.parametrize("call", [lambda: gpu_facts(-1), lambda: hardware.usable_memory_gib(-3),
                                  lambda: hardware.cuda_capability(-1)])
def test_a_negative_device_index_is_refused_even_without_a_gpu(call, fake_gpu):
    fake_gpu("none")
    with pytest.raises(ValueError, match="device index must be an int >= 0"):
        call()


@pytest.mark.parametrize("name", [3, ("Tesla T4",), b"T4"])
def test_chip_features_refuses_a_name_that_is_not_a_string(name):
    with pytest.raises(ValueError, match="name must be a GPU name string"):
        chip_features((7, 5), name)


@pytest.mark.parametrize("key", [float("nan"), float("inf"), -1, "8"])
def test_pick_for_memory_refuses_keys_that_are_not_finite_gib(key):
    with pytest.raises(ValueError, match="full's keys must be finite GiB numbers"):
        pick_for_memory(1, {key: 2})


def test_pick_for_memory_accepts_numpy_keys():
    import numpy as np

    assert pick_for_memory(1, {np.int64(8): 2, np.float64(16.0): 3}) in (1, 2, 3)


def test_build_code_for_follows_cuda_binary_compatibility():
    from fp16lab.hardware import build_code_for

    wheel = ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"]   # a cu130 wheel: no sm_89 entry
    assert build_code_for(wheel, (8, 9)) == "sm_86"                     # same major, older minor: runs
    assert build_code_for(["sm_75", "sm_90"], (8, 9)) is None          # newer or other major: does not
    assert build_code_for(["sm_90a", "compute_80"], (8, 9)) == "compute_80"   # PTX is compiled on load
    assert build_code_for(["sm_90a"], (9, 0)) == "sm_90a" and build_code_for([], (8, 9)) is None
    with pytest.raises(ValueError, match="arch_list must be a list of strings"):
        build_code_for("sm_86", (8, 9))
