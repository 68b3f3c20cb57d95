"""The environment report on faked machines: no GPU, pre-Ampere, Ada, Hopper."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

from fp16lab.course.env import Status, report, run_metadata


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
    fake_gpu("pascal", arch_list=["sm_60", "sm_70", "sm_75", "sm_80"])  # an older wheel that has sm_60
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
    assert r["compute capability"].value == "sm_89"
    assert r["SMs"].value == "114"
    assert r["FP8"].value.startswith("yes")
    assert "RTX 4090D" in r["peak table"].value and "cited" in r["peak table"].value


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


def test_old_torch_fails_with_the_floor_and_a_fix(monkeypatch, fake_gpu):
    fake_gpu("none")
    monkeypatch.setattr(torch, "__version__", "2.6.0+cu124")
    r = report()
    assert not r.ok and r["torch"].status is Status.FAIL
    assert "2.11" in r["torch"].fix and "pip install" in r["torch"].fix


def test_volta_without_kernels_fails_and_names_the_wheel(fake_gpu):
    fake_gpu("volta", arch_list=["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"])
    r = report()
    assert r["compute capability"].status is Status.FAIL
    assert "cu126" in r["compute capability"].fix


def test_arch_check_accepts_same_major_binaries_and_ptx(fake_gpu):
    fake_gpu("ada", arch_list=["sm_80", "sm_86"])  # sm_86 binaries run on sm_89
    assert report()["compute capability"].status is Status.OK
    fake_gpu("hopper", arch_list=["sm_80", "compute_80"])  # PTX for 8.0 JIT-compiles on 9.0
    assert report()["compute capability"].status is Status.OK


def test_gtx16_has_no_tensor_cores(fake_gpu):
    fake_gpu("gtx1660")
    r = report()
    assert r["FP16 Tensor Cores"].status is Status.WARN and "GTX 16" in r["FP16 Tensor Cores"].value


def test_report_checks_its_argument_first(fake_gpu):
    fake_gpu("hopper")
    for bad in (-1, True, 1.0, "0", 5):
        with pytest.raises(ValueError, match="device_index"):
            report(bad)


def test_profile_shown_and_unknown_profile_fails(fake_gpu, monkeypatch):
    fake_gpu("hopper")
    monkeypatch.setenv("FP16LAB_PROFILE", "rtx4090d")
    r = report()
    assert r["GPU"].value.startswith("NVIDIA GeForce RTX 4090 D")
    assert r["hardware profile"].status is Status.WARN and "NVIDIA H200" in r["hardware profile"].value
    assert r["memory"].value.startswith("24.0")
    monkeypatch.setenv("FP16LAB_PROFILE", "rtx9999")
    r = report()
    assert not r.ok and "rtx4090d" in r["hardware profile"].fix


def test_fix_text_renders_backticks_as_code(fake_gpu):
    fake_gpu("none")
    html = report()._repr_html_()
    assert "<code>nvidia-smi</code>" in html and "`nvidia-smi`" not in html


def test_missing_lab_packages_warn_but_do_not_fail(monkeypatch, fake_gpu):
    import importlib.metadata as md

    fake_gpu("none")
    real = md.version

    def version(name):
        if name in ("jupyterlab", "ipywidgets"):
            raise md.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(md, "version", version)
    r = report()
    assert r.ok  # a headless runner (nbclient, VS Code) needs neither
    for pkg in ("jupyterlab", "ipywidgets"):
        assert r[pkg].status is Status.WARN and f"pip install {pkg}" in r[pkg].fix


@pytest.mark.parametrize("device", ["cuda", "cuda:7", "mps"])
def test_run_metadata_refuses_a_device_this_machine_lacks(device, fake_gpu):
    """Regression: run_metadata('cuda') on a CPU-only machine recorded device_type 'cuda'."""
    fake_gpu("none")
    with pytest.raises(ValueError, match="device"):
        run_metadata(device)
