"""On a CUDA GPU, values, not just ``status == "ok"``: channels_last really applied in the benchmark,
fp16lab's FP16 ``train_step`` bit for bit equal to the hand-written loop, and the benchmark's
images/s equal (within timing noise) to what ``time_windows`` gives on the same step.

Skipped without CUDA (CI); the lead runs them on the H200.
"""

from __future__ import annotations

import copy
import statistics

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from fp16lab.labs.benchmark import CONFIGS, BenchSettings, bench_one
from fp16lab.labs.benchmark.configs import parse_model
from fp16lab.labs.benchmark.measure import _backend
from fp16lab.labs.benchmark.steps import build_runner
from fp16lab.timing import time_windows
from fp16lab.train import make_scaler, train_step

pytestmark = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
CL = torch.channels_last


class Probe(nn.Module):
    """Two 3x3 convolutions (no size-1 dimension, so NCHW and NHWC contiguity differ) and a head."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, padding=1)
        self.head = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.bn(self.conv1(x)))
        return self.head(torch.relu(self.conv2(x)).mean((2, 3)))


def probed(seen: list[tuple[bool, bool]]):
    """A model factory whose convolutions record, at every call, whether input and weight are channels_last."""

    def record(mod: nn.Module, args: tuple[torch.Tensor, ...]) -> None:
        seen.append((args[0].is_contiguous(memory_format=CL), mod.weight.is_contiguous(memory_format=CL)))

    def factory() -> nn.Module:
        net = Probe()
        for m in (net.conv1, net.conv2):
            m.register_forward_pre_hook(record)
        return net

    return factory


SMALL = BenchSettings(image_size=32, warmup=2, steps=3, windows=2, num_classes=10)


@pytest.mark.parametrize(("config", "expected"), [("fp16_cl", (True, True)), ("fp16", (False, False))])
def test_the_channels_last_configuration_runs_its_convolutions_in_channels_last(config: str, expected):
    seen: list[tuple[bool, bool]] = []
    row = bench_one(probed(seen), config, 8, settings=SMALL, device="cuda")
    assert row["status"] == "ok", row["error"]
    steps = SMALL.warmup + SMALL.steps * SMALL.windows
    assert len(seen) == 2 * steps  # two convolutions per step, every step probed
    assert set(seen) == {expected}  # (input, weight) channels_last in fp16_cl; neither in plain fp16
    assert row["memory_format"] == ("channels_last" if expected[0] else "NCHW")


def test_fp16_train_step_equals_the_hand_written_loop_bit_for_bit():
    dev = torch.device("cuda")
    old = (torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark)
    torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = True, False
    try:
        torch.manual_seed(0)
        ours = Probe().to(dev)
        theirs, initial = copy.deepcopy(ours), copy.deepcopy(ours)
        g = torch.Generator().manual_seed(1)
        batches = [(torch.randn(16, 3, 16, 16, generator=g).to(dev), torch.randint(0, 10, (16,), generator=g).to(dev))
                   for _ in range(6)]
        opt_a = torch.optim.Adam(ours.parameters(), lr=1e-3)
        opt_b = torch.optim.Adam(theirs.parameters(), lr=1e-3)
        scaler_a = make_scaler("fp16", dev)
        scaler_b = torch.amp.GradScaler("cuda")  # PyTorch's AMP recipe, by hand
        for x, y in batches:
            res = train_step(ours, opt_a, scaler_a, [(x, y)], precision="fp16", device=dev)
            with torch.autocast("cuda", dtype=torch.float16):
                loss = F.cross_entropy(theirs(x), y)
            scaler_b.scale(loss).backward()
            scaler_b.step(opt_b)
            scaler_b.update()
            opt_b.zero_grad(set_to_none=True)
            assert res.loss == loss.item() and res.scale == scaler_b.get_scale() and not res.skipped
        for (name, a), b in zip(ours.state_dict().items(), theirs.state_dict().values(), strict=True):
            assert torch.equal(a, b), name  # weights and batch-norm statistics, bit for bit
        assert not torch.equal(ours.conv1.weight, initial.conv1.weight)  # six steps did train
    finally:
        torch.backends.cudnn.deterministic, torch.backends.cudnn.benchmark = old


def own_images_per_s(cfg_name: str, batch: int, s: BenchSettings) -> float:
    """The same step (build_runner), timed by time_windows directly: batch * steps / median window."""
    dev, cfg = torch.device("cuda"), CONFIGS[cfg_name]
    with _backend(cfg, s, dev):
        run, _ = build_runner(parse_model("resnet18"), cfg, batch, s, "train", dev)
        run(s.warmup)
        torch.cuda.synchronize()
        secs = time_windows(lambda: run(s.steps), dev, s.windows)
    return batch * s.steps / statistics.median(secs)


def test_bench_one_images_per_second_agree_with_time_windows_on_the_same_step():
    s = BenchSettings(image_size=64, warmup=5, steps=10, windows=5, num_classes=10)
    before = own_images_per_s("fp16_cl_fused", 64, s)
    row = bench_one("resnet18", "fp16_cl_fused", 64, settings=s, device="cuda")
    after = own_images_per_s("fp16_cl_fused", 64, s)
    assert row["status"] == "ok", row["error"]
    # Tolerance: 25 % beyond the two independent measurements either side (timing noise of
    # separate runs); a missing steps factor (10x) or a unit slip (1000x) is far outside it.
    lo, hi = min(before, after), max(before, after)
    assert 0.75 * lo <= row["img_per_s"] <= 1.25 * hi, (before, row["img_per_s"], after)
    # 5 windows: the median rate is the median window's, so ms per step = 1000 * batch / rate
    assert row["step_ms"] == pytest.approx(1e3 * 64 / row["img_per_s"], rel=1e-6)
