"""Tests of fp16lab.labs.memory.allocator: tensor-level accounting, the allocator cap, OOM rows, the workload child, snapshots."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from fp16lab.labs.memory import allocator as M
from fp16lab.labs.memory.allocator import (
    MIB,
    allocator_experiment,
    fragmentation_workload,
    memory_cap,
    run_or_oom,
    snapshot_summary,
    track_tensor_memory,
)

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
NO_CUDA = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a machine without CUDA")
N = 256 * 1024  # 1 MiB of float32


# ------------------------------------------------------------------ track_tensor_memory


def test_out_of_place_chain_holds_two_buffers_in_place_one() -> None:
    x = torch.randn(N)
    with track_tensor_memory() as oop:
        y = ((x * 2) + 1).relu()
        del y
    with track_tensor_memory() as inp:
        y = x.clone()
        y.mul_(2).add_(1).relu_()
        del y
    assert oop.peak_bytes == 2 * x.nbytes and oop.allocated_bytes == 3 * x.nbytes and oop.allocations == 3
    assert inp.peak_bytes == x.nbytes and inp.allocated_bytes == x.nbytes and inp.allocations == 1
    assert oop.live_bytes == inp.live_bytes == 0  # everything freed inside the block


def test_views_and_inputs_are_not_allocations() -> None:
    x = torch.randn(64, N // 64)
    with track_tensor_memory() as t:
        v = x.view(-1)[: N // 2]
        x.add_(1)
        w = x.t()
    assert t.allocations == 0 and t.peak_bytes == 0
    del v, w


def test_live_bytes_counts_what_outlives_the_block_and_backward_is_seen() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 4))
    x = torch.randn(128, 64)
    with track_tensor_memory() as t:
        loss = F.cross_entropy(model(x), torch.zeros(128, dtype=torch.long))
        after_forward = t.live_bytes
        loss.backward()
    hidden = 128 * 256 * 4
    # the ReLU output is kept for backward; the Linear output before it is not (ReLU's backward needs its result)
    assert hidden <= after_forward < 2 * hidden
    grads = sum(p.grad.nbytes for p in model.parameters())
    assert t.live_bytes >= grads  # the gradients were created in the block and are alive
    assert t.peak_bytes >= after_forward + grads // 2


def test_as_row_units() -> None:
    with track_tensor_memory() as t:
        y = torch.zeros(N)
    row = t.as_row()
    assert row["peak_mib"] == pytest.approx(1.0) and row["live_mib"] == pytest.approx(1.0)
    del y


# ------------------------------------------------------------------ memory_cap


@pytest.mark.parametrize(
    ("cap", "usable", "total", "current", "expected"),
    [
        (24, 140, 140, 1.0, 24 / 140),  # a big card: capped at 24
        (24, 23.99, 23.99, 1.0, None),  # a 24 GB card: no cap above the card (the issue-15 crash)
        (24, 8, 140, 8 / 140, None),  # an 8 GB profile already caps lower: never raised
        (4, 8, 140, 8 / 140, 4 / 140),  # below a profile: shrinks
    ],
)
def test_cap_fraction_only_shrinks(cap, usable, total, current, expected) -> None:
    got = M._cap_fraction(int(cap * 2**30), int(usable * 2**30), int(total * 2**30), current)
    if expected is None:
        assert got is None
    else:
        assert got == pytest.approx(expected) and 0 < got <= 1


@pytest.mark.parametrize("bad", [0, -1, True, float("nan"), "24"])
def test_memory_cap_refuses_bad_gib_before_anything(bad) -> None:
    with pytest.raises(ValueError, match="gib"), memory_cap(bad):
        pass


@NO_CUDA
def test_memory_cap_needs_cuda() -> None:
    with pytest.raises(ValueError, match="CUDA"), memory_cap(24):
        pass


@CUDA
def test_memory_cap_caps_and_restores() -> None:
    before = torch.cuda.get_per_process_memory_fraction(0)
    with memory_cap(1.0) as cap:
        assert cap == pytest.approx(1.0, rel=1e-3)
        with pytest.raises(torch.cuda.OutOfMemoryError, match="CUDA out of memory"):
            torch.empty(2 * 2**30, dtype=torch.uint8, device="cuda")
    assert torch.cuda.get_per_process_memory_fraction(0) == pytest.approx(before)


# ------------------------------------------------------------------ run_or_oom


def test_run_or_oom_rows() -> None:
    ok = run_or_oom(lambda: {"x": 1}, device="cpu", batch=8)
    assert ok == {"batch": 8, "x": 1, "oom": False}

    def boom() -> dict:
        raise MemoryError("cannot allocate")

    row = run_or_oom(boom, device="cpu", batch=16)
    assert row["oom"] is True and row["batch"] == 16 and "cannot allocate" in row["error"]

    def cuda_text() -> dict:
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")

    assert run_or_oom(cuda_text, device="cpu")["oom"] is True


def test_run_or_oom_lets_other_errors_through() -> None:
    def bug() -> dict:
        raise RuntimeError("shape mismatch")

    with pytest.raises(RuntimeError, match="shape mismatch"):
        run_or_oom(bug, device="cpu")
    with pytest.raises(ValueError, match="fn must be"):
        run_or_oom("not callable", device="cpu")  # type: ignore[arg-type]


# ------------------------------------------------------------------ fragmentation workload


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [({"steps": 0}, "steps"), ({"batch": 1}, "batch"), ({"unit_mib": -1.0}, "unit_mib"),
     ({"empty_cache_every": True}, "empty_cache_every"), ({"layers": (1, 0)}, "layers"), ({"seed": 1.5}, "seed")],
)
def test_workload_refuses_bad_arguments(kwargs, name) -> None:
    with pytest.raises(ValueError, match=name):
        fragmentation_workload(device="cpu", **kwargs)


def test_workload_refuses_the_cpu() -> None:
    with pytest.raises(ValueError, match="CUDA"):
        fragmentation_workload(device="cpu")


def test_child_env_sets_and_clears_the_setting(monkeypatch) -> None:
    monkeypatch.setenv(M.ALLOC_CONF_ENV, "max_split_size_mb:128")
    env = M._child_env(None)
    assert M.ALLOC_CONF_ENV not in env  # the default allocator, not the parent's setting
    assert M._child_env("expandable_segments:True")[M.ALLOC_CONF_ENV] == "expandable_segments:True"
    assert env["PYTHONPATH"].split(__import__("os").pathsep)[0].endswith(str(M.Path(M.__file__).parent.parent.name))


@pytest.mark.parametrize("bad", ["", "a\nb", 3])
def test_allocator_experiment_refuses_bad_conf(bad) -> None:
    with pytest.raises(ValueError, match="alloc_conf"):
        allocator_experiment(bad)  # type: ignore[arg-type]


@NO_CUDA
def test_allocator_experiment_without_cuda_says_why_before_starting_a_child() -> None:
    with pytest.raises(RuntimeError, match="no CUDA GPU"):
        allocator_experiment("expandable_segments:True", steps=2, timeout=120)


def test_per_setting_takes_medians_and_the_spread_of_the_repeats() -> None:
    runs = pd.DataFrame([
        {"alloc_conf": "(default)", "empty_cache_every": e, "ms_per_step": ms, "segments_allocated": seg,
         "live_segments": 9, "expandable_segments": False, "oom": False}
        for e, ms, seg in ((0, 0.5, 11), (1, 1.3, 320), (0, 0.4, 11), (1, 1.2, 320), (0, 0.6, 11), (1, 1.4, 320))])
    table = M._per_setting(runs)
    assert list(table["empty_cache_every"]) == [0, 1]  # first-seen order, one row each
    never = table.set_index("empty_cache_every").loc[0]
    assert never["ms_per_step"] == pytest.approx(0.5) and never["ms_spread"] == pytest.approx(0.2 / 0.5)
    assert never["runs"] == 3 and never["segments_allocated"] == 11 and never["alloc_conf"] == "(default)"
    assert not never["oom"] and not never["expandable_segments"] and not pd.isna(never["expandable_segments"])
    one = M._per_setting(runs.iloc[:1])
    assert one["runs"].iloc[0] == 1 and math.isnan(one["ms_spread"].iloc[0])  # one run: no spread


def test_per_setting_keeps_an_out_of_memory_setting() -> None:
    runs = pd.DataFrame([{"alloc_conf": "(default)", "empty_cache_every": 0, "oom": True, "error": "OutOfMemoryError"},
                         {"alloc_conf": "(default)", "empty_cache_every": 0, "oom": True, "error": "OutOfMemoryError"}])
    row = M._per_setting(runs).iloc[0]
    assert row["oom"] and row["runs"] == 0 and math.isnan(row["ms_spread"]) and row["error"] == "OutOfMemoryError"


def test_cli_refuses_bad_everies() -> None:
    with pytest.raises(SystemExit, match="^2$"):  # argparse's usage error
        M.main(["workload", "--empty-cache-every", "x"])


@CUDA
def test_workload_on_the_gpu() -> None:
    row = fragmentation_workload(steps=6, batch=16, unit_mib=1.0)
    assert row["peak_reserved_mib"] >= row["peak_allocated_mib"] > 0
    assert math.isfinite(row["ms_per_step"])
    every = fragmentation_workload(steps=6, batch=16, unit_mib=1.0, empty_cache_every=1)
    assert every["segments_allocated"] >= row["segments_allocated"]


@CUDA
def test_allocator_experiment_expandable_on_the_gpu() -> None:
    table = allocator_experiment("expandable_segments:True", steps=6, batch=16, unit_mib=1.0, empty_cache_every=(0, 1))
    assert list(table["empty_cache_every"]) == [0, 1] and (~table["oom"]).all()


@CUDA
def test_expandable_segments_grow_one_segment_on_the_gpu() -> None:
    default = allocator_experiment(None, steps=8, repeats=2).iloc[0]
    grown = allocator_experiment("expandable_segments:True", steps=8, repeats=2).iloc[0]
    assert default["runs"] == 2 and default["ms_spread"] >= 0
    if grown["expandable_segments"]:
        assert grown["segments_allocated"] < default["segments_allocated"]
        assert grown["live_segments"] < default["live_segments"]


# ------------------------------------------------------------------ snapshots


def _block(size: int, state: str, filename: str = "", line: int = 0) -> dict:
    frames = [{"filename": "/x/site-packages/torch/nn/modules/conv.py", "line": 5, "name": "forward"}]
    if filename:
        frames.append({"filename": filename, "line": line, "name": "step"})
    return {"size": size, "requested_size": size, "address": 0, "state": state, "frames": frames}


def test_snapshot_summary_tables() -> None:
    snap = {
        "segments": [
            {"total_size": 20 * MIB, "allocated_size": 12 * MIB, "segment_type": "large", "is_expandable": False,
             "blocks": [_block(8 * MIB, "active_allocated", "/home/me/model.py", 10),
                        _block(4 * MIB, "active_allocated", "C:\\work\\model.py", 10),
                        _block(8 * MIB, "inactive")]},
            {"total_size": 2 * MIB, "allocated_size": 1 * MIB, "segment_type": "small",
             "blocks": [_block(1 * MIB, "active_allocated"), _block(1 * MIB, "inactive")]},
        ],
        "device_traces": [],
    }
    s = snapshot_summary(snap)
    seg = s.segments.set_index("pool")
    assert seg.loc["large", "reserved_mib"] == 20 and seg.loc["large", "inactive_mib"] == 8
    assert seg.loc["small", "segments"] == 1 and s.reserved_mib == 22 and s.inactive_mib == 9
    top = s.by_frame.iloc[0]
    assert top["where"] == "model.py:10 (step)" and top["mib"] == 12 and top["blocks"] == 2  # POSIX and Windows paths
    assert "(no Python frame recorded)" in set(s.by_frame["where"])
    assert "inactive" in s._repr_html_()


def test_snapshot_summary_refuses_other_things() -> None:
    with pytest.raises(ValueError, match="snapshot"):
        snapshot_summary({"blocks": []})
    with pytest.raises(ValueError, match="top"):
        snapshot_summary({"segments": []}, top=0)
    empty = snapshot_summary({"segments": []})
    assert isinstance(empty.segments, pd.DataFrame) and empty.reserved_mib == 0


@CUDA
def test_snapshot_summary_of_a_real_snapshot() -> None:
    torch.cuda.memory._record_memory_history(max_entries=1000)
    try:
        x = torch.empty(8 * MIB, dtype=torch.uint8, device="cuda")
        snap = torch.cuda.memory._snapshot()
    finally:
        torch.cuda.memory._record_memory_history(enabled=None)
    s = snapshot_summary(snap)
    # earlier tests' blocks may still be cached (recorded before the history, so with no frame): find ours
    mine = s.by_frame[s.by_frame["where"].str.contains("test_memory.py", regex=False)]
    assert len(mine) and mine["mib"].sum() >= 8, s.by_frame
    del x


# ------------------------------------------------------------------ bad input (issue 14): named, before any work


def test_run_or_oom_checks_device_and_labels_before_running() -> None:
    ran = []
    for kwargs, match in [({"device": "gpu"}, "device 'gpu' is not a device"),
                          ({"oom": "x"}, "labels may not be named 'oom'"), ({"error": "x"}, "labels may not be named")]:
        with pytest.raises(ValueError, match=match):
            run_or_oom(lambda: ran.append(1) or {"a": 1}, **kwargs)
    assert not ran  # refused before fn ran


@pytest.mark.parametrize("result", [3.0, None, [("a", 1)], {"oom": 5}])
def test_run_or_oom_says_when_fn_returns_no_row(result) -> None:
    with pytest.raises(ValueError, match="fn must return a dict"):
        run_or_oom(lambda: result)


@pytest.mark.parametrize(("layers", "match"), [("abc", r"layers must be a list, got 'abc' \(str\): pass a list"),
                                               ([3, 0], r"layers\[1\] must be an int >= 1"),
                                               ([3, 2.0], r"layers\[1\] must be an int"), (5, "layers must be")])
def test_workload_refuses_bad_layers_by_position(layers, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        fragmentation_workload(layers=layers)


@NO_CUDA
def test_workload_accepts_numpy_ints_as_layers() -> None:
    with pytest.raises(ValueError, match="no CUDA GPU"):  # past the layers check: only the device is missing
        fragmentation_workload(layers=[np.int64(3), 2])


@pytest.mark.parametrize("bad", [1, "01", None])
def test_allocator_experiment_refuses_a_non_sequence_of_everies(bad) -> None:
    with pytest.raises(ValueError, match="empty_cache_every must be a list, got .*: pass a list, e.g. \\[0, 1\\]"):
        allocator_experiment(None, empty_cache_every=bad)


@pytest.mark.parametrize(
    ("snapshot", "match"),
    [({"segments": None}, "'segments' is a list"), ({"segments": [{}]}, r"segments\[0\] lacks 'total_size'"),
     ({"segments": [{"total_size": 1, "blocks": "x"}]}, r"segments\[0\] lacks"),
     ({"segments": [{"total_size": 1, "blocks": [{"state": "inactive"}]}]}, r"segments\[0\]\['blocks'\]\[0\] lacks 'size'")],
)
def test_snapshot_summary_names_what_a_malformed_snapshot_lacks(snapshot, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        snapshot_summary(snapshot)
