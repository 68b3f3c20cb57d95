"""Shared fixtures: fake GPUs so the environment report can be tested without one."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

import fp16lab.course.env as env
import fp16lab.device as device
import fp16lab.hardware as hardware
import fp16lab.labs.runtime.metadata as metadata

FAKE_GPUS = {
    "none": None,
    "pascal": ("Tesla P100-PCIE-16GB", (6, 0), 56, 16),
    "turing": ("Tesla T4", (7, 5), 40, 15),
    "ada": ("NVIDIA GeForce RTX 4090 D", (8, 9), 114, 24),
    "hopper": ("NVIDIA H200", (9, 0), 132, 140),
    "gtx1660": ("NVIDIA GeForce GTX 1660 SUPER", (7, 5), 22, 6),
    "volta": ("Tesla V100-SXM2-16GB", (7, 0), 80, 16),
}


@pytest.fixture(autouse=True)
def _english_unless_asked(monkeypatch):
    """Tests match English messages: a shell's FP16LAB_LANG=zh must not change them (tests of the
    Chinese path set it themselves)."""
    monkeypatch.delenv("FP16LAB_LANG", raising=False)


@pytest.fixture
def fake_gpu(monkeypatch):
    """Call ``fake_gpu(kind)`` to make torch (as fp16lab sees it) report that GPU.

    No hardware profile is active unless the test sets one; allocator caps are recorded in
    ``fake_gpu.caps`` instead of reaching torch.
    """
    monkeypatch.delenv("FP16LAB_PROFILE", raising=False)
    import torchvision.models  # noqa: F401  (first imported under a faked torch.version.cuda, it refuses)
    monkeypatch.setattr(hardware, "_override", [])
    monkeypatch.setattr(hardware, "_capped", {})
    caps: list[tuple[float, int]] = []

    def install(kind: str, *, cudnn: bool = True, cuda_build: str | None = "12.6",
                arch_list: list[str] | None = None):
        spec = FAKE_GPUS[kind]
        monkeypatch.setattr(torch.version, "cuda", cuda_build)
        monkeypatch.setattr(torch.backends.cudnn, "is_available", lambda: cudnn)
        monkeypatch.setattr(torch.backends.cudnn, "version", lambda: 91002 if cudnn else None)
        for where in (env, metadata):  # the doctor's rows and the run metadata ask the same function
            monkeypatch.setattr(where, "driver_version", lambda: "580.00" if spec else None)
        monkeypatch.setattr(env, "mps_available", lambda: False)
        monkeypatch.setattr(device, "mps_available", lambda: False)
        if spec is None:
            monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
            monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
            return None
        name, cap, sms, gib = spec
        props = SimpleNamespace(name=name, major=cap[0], minor=cap[1], multi_processor_count=sms,
                                total_memory=gib * 2**30)
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)
        monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
        monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i=0: props)
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i=0: cap)
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: name)
        monkeypatch.setattr(torch.cuda, "get_arch_list",
                            lambda: arch_list if arch_list is not None else ["sm_75", "sm_80", "sm_86", "sm_90"])
        monkeypatch.setattr(torch.cuda, "set_per_process_memory_fraction",
                            lambda fraction, index=None: caps.append((fraction, index)))
        return props

    install.caps = caps  # type: ignore[attr-defined]
    return install


@pytest.fixture
def fake_profiler(monkeypatch):
    """Call ``fake_profiler(events)`` to make ``torch.profiler.profile`` record exactly ``events``.

    Each event is a namespace with ``device_type``, ``is_user_annotation`` and the fields the code
    under test reads; ``events()`` and ``key_averages()`` both return them. CUDA synchronisation
    becomes a no-op and ``torch.cuda.is_available()`` True.
    """
    import torch.profiler

    def install(events):
        class FakeProfile:
            def __init__(self, activities):
                self.activities = activities

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                return False

            def events(self):
                return events

            def key_averages(self):
                return events

        monkeypatch.setattr(torch.profiler, "profile", FakeProfile)
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: None)

    return install
