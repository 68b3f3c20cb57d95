"""Lesson 05's harness (fp16lab.labs.memory.pitfalls): medians and spreads, budgets, op names, clear errors."""

from __future__ import annotations

import itertools

import pytest
import torch

from fp16lab.hardware import PROFILES
from fp16lab.labs.memory.pitfalls import (
    aten_ops,
    feed_rate,
    host_syncs,
    interleaved,
    ratio_verdict,
    rtx4090d_budget_mib,
    step_profile,
    window_rates,
)


def test_interleaved_takes_turns_and_reports_median_and_spread():
    order = []
    counter = itertools.count()

    def case(name, values):
        it = iter(values)
        return lambda: (order.append(name), {"rate": next(it), "size": 2.0, "label": name, "tick": next(counter)})[1]

    table = interleaved({"a": case("a", [10.0, 12.0, 11.0]), "b": case("b", [5.0, 5.0, 5.0])}, key="rate")
    assert order == ["a", "b"] * 3  # in turns, not all of a first
    a = table.set_index("case").loc["a"]
    assert a["rate"] == 11.0 and a["spread"] == pytest.approx(2 / 11) and a["runs"] == 3 and a["label"] == "a"
    assert table.set_index("case").loc["b", "spread"] == 0.0


def test_interleaved_keeps_out_of_memory_rows():
    rows = iter([{"rate": 3.0, "oom": False}, {"oom": True, "error": "OutOfMemoryError"}])
    table = interleaved({"fits": lambda: next(rows), "oom": lambda: next(rows)}, key="rate", rounds=1)
    t = table.set_index("case")
    assert not t.loc["fits", "oom"] and t.loc["oom", "oom"] and t["rate"].isna().sum() == 1


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"cases": {}, "key": "r"}, "cases must be a non-empty dict"),
    ({"cases": {"a": 3}, "key": "r"}, r"cases\['a'\] must be a function"),
    ({"cases": {"a": lambda: {"x": 1.0}}, "key": "r"}, "key 'r' is not in the row"),
    ({"cases": {"a": lambda: {"r": 1.0}}, "key": "r", "rounds": 0}, "rounds"),
])
def test_interleaved_refuses_bad_input(kwargs, match):
    with pytest.raises(ValueError, match=match):
        interleaved(**kwargs)


def test_the_4090d_budget_is_below_the_label():
    total = PROFILES["rtx4090d"].memory_mib
    assert rtx4090d_budget_mib(0, 0) == total
    assert rtx4090d_budget_mib() < total < 24 * 1024  # below the card's report, which is below "24 GiB"
    for bad in (-1, 1.5, True, total):
        with pytest.raises(ValueError, match="context_mib"):
            rtx4090d_budget_mib(bad, 0)


@pytest.mark.parametrize(("flags", "marker"), [
    ({"fused": True}, "_fused_adam_"), ({"foreach": True}, "_foreach_lerp_"),
])
def test_aten_ops_names_the_adam_implementation(flags, marker):
    model = torch.nn.Linear(8, 8)
    for p in model.parameters():
        p.grad = torch.randn_like(p)
    opt = torch.optim.Adam(model.parameters(), **flags)
    opt.step()
    ops = aten_ops(opt.step)
    assert marker in ops
    assert not any(n.startswith(("_foreach_", "_fused_")) for n in aten_ops(torch.optim.Adam(
        model.parameters(), fused=False).step))  # fused=False: the for-loop, torch's own choice


def test_window_rates_on_the_cpu():
    out = window_rates(lambda: sum(range(1000)), 100, "cpu", windows=3)
    assert out["img_per_s"] > 0 and out["spread"] >= 0
    assert out["cuda_mallocs_per_window"] != out["cuda_mallocs_per_window"]  # NaN: no CUDA allocator here
    with pytest.raises(ValueError, match="items_per_window"):
        window_rates(lambda: None, 0, "cpu")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the error a machine without CUDA gives")
@pytest.mark.parametrize("call", [
    lambda: step_profile(lambda: None, "cpu"),
    lambda: feed_rate(lambda x, y: None, lambda: [], "cpu"),
    lambda: host_syncs(lambda: None, "cpu"),
])
def test_gpu_only_helpers_say_so(call):
    with pytest.raises(ValueError, match="needs a CUDA GPU"):
        call()


def test_helpers_name_a_bad_function():
    with pytest.raises(ValueError, match="step must be a function"):
        step_profile(42, "cpu")


def test_step_profile_rows_from_time_and_kernels(monkeypatch):
    """The row's arithmetic, with the timer and the profiler stood in for (they need a GPU)."""
    import pandas as pd

    from fp16lab.labs.memory import pitfalls
    from fp16lab.timing import Timing

    monkeypatch.setattr(pitfalls, "_cuda", lambda device, what: torch.device("cpu"))
    monkeypatch.setattr(pitfalls, "time_fn", lambda fn, **kw: Timing(0.004, 0.0004, 20, "stub"))
    kernels = pd.DataFrame({"kernel": ["a" * 100, "b"], "calls": [20, 40], "total_us": [600.0, 200.0]})
    monkeypatch.setattr(pitfalls, "gpu_kernels", lambda fn, calls, warmup: kernels)
    row, per_step = step_profile(lambda: None, "cpu", calls=10)
    assert row["step_ms"] == pytest.approx(4.0) and row["step_spread"] == pytest.approx(0.1)
    assert row["gpu_kernel_ms"] == pytest.approx(0.08) and row["gpu_busy"] == pytest.approx(0.02)
    assert row["kernels_per_step"] == 6
    assert per_step["launches_per_step"].tolist() == [2, 4] and per_step["us_per_launch"].tolist() == [30, 5]
    assert per_step["kernel"].str.len().max() == 80


def test_feed_rate_restarts_its_batches(monkeypatch):
    from fp16lab.labs.memory import pitfalls

    monkeypatch.setattr(pitfalls, "_cuda", lambda device, what: torch.device("cpu"))
    monkeypatch.setattr(torch.cuda, "reset_peak_memory_stats", lambda dev: None)
    monkeypatch.setattr(torch.cuda, "max_memory_allocated", lambda dev: 2**20)
    seen = []
    batch = (torch.zeros(4, 2), torch.zeros(4))
    out = feed_rate(lambda x, y: seen.append(len(y)), lambda: [batch, batch], "cpu", steps=5, warmup=2)
    assert len(seen) == 7 and out["samples_per_s"] > 0 and out["peak_allocated_mib"] == 1.0


@pytest.mark.parametrize(("value", "base", "spreads", "verdict"), [
    (53.0, 100.0, (0.29, 0.04), "slower, beyond the spread"),      # 0.53x, spreads 33 %
    (83.0, 100.0, (0.15, 0.05), "a tie (inside the spread)"),      # 0.83x inside 20 %: a tie, not "slower"
    (90.5, 100.0, (0.063, 0.044), "a tie (inside the spread)"),
    (530.0, 100.0, (0.03, 0.03), "faster, beyond the spread"),
    (100.0, 100.0, (0.0, 0.0), "a tie (inside the spread)"),       # equal: a tie even with no spread
    (80.0, 100.0, (float("nan"), 0.1), "one run: no spread, no verdict"),
])
def test_ratio_verdict_calls_ties_inside_the_summed_spreads(value, base, spreads, verdict):
    call = ratio_verdict(value, base, *spreads, above="faster", below="slower")
    assert call.verdict == verdict and call.ratio == pytest.approx(value / base)
    assert verdict in str(call) and f"{value / base:.2f}x" in str(call)


@pytest.mark.parametrize(("args", "kwargs", "named"), [
    ((0.0, 1.0, 0.1, 0.1), {}, "value"),
    ((1.0, float("inf"), 0.1, 0.1), {}, "baseline"),
    ((1.0, 1.0, -0.1, 0.1), {}, "value_spread"),
    ((1.0, 1.0, 0.1, "x"), {}, "baseline_spread"),
    ((1.0, 1.0, 0.1, 0.1), {"above": ""}, "above"),
])
def test_ratio_verdict_names_a_bad_argument(args, kwargs, named):
    words = {"above": "faster", "below": "slower", **kwargs}
    with pytest.raises(ValueError, match=named):
        ratio_verdict(*args, **words)
