"""Shared fixtures: fake GPUs so the environment report can be tested without one."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

import fp16lab.env as env

FAKE_GPUS = {
    "none": None,
    "pascal": ("Tesla P100-PCIE-16GB", (6, 0), 56, 16),
    "turing": ("Tesla T4", (7, 5), 40, 15),
    "ada": ("NVIDIA GeForce RTX 4090 D", (8, 9), 114, 24),
    "hopper": ("NVIDIA H200", (9, 0), 132, 140),
}


@pytest.fixture
def fake_gpu(monkeypatch):
    """Call ``fake_gpu(kind)`` to make torch (as fp16lab sees it) report that GPU."""

    def install(kind: str, *, cudnn: bool = True, cuda_build: str | None = "12.6"):
        spec = FAKE_GPUS[kind]
        monkeypatch.setattr(torch.version, "cuda", cuda_build)
        monkeypatch.setattr(torch.backends.cudnn, "is_available", lambda: cudnn)
        monkeypatch.setattr(torch.backends.cudnn, "version", lambda: 91002 if cudnn else None)
        monkeypatch.setattr(env, "_driver_version", lambda: "580.00" if spec else None)
        monkeypatch.setattr(env, "_mps_available", lambda: False)
        if spec is None:
            monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
            return None
        name, cap, sms, gib = spec
        props = SimpleNamespace(name=name, multi_processor_count=sms, total_memory=gib * 2**30)
        monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
        monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i=0: props)
        monkeypatch.setattr(torch.cuda, "get_device_capability", lambda i=0: cap)
        monkeypatch.setattr(torch.cuda, "get_device_name", lambda i=0: name)
        return props

    return install
