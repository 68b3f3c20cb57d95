"""What a benchmark run is asked to do, spelled once: the CLI builds it, the plan checks it, the report reads it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

import torch

from fp16lab.labs.benchmark.configs import (
    COMPILE_MODES,
    RECOMMENDED,
    REPEATED,
    BenchSettings,
    ConfigArg,
    ModelArg,
)
from fp16lab.labs.benchmark.flags import flag

__all__ = ["BenchOptions", "OPTION_NAMES", "COMPILE_MODE_TIMEOUT_S"]

COMPILE_MODE_TIMEOUT_S = 300.0
"""The default time box (seconds) for building and compiling each mode of ``--compile-modes``."""


@dataclass(frozen=True)
class BenchOptions:
    """The options of :func:`~fp16lab.labs.benchmark.run.run_benchmark` (its docstring says what each does).

    Given as they come (names, lists, a device string); :func:`~fp16lab.labs.benchmark.run.make_plan`
    checks every one before any work; :meth:`Plan.recorded <fp16lab.labs.benchmark.run.Plan.recorded>` is
    what a run stores in its metadata (``metadata["benchmark"]``) under the same names, and
    :meth:`from_metadata` reads them back for the report. A field's ``flag`` metadata
    (:mod:`fp16lab.labs.benchmark.flags`) is how ``python -m fp16lab bench`` spells it.
    """

    model: ModelArg = field(default="resnet50", metadata=flag(
        "--model", 10, "torchvision model (default resnet50; quick: resnet18)"))
    configs: Sequence[ConfigArg] | None = field(default=None, metadata=flag(
        "--configs", 30, "comparison configurations (default: all on CUDA)", nargs="+"))
    batch_sizes: Sequence[int] = field(default=(256,), metadata=flag(
        "--batch-sizes", 20, "comparison batch sizes (default 256; quick: 8)", type=int, nargs="+"))
    repeat: Sequence[ConfigArg] | None = field(default=None, metadata=flag(
        "--repeat", 40, f"configurations timed in interleaved rounds (default those of: {', '.join(REPEATED)})",
        nargs="*"))
    rounds: int = field(default=3, metadata=flag(
        "--rounds", 50, "interleaved rounds (default 5; quick and smoke: 3)", type=int))
    sweep_batch_sizes: Sequence[int] = field(default=(), metadata=flag(
        "--sweep", 70, "batch sizes of the sweep (default 64 128 512; quick: none; empty: none)", type=int, nargs="*"))
    sweep_configs: Sequence[ConfigArg] = field(default=(RECOMMENDED,), metadata=flag(
        "--sweep-configs", 80, f"configurations of the sweep (default fp32_default {RECOMMENDED})", nargs="+"))
    explore: Sequence[ConfigArg] = field(default=(), metadata=flag(
        "--explore-configs", 100, "exploration configurations (implies --explore)", nargs="*"))
    precisions: Sequence[str] | None = field(default=None, metadata=flag(
        "--precisions", 60, "keep only configurations of these precisions (fp32, tf32, fp16, bf16)", nargs="+"))
    settings: BenchSettings | None = None  # on the command line by its own fields' flags
    device: torch.device | str | None = field(default=None, metadata=flag(
        "--device", 200, "device (default: cuda > mps > cpu)"))
    task: str = field(default="train", metadata=flag(
        "--task", 190, "train (default) or infer", choices=["train", "infer"], default="train"))
    time_budget_s: float | None = field(default=None, metadata=flag(
        "--time-budget", 210, "seconds after which nothing new starts (default none; --reference 480)", type=float))
    compile_timeout_s: float | None = field(default=None, metadata=flag(
        "--compile-timeout", 220, "time box in seconds for building and compiling one configuration", type=float))
    profile: Sequence[ConfigArg] = field(default=(), metadata=flag(
        "--profile", 120, "repeated configurations to profile after the rounds (CUDA): kernel time by kind and GPU "
        "idle, stored in the metadata", nargs="*"))
    compile_modes: Sequence[str] = field(default=(), metadata=flag(
        "--compile-modes", 230, "also time the compiled recipe in these torch.compile modes, interleaved with it (no "
        f"MODE: {' and '.join(COMPILE_MODES)}); reported beside it: ratio, spread, first-step (compile) seconds. Off "
        "by default", nargs="*", choices=list(COMPILE_MODES), metavar="MODE"))
    compile_mode_timeout_s: float | None = field(default=None, metadata=flag(
        "--compile-mode-timeout", 240,
        f"time box in seconds for each --compile-modes compile (default {COMPILE_MODE_TIMEOUT_S:g})", type=float))

    @classmethod
    def of(cls, **given: Any) -> BenchOptions:
        """Options from keyword arguments; an unknown name is refused with the allowed ones."""
        unknown = sorted(set(given) - set(OPTION_NAMES))
        if unknown:
            raise ValueError(f"unknown benchmark option(s) {unknown!r}; allowed: {', '.join(OPTION_NAMES)}")
        return cls(**given)

    def but(self, **changes: Any) -> BenchOptions:
        """A copy with ``changes`` (checked like :meth:`of`)."""
        self.of(**changes)
        return replace(self, **changes)

    def as_kwargs(self) -> dict[str, Any]:
        """The options as ``run_benchmark``'s keyword arguments."""
        return {name: getattr(self, name) for name in OPTION_NAMES}

    @classmethod
    def from_metadata(cls, benchmark: Mapping[str, Any]) -> BenchOptions:
        """The options a stored run recorded (``metadata["benchmark"]``); what it did not record keeps its default."""
        known = {f.name for f in fields(BenchSettings)}
        settings = BenchSettings(**{k: v for k, v in benchmark.items() if k in known}) if known & set(benchmark) else None
        kept = {k: benchmark[k] for k in OPTION_NAMES if k in benchmark and k not in ("settings", "device")}
        kept = {k: tuple(v) if isinstance(v, list) else v for k, v in kept.items()}
        return cls(settings=settings, **kept)


OPTION_NAMES: tuple[str, ...] = tuple(f.name for f in fields(BenchOptions))
"""The names of the options, in order: the keyword arguments of ``run_benchmark`` beyond its output ones."""
