"""Benchmark training (and inference) of a torchvision model at several precisions, honestly.

What "honestly" means here: synthetic data already on the device (the input pipeline is
not measured by accident); warm-up steps outside the timed part (torch.compile, cuDNN
autotuning, the caching allocator); CUDA events around windows of N steps, several windows,
their median and spread; peak memory from ``torch.cuda.max_memory_allocated`` after a
reset; and with every row the settings that produced it (precision, memory format, compile,
optimizer, TF32 flags and cudnn.benchmark as used, plus :func:`fp16lab.env.run_metadata`).

The comparison (:data:`CONFIGS`) puts the article's loop, exactly as written (deprecated
``torch.cuda.amp`` and all), next to true FP32, PyTorch's default FP32 (TF32 convolutions),
TF32, FP16/BF16 AMP, channels_last and torch.compile. The recommended recipe
(:data:`RECOMMENDED`) is FP16 AMP (``torch.autocast`` + ``torch.amp.GradScaler``) with
channels_last memory format, optionally compiled.

Command line: ``python -m fp16lab bench --help``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import math
import os
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from fp16lab.config import is_quick, pick
from fp16lab.device import OOM_ERRORS, free_memory, parse_device, synchronize
from fp16lab.precision import Precision, autocast, parse_precision, tf32_state
from fp16lab.results import load_results, output_path, save_results

__all__ = [
    "BenchConfig",
    "CONFIGS",
    "RECOMMENDED",
    "ARTICLE_CLAIM",
    "BenchSettings",
    "BenchResult",
    "allowed_models",
    "validate_model",
    "validate_configs",
    "validate_batch_sizes",
    "validate_output",
    "default_configs",
    "default_settings",
    "article_loop",
    "article_scaler",
    "bench_one",
    "run_benchmark",
    "comparison_table",
    "side_by_side",
    "model_flops",
    "add_flop_utilisation",
    "plot_results",
    "readme_section",
    "add_bench_parser",
    "main",
]


# ---------------------------------------------------------------- configurations


@dataclass(frozen=True)
class BenchConfig:
    """One way of running the training step: precision, memory format, compile, TF32 flags.

    ``tf32_matmul``/``tf32_cudnn`` are set explicitly for the run (PyTorch's defaults are
    False/True). ``loop="article"`` runs :func:`article_loop` (deprecated API, verbatim);
    ``loop="fp16lab"`` the current-API step. ``fused_adam`` builds ``Adam(fused=True)``
    instead of PyTorch's default (foreach) Adam. ``cuda_only`` configs refuse other devices.
    """

    name: str
    label: str
    precision: Precision
    channels_last: bool = False
    compile: bool = False
    tf32_matmul: bool = False
    tf32_cudnn: bool = True
    loop: str = "fp16lab"
    fused_adam: bool = False
    cuda_only: bool = False
    description: str = ""

    @property
    def memory_format(self) -> str:
        return "channels_last" if self.channels_last else "NCHW"

    @property
    def optimizer(self) -> str:
        """The optimizer as recorded with each row; :meth:`make_optimizer` builds exactly this."""
        return f"Adam(lr={_ADAM_LR:g}, fused=True)" if self.fused_adam else _OPTIMIZER

    def make_optimizer(self, params: Any) -> torch.optim.Optimizer:
        if self.fused_adam:
            return torch.optim.Adam(params, lr=_ADAM_LR, fused=True)
        return torch.optim.Adam(params, lr=_ADAM_LR)


_P = Precision
CONFIGS: dict[str, BenchConfig] = {
    c.name: c
    for c in [
        BenchConfig(
            "article", "article's loop (FP16 AMP, torch.cuda.amp, NCHW)", _P.FP16, loop="article",
            cuda_only=True,
            description="the article's code as written: torch.cuda.amp.autocast() + GradScaler(), "
            "zero_grad after step, default NCHW layout, PyTorch's default TF32 flags",
        ),
        BenchConfig(
            "fp32_true", "FP32, true (TF32 off)", _P.FP32, tf32_matmul=False, tf32_cudnn=False,
            description="every matmul and convolution in real FP32: the honest FP32 baseline",
        ),
        BenchConfig(
            "fp32_default", "FP32, PyTorch default (TF32 convs)", _P.FP32, tf32_matmul=False, tf32_cudnn=True,
            description="what a plain FP32 script gets: cuDNN convolutions already run in TF32",
        ),
        BenchConfig(
            "tf32", "TF32 (matmul + convs)", _P.TF32, tf32_matmul=True, tf32_cudnn=True,
            description="FP32 storage, TF32 Tensor Core math for matmuls and convolutions",
        ),
        BenchConfig(
            "fp16", "FP16 AMP (torch.amp), NCHW", _P.FP16,
            description="torch.autocast(float16) + torch.amp.GradScaler, default NCHW layout",
        ),
        BenchConfig(
            "bf16", "BF16 AMP, NCHW", _P.BF16,
            description="torch.autocast(bfloat16), no scaler needed, default NCHW layout",
        ),
        BenchConfig(
            "fp16_cl", "FP16 AMP + channels_last (recommended)", _P.FP16, channels_last=True,
            description="the recommended recipe: FP16 AMP with the model and inputs in "
            "channels_last, the layout Tensor Core convolutions want",
        ),
        BenchConfig(
            "bf16_cl", "BF16 AMP + channels_last", _P.BF16, channels_last=True,
            description="BF16 AMP with channels_last",
        ),
        BenchConfig(
            "fp16_cl_compile", "FP16 AMP + channels_last + torch.compile", _P.FP16, channels_last=True,
            compile=True,
            description="the recommended recipe with torch.compile (fused elementwise kernels)",
        ),
        BenchConfig(
            "fp16_cl_fused", "FP16 AMP + channels_last + Adam(fused=True)", _P.FP16, channels_last=True,
            fused_adam=True,
            description="the recommended recipe with the fused Adam: one kernel updates every parameter, "
            "and the GradScaler's inf check and unscaling happen inside it, with no host sync per step",
        ),
        BenchConfig(
            "fp16_cl_repeat", "FP16 AMP + channels_last (repeat)", _P.FP16, channels_last=True,
            description="identical to fp16_cl, measured again at the end: the repeatability check",
        ),
    ]
}

RECOMMENDED = "fp16_cl"
"""The recommended recipe: FP16 AMP (current API) + channels_last; ``fp16_cl_compile`` adds
torch.compile. On GPUs without native BF16 (before Ampere) FP16 is the only fast choice;
on Ampere and later BF16 AMP (``bf16_cl``) is as fast and needs no GradScaler."""

ARTICLE_CLAIM: dict[str, Any] = {
    "gpu": "RTX 4090D",
    "model": "resnet50",
    "rows": [
        {"precision": "FP32", "img_per_s": 1200.0, "memory_gb": 8.5},
        {"precision": "FP16", "img_per_s": 2200.0, "memory_gb": 4.2},
    ],
    "source": "the article's table (性能测试), batch size and settings not stated",
}
"""The article's ResNet50 table as it states it (not measured by this project)."""

_ADAM_LR = 0.001
_OPTIMIZER = f"Adam(lr={_ADAM_LR:g})"  # every configuration's optimizer unless it says fused


# ---------------------------------------------------------------- validation


def allowed_models() -> list[str]:
    """torchvision classification model names that :func:`bench_one` accepts."""
    import torchvision

    return sorted(torchvision.models.list_models(module=torchvision.models))


def validate_model(name: str) -> str:
    """Return ``name`` if torchvision has that classification model; ``ValueError`` otherwise."""
    allowed = allowed_models()
    if not isinstance(name, str) or name not in allowed:
        raise ValueError(f"unknown model {name!r}; allowed (torchvision classification models): {', '.join(allowed)}")
    return name


def validate_configs(names: Iterable[str], device: "torch.device | str") -> list[BenchConfig]:
    """The :class:`BenchConfig` for each name, checked against ``device`` (before any work)."""
    dev = parse_device(device)
    names = list(names)
    if not names:
        raise ValueError(f"no configurations given; allowed: {', '.join(CONFIGS)}")
    out = []
    for n in names:
        if n not in CONFIGS:
            raise ValueError(f"unknown configuration {n!r}; allowed: {', '.join(CONFIGS)}")
        c = CONFIGS[n]
        if c.cuda_only and dev.type != "cuda":
            ok = [k for k, v in CONFIGS.items() if not v.cuda_only]
            raise ValueError(
                f"configuration {n!r} needs a CUDA GPU (the article's loop uses torch.cuda.amp and "
                f".cuda()); the device is {str(dev)!r}. Allowed here: {', '.join(ok)}"
            )
        out.append(c)
    if len(set(names)) != len(names):
        raise ValueError(f"configurations repeat a name: {names!r}; use 'fp16_cl_repeat' for a repeat")
    return out


def validate_batch_sizes(batch_sizes: Iterable[int]) -> list[int]:
    """Batch sizes as a list of positive ints; ``ValueError`` quoting the bad one."""
    out = []
    for b in batch_sizes:
        if isinstance(b, bool) or not isinstance(b, int) or b < 1:
            raise ValueError(f"batch size must be a positive int (> 0), got {b!r}")
        out.append(b)
    if not out:
        raise ValueError("no batch sizes given; pass at least one positive int, e.g. 256")
    return out


def validate_output(path: "str | os.PathLike[str]") -> Path:
    """Check that results can be written to ``path`` (a .json in a writable folder) up front.

    The folder is created if missing; a probe file is written and removed, so an
    unwritable location fails now rather than after minutes of measuring.
    """
    p = Path(path)
    if p.suffix != ".json":
        raise ValueError(f"output path must end in .json, got {str(p)!r}")
    if p.exists() and p.is_dir():
        raise ValueError(f"output path {str(p)!r} is a folder; give a file name ending in .json")
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        probe = p.parent / f".{p.name}.probe"
        probe.write_text("")
        probe.unlink()
    except OSError as e:
        raise ValueError(f"output path {str(p)!r} cannot be written: {e.strerror or e}") from None
    return p


# ---------------------------------------------------------------- settings


@dataclass(frozen=True)
class BenchSettings:
    """Sizes of a benchmark run. ``warmup`` untimed steps, then ``windows`` timed windows of
    ``steps`` steps each; ``image_size`` square inputs; ``cudnn_benchmark`` autotuning;
    ``cpu_threads`` sets ``torch.set_num_threads`` for runs on the CPU (None: leave it)."""

    image_size: int = 224
    warmup: int = 5
    steps: int = 10
    windows: int = 3
    num_classes: int = 1000
    cudnn_benchmark: bool = True
    seed: int = 0
    cpu_threads: int | None = None

    def __post_init__(self) -> None:
        for k in ("image_size", "steps", "windows", "num_classes"):
            v = getattr(self, k)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{k} must be a positive int, got {v!r}")
        if self.cpu_threads is not None and (
            isinstance(self.cpu_threads, bool) or not isinstance(self.cpu_threads, int) or self.cpu_threads < 1
        ):
            raise ValueError(f"cpu_threads must be None or a positive int, got {self.cpu_threads!r}")
        if isinstance(self.warmup, bool) or not isinstance(self.warmup, int) or self.warmup < 1:
            raise ValueError(f"warmup must be an int >= 1 (compile and autotuning happen there), got {self.warmup!r}")


def default_settings() -> BenchSettings:
    """Quick mode: 32-px images, 1 warm-up step, 3 windows of 1 step, one CPU thread; full:
    224 px, 10 warm-up steps, 5 windows of 10 steps, CPU threads left alone.

    Ten warm-up steps (about half a second for ResNet50 on an H100/H200) also let the GPU
    clocks climb back after the CPU-only model build; with 5 and 3 windows the first H200
    reference run showed 5% spread on the fastest configurations.

    One CPU thread in quick mode: on a small shared CI machine several multi-threaded processes
    make OpenMP threads wait on each other, and a step ran 5x slower with 2 threads than with 1.
    """
    return BenchSettings(
        cpu_threads=pick(quick=1, full=None),
        image_size=pick(quick=32, full=224),
        warmup=pick(quick=1, full=10),
        steps=pick(quick=1, full=10),
        windows=pick(quick=3, full=5),
    )


def default_configs(device: "torch.device | str") -> list[str]:
    """Configurations to run by default: all of them on CUDA in full mode; a short list else.

    Quick mode on the CPU: fp32_true, fp32_default, bf16, bf16_cl (fp16 matmuls are 30-80x
    slower than fp32 on CPUs without native half math; TF32 flags change nothing there, so
    the two FP32 rows double as a repeatability check). Quick mode on CUDA: article,
    fp32_default, fp16_cl.
    """
    dev = parse_device(device)
    if dev.type == "cuda":
        return pick(quick=["article", "fp32_default", "fp16_cl"], full=list(CONFIGS))
    return ["fp32_true", "fp32_default", "bf16", "bf16_cl"]


# ---------------------------------------------------------------- the article's loop


def article_scaler() -> Any:
    """``torch.cuda.amp.GradScaler()`` exactly as the article makes it (deprecated: warns)."""
    from torch.cuda.amp import GradScaler

    return GradScaler()  # 用于动态调整梯度缩放


def article_loop(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    scaler: Any,
    criterion: Callable[..., torch.Tensor],
    dataloader: Iterable[tuple[torch.Tensor, torch.Tensor]],
    num_epochs: int = 1,
) -> None:
    """The article's training loop, line for line (deprecated ``torch.cuda.amp`` API and all).

    Only the scaler is passed in (the article creates it once, before the loop: see
    :func:`article_scaler`) so that timed windows continue one run. Do not copy this:
    lesson 02 shows the current API and what the loop gets wrong.
    """
    from torch.cuda.amp import autocast

    for _epoch in range(num_epochs):
        for inputs, targets in dataloader:
            inputs, targets = inputs.cuda(), targets.cuda()
            # 启用混合精度
            with autocast():
                outputs = model(inputs)
                loss = criterion(outputs, targets)
            # 反向传播和优化
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad()


class _Repeat:
    """A 'dataloader' that yields the same device-resident batch ``n`` times."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor, n: int) -> None:
        self.x, self.y, self.n = x, y, n

    def __iter__(self) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
        for _ in range(self.n):
            yield self.x, self.y


# ---------------------------------------------------------------- one measurement


@contextlib.contextmanager
def _backend_flags(tf32_matmul: bool, tf32_cudnn: bool, cudnn_benchmark: bool) -> Iterator[None]:
    from fp16lab.precision import tf32_flags

    old = torch.backends.cudnn.benchmark
    torch.backends.cudnn.benchmark = cudnn_benchmark
    try:
        with tf32_flags(tf32_matmul, cudnn=tf32_cudnn):
            yield
    finally:
        torch.backends.cudnn.benchmark = old


@contextlib.contextmanager
def _cpu_threads(n: int | None) -> Iterator[None]:
    old = torch.get_num_threads()
    if n is not None:
        torch.set_num_threads(n)
    try:
        yield
    finally:
        if n is not None:
            torch.set_num_threads(old)


def _time_windows(run_window: Callable[[], None], dev: torch.device, windows: int) -> list[float]:
    """Seconds per window: CUDA events around each window on CUDA, perf_counter elsewhere."""
    if dev.type == "cuda":
        pairs = []
        for _ in range(windows):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            run_window()
            end.record()
            pairs.append((start, end))
        torch.cuda.synchronize(dev)
        return [s.elapsed_time(e) / 1e3 for s, e in pairs]
    out = []
    for _ in range(windows):
        synchronize(dev)
        t0 = time.perf_counter()
        run_window()
        synchronize(dev)
        out.append(time.perf_counter() - t0)
    return out


def bench_one(
    model: str = "resnet50",
    config: "BenchConfig | str" = RECOMMENDED,
    batch_size: int = 256,
    *,
    settings: BenchSettings | None = None,
    device: "torch.device | str | None" = None,
    task: str = "train",
) -> dict[str, Any]:
    """Measure one (model, configuration, batch size): images/s (median of windows), spread, peak memory.

    Defaults: ``model='resnet50'`` (torchvision, weights=None: nothing is downloaded),
    ``config='fp16_cl'``, ``batch_size=256``, ``settings=default_settings()``,
    ``device`` from :func:`fp16lab.device.choose_device`, ``task='train'`` (Adam step) or
    ``'infer'`` (eval + inference_mode, forward only). Raises ``torch.OutOfMemoryError`` on OOM (the
    caller :func:`run_benchmark` turns that into an "OOM" row). Returns one result row.
    """
    from fp16lab.device import choose_device

    validate_model(model)
    dev = choose_device(device)
    cfg = validate_configs([config if isinstance(config, str) else config.name], dev)[0]
    validate_batch_sizes([batch_size])
    if task not in ("train", "infer"):
        raise ValueError(f"unknown task {task!r}; allowed: 'train', 'infer'")
    s = settings or default_settings()
    p = parse_precision(cfg.precision)
    if dev.type == "cuda":
        from fp16lab.precision import check_precision_supported

        check_precision_supported(p, dev)
    row: dict[str, Any] = _row_settings(model, cfg, batch_size, s, task, dev)
    caught: list[str] = []
    free_memory(dev)
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats(dev)
        row["baseline_gb"] = torch.cuda.memory_allocated(dev) / 1e9  # left over from before: should be ~0
    with (
        _backend_flags(cfg.tf32_matmul, cfg.tf32_cudnn, s.cudnn_benchmark),
        _cpu_threads(s.cpu_threads if dev.type == "cpu" else None),
        warnings.catch_warnings(record=True) as w,
    ):
        warnings.simplefilter("always")
        row["tf32_matmul"] = tf32_state()["matmul"] == "tf32"  # as used
        row["tf32_cudnn"] = tf32_state()["cudnn_conv"] == "tf32"
        row["cudnn_benchmark"] = torch.backends.cudnn.benchmark
        row["cpu_threads"] = torch.get_num_threads()
        t0 = time.perf_counter()
        window, step_count = _build(model, cfg, batch_size, s, task, dev)
        for _ in range(s.warmup):
            window(1)
        synchronize(dev)
        row["warmup_s"] = time.perf_counter() - t0
        secs = _time_windows(functools.partial(window, s.steps), dev, s.windows)
        caught = sorted({f"{x.category.__name__}: {x.message}" for x in w})
    steps_run = step_count()
    del window, step_count  # the model, optimizer and data go with them
    if cfg.compile:
        torch.compiler.reset()  # drop compiled graphs (and the model they hold) before the next run
    rates = [batch_size * s.steps / t for t in secs]
    med = statistics.median(rates)
    row.update(
        status="ok",
        img_per_s=med,
        img_per_s_min=min(rates),
        img_per_s_max=max(rates),
        spread=(max(rates) - min(rates)) / med,
        step_ms=1e3 * statistics.median(secs) / s.steps,
        window_s=[round(t, 6) for t in secs],
        steps_run=steps_run,
        warnings="; ".join(caught),
    )
    if dev.type == "cuda":
        row["peak_mem_gb"] = torch.cuda.max_memory_allocated(dev) / 1e9
        row["peak_reserved_gb"] = torch.cuda.max_memory_reserved(dev) / 1e9
    free_memory(dev)
    return row


def _row_settings(
    model: str, cfg: BenchConfig, batch: int, s: BenchSettings, task: str, dev: torch.device
) -> dict[str, Any]:
    return {
        "config": cfg.name,
        "label": cfg.label,
        "model": model,
        "task": task,
        "batch_size": batch,
        "image_size": s.image_size,
        "precision": cfg.precision.value,
        "memory_format": cfg.memory_format,
        "compile": cfg.compile,
        "loop": cfg.loop,
        "amp_api": ("torch.cuda.amp (deprecated)" if cfg.loop == "article" else "torch.amp")
        if cfg.precision.autocast_dtype is not None
        else "none",
        "grad_scaler": cfg.precision.uses_scaler and task == "train",
        "optimizer": cfg.optimizer if task == "train" else "none",
        "tf32_matmul": cfg.tf32_matmul,
        "tf32_cudnn": cfg.tf32_cudnn,
        "cudnn_benchmark": s.cudnn_benchmark,
        "cpu_threads": s.cpu_threads if dev.type == "cpu" and s.cpu_threads else torch.get_num_threads(),
        "warmup_steps": s.warmup,
        "steps_per_window": s.steps,
        "windows": s.windows,
        "device": dev.type,
        "status": "pending",
        "img_per_s": math.nan,
        "img_per_s_min": math.nan,
        "img_per_s_max": math.nan,
        "spread": math.nan,
        "step_ms": math.nan,
        "peak_mem_gb": math.nan,
        "peak_reserved_gb": math.nan,
        "baseline_gb": math.nan,
        "warmup_s": math.nan,
        "warnings": "",
        "error": "",
    }


def _build(
    model_name: str, cfg: BenchConfig, batch: int, s: BenchSettings, task: str, dev: torch.device
) -> tuple[Callable[[int], None], Callable[[], int]]:
    """Model, optimizer, scaler and one synthetic batch on ``dev``; returns window(n), count()."""
    import torchvision

    torch.manual_seed(s.seed)
    net = torchvision.models.get_model(model_name, weights=None, num_classes=s.num_classes).to(dev)
    fmt = torch.channels_last if cfg.channels_last else torch.contiguous_format
    net = net.to(memory_format=fmt)
    g = torch.Generator(device="cpu").manual_seed(s.seed)
    x = torch.randn(batch, 3, s.image_size, s.image_size, generator=g).to(dev).contiguous(memory_format=fmt)
    y = torch.randint(0, s.num_classes, (batch,), generator=g).to(dev)
    criterion = torch.nn.CrossEntropyLoss()
    count = [0]
    fwd: Callable[..., torch.Tensor] = torch.compile(net) if cfg.compile else net

    if task == "infer":
        net.eval()

        def infer_window(n: int) -> None:
            with torch.inference_mode(), autocast(cfg.precision, dev):
                for _ in range(n):
                    fwd(x)
            count[0] += n

        return infer_window, lambda: count[0]

    net.train()
    optimizer = cfg.make_optimizer(net.parameters())
    if cfg.loop == "article":
        scaler = article_scaler()

        def article_window(n: int) -> None:
            article_loop(fwd, optimizer, scaler, criterion, _Repeat(x, y, n))  # type: ignore[arg-type]
            count[0] += n

        return article_window, lambda: count[0]

    step = _fp16lab_step(fwd, optimizer, criterion, cfg.precision, dev)

    def window(n: int) -> None:
        for _ in range(n):
            step(x, y)
        count[0] += n

    return window, lambda: count[0]


def _fp16lab_step(
    model: Callable[..., torch.Tensor],
    optimizer: torch.optim.Optimizer,
    criterion: Callable[..., torch.Tensor],
    precision: Precision,
    dev: torch.device,
) -> Callable[[torch.Tensor, torch.Tensor], None]:
    """The current-API AMP step: autocast forward, scaled backward outside it, step, update.

    Same order as :func:`fp16lab.train.train_step`, without its per-step read-back of loss,
    scale and gradient norm to the host: that sync is right for a training history but would
    be timed here as part of every step.
    """
    scaler = torch.amp.GradScaler(dev.type, enabled=precision.uses_scaler)

    def step(x: torch.Tensor, y: torch.Tensor) -> None:
        with autocast(precision, dev):
            loss = criterion(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)

    return step


# ---------------------------------------------------------------- many measurements


@dataclass
class BenchResult:
    """Rows of a benchmark run with its metadata; renders as the comparison table in Jupyter."""

    frame: pd.DataFrame
    metadata: dict[str, Any] = field(default_factory=dict)
    path: Path | None = None
    interrupted: bool = False

    def table(self, part: str = "comparison") -> pd.DataFrame:
        """The article-like table of one part ('comparison' or 'sweep'): see :func:`comparison_table`."""
        return comparison_table(self.frame, part=part)

    def save(self, path: "str | os.PathLike[str]") -> Path:
        """Write JSON (rows + metadata) and a CSV copy beside it."""
        meta = dict(self.metadata, interrupted=self.interrupted)
        self.path = save_results(self.frame, validate_output(path), meta, csv=True)
        return self.path

    @classmethod
    def load(cls, path: "str | os.PathLike[str]") -> BenchResult:
        """Read a file written by :meth:`save` (or by ``python -m fp16lab bench``)."""
        frame, meta = load_results(path)
        for col in _NUMERIC:  # all-NaN columns (e.g. peak memory on a CPU) come back as None
            if col in frame:
                frame[col] = pd.to_numeric(frame[col], errors="coerce")
        return cls(frame, meta, Path(path), bool(meta.get("interrupted", False)))

    def __repr__(self) -> str:
        head = f"BenchResult({len(self.frame)} rows, {self.metadata.get('device', '?')}, {self.metadata.get('mode', '?')} mode"
        head += ", INTERRUPTED" if self.interrupted else ""
        return head + ")\n" + self.table().to_string()

    def _repr_html_(self) -> str:
        import html

        m = self.metadata
        cap = (
            f"{html.escape(str(m.get('device', '?')))} · torch {html.escape(str(m.get('torch', '?')))} · "
            f"{html.escape(str(m.get('date', '?')))} · {html.escape(str(m.get('mode', '?')))} mode"
        )
        if self.interrupted:
            cap += " · <b>INTERRUPTED: partial results</b>"
        parts = [f"<p>{cap}</p>", self.table().to_html(index=False, na_rep="")]
        if (self.frame.get("part") == "sweep").any():
            parts += ["<p>batch-size sweep</p>", self.table("sweep").to_html(index=False, na_rep="")]
        return "".join(parts)


_NUMERIC = (
    "img_per_s", "img_per_s_min", "img_per_s_max", "spread", "step_ms",
    "peak_mem_gb", "peak_reserved_gb", "baseline_gb", "warmup_s",
)


def run_benchmark(
    model: str = "resnet50",
    configs: Sequence[str] | None = None,
    batch_sizes: Sequence[int] = (256,),
    *,
    sweep_batch_sizes: Sequence[int] = (),
    sweep_configs: Sequence[str] = ("fp32_default", RECOMMENDED),
    precisions: Sequence[str] | None = None,
    settings: BenchSettings | None = None,
    device: "torch.device | str | None" = None,
    task: str = "train",
    output: "str | os.PathLike[str] | None" = None,
    progress: bool = True,
    metadata: dict[str, Any] | None = None,
    measure: Callable[..., dict[str, Any]] | None = None,
) -> BenchResult:
    """Run every configuration at every batch size (the comparison), then an optional sweep.

    Defaults: ``model='resnet50'``, ``configs=default_configs(device)``, ``batch_sizes=(256,)``,
    no sweep (``sweep_batch_sizes=()``; when given, ``sweep_configs`` fp32_default and fp16_cl
    run at each size, skipping pairs already measured), ``settings=default_settings()``,
    ``task='train'``, ``output=None`` (nothing written; else JSON + CSV, saved after every row).
    ``precisions`` (e.g. ``['fp32', 'fp16']``) keeps only configurations of those precisions.
    Everything is validated before the first measurement. An OOM becomes a row with
    status 'OOM' and the run goes on (any other exception: status 'error' with the message in
    ``error``, and the run goes on); Ctrl-C stops it, keeps (and saves) the rows so far and
    returns them with ``interrupted=True``. ``metadata`` is merged into the
    stored metadata (e.g. the command line). ``measure`` replaces :func:`bench_one` (tests).
    """
    from fp16lab.device import choose_device
    from fp16lab.env import run_metadata

    validate_model(model)
    dev = choose_device(device)
    names = list(configs) if configs is not None else default_configs(dev)
    cfgs = validate_configs(names, dev)
    if precisions is not None:
        keep = {parse_precision(p) for p in precisions}
        cfgs = [c for c in cfgs if c.precision in keep]
        if not cfgs:
            raise ValueError(
                f"no configuration in {names!r} has a precision in {sorted(p.value for p in keep)!r}; "
                f"precisions of these configurations: {sorted({CONFIGS[n].precision.value for n in names})!r}"
            )
    sizes = validate_batch_sizes(batch_sizes)
    sweep = validate_batch_sizes(sweep_batch_sizes) if len(sweep_batch_sizes) else []
    scfgs = validate_configs(sweep_configs, dev) if sweep else []
    if task not in ("train", "infer"):
        raise ValueError(f"unknown task {task!r}; allowed: 'train', 'infer'")
    if dev.type == "cuda":  # e.g. bf16/tf32 before Ampere: refuse now, not after minutes of work
        from fp16lab.precision import check_precision_supported

        for c in {*cfgs, *scfgs}:
            check_precision_supported(c.precision, dev)
    s = settings or default_settings()
    out = validate_output(output) if output is not None else None
    measure = measure or bench_one

    plan = [("comparison", c, b) for b in sizes for c in cfgs]
    done = {(c.name, b) for _, c, b in plan}
    plan += [("sweep", c, b) for c in scfgs for b in sweep if (c.name, b) not in done]

    meta = run_metadata(dev)
    meta.update(
        benchmark={
            "model": model,
            "task": task,
            "configs": [c.name for c in cfgs],
            "batch_sizes": sizes,
            "sweep_batch_sizes": sweep,
            "sweep_configs": [c.name for c in scfgs],
            "optimizer": ", ".join(sorted({c.optimizer for c in [*cfgs, *scfgs]})) if task == "train" else "none",
            "data": "synthetic, device-resident (input pipeline not measured)",
            "timing": "CUDA events around each window" if dev.type == "cuda" else "perf_counter around each window",
            "memory": "torch.cuda.max_memory_allocated after reset_peak_memory_stats, GB = 1e9 bytes",
            "quick": is_quick(),
            "recommended": RECOMMENDED,
            **asdict(s),
        },
        **(metadata or {}),
    )
    result = BenchResult(pd.DataFrame(), meta)
    rows: list[dict[str, Any]] = []

    def flush() -> None:
        result.frame = pd.DataFrame(rows)
        if out is not None:
            result.save(out)

    from tqdm.auto import tqdm

    bar = tqdm(plan, desc=f"bench {model}", disable=not progress, unit="run")
    try:
        for part, cfg, b in bar:
            bar.set_postfix_str(f"{cfg.name} b={b}")
            try:
                row = measure(model, cfg, b, settings=s, device=dev, task=task)
            except OOM_ERRORS:
                row = _row_settings(model, cfg, b, s, task, dev)
                row["status"] = "OOM"
            except Exception as e:  # reported in the table (status 'error'); the other runs go on
                row = _row_settings(model, cfg, b, s, task, dev)
                first = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
                row.update(status="error", error=f"{type(e).__name__}: {first}")
                print(f"bench: {cfg.name} at batch {b} failed: {row['error']}", file=sys.stderr)
            if row["status"] != "ok":
                free_memory(dev)  # the exception and its frames are gone here: memory can be returned
            row["part"] = part
            rows.append(row)
            flush()
    except KeyboardInterrupt:
        result.interrupted = True
        flush()
        free_memory(dev)
        where = f"; {len(rows)} rows saved to {out}" if out is not None else ""
        print(f"interrupted (Ctrl-C) after {len(rows)} of {len(plan)} runs{where}", file=sys.stderr)
    finally:
        bar.close()
    if out is not None:
        result.path = out
    return result


# ---------------------------------------------------------------- tables, FLOPs, plots


def comparison_table(frame: pd.DataFrame, part: str = "comparison") -> pd.DataFrame:
    """One row per (configuration, batch): images/s, spread, GB, and speed-ups.

    ``x_article`` is images/s relative to the article's loop and ``x_fp32_default`` relative
    to PyTorch's default FP32, both at the same batch size (NaN where that row is missing
    or OOM); ``GB`` is peak allocated memory; OOM rows show 'OOM' in ``img/s``.
    """
    if frame.empty:
        return pd.DataFrame(columns=["config", "batch", "img/s", "spread", "GB", "x_article", "x_fp32_default"])
    if part not in ("comparison", "sweep"):
        raise ValueError(f"unknown part {part!r}; allowed: 'comparison', 'sweep'")
    if "part" not in frame:
        f = frame
    elif part == "comparison":
        f = frame[frame["part"] == "comparison"]
    else:  # the sweep's configurations at every batch size measured, comparison rows included
        names = set(frame.loc[frame["part"] == "sweep", "config"])
        f = frame[frame["config"].isin(names)].sort_values(["config", "batch_size"], kind="stable")
    ok = frame[frame["status"] == "ok"]
    ref = {k: ok[ok["config"] == k].set_index("batch_size")["img_per_s"] for k in ("article", "fp32_default")}

    def ratio(r: pd.Series, k: str) -> float:
        base = ref[k].get(r["batch_size"], math.nan) if r["status"] == "ok" else math.nan
        return r["img_per_s"] / base if base == base and base else math.nan

    rows = []
    for _, r in f.iterrows():
        isok = r["status"] == "ok"
        rows.append(
            {
                "config": r["config"],
                "label": r["label"],
                "batch": int(r["batch_size"]),
                "img/s": round(float(r["img_per_s"]), 1) if isok else r["status"],
                "spread": round(float(r["spread"]), 3) if isok else math.nan,
                "GB": round(float(r["peak_mem_gb"]), 2) if isok and r["peak_mem_gb"] == r["peak_mem_gb"] else math.nan,
                "x_article": round(ratio(r, "article"), 2),
                "x_fp32_default": round(ratio(r, "fp32_default"), 2),
            }
        )
    return pd.DataFrame(rows)


def side_by_side(
    results: dict[str, BenchResult], *, fp32: str = "fp32_default", half: str = "article", batch: int | None = None
) -> pd.DataFrame:
    """The article's claim next to each run: FP32 and half-precision images/s and GB, ratios.

    Defaults: the article's "FP32" row is compared with ``fp32='fp32_default'`` (what a plain
    FP32 script runs: TF32 convolutions), its "FP16" row with ``half='article'`` (its own
    loop); ``batch=None`` uses each run's first comparison batch size. A configuration the run
    lacks (or that hit OOM) gives NaN. ``recipe`` is the recommended recipe's images/s.
    """
    for name in (fp32, half):
        if name not in CONFIGS:
            raise ValueError(f"unknown configuration {name!r}; allowed: {', '.join(CONFIGS)}")
    a32, a16 = ARTICLE_CLAIM["rows"]
    rows = [{
        "source": "the article (claimed)", "gpu": ARTICLE_CLAIM["gpu"], "date": "", "batch": math.nan,
        "fp32 img/s": a32["img_per_s"], "half img/s": a16["img_per_s"], "speed-up": a16["img_per_s"] / a32["img_per_s"],
        "fp32 GB": a32["memory_gb"], "half GB": a16["memory_gb"], "memory ratio": a16["memory_gb"] / a32["memory_gb"],
        "recipe img/s": math.nan, "recipe / fp32": math.nan,
    }]
    for source, res in results.items():
        f = res.frame
        f = f[(f.get("part", "comparison") == "comparison") & (f["status"] == "ok")] if not f.empty else f
        b = batch if batch is not None else (int(res.frame["batch_size"].iloc[0]) if not res.frame.empty else None)

        def get(cfg: str, col: str, f: pd.DataFrame = f, b: int | None = b) -> float:
            hit = f[(f["config"] == cfg) & (f["batch_size"] == b)] if not f.empty else f
            return float(hit[col].iloc[0]) if len(hit) else math.nan

        i32, i16, ir = get(fp32, "img_per_s"), get(half, "img_per_s"), get(RECOMMENDED, "img_per_s")
        g32, g16 = get(fp32, "peak_mem_gb"), get(half, "peak_mem_gb")
        rows.append({
            "source": source, "gpu": res.metadata.get("device", "?"), "date": res.metadata.get("date", ""),
            "batch": b, "fp32 img/s": i32, "half img/s": i16, "speed-up": i16 / i32, "fp32 GB": g32,
            "half GB": g16, "memory ratio": g16 / g32, "recipe img/s": ir, "recipe / fp32": ir / i32,
        })
    return pd.DataFrame(rows)


def model_flops(model: str = "resnet50", image_size: int = 224) -> dict[str, float]:
    """FLOPs per image counted by ``torch.utils.flop_counter`` (1 multiply-add = 2 FLOPs).

    Returns ``forward`` and ``train`` (forward + backward) FLOPs for one image of
    ``image_size`` (default 224). Note: torchvision's "GFLOPS" (4.09 for ResNet50) counts
    multiply-adds, half of these numbers. Counted on the meta device (no memory, no math):
    fast, and the same count as on a GPU. Two images are counted (batch norm needs more than
    one value per channel in training mode) and the total halved.
    """
    import torchvision
    from torch.utils.flop_counter import FlopCounterMode

    validate_model(model)
    if isinstance(image_size, bool) or not isinstance(image_size, int) or image_size < 1:
        raise ValueError(f"image_size must be a positive int, got {image_size!r}")
    with torch.device("meta"):
        net = torchvision.models.get_model(model, weights=None)
        x = torch.randn(2, 3, image_size, image_size)
    with FlopCounterMode(display=False) as fwd:
        net(x)
    with FlopCounterMode(display=False) as both:
        net(x).sum().backward()
    return {"forward": fwd.get_total_flops() / 2.0, "train": both.get_total_flops() / 2.0}


_PEAK_FIELD = {"fp32": "fp32", "tf32": "tf32", "fp16": "fp16", "bf16": "bf16"}


def add_flop_utilisation(frame: pd.DataFrame, gpu_name: str, flops_per_image: float) -> pd.DataFrame:
    """Add ``tflops`` (achieved) and ``mfu`` (fraction of the chip's dense peak) columns.

    The peak for each row is the one its math runs at: fp16/bf16 AMP → the FP16/BF16 peak;
    fp32 with TF32 convolutions (fp32_default, tf32) → the TF32 peak; true FP32 → FP32.
    ``flops_per_image`` is per image per step (``model_flops(...)['train']`` for training).
    """
    from fp16lab.hardware import peak_for

    peak = peak_for(gpu_name)
    if peak is None:
        raise ValueError(f"{gpu_name!r} is not in fp16lab.hardware.PEAK_TFLOPS; add its datasheet peaks first")
    out = frame.copy()

    def peak_of(r: pd.Series) -> float:
        p = r["precision"]
        if p == "fp32" and r["tf32_cudnn"]:
            p = "tf32"
        v = getattr(peak, _PEAK_FIELD[p])
        return math.nan if v is None else float(v)

    out["peak_tflops"] = out.apply(peak_of, axis=1)
    out["tflops"] = out["img_per_s"] * flops_per_image / 1e12
    out["mfu"] = out["tflops"] / out["peak_tflops"]
    return out


def plot_results(frame: pd.DataFrame, path: "str | os.PathLike[str] | None" = None, *, title: str = "") -> Any:
    """Bar charts of images/s and peak GB per configuration (comparison part); saves PNG if ``path``.

    The article's claimed FP32/FP16 figures are drawn as dashed lines for orientation.
    Returns the matplotlib Figure.
    """
    import matplotlib.pyplot as plt

    t = comparison_table(frame)
    t = t[t["img/s"].apply(lambda v: isinstance(v, (int, float)))]
    fig, axes = plt.subplots(1, 2, figsize=(12, 0.45 * max(len(t), 4) + 1.5), sharey=True)
    labels = [f"{r.label} (b={r.batch})" for r in t.itertuples()]
    colours = ["#1a7f37" if c.startswith(RECOMMENDED) else ("#cf222e" if c == "article" else "#5a6f8c") for c in t["config"]]
    bars = axes[0].barh(labels, t["img/s"].astype(float), color=colours)
    axes[0].bar_label(bars, fmt="%.0f", padding=2, fontsize=8)
    axes[0].set_xlabel("training images/s (higher is better)")
    bars = axes[1].barh(labels, t["GB"].astype(float), color=colours)
    if t["GB"].notna().any():
        axes[1].bar_label(bars, fmt="%.1f", padding=2, fontsize=8)
    axes[1].set_xlabel("peak memory, GB (lower is better)")
    for row, style in zip(ARTICLE_CLAIM["rows"], (":", "--"), strict=True):
        axes[0].axvline(row["img_per_s"], color="k", ls=style, lw=1, label=f"article {row['precision']} (claimed, 4090D)")
        axes[1].axvline(row["memory_gb"], color="k", ls=style, lw=1, label=f"article {row['precision']} (claimed, 4090D)")
    handles, names = axes[0].get_legend_handles_labels()
    fig.legend(handles, names, loc="lower center", ncol=2, fontsize=8, frameon=False)
    for ax in axes:
        ax.set_xlim(0, ax.get_xlim()[1] * 1.1)  # room for the value labels
    axes[0].invert_yaxis()
    if title:
        fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.06, 1, 1))
    if path is not None:
        fig.savefig(path, dpi=110)
    return fig


def readme_section(results: "str | os.PathLike[str]", png: "str | os.PathLike[str] | None" = None) -> str:
    """Markdown for the README: the committed run's table and plot beside the article's claim.

    Reads ``results`` (a file written by ``python -m fp16lab bench``), writes the plot to
    ``png`` (default: the results path with ``.png``) and returns the markdown to paste.
    """
    res = BenchResult.load(results)
    m = res.metadata
    png_path = Path(png) if png is not None else Path(results).with_suffix(".png")
    fig = plot_results(res.frame, png_path, title=f"{m.get('benchmark', {}).get('model', '')} training, {m.get('device')}, {m.get('date')}")
    import matplotlib.pyplot as plt

    plt.close(fig)
    t = res.table()
    lines = [
        f"**{m.get('benchmark', {}).get('model', 'model')} training on {m.get('device')}** "
        f"({m.get('date')}, torch {m.get('torch')}, CUDA {m.get('cuda')}, cuDNN {m.get('cudnn')}; "
        f"synthetic data, Adam; {m.get('benchmark', {}).get('windows')} timed windows of "
        f"{m.get('benchmark', {}).get('steps')} steps, median). Source: `{Path(results).as_posix()}`.",
        "",
        "| configuration | batch | images/s | peak GB | × article's loop | × default FP32 |",
        "|---|---|---|---|---|---|",
    ]
    def num(v: Any, fmt: str) -> str:
        return v if isinstance(v, str) else ("" if v != v else format(v, fmt))

    for _, r in t.iterrows():
        lines.append(
            f"| {'**' + r['label'] + '**' if r['config'] == RECOMMENDED else r['label']} | {r['batch']} | {num(r['img/s'], '.0f')} | {num(r['GB'], '.1f')} "
            f"| {num(r['x_article'], '.2f')} | {num(r['x_fp32_default'], '.2f')} |"
        )
    lines += [
        "",
        f"The article's claim ({ARTICLE_CLAIM['gpu']}, batch not stated): "
        + ", ".join(f"{r['precision']} {r['img_per_s']:.0f} images/s, {r['memory_gb']} GB" for r in ARTICLE_CLAIM["rows"])
        + ".",
        "",
        f"![{m.get('benchmark', {}).get('model', 'model')} benchmark on {m.get('device')}]({png_path.as_posix()})",
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------- command line


def _bench_cli(args: argparse.Namespace) -> int:
    from fp16lab.device import choose_device

    if args.readme_from:
        try:
            print(readme_section(args.readme_from, args.png))
        except (FileNotFoundError, ValueError) as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        return 0
    quick = is_quick()
    model = args.model or pick(quick="resnet18", full="resnet50")
    batch_sizes = args.batch_sizes or pick(quick=[8], full=[256])
    sweep = args.sweep if args.sweep is not None else pick(quick=[], full=[64, 128, 512])
    base = default_settings()

    def given(v: Any, default: Any) -> Any:
        return default if v is None else v

    try:
        dev = choose_device(args.device)
        settings = BenchSettings(
            image_size=given(args.image_size, base.image_size),
            warmup=given(args.warmup, base.warmup),
            steps=given(args.steps, base.steps),
            windows=given(args.repeats, base.windows),
            cudnn_benchmark=not args.no_cudnn_benchmark,
            cpu_threads=given(args.cpu_threads, base.cpu_threads),
        )
        validate_model(model)
        output = args.output or output_path(f"bench_{model}")
        launched = bool(sys.argv) and Path(sys.argv[0]).name in ("__main__.py", "fp16lab", "bench.py")
        cmd = "python -m fp16lab " + " ".join(sys.argv[1:]) if launched else None
        return _bench_run(args, dev, quick, model, batch_sizes, sweep, settings, output, cmd)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


def _bench_run(
    args: argparse.Namespace,
    dev: torch.device,
    quick: bool,
    model: str,
    batch_sizes: list[int],
    sweep: list[int],
    settings: BenchSettings,
    output: "str | os.PathLike[str]",
    cmd: str | None,
) -> int:
    from fp16lab.config import mode

    print(mode())
    if dev.type != "cuda":
        print(
            f"NOTE: running on {dev.type.upper()}: these timings are {dev.type.upper()} numbers, not FP16 "
            "speed-ups (by default fp16 and the CUDA-only article loop are left out; the committed "
            "GPU reference shows those)."
        )
    res = run_benchmark(
        model,
        args.configs,
        batch_sizes,
        sweep_batch_sizes=sweep,
        sweep_configs=args.sweep_configs or (["fp32_default", RECOMMENDED] if dev.type == "cuda" else ["fp32_default"]),
        settings=settings,
        device=dev,
        task=args.task,
        precisions=args.precisions,
        output=output,
        progress=not args.no_progress,
        metadata={"command": cmd} if cmd else None,
    )
    with pd.option_context("display.width", 160, "display.max_columns", 20):
        print(f"\n{model} {args.task}, {res.metadata['device']} ({'QUICK CPU MODE' if quick and dev.type != 'cuda' else res.metadata['mode'] + ' mode'}), "
              f"{settings.windows} windows x {settings.steps} steps, median")
        print(res.table().drop(columns=["label"]).to_string(index=False))
        if (res.frame.get("part") == "sweep").any():
            print("\nbatch-size sweep")
            print(res.table("sweep").drop(columns=["label"]).to_string(index=False))
        print("\nthe article (RTX 4090D, claimed): " + ", ".join(
            f"{r['precision']} {r['img_per_s']:.0f} img/s {r['memory_gb']} GB" for r in ARTICLE_CLAIM["rows"]))
    print(f"results: {res.path}")
    return 130 if res.interrupted else 0


def add_bench_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Register ``python -m fp16lab bench`` on a subparsers object."""
    p = sub.add_parser(
        "bench",
        help="benchmark ResNet training at FP32/TF32/FP16/BF16, channels_last, torch.compile",
        description=(
            "Training throughput (images/s) and peak memory of a torchvision model per configuration, "
            "on synthetic device-resident data, CUDA-event timing, median of windows. Full mode (GPU): "
            "resnet50, batch 256, all configurations plus a batch-size sweep (a few minutes). Quick mode "
            "(CPU or FP16LAB_QUICK=1): resnet18 at 32 px, batch 8, a few steps (under a minute). "
            f"Configurations: {', '.join(CONFIGS)}."
        ),
    )
    p.add_argument("--model", default=None, help="torchvision model (default resnet50; quick: resnet18)")
    p.add_argument("--batch-sizes", type=int, nargs="+", default=None, help="comparison batch sizes (default 256; quick: 8)")
    p.add_argument("--configs", nargs="+", default=None, help=f"configurations (default: all on CUDA); any of {', '.join(CONFIGS)}")
    p.add_argument("--precisions", nargs="+", default=None,
                   help="keep only configurations of these precisions (fp32, tf32, fp16, bf16)")
    p.add_argument("--sweep", type=int, nargs="*", default=None,
                   help="batch sizes for the sweep of fp32_default and fp16_cl (default 64 128 512; quick: none; empty: none)")
    p.add_argument("--sweep-configs", nargs="+", default=None,
                   help=f"configurations of the sweep (default fp32_default {RECOMMENDED}; on a CPU fp32_default)")
    p.add_argument("--output", default=None, help="results JSON (default results/local/bench_<model>.json; a CSV is written beside it)")
    p.add_argument("--repeats", type=int, default=None, help="timed windows per configuration (default 5; quick: 3)")
    p.add_argument("--steps", type=int, default=None, help="steps per timed window (default 10; quick: 1)")
    p.add_argument("--warmup", type=int, default=None, help="untimed warm-up steps (default 10; quick: 1)")
    p.add_argument("--image-size", type=int, default=None, help="square image side (default 224; quick: 32)")
    p.add_argument("--cpu-threads", type=int, default=None, help="torch threads for CPU runs (default: quick 1, full unchanged)")
    p.add_argument("--task", choices=["train", "infer"], default="train", help="train (default) or infer")
    p.add_argument("--device", default=None, help="device (default: cuda > mps > cpu)")
    p.add_argument("--no-cudnn-benchmark", action="store_true", help="leave cudnn.benchmark off (default on)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--readme-from", default=None, help="print the README table for this results file and write its PNG; no benchmark")
    p.add_argument("--png", default=None, help="with --readme-from: plot path (default: results path with .png)")
    p.set_defaults(func=_bench_cli)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``bench`` alone (same options as ``python -m fp16lab bench``)."""
    parser = argparse.ArgumentParser(prog="python -m fp16lab.bench")
    sub = parser.add_subparsers(dest="command", required=True)
    add_bench_parser(sub)
    args = parser.parse_args(["bench", *(sys.argv[1:] if argv is None else argv)])
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
