"""What a benchmark run is asked to do, spelled once: the CLI builds it, the plan checks it, the report reads it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

import torch

from fp16lab.labs.benchmark.configs import RECOMMENDED, BenchSettings, ConfigArg, ModelArg

__all__ = ["BenchOptions", "OPTION_NAMES"]


@dataclass(frozen=True)
class BenchOptions:
    """The options of :func:`~fp16lab.labs.benchmark.run.run_benchmark` (its docstring says what each does).

    Given as they come (names, lists, a device string); :func:`~fp16lab.labs.benchmark.run.make_plan`
    checks every one before any work; :meth:`Plan.recorded <fp16lab.labs.benchmark.run.Plan.recorded>` is
    what a run stores in its metadata (``metadata["benchmark"]``) under the same names, and
    :meth:`from_metadata` reads them back for the report.
    """

    model: ModelArg = "resnet50"
    configs: Sequence[ConfigArg] | None = None
    batch_sizes: Sequence[int] = (256,)
    repeat: Sequence[ConfigArg] | None = None
    rounds: int = 3
    sweep_batch_sizes: Sequence[int] = ()
    sweep_configs: Sequence[ConfigArg] = (RECOMMENDED,)
    explore: Sequence[ConfigArg] = ()
    precisions: Sequence[str] | None = None
    settings: BenchSettings | None = None
    device: torch.device | str | None = None
    task: str = "train"
    time_budget_s: float | None = None
    compile_timeout_s: float | None = None
    profile: Sequence[ConfigArg] = ()
    compile_modes: Sequence[str] = ()
    compile_mode_timeout_s: float | None = None

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
