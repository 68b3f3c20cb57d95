"""Tests of fp16lab.debug: PyTorch itself (autocast, isfinite) is the oracle."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from fp16lab.debug import (
    FP16_MAX,
    BatchSearch,
    NonFiniteReport,
    dtype_trace,
    first_nonfinite,
    max_batch_size,
)
from fp16lab.labs.memory import memory_sweep, step_peak_memory

CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


class LinearAndSoftmax(nn.Module):
    """A Linear layer (autocast: lower precision) beside a softmax of the fp32 input."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(8, 4)
        self.sm = nn.Softmax(dim=-1)
        self.loss = nn.MSELoss()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.lin(x)
        return self.loss(y, self.sm(x)[:, :4]) + self.sm(y).sum()


def _oracle(x: torch.Tensor, model: LinearAndSoftmax, dtype: torch.dtype) -> dict[str, torch.dtype]:
    with torch.autocast("cpu", dtype=dtype):
        y = F.linear(x, model.lin.weight, model.lin.bias)
        return {
            "lin": y.dtype,
            "sm_fp32_in": torch.softmax(x, -1).dtype,
            "sm_low_in": torch.softmax(y, -1).dtype,
            "loss": F.mse_loss(y, torch.softmax(x, -1)[:, :4]).dtype,
        }


def test_dtype_trace_matches_cpu_bf16_autocast_policy() -> None:
    torch.manual_seed(0)
    model, x = LinearAndSoftmax(), torch.randn(3, 8)
    oracle = _oracle(x, model, torch.bfloat16)
    trace = dtype_trace(model, x, precision="bf16")
    assert list(trace["module"]) == ["lin", "sm", "loss", "sm"]  # leaves, in execution order
    lin, sm_a, loss, sm_b = (trace.iloc[i] for i in range(4))
    assert lin["input_dtypes"] == "float32" and lin["param_dtypes"] == "float32"
    assert lin["output_dtypes"] == str(oracle["lin"]).replace("torch.", "") == "bfloat16"
    assert lin["low_precision"]
    assert sm_a["output_dtypes"] == str(oracle["sm_fp32_in"]).replace("torch.", "")
    assert sm_b["input_dtypes"] == "bfloat16"
    assert sm_b["output_dtypes"] == str(oracle["sm_low_in"]).replace("torch.", "")
    assert loss["output_dtypes"] == str(oracle["loss"]).replace("torch.", "") == "float32"
    assert not loss["low_precision"] and sm_a["param_dtypes"] == "-"
    assert trace.attrs == {"precision": "bf16", "device": "cpu", "autocast_dtype": "bfloat16"}


def test_dtype_trace_fp32_has_autocast_off_and_containers_optional() -> None:
    model = nn.Sequential(nn.Linear(4, 4), nn.Sequential(nn.ReLU(), nn.Linear(4, 2)))
    trace = dtype_trace(model, torch.randn(2, 4), precision="fp32")
    assert set(trace["output_dtypes"]) == {"float32"} and not trace["low_precision"].any()
    assert list(trace["module"]) == ["0", "1.0", "1.1"]
    full = dtype_trace(model, torch.randn(2, 4), precision="bf16", leaves_only=False)
    assert list(full["module"]) == ["0", "1.0", "1.1", "1", "(model)"]
    assert full.set_index("module").loc["(model)", "output_dtypes"] == "bfloat16"


def test_dtype_trace_restores_mode_and_leaves_batchnorm_stats() -> None:
    model = nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))
    model.train()
    before = model[1].running_mean.clone()
    dtype_trace(model, torch.randn(8, 4) * 5 + 3, precision="bf16")
    assert model.training and model[1].training
    assert torch.equal(model[1].running_mean, before)


def test_dtype_trace_accepts_tuple_and_dict_inputs() -> None:
    class Two(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
            return self.lin(a) + b

    m = Two()
    a, b = torch.randn(2, 3), torch.randn(2, 3)
    t1 = dtype_trace(m, (a, b), precision="bf16")
    t2 = dtype_trace(m, {"a": a, "b": b}, precision="bf16")
    assert list(t1["output_dtypes"]) == list(t2["output_dtypes"]) == ["bfloat16"]


@pytest.mark.parametrize("fn", [dtype_trace, first_nonfinite])
def test_bad_inputs_are_refused(fn) -> None:
    model = nn.Linear(2, 2)
    with pytest.raises(ValueError, match="model must be a torch.nn.Module"):
        fn(lambda x: x, torch.randn(1, 2))
    with pytest.raises(ValueError, match="empty"):
        fn(model, torch.randn(0, 2))
    with pytest.raises(ValueError, match="no tensor"):
        fn(model, ())
    with pytest.raises(ValueError, match="'fp8'.*allowed"):
        fn(model, torch.randn(1, 2), precision="fp8")
    with pytest.raises(ValueError, match="allowed"):
        fn(model, torch.randn(1, 2), device="tpu")
    with pytest.raises(ValueError, match="not a dtype"):
        fn(model, torch.randn(1, 2), precision=torch.float16)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA GPU is visible"):
            fn(nn.ReLU(), torch.randn(1, 2), device="cuda")  # no parameters to say where it lives


def test_dtype_trace_leaves_only_must_be_a_bool() -> None:
    with pytest.raises(ValueError, match="leaves_only must be True or False"):
        dtype_trace(nn.Linear(2, 2), torch.randn(1, 2), "bf16", leaves_only="yes")


def test_tf32_on_mps_is_refused_clearly(monkeypatch) -> None:
    import fp16lab.device

    monkeypatch.setattr(fp16lab.device, "resolve_device", lambda d: torch.device("mps"))
    monkeypatch.setattr(fp16lab.device, "model_device", lambda m, default=None: torch.device("mps"))
    with pytest.raises(ValueError, match="'tf32'.*NVIDIA.*'mps'"):
        dtype_trace(nn.Linear(2, 2), torch.randn(1, 2), "tf32", device="mps")


class ExpSoftmax(nn.Module):
    """A hand-written softmax: exp overflows fp16 for logits above ~11.1."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        e = torch.exp(x)
        return e / e.sum(-1, keepdim=True)


def _overflowing_model() -> nn.Module:
    torch.manual_seed(0)
    lin = nn.Linear(4, 4)
    with torch.no_grad():
        lin.weight.copy_(torch.eye(4) * 4.0)
        lin.bias.zero_()
    return nn.Sequential(nn.Linear(4, 4), lin, ExpSoftmax(), nn.Linear(4, 2))


def test_first_nonfinite_finds_the_overflowing_module() -> None:
    model = _overflowing_model()
    with torch.no_grad():
        model[0].weight.copy_(torch.eye(4))
        model[0].bias.zero_()
    x = torch.full((2, 4), 3.0)  # logits 12 -> exp(12) = 162755 > 65504
    report = first_nonfinite(model, x, precision="fp16")
    assert isinstance(report, NonFiniteReport) and report.found
    assert report.first == "2"
    # the oracle: the same computation by hand in fp16
    logits = (x.half() @ torch.eye(4).half() * 4).float()
    assert not torch.isfinite(torch.exp(logits.half())).all()
    rows = report.table.set_index("module")
    assert rows.loc["1", "finite"] and rows.loc["1", "max_abs"] == pytest.approx(12.0)
    assert rows.loc["1", "vs_fp16_max"] == pytest.approx(12.0 / FP16_MAX)
    assert rows.loc["2", "n_nan"] > 0  # inf / inf
    assert "first non-finite" in str(report) and "<table" in report._repr_html_()
    # in fp32 the same model is finite
    ok = first_nonfinite(model, x, precision="fp32")
    assert not ok.found and ok.first is None and ok.first_row is None
    assert "all outputs finite" in str(ok)


def test_first_nonfinite_reports_bad_input() -> None:
    x = torch.tensor([[1.0, float("inf")]])
    report = first_nonfinite(nn.Linear(2, 2), x, precision="fp32")
    assert report.first == "(input)"


def test_first_nonfinite_with_bf16_has_no_overflow() -> None:
    model = _overflowing_model()
    x = torch.full((2, 4), 3.0)
    assert not first_nonfinite(model, x, precision="bf16").found


# ---------------------------------------------------------------------------- memory


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))


def _fake_oom_batches(max_fit: int, calls: list[int] | None = None):
    def make_batch(n: int):
        if calls is not None:
            calls.append(n)
        if n > max_fit:
            raise torch.cuda.OutOfMemoryError(f"CUDA out of memory. Tried to allocate a batch of {n}")
        g = torch.Generator().manual_seed(n)
        return torch.randn(n, 16, generator=g), torch.randint(0, 4, (n,), generator=g)

    return make_batch


@pytest.mark.parametrize("max_fit", [1, 5, 37, 64, 100])
def test_max_batch_size_with_fake_oom(max_fit: int) -> None:
    model = _mlp()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    result = max_batch_size(model, _fake_oom_batches(max_fit), precision="fp32", limit=1024)
    assert isinstance(result, BatchSearch)
    assert result.max_batch == max_fit and not result.hit_limit
    assert (~result.trials["ok"]).sum() >= 1
    assert result.trials["error"].str.contains("OutOfMemoryError").any()
    # weights restored, no gradients left, process still usable
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k])
    assert all(p.grad is None for p in model.parameters())
    assert model(torch.randn(2, 16)).shape == (2, 4)
    assert "largest batch" in str(result) and "<table" in result._repr_html_()


def test_max_batch_size_multiple_and_limit() -> None:
    res = max_batch_size(_mlp(), _fake_oom_batches(45), precision="fp32", start=8, multiple=8, limit=1024)
    assert res.max_batch == 40
    assert all(n % 8 == 0 for n in res.trials["batch_size"])
    capped = max_batch_size(_mlp(), _fake_oom_batches(10_000), precision="fp32", limit=50)
    assert capped.max_batch == 50 and capped.hit_limit and capped.trials["ok"].all()
    assert "limit" in str(capped)
    odd = max_batch_size(_mlp(), _fake_oom_batches(10_000), precision="fp32", start=2, multiple=2, limit=7)
    assert odd.max_batch == 6 and odd.limit == 6 and odd.hit_limit and "the search limit 6 was reached" in str(odd)


def test_max_batch_size_nothing_fits() -> None:
    res = max_batch_size(_mlp(), _fake_oom_batches(0), precision="fp32", start=4, limit=64)
    assert res.max_batch == 0 and len(res.trials) == 1 and "no batch size fits" in str(res)


def test_max_batch_size_oom_inside_the_step_is_caught() -> None:
    class Boom(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lin = nn.Linear(16, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if x.shape[0] > 12:
                raise torch.cuda.OutOfMemoryError("CUDA out of memory (fake, in forward)")
            return self.lin(x)

    res = max_batch_size(Boom(), _fake_oom_batches(10_000), precision="bf16", limit=256)
    assert res.max_batch == 12


def test_max_batch_size_catches_an_mps_style_out_of_memory() -> None:
    """Apple's MPS raises a plain RuntimeError saying "out of memory": it is an OOM too."""
    def make(n: int):
        if n > 20:
            raise RuntimeError("MPS backend out of memory (MPS allocated: 1 GB, other allocations: 0 B)")
        return torch.randn(n, 16), torch.randint(0, 4, (n,))

    res = max_batch_size(_mlp(), make, precision="fp32", limit=256)
    assert res.max_batch == 20 and res.trials["error"].str.contains("MPS backend").any()


def test_max_batch_size_other_errors_propagate_and_bad_arguments() -> None:
    def broken(n: int):
        raise KeyError("a bug, not an OOM")

    with pytest.raises(KeyError, match="a bug, not an OOM"):
        max_batch_size(_mlp(), broken, precision="fp32")
    with pytest.raises(ValueError, match="model must be a torch.nn.Module"):
        max_batch_size("model", _fake_oom_batches(4))
    for kwargs, match in ((dict(start=True), "start"), (dict(limit=2.0), "limit"), (dict(multiple="8"), "multiple"),
                          (dict(loss_fn="mse"), "loss_fn"), (dict(optimizer=torch.optim.Adam([nn.Parameter(torch.ones(1))])),
                                                             "optimizer must be a function")):
        with pytest.raises(ValueError, match=match):
            max_batch_size(_mlp(), _fake_oom_batches(4), "fp32", **kwargs)
    with pytest.raises(ValueError, match="make_batch must be"):
        max_batch_size(_mlp(), [1, 2], "fp32")
    with pytest.raises(ValueError, match="'fp8'"):
        max_batch_size(_mlp(), _fake_oom_batches(4), precision="fp8")
    with pytest.raises(ValueError, match="start"):
        max_batch_size(_mlp(), _fake_oom_batches(4), start=0)
    with pytest.raises(ValueError, match="multiple"):
        max_batch_size(_mlp(), _fake_oom_batches(4), start=4, multiple=8)
    with pytest.raises(ValueError, match="empty"):
        max_batch_size(_mlp(), lambda n: (torch.randn(0, 16), torch.zeros(0, dtype=torch.long)), precision="fp32")


def test_step_peak_memory_refuses_cpu() -> None:
    batch = (torch.randn(4, 16), torch.randint(0, 4, (4,)))
    with pytest.raises(ValueError, match="CUDA"):
        step_peak_memory(_mlp(), batch, "fp16")
    with pytest.raises(ValueError, match="CUDA"):
        memory_sweep(_mlp(), lambda n: batch, [4])
    with pytest.raises(ValueError, match="model must be a torch.nn.Module"):
        step_peak_memory(None, batch)
    with pytest.raises(ValueError, match="model must be a torch.nn.Module"):
        memory_sweep("model", lambda n: batch, [4])


@CUDA
@pytest.mark.parametrize("kwargs, match", [
    (dict(warmup_steps=-1), "warmup_steps"), (dict(warmup_steps=True), "warmup_steps"), (dict(restore=1), "restore"),
    (dict(loss_fn=3), "loss_fn"), (dict(optimizer="adam"), "optimizer"),
])
def test_step_peak_memory_names_bad_arguments(kwargs, match) -> None:
    model = _mlp().cuda()
    batch = (torch.randn(4, 16, device="cuda"), torch.randint(0, 4, (4,), device="cuda"))
    with pytest.raises(ValueError, match=match):
        step_peak_memory(model, batch, "fp32", **kwargs)
    for bad, m in (([], "batch_sizes"), ([4, 0], "batch_sizes"), ("48", "batch_sizes")):
        with pytest.raises(ValueError, match=m):
            memory_sweep(model, lambda n: batch, bad)
    with pytest.raises(ValueError, match="precisions"):
        memory_sweep(model, lambda n: batch, [4], precisions="fp16")


@CUDA
def test_step_peak_memory_on_gpu_amp_saves_activations() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(*[m for _ in range(4) for m in (nn.Linear(1024, 1024), nn.ReLU())], nn.Linear(1024, 10))
    model = model.cuda()

    def make(n: int):
        return torch.randn(n, 1024, device="cuda"), torch.randint(0, 10, (n,), device="cuda")

    fp32 = step_peak_memory(model, make(2048), "fp32")
    fp16 = step_peak_memory(model, make(2048), "fp16")
    assert fp32.peak_bytes > fp32.before_bytes > 0
    assert fp16.step_bytes < fp32.step_bytes
    table = memory_sweep(model, make, [256, 512], ("fp32", "fp16"))
    assert len(table) == 4 and not table["oom"].any()
    total = torch.cuda.get_device_properties(0).total_memory
    torch.cuda.empty_cache()
    torch.cuda.set_per_process_memory_fraction(4 * 2**30 / total)  # a 4 GiB card: a real OOM
    try:
        big = max_batch_size(model, make, "fp16", start=256, limit=1 << 20, multiple=256)
    finally:
        torch.cuda.set_per_process_memory_fraction(1.0)
    assert big.max_batch >= 256 and not big.trials["ok"].all() and not big.hit_limit
    assert big.trials.loc[~big.trials["ok"], "error"].str.contains("OutOfMemoryError").all()
    assert torch.ones(1024, device="cuda").sum().item() == 1024  # the GPU is still usable


@CUDA
def test_step_peak_memory_fp16_warmup_outlasts_skipped_steps() -> None:
    # fp16's first steps may be skipped (inf gradients at scale 2**16): no Adam state yet, so the
    # resident memory would be too small and the measured step would create the state.
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)).cuda()
    batch = (torch.randn(64, 1024, device="cuda"), torch.randint(0, 10, (64,), device="cuda"))
    calls = {"n": 0}

    def overflow_first_3(out: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        calls["n"] += 1
        loss = nn.functional.cross_entropy(out, y)
        return loss * math.inf if calls["n"] <= 3 else loss

    param_bytes = sum(q.numel() * q.element_size() for q in model.parameters())
    fp16 = step_peak_memory(model, batch, "fp16", loss_fn=overflow_first_3)
    fp32 = step_peak_memory(model, batch, "fp32")
    assert calls["n"] == 5  # 3 skipped + 1 real warm-up step + the measured one
    assert fp16.before_bytes >= 3 * param_bytes  # weights + Adam's exp_avg and exp_avg_sq
    assert abs(fp16.before_bytes - fp32.before_bytes) < 0.05 * fp32.before_bytes
    with pytest.raises(RuntimeError, match="skipped by the GradScaler"):
        step_peak_memory(model, batch, "fp16", loss_fn=lambda out, y: nn.functional.cross_entropy(out, y) * math.inf)


class _FakeCuda:
    """Stands in for torch.cuda's memory counters so the GPU code path runs on the CPU."""

    def __init__(self) -> None:
        self.allocated = 1000

    def memory_allocated(self, dev=None) -> int:
        return self.allocated

    def max_memory_allocated(self, dev=None) -> int:
        return self.allocated + 500

    def max_memory_reserved(self, dev=None) -> int:
        return self.allocated + 800

    def reset_peak_memory_stats(self, dev=None) -> None:
        pass

    def synchronize(self, dev=None) -> None:
        pass


def test_memory_code_path_on_the_cpu_with_fake_counters(monkeypatch) -> None:
    """step_peak_memory / memory_sweep on the CPU with torch.cuda's counters faked: the flow, not the numbers."""
    from fp16lab.labs.memory import sweep as memory

    fake = _FakeCuda()
    monkeypatch.setattr(memory, "_cuda_device", lambda model, device, what: torch.device("cpu"))
    for name in ("memory_allocated", "max_memory_allocated", "max_memory_reserved", "reset_peak_memory_stats",
                 "synchronize"):
        monkeypatch.setattr(torch.cuda, name, getattr(fake, name))
    model = _mlp()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    batch = (torch.randn(4, 16), torch.randint(0, 4, (4,)))
    r = memory.step_peak_memory(model, batch, "fp32", warmup_steps=2)
    assert (r.before_bytes, r.peak_bytes, r.step_bytes, r.batch_size) == (1000, 1500, 500, 4)
    assert all(torch.equal(v, before[k]) for k, v in model.state_dict().items())  # restored

    def make(n: int):
        if n > 4:
            raise torch.cuda.OutOfMemoryError("CUDA out of memory (fake)")
        return torch.randn(n, 16), torch.randint(0, 4, (n,))

    table = memory.memory_sweep(model, make, [2, 4, 8], ("fp32", "bf16"))
    assert list(table["oom"]) == [False, False, True] * 2
    assert table.loc[table["oom"], "error"].str.contains("OutOfMemoryError").all()
    with pytest.raises(KeyError, match="^2$"):
        memory.memory_sweep(model, lambda n: {}[n], [2])  # not an OOM: propagates (the missing key, 2)


# unlisted neighbours of issue 14: callbacks of the wrong shape, models that cannot train, inputs the model refuses


def _frozen() -> nn.Module:
    return _mlp().requires_grad_(False)


@pytest.mark.parametrize("kw,match", [
    (dict(make_batch=lambda: None), "make_batch must be a function .*called with 1 argument"),
    (dict(loss_fn=nn.CrossEntropyLoss), "loss_fn .*the class CrossEntropyLoss: pass an instance"),
    (dict(loss_fn=lambda out: out.sum()), "loss_fn must be a function .*called with 2 argument"),
    (dict(optimizer=torch.optim.SGD(_mlp().parameters(), lr=0.1)), "optimizer must be a function params -> "
     "optimizer .*lambda params"),
    (dict(model=nn.ReLU()), "model has no trainable parameters"),
    (dict(model=_frozen()), "model has no trainable parameters"),
])
def test_max_batch_size_refuses_before_any_trial(kw: dict, match: str) -> None:
    calls: list[int] = []
    args = dict(model=_mlp(), make_batch=_fake_oom_batches(64, calls), precision="fp32", limit=8) | kw
    with pytest.raises(ValueError, match=match):
        max_batch_size(**args)
    assert calls == []


def test_max_batch_size_accepts_an_optimizer_class() -> None:
    res = max_batch_size(_mlp(), _fake_oom_batches(64), precision="fp32", limit=4, optimizer=torch.optim.SGD)
    assert res.max_batch == 4


def test_max_batch_size_refuses_a_make_batch_of_the_wrong_size() -> None:
    model = _mlp()
    before = [p.detach().clone() for p in model.parameters()]
    with pytest.raises(ValueError, match=r"make_batch\(1\) returned inputs of 3 samples; it must return n=1"):
        max_batch_size(model, lambda n: (torch.randn(3, 16), torch.zeros(3, dtype=torch.long)), "fp32", limit=8)
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


@pytest.mark.parametrize("tool", [dtype_trace, first_nonfinite])
@pytest.mark.parametrize("example,match", [
    (torch.randn(3, 7), r"example_input: the model cannot run on it \(tensor \(3, 7\) float32\): RuntimeError"),
    (torch.ones(3, 16, dtype=torch.long), r"example_input: the model cannot run on it \(tensor \(3, 16\) int64\)"),
])
def test_an_input_the_model_refuses_names_example_input(tool, example: torch.Tensor, match: str) -> None:
    with pytest.raises(ValueError, match=match) as info:
        tool(_mlp(), example, "fp32")
    assert isinstance(info.value.__cause__, RuntimeError)  # the model's own error is kept


def test_step_peak_memory_refuses_a_model_without_trainable_parameters() -> None:
    with pytest.raises(ValueError, match="model has no trainable parameters"):
        step_peak_memory(_frozen(), (torch.randn(2, 16), torch.zeros(2, dtype=torch.long)))
