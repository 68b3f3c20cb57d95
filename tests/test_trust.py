"""Bad input, second round: each defect class has its regression cases here, beyond the examples
(chip names, bare strings for lists, optimizers of other models, gradients train_step does not
own, wrong types, missing paths). The generated sweep over every signature is test_signatures.py."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import nbformat
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from fp16lab import checks, device
from fp16lab.hardware import PEAK_TFLOPS, PROFILES, peak_for
from fp16lab.train import make_scaler, train_step
from fp16lab.train.checkpoint import HistoryFile, check_checkpoint_fits, save_checkpoint

# ---------------------------------------------------------------- 1. chip names


# Every row of the peak table, as torch names it, against names that differ by a word or a digit.
ROWS = {
    "H200": (["NVIDIA H200", "NVIDIA H200 SXM"], ["NVIDIA H200 NVL", "NVIDIA GH200 480GB", "NVIDIA H20",
                                                 "NVIDIA H2000", "NVIDIA H200X"]),
    "H100 SXM": (["NVIDIA H100 80GB HBM3", "NVIDIA H100 SXM5 80GB"], ["NVIDIA H100 80GB HBM2e", "NVIDIA H1000",
                                                                       "NVIDIA H800", "NVIDIA H100X"]),
    "H100 NVL": (["NVIDIA H100 NVL"], ["NVIDIA H100 NVLink bridge"]),
    "H100 PCIe": (["NVIDIA H100 PCIe"], ["NVIDIA H100 PCIe Gen6 prototype"]),
    "A100": (["NVIDIA A100-SXM4-40GB", "NVIDIA A100-SXM4-80GB", "NVIDIA A100 80GB PCIe", "NVIDIA A100-PCIE-40GB"],
             ["NVIDIA RTX A1000 6GB Laptop GPU", "NVIDIA A1000", "NVIDIA A100X", "NVIDIA A800-SXM4-80GB"]),
    "A10": (["NVIDIA A10"], ["NVIDIA A10G", "NVIDIA A100-SXM4-40GB", "NVIDIA RTX A1000", "NVIDIA A10M"]),
    "L40S": (["NVIDIA L40S"], ["NVIDIA L40", "NVIDIA L40S-48Q vGPU"]),
    "L4": (["NVIDIA L4"], ["NVIDIA L40", "NVIDIA L40S", "NVIDIA L4T Orin"]),
    "RTX 4090": (["NVIDIA GeForce RTX 4090"], ["NVIDIA GeForce RTX 4090 Ti", "NVIDIA GeForce RTX 4090 Laptop GPU",
                                              "NVIDIA GeForce RTX 40900"]),
    "RTX 4090D": (["NVIDIA GeForce RTX 4090 D", "RTX 4090D"], ["NVIDIA GeForce RTX 4090 DX"]),
    "RTX 4090 Laptop": (["NVIDIA GeForce RTX 4090 Laptop GPU"], ["NVIDIA GeForce RTX 4090 Mobile Max-Q"]),
    "RTX 4060 Laptop": (["NVIDIA GeForce RTX 4060 Laptop GPU"], ["NVIDIA GeForce RTX 4060", "NVIDIA GeForce RTX 4060 Ti",
                                                                 "NVIDIA GeForce RTX 4060 Ti Laptop GPU"]),
    "RTX 3090": (["NVIDIA GeForce RTX 3090"], ["NVIDIA GeForce RTX 3090 Ti", "NVIDIA GeForce RTX 3090 Laptop GPU"]),
    "RTX 3060": (["NVIDIA GeForce RTX 3060"], ["NVIDIA GeForce RTX 3060 Ti", "NVIDIA GeForce RTX 3060 Laptop GPU",
                                              "NVIDIA GeForce RTX 3060M"]),
    "T4": (["Tesla T4"], ["Tesla T40", "NVIDIA T400", "NVIDIA T4G"]),
    "V100": (["Tesla V100-SXM2-16GB", "Tesla V100-SXM2-32GB"], ["Tesla V100-PCIE-16GB", "Tesla V100S-PCIE-32GB",
                                                                "Tesla V100-SXM3-32GB"]),
}


def test_every_peak_row_is_covered_by_the_near_miss_table() -> None:
    assert set(ROWS) == set(PEAK_TFLOPS)


@pytest.mark.parametrize("key", sorted(ROWS))
def test_each_chip_gets_its_own_row_and_a_near_miss_gets_none_never_a_neighbours(key: str) -> None:
    exact, near = ROWS[key]
    for name in exact:
        assert peak_for(name) is PEAK_TFLOPS[key], name
        assert peak_for(name.upper()) is PEAK_TFLOPS[key] and peak_for(f"  {name}  ") is PEAK_TFLOPS[key]
    exact_of = {n: k for k, (names, _) in ROWS.items() for n in names}
    for name in near:  # never this row; another row only when the name is exactly that chip
        got = peak_for(name)
        assert got is (PEAK_TFLOPS[exact_of[name]] if name in exact_of else None), f"{name!r} got {got}"


def test_h200_nvl_is_not_given_the_sxm_peak() -> None:
    assert peak_for("NVIDIA H200") is PEAK_TFLOPS["H200"]
    assert peak_for("NVIDIA H200 NVL") is None  # a lower-clocked card: no cited row here, so no peak


def test_every_profile_still_has_its_row() -> None:
    for prof in PROFILES.values():
        assert peak_for(prof.name) is not None, prof.name


# ---------------------------------------------------------------- 2. a bare string where a list is expected


@pytest.mark.parametrize("value", ["fp16", "x", b"fp16"])
def test_sequence_of_refuses_a_bare_string_with_the_fix(value: object) -> None:
    with pytest.raises(ValueError, match=r"precisions must be a list.*pass a list, e\.g\. \['fp16'\]"):
        checks.sequence_of("precisions", value)


@pytest.mark.parametrize("value", [5, None, {"fp16": 1}, torch.zeros(2), 1.5])
def test_sequence_of_refuses_non_lists(value: object) -> None:
    with pytest.raises(ValueError, match="precisions must be a list"):
        checks.sequence_of("precisions", value)


def test_sequence_of_takes_lists_tuples_and_generators_and_checks_each_entry() -> None:
    assert checks.sequence_of("sizes", (1, 2)) == [1, 2]
    assert checks.sequence_of("sizes", (i for i in range(3))) == [0, 1, 2]
    assert checks.sequence_of("sizes", [3], item=checks.positive_int) == [3]
    with pytest.raises(ValueError, match=r"sizes\[1\] must be an int >= 1, got 0"):
        checks.sequence_of("sizes", [3, 0], item=checks.positive_int)
    with pytest.raises(ValueError, match="sizes is empty"):
        checks.sequence_of("sizes", [])
    assert checks.sequence_of("sizes", [], allow_empty=True) == []
    assert checks.sequence_of("precisions", "fp16", single=True) == ["fp16"]


@pytest.mark.parametrize("value", ["p1", "f", "16", "", "fp", "fp16 ", "FP16"])
def test_one_of_with_a_string_allowed_is_an_exact_match_never_a_substring(value: str) -> None:
    with pytest.raises(ValueError, match="must be one of 'fp16'"):
        checks.one_of("precision", value, "fp16")
    assert checks.one_of("precision", "fp16", "fp16") == "fp16"
    with pytest.raises(ValueError, match="must be one of 'fp16', 'bf16'"):
        checks.one_of("precision", value, ("fp16", "bf16"))


def test_course_helpers_refuse_a_bare_string_for_a_list(tmp_path: Path) -> None:
    from fp16lab.course import readme, student, workspace

    with pytest.raises(ValueError, match=r"names must be a list.*pass a list"):
        student.prompt_source("answer")
    with pytest.raises(ValueError, match=r"names must be a list.*pass a list"):
        workspace.reset("02", root=tmp_path)
    with pytest.raises(ValueError, match=r"paths must be a list.*pass a list"):
        student.write_student_copies("notebooks/02_amp_training_loop.ipynb", student_dir=tmp_path)
    with pytest.raises(ValueError, match=r"files must be a list.*pass a list"):
        readme.targets_table("07 transformers")


# ---------------------------------------------------------------- 3. the optimizer holds the model's parameters


def _mlp(seed: int = 0) -> nn.Module:
    torch.manual_seed(seed)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3))


def test_optimizer_holds_is_the_one_check() -> None:
    m, other = _mlp(), _mlp(1)
    assert len(checks.optimizer_holds(m, torch.optim.SGD(m.parameters(), lr=0.1))) == 4
    with pytest.raises(ValueError, match="optimizer does not hold 4 of the model's 4 trainable parameters"):
        checks.optimizer_holds(m, torch.optim.SGD(other.parameters(), lr=0.1))
    with pytest.raises(ValueError, match="optimizer holds none of this model's parameters"):
        checks.optimizer_holds(m, torch.optim.SGD(other.parameters(), lr=0.1), every=False)
    part = torch.optim.SGD(m[2].parameters(), lr=0.1)
    with pytest.raises(ValueError, match=r"optimizer does not hold 2 of the model's 4 trainable parameters \(0\.weight, 0\.bias\)"):
        checks.optimizer_holds(m, part)
    assert len(checks.optimizer_holds(m, part, every=False)) == 2
    both = torch.optim.SGD([*m.parameters(), *other.parameters()], lr=0.1)
    checks.optimizer_holds(m, both)  # extra parameters (a loss's own) pass by default
    with pytest.raises(ValueError, match="holds 4 parameter\\(s\\) that are not this model's"):
        checks.optimizer_holds(m, both, only_model=True)
    with pytest.raises(ValueError, match="optimizer must be a torch.optim.Optimizer"):
        checks.optimizer_holds(m, "adam")


def test_lm_helpers_refuse_an_optimizer_of_another_model() -> None:
    from fp16lab.gpt import GPT, GPTConfig
    from fp16lab.labs.transformers.lm import lm_throughput, state_bytes

    cfg = GPTConfig(vocab_size=16, seq_len=8, n_layers=1, n_heads=2, d_model=8)
    torch.manual_seed(0)
    m, other = GPT(cfg), GPT(cfg)
    foreign = torch.optim.AdamW(other.parameters())
    with pytest.raises(ValueError, match="optimizer does not hold .* of the model's .* trainable parameters"):
        lm_throughput(m, 1, steps=1, warmup=1, optimizer=foreign)
    with pytest.raises(ValueError, match="optimizer holds none of this model's parameters"):
        state_bytes(m, foreign)
    mixed = torch.optim.AdamW([*m.parameters(), *other.parameters()])
    with pytest.raises(ValueError, match="not this model's"):
        state_bytes(m, mixed)  # would count the other model's Adam state
    assert state_bytes(m, torch.optim.AdamW(m.parameters())) is not None


# ---------------------------------------------------------------- 4. train_step and gradients it does not own


def _batch(seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(8, 4, generator=g), torch.randint(0, 3, (8,), generator=g)


def _step(m: nn.Module, opt: torch.optim.Optimizer, seed: int) -> None:
    train_step(m, opt, make_scaler("fp32", "cpu"), [_batch(seed)], precision="fp32")


def test_train_step_refuses_gradients_left_by_an_earlier_backward() -> None:
    m = _mlp()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    x, y = _batch()
    F.cross_entropy(m(x), y).backward()  # a stray backward, not cleared
    before = copy.deepcopy(m.state_dict())
    with pytest.raises(ValueError, match=r"model: 4 trainable parameter\(s\) already hold a gradient.*zero_grad"):
        _step(m, opt, 0)
    assert all(torch.equal(v, m.state_dict()[k]) for k, v in before.items())  # refused before any work
    m.zero_grad(set_to_none=True)
    _step(m, opt, 0)
    assert all(p.grad is None for p in m.parameters())  # and it leaves them so


def test_train_step_matches_plain_pytorch_over_several_steps() -> None:
    m, ref = _mlp(), _mlp()
    opt, ref_opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9), torch.optim.SGD(ref.parameters(), lr=0.1,
                                                                                            momentum=0.9)
    for s in range(3):
        _step(m, opt, s)
        x, y = _batch(s)
        F.cross_entropy(ref(x), y).backward()
        ref_opt.step()
        ref_opt.zero_grad(set_to_none=True)
    for a, b in zip(m.parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(a, b)


def test_two_optimizers_on_one_model_match_plain_pytorch() -> None:
    """Each call owns every gradient of the model: nothing one optimizer's step leaves is added to the other's."""
    m, ref = _mlp(), _mlp()
    opts = [torch.optim.SGD(m[0].parameters(), lr=0.1), torch.optim.Adam(m[2].parameters(), lr=0.01)]
    ref_opts = [torch.optim.SGD(ref[0].parameters(), lr=0.1), torch.optim.Adam(ref[2].parameters(), lr=0.01)]
    for s in range(4):
        _step(m, opts[s % 2], s)
        x, y = _batch(s)
        F.cross_entropy(ref(x), y).backward()
        ref_opts[s % 2].step()
        ref.zero_grad(set_to_none=True)  # the plain-PyTorch contract: every gradient cleared after a step
    for a, b in zip(m.parameters(), ref.parameters(), strict=True):
        torch.testing.assert_close(a, b)
    assert all(p.grad is None for p in m.parameters())


def test_train_step_refuses_an_optimizer_of_another_model_before_any_work() -> None:
    m = _mlp()
    with pytest.raises(ValueError, match="optimizer holds none of this model's parameters"):
        _step(m, torch.optim.SGD(_mlp(1).parameters(), lr=0.1), 0)
    assert all(p.grad is None for p in m.parameters())


# ---------------------------------------------------------------- 5. a wrong type names the argument


def test_device_helpers_take_a_string_and_refuse_a_non_device() -> None:
    device.synchronize("cpu")
    device.free_memory("cpu")
    for fn in (device.synchronize, device.free_memory):
        with pytest.raises(ValueError, match="device 'gpu' is not a device"):
            fn("gpu")
        with pytest.raises(ValueError, match="device must be a str or torch.device"):
            fn(0.5)
    with pytest.raises(ValueError, match="model must be a torch.nn.Module, got 'net'"):
        device.model_device("net")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="default 'gpu' is not a device"):
        device.model_device(nn.ReLU(), default="gpu")  # type: ignore[arg-type]
    assert device.model_device(nn.ReLU(), default=torch.device("cpu")).type == "cpu"
    with pytest.raises(ValueError, match="exc must be an exception"):
        device.is_oom("out of memory")  # type: ignore[arg-type]


def test_checkpoint_helpers_name_the_argument(tmp_path: Path) -> None:
    m = _mlp()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    with pytest.raises(ValueError, match="payload must be a checkpoint as read_checkpoint returns it"):
        check_checkpoint_fits({}, tmp_path / "c.pt", m, opt)
    with pytest.raises(ValueError, match="payload must be a checkpoint"):
        check_checkpoint_fits("c.pt", tmp_path / "c.pt", m, opt)  # type: ignore[arg-type]
    save_checkpoint(tmp_path / "c.pt", m, opt)
    payload = torch.load(tmp_path / "c.pt", weights_only=True)
    with pytest.raises(ValueError, match="model must be a torch.nn.Module"):
        check_checkpoint_fits(payload, tmp_path / "c.pt", "net", opt)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="scaler_enabled must be True or False"):
        check_checkpoint_fits(payload, tmp_path / "c.pt", m, opt, scaler_enabled="yes")  # type: ignore[arg-type]
    check_checkpoint_fits(payload, tmp_path / "c.pt", m, opt)


def test_history_file_takes_a_str_path_as_every_helper_does(tmp_path: Path) -> None:
    h = HistoryFile(str(tmp_path / "run.pt"))
    assert h.path == tmp_path / "run.pt.history.jsonl"
    mark = h.save([{"step": 1, "loss": 2.0}])
    assert h.read({"run": mark.run, "rows": mark.rows, "bytes": mark.bytes}, 1) == [{"step": 1, "loss": 2.0}]
    with pytest.raises(ValueError, match="checkpoint must be a file path"):
        HistoryFile(5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"rows must be a list"):
        h.save("rows")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="mark must be a history mark"):
        h.read("mark", 1)  # type: ignore[arg-type]


def test_checks_helpers_name_their_argument() -> None:
    with pytest.raises(ValueError, match="t must be a torch.Tensor, got 'x'"):
        checks.values_readable("x")
    with pytest.raises(ValueError, match="formats must be a list, got 5"):
        checks.distinct("formats", 5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="formats must be a list, got 'ab'"):
        checks.distinct("formats", "ab")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="name must be the argument's name"):
        checks.positive_int(3, 4)  # type: ignore[arg-type]
    assert checks.distinct("formats", ("a", "b")) == ["a", "b"]


@pytest.mark.parametrize("bad", ["x = 1", {"cells": "no"}, 5, None, Path("01.ipynb")])
def test_course_helpers_refuse_a_non_notebook(bad: object) -> None:
    from fp16lab.course import prose, student, workspace

    for fn in (student.exercises, student.make_student_copy, prose.markdown_hits):
        with pytest.raises(ValueError, match="nb must be a notebook"):
            fn(bad)
    with pytest.raises(ValueError, match="nb must be a notebook"):
        workspace.work_copy(bad, source="01.ipynb")
    with pytest.raises(ValueError, match="cell must be a notebook cell"):
        student.cell_source(bad)
    from fp16lab.course import outputs

    for fn in (outputs.code_digest, outputs.strip_noise, outputs.stamp, outputs.set_reference_note,
               outputs.drop_orphan_widgets):
        with pytest.raises(ValueError, match="nb must be a notebook"):
            fn(bad)


def test_a_notebook_as_plain_json_is_a_notebook_only_where_allowed() -> None:
    plain = json.loads(nbformat.writes(nbformat.v4.new_notebook()))
    assert checks.notebook("nb", plain, plain=True) is plain
    with pytest.raises(ValueError, match=r"nb must be a notebook \(nbformat.read\(path, as_version=4\)\), got"):
        checks.notebook("nb", plain)  # attribute access (nb.cells) would fail on it
    with pytest.raises(ValueError, match="plain must be a bool"):
        checks.notebook("nb", plain, plain=1)  # type: ignore[arg-type]


def test_course_helpers_accept_a_real_notebook() -> None:
    from fp16lab.course import prose, student

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("It took 3 ms"), nbformat.v4.new_code_cell("x = 1")]
    assert prose.markdown_hits(nb) == [(0, "It took 3 ms", ["3 ms"])]
    assert student.cell_source(nb.cells[1]) == "x = 1"


# ---------------------------------------------------------------- 6. a missing path is an error


def test_lessons_of_a_missing_folder_is_an_error(tmp_path: Path) -> None:
    from fp16lab.course import paths

    with pytest.raises(FileNotFoundError, match="folder: '/nonexistent' does not exist"):
        paths.lessons("/nonexistent")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        paths.lessons(tmp_path / "notebooks")
    (tmp_path / "f.txt").write_text("x")
    with pytest.raises(ValueError, match="is a file, not a folder"):
        paths.lessons(tmp_path / "f.txt")
    assert paths.lessons(tmp_path) == []  # an existing folder without lessons is an honest empty answer


def test_agenda_of_a_missing_timings_file_is_an_error(tmp_path: Path) -> None:
    from fp16lab.course import agenda

    with pytest.raises(FileNotFoundError, match="timings_file: .*missing.json' does not exist"):
        agenda.agenda_table(tmp_path / "missing.json")
    (tmp_path / "t.json").write_text(json.dumps({}))
    assert "not measured yet" in agenda.agenda_table(tmp_path / "t.json")  # exists, measured nothing: honest


def test_replace_block_of_a_missing_file_is_an_error(tmp_path: Path) -> None:
    from fp16lab.course import paths

    with pytest.raises(FileNotFoundError, match="path: .*guide.md' does not exist"):
        paths.replace_block(tmp_path / "guide.md", "<!-- a -->", "<!-- b -->", "x")


# ---------------------------------------------------------------- 8. smaller ones


@pytest.mark.parametrize("bad", ["gpu", "cuda0", "tpu", 0, None])
def test_default_configs_refuses_a_non_device_clearly(bad: object) -> None:
    from fp16lab.labs.benchmark import default_configs

    with pytest.raises(ValueError, match="device"):
        default_configs(bad)  # type: ignore[arg-type]
    assert default_configs("cpu") == default_configs(torch.device("cpu"))


def test_run_benchmark_checks_an_unused_sweep_configs_too() -> None:
    """A wrong sweep_configs was accepted in silence when there was no sweep (and a benchmark ran)."""
    from fp16lab.labs.benchmark import run_benchmark

    with pytest.raises(ValueError, match=r"sweep_configs must be a list, got 5 \(int\): pass a list"):
        run_benchmark("resnet18", configs=["fp32_true"], sweep_configs=5, device="cpu")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"sweep_configs\[0\] must be one of 'article'.*; got 'fp16_typo'"):
        run_benchmark("resnet18", configs=["fp32_true"], sweep_configs=["fp16_typo"], device="cpu")


def test_train_step_walks_again_when_the_optimizer_is_re_pointed() -> None:
    """train_step remembers the model's parameters per optimizer; re-pointing it (as pad_layers does) is seen."""
    m = _mlp()
    opt = torch.optim.SGD(m.parameters(), lr=0.1)
    _step(m, opt, 0)
    new = nn.Parameter(m[0].weight.detach().clone())
    old = m[0].weight
    m[0].weight = new
    group = opt.param_groups[0]["params"]
    group[[i for i, q in enumerate(group) if q is old][0]] = new
    _step(m, opt, 1)
    assert all(p.grad is None for p in m.parameters())  # the new parameter's gradient was cleared too


# ---------------------------------------------------------------- 9. third round: the labs and the course
# Each class of defect the probes found, with cases beyond the ones they listed.


def _rows() -> Any:
    import pandas as pd

    return pd.DataFrame([{"config": c, "status": "ok", "batch_size": b, "img_per_s": v, "peak_mem_gb": 1.0}
                         for c, b, v in (("article", 8, 100.0), ("fp16_cl_fused", 8, 250.0), ("article", 16, 110.0))])


@pytest.mark.parametrize(("call", "match"), [
    (lambda f: f.iloc[0:0], "frame has no rows"),
    (lambda f: f.assign(config="x"), "numerator 'fp16_cl_fused' is not a config of this run; its configs: x"),
])
def test_ratio_values_refuses_an_empty_run_and_a_config_it_lacks(call, match) -> None:
    from fp16lab.labs.benchmark.analysis import ratio_values

    with pytest.raises(ValueError, match=match):
        ratio_values(call(_rows()), "fp16_cl_fused", "article")


@pytest.mark.parametrize(("kw", "match"), [
    ({"denominator": "Article"}, "denominator 'Article' is not a config of this run"),  # a typo is not "no value"
    ({"batch": 32}, r"batch 32 is not a batch size of this run; its batch sizes: \[8, 16\]"),
    ({"quantity": "speed"}, "quantity must be one of 'img_per_s'"),
    ({"quantity": "tflops"}, r"quantity 'tflops': frame lacks the column"),
])
def test_ratio_values_names_what_the_run_lacks(kw, match) -> None:
    from fp16lab.labs.benchmark.analysis import ratio_values

    args = {"numerator": "fp16_cl_fused", "denominator": "article", **kw}
    with pytest.raises(ValueError, match=match):
        ratio_values(_rows(), **args)
    assert ratio_values(_rows(), "fp16_cl_fused", "article", batch=8) == ([2.5], "single runs")


@pytest.mark.parametrize(("values", "match"), [
    ([2.0, float("nan"), 1.0], r"values\[1\] must be a finite number, got nan"),
    ([float("-inf")], r"values\[0\] must be a finite number"),
    (["1.5", 2.0], r"values\[0\] must be a finite number, got '1.5'"),
    ("123", "values must be a list, got '123'"),
    (2.0, "values must be a list"),
    ([True, 1.0], r"values\[0\] must be a finite number, got True"),
])
def test_summarise_refuses_what_would_sort_in_silently(values, match) -> None:
    from fp16lab.labs.benchmark.analysis import summarise

    with pytest.raises(ValueError, match=match):
        summarise(values)
    assert summarise((3, 1.0, 2)) == (2.0, 1.0, 3)  # a tuple of ints is fine


@pytest.mark.parametrize(("kw", "match"), [
    ({"op": "=>"}, "op must be one of '>=', '<='"), ({"op": ">"}, "op must be one of"),
    ({"quantity": "images_per_second"}, "quantity must be one of 'img_per_s'"),
    ({"goal": float("inf")}, "goal must be a finite number > 0, got inf"), ({"goal": 0}, "goal must be"),
    ({"goal": "2"}, "goal must be"), ({"stretch": 1.5}, "stretch must be a harder goal than goal=2"),
    ({"stretch": float("nan")}, "stretch must be a finite number"), ({"denominator": "fp16"}, "the same config"),
    ({"name": ""}, "name must be a non-empty str"), ({"numerator": 5}, "numerator must be a str"),
])
def test_a_target_that_could_never_be_measured_is_refused_when_built(kw, match) -> None:
    from fp16lab.labs.benchmark.analysis import Target

    args = {"name": "t", "numerator": "fp16", "denominator": "article", "quantity": "img_per_s", "op": ">=",
            "goal": 2.0, **kw}
    with pytest.raises(ValueError, match=match):
        Target(**args)
    assert Target("m", "fp16", "fp32_true", "peak_mem_gb", "<=", 0.5, stretch=0.4).stretch == 0.4


def test_targets_table_refuses_a_target_whose_column_the_run_lacks_and_a_batch_it_lacks() -> None:
    from fp16lab.labs.benchmark.analysis import Target, targets_table

    rows = _rows().assign(part="comparison")
    with pytest.raises(ValueError, match=r"targets\[0\] \('mfu'\) needs the column 'mfu'"):
        targets_table(rows, [Target("mfu", "fp16_cl_fused", "article", "mfu", ">=", 1.0)])
    with pytest.raises(ValueError, match="batch 64 is not a batch size of this run"):
        targets_table(rows, batch=64)


def test_student_helpers_refuse_a_lesson_that_does_not_exist(tmp_path: Path) -> None:
    from fp16lab.course import student

    ghost = tmp_path / "03_ghost.ipynb"
    for call in (lambda: student.stale_student_copies([ghost]), lambda: student.student_path(ghost),
                 lambda: student.write_student_copies([ghost], tmp_path / "out")):
        with pytest.raises(FileNotFoundError, match=r"03_ghost\.ipynb' does not exist"):
            call()
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(ValueError, match=r"paths\[0\]: .*notes\.txt' is not a notebook"):
        student.stale_student_copies([tmp_path / "notes.txt"])
    (tmp_path / "04_broken.ipynb").write_text("{not json")
    with pytest.raises(ValueError, match=r"paths\[0\]: .*04_broken\.ipynb' is not a readable notebook"):
        student.write_student_copies([tmp_path / "04_broken.ipynb"], tmp_path / "out")
    assert not (tmp_path / "out").exists()  # refused before anything was written


def test_course_readers_name_the_file_argument(tmp_path: Path) -> None:
    from fp16lab.course import agenda, outputs, prose, translations
    from fp16lab.labs.runtime.results import load_results

    (tmp_path / "t.json").write_text("[1, 2")
    with pytest.raises(ValueError, match=r"timings_file: .*t\.json' is not a timings file"):
        agenda.agenda_table(tmp_path / "t.json")
    with pytest.raises(ValueError, match=r"path: .*t\.json' is not an fp16lab results file"):
        load_results(tmp_path / "t.json")
    with pytest.raises(FileNotFoundError, match=r"lesson: .*nope\.ipynb' does not exist"):
        prose.lint_lesson(tmp_path / "nope.ipynb")
    with pytest.raises(ValueError, match=r"path: .*t\.json' is not a notebook"):
        outputs.stale(tmp_path / "t.json")
    (tmp_path / "a.ipynb").write_text("{}")
    with pytest.raises(ValueError, match=r"notebook: .*a\.ipynb' is not a notebook \(no list of cells\)"):
        translations.markdown_cells(tmp_path / "a.ipynb")
    with pytest.raises(FileNotFoundError, match=r"guide: .*g\.md' does not exist"):
        agenda.update_agenda(tmp_path / "g.md")


@pytest.mark.parametrize(("params", "match"), [
    ([], "params is empty"), (iter(()), "params is empty"),
    ([torch.zeros(2, dtype=torch.int64)], r"params\[0\] must be a leaf floating-point tensor.*int64"),
    ([torch.ones(2, requires_grad=True) * 2], r"params\[0\] must be a leaf floating-point tensor.*non-leaf"),
    ([{"lr": 0.1}], r"params\[0\] is a param group without 'params'"), ([1.0], r"params\[0\] must be a tensor"),
])
def test_adamw16_names_what_is_wrong_with_params(params, match) -> None:
    from fp16lab.labs.transformers.optim import AdamW16

    with pytest.raises(ValueError, match=match):
        AdamW16(params)


@pytest.mark.parametrize("fn", [lambda x: x, lambda a, b=1: a, lambda *, k: k])
def test_functions_are_refused_by_their_signature_before_they_run(fn) -> None:
    from fp16lab.labs.memory.allocator import run_or_oom
    from fp16lab.labs.transformers.lm import sdpa_kernel_ran

    with pytest.raises(ValueError, match="fn must be a function of no arguments"):
        sdpa_kernel_ran(fn)
    with pytest.raises(ValueError, match="fn must be a function of no arguments"):
        run_or_oom(fn)


def test_fp8_matmuls_refuse_what_cannot_be_scaled_naming_the_operand() -> None:
    from fp16lab.labs.fp8.matmul import scaled_matmul, scaled_mm_api, scaled_mm_path

    a = torch.randn(16, 16)
    b = a.clone()
    b[2, 2] = float("inf")
    with pytest.raises(ValueError, match="b holds 1 inf/NaN values"):
        scaled_matmul(a, b)
    with pytest.raises(ValueError, match=r"a is empty, shape \(0, 16\)"):
        scaled_matmul(torch.empty(0, 16), a)
    if not torch.cuda.is_available():
        for call in (lambda: scaled_mm_api("cuda"), lambda: scaled_mm_path("cuda:1", "rowwise")):
            with pytest.raises(ValueError, match="device 'cuda"):
                call()


def test_precision_agreement_says_when_the_inputs_do_not_fit_the_model() -> None:
    from fp16lab.labs.inference.infer import precision_agreement

    model = nn.Linear(4, 3)
    with pytest.raises(ValueError, match=r"inputs: the model fails on them in true FP32 .*got torch.float32 \(2, 5\)"):
        precision_agreement(model, torch.randn(2, 5), device="cpu")
    with pytest.raises(ValueError, match="inputs holds 8 inf/NaN values"):
        precision_agreement(model, torch.full((2, 4), float("nan")), device="cpu")
    with pytest.raises(ValueError, match=r"loss_fn must be a function \(outputs, targets\) -> loss or None, called with 2"):
        precision_agreement(model, torch.randn(2, 4), torch.zeros(2, dtype=torch.long), loss_fn=lambda out: out,
                            device="cpu")


def test_compile_for_inference_checks_the_example_args_against_the_model() -> None:
    from fp16lab.labs.inference.graphs import compile_for_inference

    with pytest.raises(ValueError, match="example_args: 2 given, but Linear"):
        compile_for_inference(nn.Linear(4, 4), torch.randn(2, 4), torch.randn(2, 4), mode=None)


def test_memory_sweep_checks_every_argument_before_it_asks_for_cuda() -> None:
    from fp16lab.labs.memory import memory_sweep

    with pytest.raises(ValueError, match=r"batch_sizes\[1\] must be an int >= 1, got 0"):
        memory_sweep(_mlp(), lambda n: _batch(), [2, 0])
    with pytest.raises(ValueError, match="precisions"):
        memory_sweep(_mlp(), lambda n: _batch(), [2], precisions=["fp17"])


def test_a_garbled_lesson_is_refused_before_a_child_process_starts(tmp_path: Path, monkeypatch) -> None:
    import subprocess

    from fp16lab.course import portability

    monkeypatch.setattr(subprocess, "run", lambda *a, **k: pytest.fail("a child process was started"))
    (tmp_path / "02_x.ipynb").write_text("{")
    with pytest.raises(ValueError, match=r"lessons\[0\]: .*02_x\.ipynb' is not a readable notebook"):
        portability.run_matrix([tmp_path / "02_x.ipynb"], ["t4"], save=False)
    with pytest.raises(ValueError, match="keep must be a path"):
        portability.run_one(_lesson_file(tmp_path), "t4", keep=5)  # type: ignore[arg-type]


def _lesson_file(tmp_path: Path) -> Path:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x = 1")])
    nbformat.write(nb, tmp_path / "03_ok.ipynb")
    return tmp_path / "03_ok.ipynb"


def test_pad_layers_advice_works_for_a_layer_registered_under_two_names() -> None:
    """audit's advice, followed, pads the one layer once and leaves both names pointing at it."""
    from fp16lab.align import audit, pad_layers

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body, self.head = nn.Linear(8, 8), nn.Linear(8, 10)
            self.classifier = self.head  # the same layer under a second name

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.head(self.body(x))

    for names in (None, ["classifier"], ["head", "classifier"]):
        net = Net()
        opt = torch.optim.SGD(net.parameters(), lr=0.1)
        x = torch.randn(4, 8)
        want = net(x)
        pad_layers(net, audit(net, x, precision="fp16").pad_names() if names is None else names, optimizer=opt)
        assert net.head is net.classifier and net.head.inner.out_features == 16
        torch.testing.assert_close(net(x), want)
        net(x).sum().backward()
        opt.step()  # the optimizer holds the padded parameters
