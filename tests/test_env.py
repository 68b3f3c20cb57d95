"""The environment report on faked machines: no GPU, pre-Ampere, Ada, Hopper."""

from __future__ import annotations

import os
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


# ---- a driver too old for the wheel, a torchvision that cannot run, a shared GPU (issue 48) ----------------

def _old_driver(monkeypatch, fake_gpu, *, wheel="13.0", supports=(12, 2), driver="535.104.05"):
    from fp16lab.course import env

    fake_gpu("none", cuda_build=wheel)
    monkeypatch.setattr(env, "driver_version", lambda: driver)
    monkeypatch.setattr(env, "driver_cuda_version", lambda: supports)
    monkeypatch.setattr(env, "cuda_unavailable_reason", lambda: "The NVIDIA driver on your system is too old "
                        "(found version 12020). Please update your GPU driver")
    return env


def test_a_driver_too_old_for_the_wheel_fails_naming_both_and_the_fix(monkeypatch, fake_gpu):
    _old_driver(monkeypatch, fake_gpu)
    r = report()
    assert not r.ok, "a GPU the wheel cannot use is a failure, not a quiet fall-back to quick mode"
    row = r["driver"]
    assert row.status is Status.FAIL
    assert "535.104.05" in row.value and "12.2" in row.value and "13.0" in row.value, row.value
    assert "580.65.06" in row.fix, "names the driver the wheel needs"
    assert "--index-url https://download.pytorch.org/whl/cu126" in row.fix, "or the wheel this driver runs"
    assert "too old" in r["CUDA GPU"].value, "torch's own reason is shown"


def test_the_driver_version_comes_from_torchs_message_without_libcuda(monkeypatch, fake_gpu):
    env = _old_driver(monkeypatch, fake_gpu, supports=None)
    monkeypatch.setattr(env, "driver_cuda_version", lambda: None)
    row = report()["driver"]
    assert row.status is Status.FAIL and "up to 12.2" in row.value, row.value


def test_a_driver_new_enough_is_no_driver_failure(monkeypatch, fake_gpu):
    from fp16lab.course import env

    fake_gpu("none", cuda_build="12.6")
    monkeypatch.setattr(env, "driver_cuda_version", lambda: (12, 8))
    monkeypatch.setattr(env, "cuda_unavailable_reason", lambda: "No CUDA GPUs are available")
    r = report()
    assert r.ok and "driver" not in [c.name for c in r.checks]
    assert "No CUDA GPUs are available" in r["CUDA GPU"].value


def test_cuda_unavailable_reason_is_torchs_own_words():
    from fp16lab.course.env import cuda_unavailable_reason

    reason = cuda_unavailable_reason()
    if torch.cuda.is_available():
        assert reason is None
    elif torch.version.cuda is None:
        assert reason is None, "a CPU-only build has no CUDA to explain"
    else:
        assert reason and "Torch not compiled" not in reason, reason


def test_a_torchvision_whose_models_cannot_import_fails(monkeypatch, fake_gpu):
    import builtins

    fake_gpu("none")
    real_import = builtins.__import__

    def broken(name, *args, **kwargs):
        if name == "torchvision.models" or (name == "torchvision" and args and args[2] and "models" in args[2]):
            raise RuntimeError("operator torchvision::nms does not exist")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", broken)
    r = report()
    row = r["torchvision works"]
    assert row.status is Status.FAIL and not r.ok
    assert "operator torchvision::nms does not exist" in row.value
    assert "torchvision 0." in row.fix and "--index-url" in row.fix


def test_a_torchvision_whose_operators_fail_warns(monkeypatch, fake_gpu):
    import torchvision.ops

    fake_gpu("none")

    def nms(*a, **k):
        raise RuntimeError("Could not run 'torchvision::nms' with arguments from the 'CPU' backend")

    monkeypatch.setattr(torchvision.ops, "nms", nms)
    row = report()["torchvision works"]
    assert row.status is Status.WARN and "torchvision::nms" in row.value


TORCHVISION_OPS_ERROR = (  # what PyPI's CUDA-built torchvision 0.28.0 says beside torch 2.13.0+cpu (CI's CPU lane)
    "Couldn't load custom C++ ops. This can happen if your PyTorch and torchvision versions are incompatible, or if "
    "you had errors while compiling torchvision from source. For further information on the compatible versions, "
    "check https://github.com/pytorch/vision#installation for the compatibility matrix. Please check your PyTorch "
    "version with torch.__version__ and your torchvision version with torchvision.__version__ and verify if they are "
    "compatible, and if not please reinstall torchvision so that it matches your PyTorch install.")


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_torchvisions_long_message_is_quoted_short_in_both_languages(lang, monkeypatch, fake_gpu):
    """torch's own words stay English, quoted and cut to their first sentence; the row around them is the reader's."""
    import re

    import torchvision.ops

    monkeypatch.setenv("FP16LAB_LANG", lang)
    fake_gpu("none")

    def nms(*a, **k):
        raise RuntimeError(TORCHVISION_OPS_ERROR)

    monkeypatch.setattr(torchvision.ops, "nms", nms)
    row = report()["torchvision works"]
    assert row.status is Status.WARN
    quote = "“RuntimeError: Couldn't load custom C++ ops.”" if lang == "zh" else '"RuntimeError: Couldn\'t load custom C++ ops."'
    assert quote in row.value and "compatibility matrix" not in row.value, row.value
    if lang == "zh":
        assert not ENGLISH.search(re.sub(r"“[^”]*”", "", row.value)), row.value


def test_a_working_torchvision_runs_nms_here():
    from fp16lab.course.env import torchvision_check

    row = torchvision_check()
    assert row.status is not Status.FAIL, row
    if row.status is Status.OK:
        assert "ops.nms runs" in row.value


def test_gpu_sharing_names_the_other_processes_and_what_they_do(monkeypatch, fake_gpu):
    from fp16lab.course import gpushare

    fake_gpu("ada")
    monkeypatch.delenv(gpushare.SHARED_ENV, raising=False)
    monkeypatch.setattr(gpushare, "_nvidia_smi_processes", lambda i: [])
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda i=0: 0)
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    monkeypatch.setattr(gpushare, "_used_gib", lambda i: 3.25)
    assert gpushare.gpu_sharing().shared, "3.25 GiB in use and none of it this process's: someone else is there"
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda i=0: 2.5 * 2**30)
    assert not gpushare.gpu_sharing().shared, "this process's own memory is not a neighbour"
    monkeypatch.setattr(gpushare, "_used_gib", lambda i: 0.3)
    assert not gpushare.gpu_sharing().shared
    assert report()["GPU shared"].status is Status.OK
    monkeypatch.setattr(gpushare, "_nvidia_smi_processes", lambda i: ["4242 python (3000 MiB)"])
    share = gpushare.gpu_sharing()
    assert share.shared and "4242 python" in str(share) and "time-slices" in str(share)
    assert "speed check can fail" in share._repr_html_()
    assert report()["GPU shared"].status is Status.WARN
    monkeypatch.setattr(gpushare, "_nvidia_smi_processes", lambda i: None)  # a container: nvidia-smi sees nobody
    monkeypatch.setenv(gpushare.SHARED_ENV, "6")
    assert gpushare.gpu_sharing().shared and "6 learners" in str(gpushare.gpu_sharing())
    with pytest.raises(ValueError, match="index 3 is out of range"):
        gpushare.gpu_sharing(3)
    with pytest.raises(ValueError, match="index must be"):
        gpushare.gpu_sharing(-1)


def test_nvidia_smi_is_asked_about_the_gpu_this_process_sees(monkeypatch):
    from fp16lab.course import gpushare

    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "GPU-abc, 3")
    assert gpushare._smi_target(0) == "GPU-abc" and gpushare._smi_target(1) == "3"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert gpushare._smi_target(2) == "2"
    calls = []
    monkeypatch.setattr(gpushare.shutil, "which", lambda exe: "/bin/nvidia-smi")

    def run(cmd, **kw):
        calls.append(cmd)
        return __import__("types").SimpleNamespace(stdout=f"{os.getpid()}, /usr/bin/python3, 500\n77, /opt/x/python, 9000\n")

    monkeypatch.setattr(gpushare.subprocess, "run", run)
    assert gpushare._nvidia_smi_processes(0) == ["77 python (9000 MiB)"], "this process is not its own neighbour"
    assert calls[0][1:3] == ["-i", "0"]


def test_gpu_sharing_without_a_gpu_says_so(fake_gpu):
    from fp16lab.course.gpushare import gpu_sharing

    fake_gpu("none")
    share = gpu_sharing()
    assert not share.shared and "no CUDA GPU" in str(share)


ENGLISH = __import__("re").compile(r"\b[a-z]{3,}\s+[a-z]{3,}\b")


@pytest.mark.parametrize("kind", ["none", "pascal", "ada", "volta", "old-driver"])
def test_the_doctor_speaks_chinese_in_labels_and_values(kind, monkeypatch, fake_gpu):
    """Under FP16LAB_LANG=zh no row has an English phrase of fp16lab's own: code, API names, units,
    product names and torch's own messages stay as they are."""
    import re

    monkeypatch.setenv("FP16LAB_LANG", "zh")
    if kind == "old-driver":
        _old_driver(monkeypatch, fake_gpu)
    else:
        fake_gpu(kind, arch_list=["sm_75", "sm_80"] if kind == "volta" else None)
        from fp16lab.course import env

        monkeypatch.setattr(env, "cuda_unavailable_reason", lambda: None)
    r = report()
    frame = r.to_frame()
    assert list(frame.columns) == ["check", "value", "status", "fix"], "pandas column names stay"
    for (_, row), check in zip(frame.iterrows(), r.checks, strict=False):
        for field in (row["check"], row["value"], row["fix"]):
            plain = re.sub(r"`[^`]*`|https?://\S+|\(cited[^)]*\)|引用：[^）]*|“[^”]*”", "", field)  # torch's words quoted
            plain = plain.replace(check.value if check.name in ("GPU", "peak table") else "\0", "")
            for name in ("CUDA GPU", "Tensor Cores", "FP16 Tensor Cores", "PEAK_TFLOPS", "GeForce", "NVIDIA",
                         "dense TFLOP/s", "ops.nms", "models", "transforms"):
                plain = plain.replace(name, "")
            assert not ENGLISH.search(plain), f"{check.name}: English left in {field!r}"
    text = str(r)
    assert "结论：" in text
    if kind == "old-driver":
        assert "驱动太旧" in text and "580.65.06" in text
