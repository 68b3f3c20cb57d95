"""fp16lab.timing proved with scripted durations: warm-up, synchronisation, medians and units.

No test here reads a real clock's noise: each stands in for the clock (or for CUDA's events) and
scripts what every call takes, so a wrong warm-up, a minimum for a median, a missing sync or
milliseconds for seconds gives a wrong number, and the test fails.
"""

from __future__ import annotations

import statistics
import time

import pytest
import torch
import torch.utils.benchmark as tbench

import fp16lab.timing as timing


class Clock:
    """A fake ``time.perf_counter``: it moves only when a scripted call says so."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class FakeEvent:
    """A stand-in ``torch.cuda.Event``: ``record()`` reads the fake GPU clock; times in milliseconds, as CUDA's."""

    def __init__(self, clock: Clock, log: list[str], enable_timing: bool = False) -> None:
        assert enable_timing, "CUDA events need enable_timing=True to be timed"
        self.clock, self.log, self.t = clock, log, None

    def record(self, stream=None) -> None:
        self.t = self.clock.now
        self.log.append("record")

    def elapsed_time(self, end: FakeEvent) -> float:
        assert self.t is not None and end.t is not None, "elapsed_time of an event that was never recorded"
        return (end.t - self.t) * 1e3


@pytest.fixture
def fake_cuda(monkeypatch):
    """A machine with 'CUDA' whose events and synchronisation are scripted; returns (clock, log)."""
    clock, log = Clock(), []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda device=None: log.append("sync"))
    monkeypatch.setattr(torch.cuda, "Event", lambda enable_timing=False: FakeEvent(clock, log, enable_timing))
    monkeypatch.setattr(timing, "resolve_device", lambda device: torch.device("cuda"))
    return clock, log


def scripted(clock: Clock, log: list[str], durations: list[float]):
    """A function whose n-th call takes ``durations[n]`` seconds on the fake clock (then the last one)."""
    calls = {"n": 0}

    def fn() -> None:
        i = calls["n"]
        calls["n"] += 1
        clock.now += durations[min(i, len(durations) - 1)]
        log.append("call")

    fn.calls = calls  # type: ignore[attr-defined]
    return fn


# ---------------------------------------------------------------- time_cuda_events


def test_time_cuda_events_warms_up_then_reports_the_median_in_seconds(fake_cuda):
    clock, log = fake_cuda
    warm = [5.0, 5.0, 5.0]  # slow first calls (autotuning): they must not be timed
    timed = [0.010, 0.030, 0.020, 0.050, 0.040]
    fn = scripted(clock, log, warm + timed)
    t = timing.time_cuda_events(fn, warmup=3, warmup_s=0.0, repeats=5)
    assert fn.calls["n"] == 8
    assert t.median_s == pytest.approx(0.030)  # the median, in seconds (not 30.0 ms, not the 0.010 minimum)
    q = statistics.quantiles(timed, n=4)
    assert t.iqr_s == pytest.approx(q[2] - q[0]) and t.runs == 5 and t.method == "CUDA events"
    # the host waits after the warm-up and once at the end, never between the timed calls
    first_record = log.index("record")
    warm_up = log[:first_record]
    assert warm_up.count("call") == 3 and warm_up[-1] == "sync"  # the warm-up's queue drained before timing
    assert log[first_record:] == ["record", "call", "record"] * 5 + ["sync"]


def test_time_cuda_events_warm_up_lasts_warmup_s_too(fake_cuda, monkeypatch):
    clock, log = fake_cuda
    monkeypatch.setattr(time, "perf_counter", clock)  # the warm-up's own clock
    fn = scripted(clock, log, [0.01])
    timing.time_cuda_events(fn, warmup=2, warmup_s=0.1, repeats=3)
    assert fn.calls["n"] - 3 == 10  # 10 calls of 0.01 s reach warmup_s=0.1, more than warmup=2


# ---------------------------------------------------------------- time_windows


def test_time_windows_on_cuda_times_each_window_with_events_and_syncs_once(fake_cuda):
    clock, log = fake_cuda
    run = scripted(clock, log, [0.1, 0.2, 0.4])
    assert timing.time_windows(run, "cuda", 3) == pytest.approx([0.1, 0.2, 0.4])  # seconds, in order
    assert log == ["record", "call", "record"] * 3 + ["sync"]  # no sync between windows, as in training


def test_time_windows_elsewhere_synchronises_around_each_window(monkeypatch):
    clock, log = Clock(), []
    monkeypatch.setattr(time, "perf_counter", clock)
    monkeypatch.setattr(timing, "synchronize", lambda dev: log.append("sync"))
    run = scripted(clock, log, [0.5, 0.25])
    assert timing.time_windows(run, "cpu", 2) == pytest.approx([0.5, 0.25])
    assert log == ["sync", "call", "sync"] * 2


# ---------------------------------------------------------------- time_fn


class FakeTimer:
    """Stands in for torch.utils.benchmark.Timer: its blocks take scripted times (seconds per call)."""

    per_call = [0.004, 0.001, 0.003, 0.002, 0.005]

    def __init__(self, stmt: str, globals: dict) -> None:
        self.fn = globals["fn"]

    def blocked_autorange(self, min_run_time: float) -> tbench.Measurement:
        self.fn()  # torch's Timer runs the statement: the log shows it comes after the warm-up
        return tbench.Measurement(number_per_run=1, raw_times=list(self.per_call), task_spec=tbench.TaskSpec("fn()",
                                                                                                            "pass"))


def test_time_fn_warms_up_synchronised_then_reports_the_median(monkeypatch):
    clock, log = Clock(), []
    monkeypatch.setattr(time, "perf_counter", clock)
    monkeypatch.setattr(timing, "_sync_all", lambda: log.append("sync"))
    monkeypatch.setattr(timing.tbench, "Timer", FakeTimer)
    fn = scripted(clock, log, [0.001])
    t = timing.time_fn(fn, warmup=3, warmup_s=0.0, min_run_time=0.2)
    assert log == ["call"] * 3 + ["sync", "call"]  # the warm-up, synchronised, before the timed blocks
    assert t.median_s == pytest.approx(0.003)  # the median of the blocks, not their 0.001 minimum
    assert t.runs == 5 and t.iqr_s == pytest.approx(0.002) and t.method == "torch.utils.benchmark"


def test_time_fn_warm_up_lasts_warmup_s_and_ends_synchronised(monkeypatch):
    clock, log = Clock(), []
    monkeypatch.setattr(time, "perf_counter", clock)
    monkeypatch.setattr(timing, "_sync_all", lambda: log.append("sync"))
    monkeypatch.setattr(timing.tbench, "Timer", FakeTimer)
    fn = scripted(clock, log, [0.01])
    timing.time_fn(fn, warmup=1, warmup_s=0.1)
    warm = log[: len(log) - 1]  # the last call is the timed one
    assert warm.count("call") == 10  # 0.1 s of 0.01 s calls, though warmup=1 asked for fewer
    assert warm[-1] == "sync"  # the queue is drained before the timed blocks start


def test_time_fn_times_the_real_thing_on_this_machine():
    t = timing.time_fn(lambda: time.sleep(0.002), warmup=1, warmup_s=0.0, min_run_time=0.05)
    assert 0.002 <= t.median_s < 0.05 and t.runs >= 1
