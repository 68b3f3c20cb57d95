"""The environment report on faked machines: no GPU, pre-Ampere, Ada, Hopper."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from fp16lab.env import (
    PEAK_TFLOPS,
    Status,
    chip_features,
    choose_device,
    peak_for,
    report,
    run_metadata,
)


def test_no_gpu_never_fails_and_says_so(fake_gpu, monkeypatch):
    monkeypatch.delenv("FP16LAB_QUICK", raising=False)
    monkeypatch.delenv("CI", raising=False)
    fake_gpu("none")
    r = report()
    assert r.ok
    assert r["CUDA GPU"].status is Status.WARN
    assert "quick mode" in r["CUDA GPU"].fix
    assert r["quick mode"].value.startswith("quick")
    assert "FP16 Tensor Cores" not in [c.name for c in r.checks]


def test_cpu_only_wheel_is_detected(fake_gpu):
    fake_gpu("none", cuda_build=None)
    r = report()
    assert r["torch CUDA build"].status is Status.WARN
    assert "CPU-only" in r["torch CUDA build"].value
    assert "download.pytorch.org" in r["torch CUDA build"].fix
    assert "torch has no CUDA support" in r["CUDA GPU"].value


def test_pascal_warns_about_everything(fake_gpu):
    fake_gpu("pascal")
    r = report()
    assert r.ok
    for row in ("FP16 Tensor Cores", "BF16 native", "TF32"):
        assert r[row].status is Status.WARN, row
        assert r[row].fix
    assert r["peak table"].status is Status.WARN  # P100 is not in the table


def test_turing_has_tensor_cores_but_bf16_is_emulated(fake_gpu):
    fake_gpu("turing")
    r = report()
    assert r["FP16 Tensor Cores"].status is Status.OK
    assert r["BF16 native"].status is Status.WARN
    assert "is_bf16_supported" in r["BF16 native"].fix
    assert r["peak table"].value.startswith("T4")


def test_ada_4090d_has_fp8_and_half_rate_peak(fake_gpu):
    fake_gpu("ada")
    r = report()
    assert all(r[x].status is Status.OK for x in ("FP16 Tensor Cores", "BF16 native", "TF32", "FP8"))
    assert r["FP8"].value == "yes"
    assert r["compute capability"].value == "sm_89"
    assert r["SMs"].value == "114"
    peak = peak_for("NVIDIA GeForce RTX 4090 D")
    assert peak is not None and peak.gpu == "RTX 4090D"
    assert peak.fp16 == pytest.approx(2 * peak.fp32)  # FP32-accumulate runs at half rate


def test_hopper(fake_gpu):
    fake_gpu("hopper")
    r = report()
    assert r.ok
    assert r["GPU"].value.startswith("NVIDIA H200")
    assert r["peak table"].value.startswith("H200")
    assert r["driver"].value == "580.00"


def test_missing_cudnn_is_a_warning(fake_gpu):
    fake_gpu("hopper", cudnn=False)
    assert report()["cuDNN"].status is Status.WARN


def test_missing_package_fails(monkeypatch, fake_gpu):
    import importlib.metadata as md

    fake_gpu("none")
    real = md.version

    def version(name):
        if name == "seaborn":
            raise md.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(md, "version", version)
    r = report()
    assert not r.ok
    assert r["seaborn"].status is Status.FAIL and "pip install seaborn" in r["seaborn"].fix


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


@pytest.mark.parametrize(
    "name,key",
    [
        ("NVIDIA GeForce RTX 4090", "RTX 4090"),
        ("NVIDIA GeForce RTX 4090 D", "RTX 4090D"),
        ("NVIDIA GeForce RTX 3090", "RTX 3090"),
        ("NVIDIA A100-SXM4-80GB", "A100"),
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA H100 PCIe", "H100 PCIe"),
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


def test_peak_unknown_and_table_sane():
    assert peak_for("Some Future GPU") is None
    for p in PEAK_TFLOPS.values():
        assert p.fp32 > 0 and p.source
        if p.fp16 is not None:
            assert p.fp16 > p.fp32  # Tensor Cores are faster than plain FP32 everywhere listed


def test_choose_device_order(fake_gpu, monkeypatch):
    import fp16lab.env as env

    fake_gpu("none")
    assert choose_device().type == "cpu"
    monkeypatch.setattr(env, "_mps_available", lambda: True)
    assert choose_device().type == "mps"
    fake_gpu("hopper")
    monkeypatch.setattr(env, "_mps_available", lambda: True)
    assert choose_device().type == "cuda"


def test_choose_device_rejects_bad_values(fake_gpu):
    fake_gpu("none")
    with pytest.raises(ValueError, match="'tpu'"):
        choose_device("tpu")
    with pytest.raises(ValueError, match="no CUDA GPU"):
        choose_device("cuda")
    assert choose_device("cpu") == torch.device("cpu")


def test_run_metadata_records_settings():
    meta = run_metadata("cpu")
    for key in ("device", "torch", "tf32_matmul", "tf32_cudnn", "mode", "date", "python"):
        assert key in meta
    assert meta["torch"] == torch.__version__


def test_report_renders_html_and_text(fake_gpu):
    fake_gpu("ada")
    r = report()
    assert "<table>" in r._repr_html_() and "RTX 4090 D" in r._repr_html_()
    assert "verdict" in str(r)
    assert list(r.to_frame().columns) == ["check", "value", "status", "fix"]
    with pytest.raises(KeyError, match="no check named"):
        r["nope"]


def test_cli_doctor_exit_status():
    out = subprocess.run([sys.executable, "-m", "fp16lab", "doctor"], capture_output=True, text=True)
    assert out.returncode == (0 if report().ok else 1), out.stderr
    assert "verdict:" in out.stdout
