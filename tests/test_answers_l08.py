"""Lesson 08's exercise checks accept the right answer and reject the typical wrong ones."""

from __future__ import annotations

import copy

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from fp16lab.course.answers import WrongAnswer, l08
from fp16lab.labs.inference.islands import keep_in_fp32

# ----------------------------------------------------------------- exercise 1: a batch for a budget


def sweep() -> pd.DataFrame:
    batches = [1, 4, 16, 64, 256, 1024]
    ms = [0.25, 0.7, 1.8, 5.0, 18.0, 70.0]
    return pd.DataFrame({"batch": batches, "status": "ok", "precision": "fp32", "ms_per_batch": ms,
                         "items_per_s": [b / m * 1e3 for b, m in zip(batches, ms, strict=True)]})


def test_batch_for_budget_accepts_the_most_throughput_within_the_budget(capsys):
    l08.check_batch_for_budget(sweep(), 64, budget_x=20)
    assert "✓" in capsys.readouterr().out


@pytest.mark.parametrize(
    "batch, words",
    [
        (1024, "longer than the budget"),  # the most items/s overall: ignores the budget
        (1, "larger batch serves more"),  # the lowest latency: leaves throughput on the table
        (16, "larger batch serves more"),
        (32, "batch sizes your table measured"),
        (None, "assign the batch size"),
    ],
)
def test_batch_for_budget_rejects_wrong_choices(batch, words):
    with pytest.raises(AssertionError, match=words):
        l08.check_batch_for_budget(sweep(), batch, budget_x=20)


def test_batch_for_budget_accepts_a_numpy_integer():
    # fits.loc[fits["items_per_s"].idxmax(), "batch"] is a numpy.int64, not an int
    table = sweep()
    l08.check_batch_for_budget(table, table.loc[3, "batch"], budget_x=20)
    l08.check_batch_for_budget(table, np.float64(64), budget_x=20)


def test_batch_for_budget_wants_the_services_precision(here):
    # On this CPU (quick mode) EX_PRECISION is FP32: a sweep in another precision measures another service.
    wrong = sweep().assign(precision="bf16", device="cpu")
    with pytest.raises(WrongAnswer, match=r"EX_PRECISION \(fp32\), your sweep in bf16"):
        l08.check_batch_for_budget(wrong, 64, budget_x=20)
    l08.check_batch_for_budget(sweep().assign(device="cpu"), 64, budget_x=20)


@pytest.fixture
def here(monkeypatch):
    """Pin the lesson's device (choose_device) to a type, and quick mode (EX_PRECISION and the image size follow
    it), so that the checks below do not depend on this machine: a GPU machine runs full mode."""
    monkeypatch.setenv("FP16LAB_QUICK", "1")

    def pin(kind: str) -> None:
        monkeypatch.setattr("fp16lab.device.choose_device", lambda prefer=None: torch.device(kind))
    pin("cpu")
    return pin


def test_batch_for_budget_wants_this_device(here):
    # device="cpu" on a GPU machine measures the CPU's latencies, not the service's (and the reverse).
    here("cuda")
    with pytest.raises(WrongAnswer, match=r"this machine's device \(cuda\), your sweep ran on cpu"):
        l08.check_batch_for_budget(sweep().assign(device="cpu"), 64, budget_x=20)
    here("cpu")
    with pytest.raises(WrongAnswer, match=r"this machine's device \(cpu\), your sweep ran on cuda"):
        l08.check_batch_for_budget(sweep().assign(device="cuda:0"), 64, budget_x=20)
    l08.check_batch_for_budget(sweep().assign(device="cpu"), 64, budget_x=20)


def test_batch_for_budget_wants_inputs_shaped_like_the_training_images(here):
    # A 224x224 sweep (the ResNet section's images) times another workload per item.
    wrong = sweep().assign(device="cpu", input_shape="3x224x224")
    with pytest.raises(WrongAnswer, match="shaped like the training images .*your sweep fed 3x224x224"):
        l08.check_batch_for_budget(wrong, 64, budget_x=20)
    mixed = sweep().assign(device="cpu", input_shape=l08._expected_input_shape())
    mixed.loc[0, "input_shape"] = "3x8x8"  # one batch size built differently
    with pytest.raises(WrongAnswer, match="shaped like the training images"):
        l08.check_batch_for_budget(mixed, 64, budget_x=20)
    l08.check_batch_for_budget(sweep().assign(device="cpu", input_shape=l08._expected_input_shape()), 64, budget_x=20)


def test_batch_for_budget_wants_a_table_that_shows_where_the_budget_binds():
    with pytest.raises(AssertionError, match="measure past the budget"):
        l08.check_batch_for_budget(sweep()[sweep()["batch"] <= 64], 64, budget_x=20)
    with pytest.raises(AssertionError, match="include batch 1"):
        l08.check_batch_for_budget(sweep()[sweep()["batch"] > 1], 64, budget_x=20)
    with pytest.raises(AssertionError, match="latency_sweep's table"):
        l08.check_batch_for_budget(None, 64, budget_x=20)


# ----------------------------------------------------------------- exercise 2: graphs per process


def graph_table(compile_ok: bool = True) -> pd.DataFrame:
    return pd.DataFrame({
        "method": ["eager", "CUDA graph (torch.cuda.CUDAGraph)", 'torch.compile(mode="reduce-overhead")'],
        "status": ["ok", "ok", "ok" if compile_ok else "failed: no compiler"],
        "ms": [4.0, 0.85, 0.65], "setup_s": [0.0, 0.024, 10.5]})


def test_graph_method_counts_the_setup(capsys):
    l08.check_graph_method(graph_table(), "CUDA graph (torch.cuda.CUDAGraph)", 'torch.compile(mode="reduce-overhead")')
    l08.check_graph_method(graph_table(False), "CUDA graph (torch.cuda.CUDAGraph)", "CUDA graph (torch.cuda.CUDAGraph)")
    assert capsys.readouterr().out.count("✓") == 2


@pytest.mark.parametrize(
    "short, long, words",
    [
        ('torch.compile(mode="reduce-overhead")', 'torch.compile(mode="reduce-overhead")',
         "ex_method_short: count the setup"),  # the fastest per call, setup ignored
        ("eager", "eager", "ex_method_short: eager is the baseline"),  # compile against eager only
        ("CUDA graph (torch.cuda.CUDAGraph)", "CUDA graph (torch.cuda.CUDAGraph)",
         "ex_method_long: a setup is paid once"),  # the short process's answer for both
        ('torch.compile(mode="reduce-overhead")', "CUDA graph (torch.cuda.CUDAGraph)", "swapped"),  # short <-> long
        ("graph", "compile", "ex_method_short: use one of the table's method names"),
        (None, None, "use one of the table's method names"),
    ],
)
def test_graph_method_rejects_wrong_choices(short, long, words):
    with pytest.raises(AssertionError, match=words):
        l08.check_graph_method(graph_table(), short, long)


def test_graph_method_names_mixed_units():
    # A longer compile: ignoring the setup picks compile, adding seconds to milliseconds picks the graph
    # (its per-call ms, read as seconds, outweighs the compile's setup), and the right total picks eager.
    table = pd.DataFrame({"method": ["eager", "CUDA graph (torch.cuda.CUDAGraph)", 'torch.compile(mode="reduce-overhead")'],
                          "status": "ok", "ms": [1.0, 0.9, 0.2], "setup_s": [0.0, 0.5, 800.0]})
    right = "eager"  # 1,000 calls: eager 1.0 s, graph 1.4 s, compile 800.2 s
    long_right = 'torch.compile(mode="reduce-overhead")'  # 10^7 calls: 10,000 s, 9,000.5 s, 2,800 s
    l08.check_graph_method(table, right, long_right)
    with pytest.raises(WrongAnswer, match="ex_method_short: units: ms is milliseconds"):
        l08.check_graph_method(table, "CUDA graph (torch.cuda.CUDAGraph)", long_right)
    with pytest.raises(WrongAnswer, match="ex_method_short: count the setup too: a process"):
        l08.check_graph_method(table, 'torch.compile(mode="reduce-overhead")', long_right)


def test_graph_method_names_both_mistakes_where_they_pick_the_same_method():
    # The lesson's stored H200 table: ignoring the setup and adding setup_s to calls × ms (ms read as seconds)
    # both pick torch.compile for the short process, so the hint names both (the units hint must not be lost).
    table = pd.DataFrame({"method": ["eager", "CUDA graph (torch.cuda.CUDAGraph)", 'torch.compile(mode="reduce-overhead")'],
                          "status": "ok", "ms": [5.740540, 0.822437, 0.415209], "setup_s": [0.0, 0.048012, 17.678169]})
    graph, compiled = "CUDA graph (torch.cuda.CUDAGraph)", 'torch.compile(mode="reduce-overhead")'
    l08.check_graph_method(table, graph, compiled)  # 1,000 calls: 5.7 s, 0.87 s, 18.1 s; 10^7: compile
    with pytest.raises(WrongAnswer, match="ex_method_short: count the setup too, in the same unit: setup_s is seconds, "
                                          "ms is milliseconds"):
        l08.check_graph_method(table, compiled, compiled)


def test_graph_method_hints_alone():
    # A wrong answer is a WrongAnswer: IPython shows its hint, not the checker's source (and so the answer).
    with pytest.raises(WrongAnswer) as info:
        l08.check_graph_method(graph_table(), "eager", "eager")
    assert info.value._render_traceback_() == [f"✗ {info.value.args[0]}"]


# ----------------------------------------------------------------- exercise 3: a plan per card


def overflow_net() -> tuple[nn.Module, torch.Tensor]:
    torch.manual_seed(1)
    net = nn.Sequential(nn.Linear(16, 64), nn.Sequential(nn.LayerNorm(64), nn.Linear(64, 64)), nn.GELU(),
                        nn.Linear(64, 4))
    with torch.no_grad():
        net[1][0].weight.mul_(4e4)
        net[1][0].bias.mul_(4e4)
        net[1][1].weight.div_(4e4)
    return net, torch.randn(64, 16)


RIGHT = {"a100-40gb": "bf16 cast", "t4": "fp16 cast + fp32 island"}


def test_card_plan_accepts_bf16_where_native_and_an_island_elsewhere(capsys):
    net, x = overflow_net()
    l08.check_card_plan(RIGHT, keep_in_fp32(copy.deepcopy(net), ["1"]).half(), net, x)
    assert "✓" in capsys.readouterr().out


@pytest.mark.parametrize(
    "plan, build, words",
    [
        ({"a100-40gb": "fp16 cast + fp32 island", "t4": "fp16 cast + fp32 island"}, "island",
         r"ex_plan\['a100-40gb'\]: among what the card runs"),  # an island where BF16 needs none
        ({"a100-40gb": "bf16 cast", "t4": "bf16 cast"}, "island", r"ex_plan\['t4'\]: that card does not run bf16"),
        ({"a100-40gb": "fp16 cast", "t4": "fp16 cast"}, "island", r"ex_plan\['a100-40gb'\]: among"),  # overflows
        (RIGHT, "cast-then-island", "rounded: make the island before casting"),
        (RIGHT, "layernorm-only", "still has inf/NaN"),
        (RIGHT, "all-fp32", "cast the T4 model to FP16"),
        (RIGHT, "same", "work on a copy"),
        (RIGHT, "too-large", "keep less in FP32"),  # the LayerNorm block and the head
        (RIGHT, "wrong-place", "island is in the wrong place"),  # the head, not the block that overflows
        (None, "island", "ex_plan must be a dict"),
    ],
)
def test_card_plan_rejects_wrong_answers(plan, build, words):
    net, x = overflow_net()
    model = {
        "island": lambda: keep_in_fp32(copy.deepcopy(net), ["1"]).half(),
        "cast-then-island": lambda: keep_in_fp32(copy.deepcopy(net).half(), ["1"]),
        "layernorm-only": lambda: keep_in_fp32(copy.deepcopy(net), ["1.0"]).half(),
        "all-fp32": lambda: copy.deepcopy(net),
        "same": lambda: net,
        "too-large": lambda: keep_in_fp32(copy.deepcopy(net), ["1", "3"]).half(),
        "wrong-place": lambda: keep_in_fp32(copy.deepcopy(net), ["3"]).half(),
    }[build]()
    with pytest.raises(AssertionError, match=words):
        l08.check_card_plan(plan, model, net, x)


def test_card_plan_names_an_ex_net_changed_in_place():
    # Forgetting copy.deepcopy: keep_in_fp32 and .half() change ex_net itself; a hint, not a dtype crash.
    net, x = overflow_net()
    model = keep_in_fp32(net, ["1"]).half()
    with pytest.raises(WrongAnswer, match="ex_net was changed in place"):
        l08.check_card_plan(RIGHT, model, net, x)


def test_graph_method_accepts_a_tie_inside_the_rounds_spread():
    # Graph and compile per call inside each other's spread: for the long process either is right; outside it,
    # only the faster one.
    graph, compiled = "CUDA graph (torch.cuda.CUDAGraph)", 'torch.compile(mode="reduce-overhead")'
    table = graph_table().assign(ms=[4.0, 0.70, 0.65])  # medians 8 % apart: beyond the 2 % a single table allows
    table["ms_rounds"] = [[4.0, 4.1, 3.9], [0.60, 0.70, 0.80], [0.70, 0.65, 0.60]]
    l08.check_graph_method(table, graph, graph)  # but a tie for 10^7 calls, round by round
    l08.check_graph_method(table, graph, compiled)
    table["ms_rounds"] = [[4.0, 4.1, 3.9], [0.85, 0.86, 0.84], [0.65, 0.66, 0.64]]
    table["ms"] = [4.0, 0.85, 0.65]
    with pytest.raises(WrongAnswer, match="ex_method_long: a setup is paid once"):
        l08.check_graph_method(table, graph, graph)
    table["ms_rounds"] = [[4.0], [0.70], [0.65]]  # one round: no spread, so no tie either
    table["ms"] = [4.0, 0.70, 0.65]
    with pytest.raises(WrongAnswer, match="ex_method_long"):
        l08.check_graph_method(table, graph, graph)


def test_graph_method_a_broken_round_is_no_tie_and_no_crash():
    graph = "CUDA graph (torch.cuda.CUDAGraph)"
    table = graph_table().assign(ms=[4.0, 0.85, 0.65])
    table["ms_rounds"] = [[4.0, 4.1, 3.9], [0.85, float("nan"), 0.84], [0.65, 0.66, "x"]]
    with pytest.raises(WrongAnswer, match="ex_method_long"):
        l08.check_graph_method(table, graph, graph)


def test_card_plan_a_model_that_fails_shows_a_hint_not_the_checker():
    class Broken(nn.Module):
        def __init__(self):
            super().__init__()
            self.w = nn.Parameter(torch.ones(2, dtype=torch.float16))

        def forward(self, x):
            raise TypeError("forward() got an unexpected argument")

    net, x = overflow_net()
    with pytest.raises(WrongAnswer, match=r"ex_t4_model\(ex_x.half\(\)\) failed: forward\(\) got"):
        l08.check_card_plan(RIGHT, Broken(), net, x)
