"""Benchmark training (and inference) honestly: the article's ResNet50 table, rebuilt and extended.

By job: :mod:`~fp16lab.labs.benchmark.configs` (what runs: :class:`BenchConfig`, :data:`CONFIGS`,
:data:`RECOMMENDED`, sizes), :mod:`~fp16lab.labs.benchmark.steps` (how each step is built: the
article's loop verbatim, the current-API step, torch.compile, CUDA-graph capture),
:mod:`~fp16lab.labs.benchmark.options` (:class:`BenchOptions`: what a run is asked to do, spelled once),
:mod:`~fp16lab.labs.benchmark.measure` (:func:`bench_one`: one configuration, timed with
:func:`fp16lab.timing.time_windows`), :mod:`~fp16lab.labs.benchmark.run` (:func:`run_benchmark`:
interleaved rounds, sweep, exploration), :mod:`~fp16lab.labs.benchmark.analysis` (FLOPs, MFU, the
targets), :mod:`~fp16lab.labs.benchmark.profile` (where a step's GPU time goes), :mod:`~fp16lab.labs.benchmark.report` (:class:`BenchResult`, tables, plots, README markdown)
and :mod:`~fp16lab.labs.benchmark.cli` (``python -m fp16lab bench``).

The recommended recipe (:data:`RECOMMENDED`) is FP16 autocast + GradScaler + channels_last +
``Adam(fused=True)``; the compiled recipe (:data:`COMPILED`) adds ``torch.compile``.
"""

from fp16lab.labs.benchmark.analysis import FLOP_METHOD, TARGETS, Target, add_mfu, model_flops, targets_table
from fp16lab.labs.benchmark.cli import REFERENCE, add_bench_parser
from fp16lab.labs.benchmark.configs import (
    ARTICLE_CLAIM,
    COMPARISON,
    COMPILE_MODES,
    COMPILED,
    CONFIGS,
    EXPLORE,
    RECOMMENDED,
    REPEATED,
    TRAIN_STEP,
    BenchConfig,
    BenchSettings,
    allowed_models,
    default_configs,
    default_settings,
    parse_configs,
    parse_model,
    unsupported_reason,
)
from fp16lab.labs.benchmark.measure import Session, bench_one
from fp16lab.labs.benchmark.options import BenchOptions
from fp16lab.labs.benchmark.profile import IDLE
from fp16lab.labs.benchmark.report import (
    BenchResult,
    busy_fraction,
    comparison_table,
    compile_modes_table,
    kernel_ms,
    plot_results,
    profile_table,
    readme_section,
    side_by_side,
)
from fp16lab.labs.benchmark.run import run_benchmark
from fp16lab.labs.benchmark.steps import article_loop, article_scaler, capture_step

__all__ = [
    "ARTICLE_CLAIM",
    "BenchConfig",
    "BenchOptions",
    "BenchResult",
    "BenchSettings",
    "COMPARISON",
    "COMPILE_MODES",
    "COMPILED",
    "CONFIGS",
    "EXPLORE",
    "FLOP_METHOD",
    "IDLE",
    "RECOMMENDED",
    "REFERENCE",
    "REPEATED",
    "Session",
    "TARGETS",
    "TRAIN_STEP",
    "Target",
    "add_bench_parser",
    "add_mfu",
    "allowed_models",
    "article_loop",
    "article_scaler",
    "bench_one",
    "busy_fraction",
    "capture_step",
    "comparison_table",
    "compile_modes_table",
    "default_configs",
    "default_settings",
    "kernel_ms",
    "model_flops",
    "parse_configs",
    "parse_model",
    "plot_results",
    "profile_table",
    "readme_section",
    "run_benchmark",
    "side_by_side",
    "targets_table",
    "unsupported_reason",
]
