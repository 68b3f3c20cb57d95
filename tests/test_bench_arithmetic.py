"""The benchmark's arithmetic proved with fixed window times: images/s, step time, spread, MFU, ratios.

Every stand-in here returns window seconds written down in the test, never a formula, and every
expected number is worked out by hand in a comment. A window is ``steps`` steps of ``batch``
images, so with several steps per window (as in the reference runs: 10) a missing steps factor
in images/s or in the step time gives a number 10x off, and a test fails.
"""

from __future__ import annotations

import functools

import pytest
import torch
from torch import nn

import fp16lab.labs.benchmark.measure as measure
import fp16lab.labs.benchmark.run as run_mod
from fp16lab.labs.benchmark import RECOMMENDED, BenchSettings, bench_one, run_benchmark, targets_table
from fp16lab.labs.benchmark.measure import _settings_row as settings_row
from fp16lab.labs.benchmark.measure import finish_row

# batch 4, 10 steps per window: a window is 40 images
TEN = BenchSettings(image_size=16, warmup=2, steps=10, windows=3, cpu_threads=1, num_classes=10)
BATCH = 4


class TinyNet(nn.Module):
    """A user's own model: 3-channel images in, 10 logits out."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.head = nn.Linear(4, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.relu(self.conv(x)).mean((2, 3)))


class FixedSession:
    """Stands in for Session: no model; round ``r`` of ``cfg`` times the windows ``script[cfg][r]``."""

    def __init__(self, spec, cfg, batch, s, task, dev, *, script):
        self.spec, self.cfg, self.batch, self.s, self.task, self.dev = spec, cfg, batch, s, task, dev
        self.row = settings_row(spec, cfg, batch, s, task, dev)
        self.script, self.rounds, self.steps = script[cfg.name], 0, 0

    def open(self):
        self.row.update(peak_mem_gb=1.0, first_step_s=0.5, warmup_s=1.0)

    def warm(self, n):
        self.steps += n

    def skip_reason(self):
        return None

    def time(self, windows):
        secs = self.script[self.rounds]
        assert len(secs) == windows, f"the test scripts {len(secs)} windows, the run asked for {windows}"
        self.rounds += 1
        self.steps += windows * self.s.steps
        return list(secs)

    def close(self):
        self.row["steps_run"] = self.steps
        return self.row


def fixed_run(script, configs, repeat, **kw):
    """run_benchmark on the CPU with FixedSession: every window's seconds come from ``script``."""
    opener = functools.partial(FixedSession, script=script)
    rounds = max(len(v) for k, v in script.items() if k in repeat) if repeat else 1
    return run_benchmark(TinyNet, configs, [BATCH], repeat=repeat, rounds=rounds, settings=TEN, device="cpu",
                         progress=False, opener=opener, **kw)


# ---------------------------------------------------------------- one configuration


def test_finish_row_counts_every_step_of_a_window():
    row = finish_row({}, [0.1, 0.2, 0.4], batch=4, steps=10)
    # 40 images per window: 400, 200 and 100 images/s; the median window (0.2 s) gives 200
    assert row["img_per_s"] == pytest.approx(200.0)
    assert (row["img_per_s_min"], row["img_per_s_max"]) == pytest.approx((100.0, 400.0))
    assert row["spread"] == pytest.approx((400 - 100) / 200)  # 1.5
    assert row["step_ms"] == pytest.approx(20.0)  # 0.2 s / 10 steps
    assert row["window_s"] == [0.1, 0.2, 0.4] and row["status"] == "ok"


def test_bench_one_images_per_second_from_fixed_windows(monkeypatch):
    """bench_one with its real Session and model; only the clock is replaced (windows of 0.1, 0.2, 0.4 s)."""
    calls = []

    def fixed_windows(run, device, windows):
        calls.append((torch.device(device).type, windows))
        for _ in range(windows):
            run()  # the real steps run; their time is the script's
        return [0.1, 0.2, 0.4]

    monkeypatch.setattr(measure, "time_windows", fixed_windows)
    row = bench_one(TinyNet, "fp32_true", BATCH, settings=TEN, device="cpu")
    assert row["status"] == "ok", row["error"]
    assert calls == [("cpu", 3)]
    assert row["img_per_s"] == pytest.approx(200.0)  # 4 images * 10 steps / 0.2 s, not 4 / 0.2 = 20
    assert row["step_ms"] == pytest.approx(20.0)  # 0.2 s / 10 steps, not 200 ms
    assert row["spread"] == pytest.approx(1.5) and row["img_per_s_max"] == pytest.approx(400.0)
    assert row["steps_run"] == 2 + 3 * 10 and row["steps_per_window"] == 10  # warm-up, then 3 windows of 10


def test_a_single_run_row_and_its_mfu(monkeypatch):
    # 5 GFLOP per image at 200 images/s is 1 TFLOP/s; over a 10 TFLOP/s peak that is an MFU of 0.1
    monkeypatch.setattr(run_mod, "_peak_and_flops", lambda plan: {
        "flops_per_image": 5e9, "peak_tflops_fp16": 10.0, "flop_method": "stand-in"})
    res = fixed_run({"fp32_true": [[0.1, 0.2, 0.4]]}, ["fp32_true"], [])
    row = res.frame.set_index("config").loc["fp32_true"]
    assert row["status"] == "ok" and row["part"] == "comparison"
    assert row["img_per_s"] == pytest.approx(200.0) and row["step_ms"] == pytest.approx(20.0)
    assert row["tflops"] == pytest.approx(1.0)
    assert row["mfu"] == pytest.approx(0.1)


# ---------------------------------------------------------------- interleaved rounds

# Round medians of images/s (40 images per window):
#   article:     r0 [0.2, 0.4, 0.8] s -> 200, 100, 50 -> 100;  r1 [0.2, 0.2, 0.1] -> 200, 200, 400 -> 200;
#                r2 [0.8, 0.8, 0.4] -> 50, 50, 100 -> 50.
#   recommended: r0 [0.125, 0.1, 0.25] -> 320, 400, 160 -> 320;  r1 [0.125] * 3 -> 320;
#                r2 [0.5, 0.25, 0.5] -> 80, 160, 80 -> 80.
ROUNDS = {
    "article": [[0.2, 0.4, 0.8], [0.2, 0.2, 0.1], [0.8, 0.8, 0.4]],
    RECOMMENDED: [[0.125, 0.1, 0.25], [0.125, 0.125, 0.125], [0.5, 0.25, 0.5]],
}


def test_each_round_is_a_row_with_its_own_windows():
    res = fixed_run(ROUNDS, ["article", RECOMMENDED], ["article", RECOMMENDED])
    rep = res.frame[res.frame["part"] == "repeat"].set_index(["config", "round"])
    assert rep.loc[("article", 0), "img_per_s"] == pytest.approx(100.0)
    assert rep.loc[("article", 0), "step_ms"] == pytest.approx(40.0)  # median window 0.4 s / 10 steps
    assert rep.loc[("article", 0), "spread"] == pytest.approx((200 - 50) / 100)
    assert rep.loc[("article", 1), "img_per_s"] == pytest.approx(200.0)
    assert rep.loc[(RECOMMENDED, 2), "img_per_s"] == pytest.approx(80.0)
    assert rep.loc[(RECOMMENDED, 2), "step_ms"] == pytest.approx(50.0)  # median window 0.5 s / 10 steps


def test_the_comparison_row_is_the_median_of_round_medians():
    res = fixed_run(ROUNDS, ["article", RECOMMENDED], ["article", RECOMMENDED])
    comp = res.frame[res.frame["part"] == "comparison"].set_index("config")
    art, rec = comp.loc["article"], comp.loc[RECOMMENDED]
    assert art["img_per_s"] == pytest.approx(100.0)  # median of 100, 200, 50
    assert (art["img_per_s_min"], art["img_per_s_max"]) == pytest.approx((50.0, 200.0))
    assert art["spread"] == pytest.approx((200 - 50) / 100)  # 1.5
    # all nine windows sorted: 0.1 0.2 0.2 0.2 [0.4] 0.4 0.8 0.8 0.8 -> 0.4 s / 10 steps
    assert art["step_ms"] == pytest.approx(40.0)
    assert rec["img_per_s"] == pytest.approx(320.0) and rec["spread"] == pytest.approx((320 - 80) / 320)
    # 0.1 0.125 0.125 0.125 [0.125] 0.25 0.25 0.5 0.5 -> 12.5 ms
    assert rec["step_ms"] == pytest.approx(12.5)
    assert rec["rounds"] == 3 and len(rec["window_s"]) == 9 and rec["steps_run"] == 3 + 3 * 3 * 10


def test_a_target_is_the_median_of_per_round_ratios_with_its_spread():
    res = fixed_run(ROUNDS, ["article", RECOMMENDED], ["article", RECOMMENDED])
    t = targets_table(res.frame).set_index("target").loc["recommended / article's loop"]
    # per-round ratios 320/100 = 3.2, 320/200 = 1.6, 80/50 = 1.6: median 1.6 (the ratio of the
    # comparison rows, 320/100 = 3.2, and the mean, 2.13, are both wrong); spread |3.2 - 1.6| = 1.6
    assert t["values"] == pytest.approx([3.2, 1.6, 1.6])
    assert t["median"] == pytest.approx(1.6) and t["spread"] == pytest.approx(1.6) and t["n"] == 3
    assert t["source"] == "interleaved rounds"
    assert t["verdict"] == "within noise"  # 2.0 missed by 0.4, less than the spread of 1.6
    stored = {r["target"]: r for r in res.metadata["targets"]}["recommended / article's loop"]
    assert stored["median"] == pytest.approx(1.6) and stored["verdict"] == "within noise"


def test_the_profile_splits_the_measured_step_time(monkeypatch):
    import fp16lab.labs.benchmark.profile as profile

    seen = []

    def fake_profile_steps(session, steps=5):
        seen.append(session.cfg.name)
        return [("sm90_xmma_fprop_implicit_gemm_f16f16_f16f32_f32_nhwckrsc_nhwc", 50_000.0)]  # 10 ms per step

    monkeypatch.setattr(profile, "profile_steps", fake_profile_steps)
    res = fixed_run(ROUNDS, ["article", RECOMMENDED], ["article", RECOMMENDED], profile=[RECOMMENDED])
    assert seen == [RECOMMENDED]
    rows = {r["kind"]: r for r in res.metadata["step_profile"][RECOMMENDED]}
    # the measured step is 12.5 ms (above): 10 ms of convolution, 2.5 ms with no kernel running
    assert rows["convolution / matmul"]["ms_per_step"] == pytest.approx(10.0)
    assert rows["convolution / matmul"]["share_of_step"] == pytest.approx(0.8)
    assert rows["GPU idle (launch gaps, host)"]["ms_per_step"] == pytest.approx(2.5)
