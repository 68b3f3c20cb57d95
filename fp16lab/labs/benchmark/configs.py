"""What a benchmark runs: the configurations, the model, the sizes, and what a device can run.

A :class:`BenchConfig` is one way of running the training step (precision, memory format,
optimizer, torch.compile mode, CUDA-graph capture, TF32 settings, which loop). :data:`CONFIGS`
holds the series' configurations by name; :data:`RECOMMENDED` is the recipe the series
recommends and :data:`COMPILED` the same recipe compiled. Nothing here measures anything.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from fp16lab.checks import (
    boolean,
    distinct,
    instance,
    non_negative_int,
    one_of,
    positive_int,
    sequence_of,
    text,
)
from fp16lab.device import parse_device, resolve_device
from fp16lab.labs.benchmark.flags import flag
from fp16lab.labs.runtime.quick import pick
from fp16lab.precision import Precision, parse_precision

__all__ = [
    "BenchConfig",
    "CONFIGS",
    "RECOMMENDED",
    "COMPILED",
    "TRAIN_STEP",
    "COMPARISON",
    "REPEATED",
    "EXPLORE",
    "COMPILE_MODES",
    "ARTICLE_CLAIM",
    "LOOPS",
    "TASKS",
    "BenchSettings",
    "default_settings",
    "default_configs",
    "ModelSpec",
    "ModelArg",
    "ConfigArg",
    "allowed_models",
    "parse_model",
    "parse_configs",
    "unsupported_reason",
    "validate_batch_sizes",
    "validate_output",
]

LOOPS = ("article", "hand", "train_step")
TASKS = ("train", "infer")
ADAM_LR = 0.001


@dataclass(frozen=True)
class BenchConfig:
    """One way of running the training step; build your own to benchmark a variant.

    ``precision`` fp32/tf32/fp16/bf16 (a name or :class:`~fp16lab.precision.Precision`);
    ``channels_last`` model and inputs in NHWC (default NCHW); ``compile_mode`` None (eager,
    the default) or a ``torch.compile`` mode such as ``"default"``, ``"reduce-overhead"`` or
    ``"max-autotune-no-cudagraphs"`` (a mode torch does not know becomes an ``error`` row, not an
    exception); ``cuda_graph`` captures the whole step (forward, backward, optimizer, scaler) in
    one CUDA graph and replays it (CUDA only; the optimizer is made ``capturable``);
    ``tf32_matmul``/``tf32_cudnn`` the TF32 settings for the run (PyTorch's defaults: False/True);
    ``loop`` ``"hand"`` (the current-API step written out, the default), ``"article"`` (the
    article's loop verbatim, deprecated API, CUDA only) or ``"train_step"``
    (:func:`fp16lab.train.train_step`); ``fused_adam`` ``Adam(fused=True)`` instead of PyTorch's
    default (foreach) Adam.
    """

    name: str
    label: str
    precision: Precision
    channels_last: bool = False
    compile_mode: str | None = None
    cuda_graph: bool = False
    tf32_matmul: bool = False
    tf32_cudnn: bool = True
    loop: str = "hand"
    fused_adam: bool = False
    description: str = ""

    def __post_init__(self) -> None:
        for key in ("name", "label"):
            value = getattr(self, key)
            if not isinstance(value, str) or not value.strip():
                raise ValueError(f"{key} must be a non-empty string, got {value!r}")
        object.__setattr__(self, "precision", parse_precision(self.precision))
        for key in ("channels_last", "cuda_graph", "tf32_matmul", "tf32_cudnn", "fused_adam"):
            boolean(key, getattr(self, key))
        if self.compile_mode is not None and (not isinstance(self.compile_mode, str) or not self.compile_mode):
            raise ValueError(
                f"compile_mode must be None (eager) or a torch.compile mode name such as 'default', "
                f"got {self.compile_mode!r}"
            )
        one_of("loop", self.loop, LOOPS)
        text("description", self.description)
        if self.loop == "article" and (self.precision is not Precision.FP16 or self.cuda_graph):
            raise ValueError("loop 'article' is the article's FP16 loop as written: precision must be 'fp16', no cuda_graph")

    @property
    def memory_format(self) -> str:
        return "channels_last" if self.channels_last else "NCHW"

    @property
    def compile(self) -> bool:
        """True when the model runs under ``torch.compile``."""
        return self.compile_mode is not None

    @property
    def cuda_only(self) -> bool:
        """The article's loop calls ``.cuda()``; CUDA graphs exist only on CUDA."""
        return self.loop == "article" or self.cuda_graph

    @property
    def optimizer(self) -> str:
        """The optimizer as recorded with each row; :meth:`make_optimizer` builds exactly this."""
        extra = (", fused=True" if self.fused_adam else "") + (", capturable=True" if self.cuda_graph else "")
        return f"Adam(lr={ADAM_LR:g}{extra})"

    def make_optimizer(self, params: Iterable[Any]) -> torch.optim.Optimizer:
        """The Adam this configuration runs (a CUDA graph needs ``capturable=True``)."""
        if self.fused_adam:
            return torch.optim.Adam(params, lr=ADAM_LR, fused=True, capturable=self.cuda_graph)
        return torch.optim.Adam(params, lr=ADAM_LR, capturable=self.cuda_graph)


_P = Precision
_RECIPE = "FP16 AMP + channels_last + Adam(fused=True)"
_ALL = [
    BenchConfig(
        "article", "article's loop (FP16 AMP, torch.cuda.amp, NCHW)", _P.FP16, loop="article",
        description="the article's code as written: torch.cuda.amp.autocast() + GradScaler(), zero_grad "
        "after step, default NCHW layout, PyTorch's default Adam and TF32 settings",
    ),
    BenchConfig("fp32_true", "FP32, true (TF32 off)", _P.FP32, tf32_cudnn=False,
                description="every matmul and convolution in real FP32: the honest FP32 baseline"),
    BenchConfig("fp32_default", "FP32, PyTorch default (TF32 convs)", _P.FP32,
                description="what a plain FP32 script gets: cuDNN convolutions already run in TF32"),
    BenchConfig("tf32", "TF32 (matmul + convs)", _P.TF32, tf32_matmul=True,
                description="FP32 storage, TF32 Tensor Core math for matmuls and convolutions"),
    BenchConfig("fp16", "FP16 AMP (torch.amp), NCHW", _P.FP16,
                description="torch.autocast(float16) + torch.amp.GradScaler, default NCHW layout"),
    BenchConfig("bf16", "BF16 AMP, NCHW", _P.BF16,
                description="torch.autocast(bfloat16), no scaler needed, default NCHW layout"),
    BenchConfig("fp16_cl", "FP16 AMP + channels_last", _P.FP16, channels_last=True,
                description="FP16 AMP with the model and inputs in channels_last, PyTorch's default Adam"),
    BenchConfig("bf16_cl", "BF16 AMP + channels_last", _P.BF16, channels_last=True,
                description="BF16 AMP with channels_last, PyTorch's default Adam"),
    BenchConfig(
        "fp16_cl_fused", f"{_RECIPE} (recommended)", _P.FP16, channels_last=True, fused_adam=True,
        description="the recommended recipe: FP16 autocast + GradScaler, channels_last, and the fused Adam "
        "(one kernel updates every parameter; the GradScaler's inf check runs as a separate kernel on the GPU, "
        "the fused kernel unscales and skips the update on an inf: no host sync per step)",
    ),
    BenchConfig("fp16_cl_fused_compile", f"{_RECIPE} + torch.compile (compiled recipe)", _P.FP16,
                channels_last=True, fused_adam=True, compile_mode="default",
                description="the recommended recipe with torch.compile(model): fused elementwise kernels"),
    BenchConfig("fp16_cl_fused_train_step", f"{_RECIPE}, fp16lab.train.train_step", _P.FP16,
                channels_last=True, fused_adam=True, loop="train_step",
                description="the recipe run by fp16lab's own train_step (it reads loss, scale and gradient "
                "norm back once per step) instead of the hand-written step"),
    # exploration: what else the compiled recipe can find (single runs, after the comparison)
    BenchConfig("fp16_cl_fused_compile_max_autotune", f"{_RECIPE} + compile(max-autotune-no-cudagraphs)",
                _P.FP16, channels_last=True, fused_adam=True, compile_mode="max-autotune-no-cudagraphs",
                description="torch.compile benchmarking Triton and library kernels per layer at compile time"),
    BenchConfig("fp16_cl_fused_compile_reduce_overhead", f"{_RECIPE} + compile(reduce-overhead)", _P.FP16,
                channels_last=True, fused_adam=True, compile_mode="reduce-overhead",
                description="torch.compile with CUDA graphs (CUDA Graph Trees) for forward and backward; "
                "the optimizer step stays outside"),
    BenchConfig("fp16_cl_fused_graph", f"{_RECIPE}, whole step in one CUDA graph", _P.FP16,
                channels_last=True, fused_adam=True, cuda_graph=True,
                description="forward, backward, GradScaler and Adam(fused=True, capturable=True) captured "
                "once with torch.cuda.graph and replayed: no launch cost at all"),
    BenchConfig("fp16_cl_fused_compile_graph", f"{_RECIPE} + compile, whole step in one CUDA graph", _P.FP16,
                channels_last=True, fused_adam=True, compile_mode="default", cuda_graph=True,
                description="the compiled recipe, with the whole step captured in one CUDA graph"),
    BenchConfig("fp16_cl_graph", "FP16 AMP + channels_last, default Adam, step in one CUDA graph", _P.FP16,
                channels_last=True, cuda_graph=True,
                description="capture with PyTorch's default (foreach) Adam: the GradScaler reads its inf "
                "check back to the host (.item()), which a CUDA graph capture forbids: expected to fail"),
]
CONFIGS: dict[str, BenchConfig] = {c.name: c for c in _ALL}

RECOMMENDED = "fp16_cl_fused"
"""The recommended recipe: FP16 autocast + GradScaler + channels_last + ``Adam(fused=True)``.
BF16 (``bf16_cl``) needs no scaler and has the same Tensor Core peak on Ampere and newer, but
measured on the H200 it is slower than FP16 at the same layout (lesson 06 profiles both)."""

COMPILED = "fp16_cl_fused_compile"
"""The compiled recipe: :data:`RECOMMENDED` + ``torch.compile`` (default mode)."""

TRAIN_STEP = "fp16_cl_fused_train_step"
"""The recipe run by :func:`fp16lab.train.train_step` (compared with the hand-written step)."""

COMPARISON = ("article", "fp32_true", "fp32_default", "tf32", "fp16", "bf16", "fp16_cl", "bf16_cl",
              RECOMMENDED, COMPILED, TRAIN_STEP)
"""The comparison table's configurations, in order."""

REPEATED = ("article", "fp32_default", RECOMMENDED, COMPILED, TRAIN_STEP)
"""Measured in interleaved rounds (every target's ratio comes from these)."""

EXPLORE = ("fp16_cl_fused_graph", "fp16_cl_fused_compile_graph", "fp16_cl_fused_compile_reduce_overhead",
           "fp16_cl_graph", "fp16_cl_fused_compile_max_autotune")
"""The compiled-recipe exploration in the order it runs: the quick ones first (the capture expected
to fail among them: a failed capture is recoverable), the long max-autotune compile last, in
whatever time the budget leaves (time-boxed)."""

COMPILE_MODES: dict[str, str] = {
    "reduce-overhead": "fp16_cl_fused_compile_reduce_overhead",
    "max-autotune-no-cudagraphs": "fp16_cl_fused_compile_max_autotune",
}
"""``torch.compile`` modes the compiled recipe can be tried with beside its default mode (mode ->
configuration): ``run_benchmark(compile_modes=...)`` / ``python -m fp16lab bench --compile-modes``
times each in the interleaved rounds, its compile in a time box. Off by default (a max-autotune
compile takes minutes)."""

ARTICLE_CLAIM: dict[str, Any] = {
    "gpu": "RTX 4090D",
    "model": "resnet50",
    "rows": [
        {"precision": "FP32", "img_per_s": 1200.0, "memory_gb": 8.5},
        {"precision": "FP16", "img_per_s": 2200.0, "memory_gb": 4.2},
    ],
    "source": "the article's table (性能测试), batch size and settings not stated",
}
"""The article's ResNet50 table as it states it (cited, not measured by this project)."""


# ---------------------------------------------------------------- sizes


@dataclass(frozen=True)
class BenchSettings:
    """Sizes of one measurement: ``warmup`` untimed steps, then ``windows`` timed windows of ``steps``.

    Defaults: 224-px images, 5 warm-up steps, 3 windows of 10 steps, 1000 classes,
    ``cudnn_benchmark=True``, seed 0, ``cpu_threads=None`` (leave torch's thread count alone).
    In interleaved rounds every round times ``windows`` windows of every configuration.
    """

    image_size: int = field(default=224, metadata=flag(
        "--image-size", 170, "square image side (default 224; quick: 32)", type=int))
    warmup: int = field(default=5, metadata=flag("--warmup", 160, "untimed warm-up steps (default 5; quick: 1)", type=int))
    steps: int = field(default=10, metadata=flag("--steps", 150, "steps per timed window (default 10; quick: 1)", type=int))
    windows: int = field(default=3, metadata=flag(
        "--windows", 140, "timed windows per measurement and round (default 3; quick: 2)", type=int))
    num_classes: int = 1000
    cudnn_benchmark: bool = field(default=True, metadata=flag(
        "--no-cudnn-benchmark", 250, "leave cudnn.benchmark off (default on)", negates=True, action="store_true"))
    seed: int = 0
    cpu_threads: int | None = field(default=None, metadata=flag(
        "--cpu-threads", 180, "torch threads for CPU runs (default: quick 1, full unchanged)", type=int))

    def __post_init__(self) -> None:
        for key in ("image_size", "steps", "windows", "num_classes"):
            positive_int(key, getattr(self, key))
        positive_int("warmup", self.warmup)  # >= 1: compile and autotuning happen there
        boolean("cudnn_benchmark", self.cudnn_benchmark)
        non_negative_int("seed", self.seed)
        if self.cpu_threads is not None:
            positive_int("cpu_threads", self.cpu_threads)


def default_settings() -> BenchSettings:
    """Quick mode: 32-px images, 1 warm-up step, 2 windows of 1 step, one CPU thread; full: 224 px,
    5 warm-up steps, 3 windows of 10 steps (profile smoke: 3 warm-up steps, 2 windows of 5).

    One CPU thread in quick mode: on a small shared CI machine several multi-threaded processes
    make OpenMP threads wait on each other (a step ran 5x slower with 2 threads than with 1).
    """
    return BenchSettings(
        cpu_threads=pick(quick=1, full=None),
        image_size=pick(quick=32, full=224),
        warmup=pick(quick=1, full=5, smoke=3),
        steps=pick(quick=1, full=10, smoke=5),
        windows=pick(quick=2, full=3, smoke=2),
    )


def default_configs(device: torch.device) -> list[str]:
    """Configurations run by default: the whole comparison on CUDA in full mode; short lists else.

    Quick mode on the CPU: fp32_true, fp32_default, bf16_cl (FP16 matmuls are 30-80x slower
    than FP32 on CPUs without native half math). Quick mode on CUDA: article, fp32_default and
    the recommended recipe. A device this machine lacks is refused (its list would not run here).
    """
    device = resolve_device(parse_device(device))  # "gpu" or a GPU not here: a clear ValueError
    if device.type == "cuda":
        return pick(quick=["article", "fp32_default", RECOMMENDED], full=list(COMPARISON))
    return ["fp32_true", "fp32_default", "bf16_cl"]


# ---------------------------------------------------------------- the model


@dataclass(frozen=True)
class ModelSpec:
    """What to benchmark: a torchvision model name, or a function that builds a fresh ``nn.Module``."""

    name: str
    factory: Callable[[], nn.Module] | None = None

    def build(self, num_classes: int) -> nn.Module:
        """A fresh model (torchvision: ``weights=None``, nothing is downloaded)."""
        if self.factory is None:
            import torchvision

            return torchvision.models.get_model(self.name, weights=None, num_classes=num_classes)
        net = self.factory()
        if not isinstance(net, nn.Module):
            raise ValueError(
                f"the model factory {self.name!r} must return an nn.Module, it returned {type(net).__name__}"
            )
        return net


ModelArg = str | Callable[[], nn.Module] | ModelSpec
ConfigArg = str | BenchConfig


def allowed_models() -> list[str]:
    """torchvision classification model names accepted by name."""
    import torchvision

    return sorted(torchvision.models.list_models(module=torchvision.models))


def parse_model(model: object) -> ModelSpec:
    """A :class:`ModelSpec` for a torchvision name or a model factory (``lambda: MyNet()``).

    A factory's model takes ``(batch, 3, image_size, image_size)`` images and returns
    ``(batch, num_classes)`` logits. An ``nn.Module`` instance is refused: the benchmark trains
    and moves what it is given, so it needs a way to build a fresh one per configuration.
    """
    if isinstance(model, ModelSpec):
        return model
    if isinstance(model, str):
        allowed = allowed_models()
        if model not in allowed:
            raise ValueError(
                f"model must be a torchvision classification model or a function returning an nn.Module; "
                f"unknown model {model!r}; allowed names: {', '.join(allowed)}"
            )
        return ModelSpec(model)
    if isinstance(model, nn.Module):
        raise ValueError(
            f"model must be a name or a function that builds a fresh model, got an nn.Module instance "
            f"({type(model).__name__}); pass e.g. lambda: {type(model).__name__}() or lambda: copy.deepcopy(net)"
        )
    if callable(model):
        try:
            inspect.signature(model).bind()
        except TypeError:
            raise ValueError(f"model: a model factory must be callable with no arguments (lambda: MyNet()), "
                             f"got {model!r:.80} with signature {inspect.signature(model)}") from None
        except ValueError:  # no signature to check (some builtins)
            pass
        name = getattr(model, "__name__", type(model).__name__)
        return ModelSpec("custom" if name == "<lambda>" else str(name), model)
    raise ValueError(f"model must be a torchvision model name or a function returning an nn.Module, got {model!r}")


# ---------------------------------------------------------------- configurations


def parse_configs(configs: Iterable[object], *, name: str = "configs") -> list[BenchConfig]:
    """Each entry as a :class:`BenchConfig` (a name from :data:`CONFIGS`, or a config object); no repeats.

    ``name`` is the argument's name in the messages (``run_benchmark`` checks several lists).
    An empty list is an empty answer: which lists may be empty is the caller's rule.
    """
    out = sequence_of(name, configs, example="['fp16_cl_fused']", item=config_entry, allow_empty=True)
    return distinct(name, out, key=lambda c: c.name)


def config_entry(label: str, entry: object) -> BenchConfig:
    """One entry of a configuration list: a :class:`BenchConfig`, or the name of one in :data:`CONFIGS`."""
    if isinstance(entry, BenchConfig):
        return entry
    instance(label, entry, str, "a configuration name (str) or a BenchConfig")
    return CONFIGS[one_of(label, entry, tuple(CONFIGS))]


def unsupported_reason(cfg: BenchConfig, device: torch.device) -> str | None:
    """Why ``device`` cannot run ``cfg`` (the row is skipped with this reason), or None.

    ``device`` must exist on this machine (a GPU that is not here has no answer: a ValueError says so).
    """
    instance("cfg", cfg, BenchConfig, "a BenchConfig (parse_configs builds them)")
    device = resolve_device(parse_device(device))
    if cfg.cuda_only and device.type != "cuda":
        what = "the article's loop calls .cuda()" if cfg.loop == "article" else "CUDA graphs exist only on CUDA"
        return f"needs a CUDA GPU ({what}); this device is {device.type}"
    if device.type != "cuda":
        return None
    from fp16lab.hardware import gpu_facts

    facts = gpu_facts(device)
    need = cfg.precision.value if cfg.precision.value in ("tf32", "bf16") else None
    if facts is not None and need is not None and not facts.supports(need):
        return f"{need} needs compute capability 8.0 or newer; this GPU ({facts.name}) is {facts.sm}"
    return None


def validate_batch_sizes(batch_sizes: Sequence[object], *, name: str = "batch_sizes",
                         allow_empty: bool = False) -> list[int]:
    """Batch sizes as a list of distinct positive ints (bools refused), non-empty unless ``allow_empty``."""
    boolean("allow_empty", allow_empty)
    sizes = sequence_of(name, batch_sizes, example="[256]", item=positive_int, allow_empty=allow_empty)
    return distinct(name, sizes)


def validate_output(path: "str | os.PathLike[str]") -> Path:
    """Check that results can be written to ``path`` (a .json in a writable folder), up front.

    The folder is created if missing; a probe file is written and removed, so an unwritable
    location fails now rather than after minutes of measuring.
    """
    p = Path(instance("output", path, (str, os.PathLike), "a path ending in .json"))
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
