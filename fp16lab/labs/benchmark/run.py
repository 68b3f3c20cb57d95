"""A whole benchmark run: interleaved rounds and single runs (the comparison), a batch-size sweep
and the compiled-recipe exploration, saved after every row, with MFU and the targets."""

from __future__ import annotations

import functools
import math
import statistics
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import pandas as pd
import torch

from fp16lab.checks import boolean, distinct, instance, one_of, positive_float, positive_int, sequence_of
from fp16lab.device import choose_device, free_memory
from fp16lab.labs.benchmark.analysis import FLOP_METHOD, add_mfu, model_flops, targets_table
from fp16lab.labs.benchmark.configs import (
    COMPILE_MODES,
    COMPILED,
    RECOMMENDED,
    REPEATED,
    TASKS,
    BenchConfig,
    BenchSettings,
    ConfigArg,
    ModelArg,
    ModelSpec,
    default_configs,
    default_settings,
    parse_configs,
    parse_model,
    validate_batch_sizes,
    validate_output,
)
from fp16lab.labs.benchmark.measure import (
    Opener,
    Session,
    attempt,
    describe_error,
    finish_row,
    measure_single,
    release,
    skipped_row,
    time_box,
)
from fp16lab.labs.benchmark.options import BenchOptions
from fp16lab.labs.benchmark.report import BenchResult
from fp16lab.labs.runtime.results import metadata_json
from fp16lab.precision import parse_precision

__all__ = ["Plan", "compile_modes_arg", "make_plan", "run_benchmark"]

_clock = time.perf_counter  # the run's clock (tests replace it)


@dataclass(frozen=True)
class Plan:
    """A validated run: what to measure, in which order, under which limits."""

    spec: ModelSpec
    dev: torch.device
    task: str
    settings: BenchSettings
    sizes: list[int]
    comparison: list[BenchConfig]
    repeat: list[BenchConfig]
    rounds: int
    sweep: list[tuple[BenchConfig, int]]
    explore: list[BenchConfig]
    time_budget_s: float | None
    compile_timeout_s: float | None
    profile: list[str]
    compile_modes: tuple[str, ...] = ()
    compile_mode_timeout_s: float | None = None

    def box(self, cfg: BenchConfig) -> float | None:
        """The time box for building and compiling ``cfg``: a tried compile mode's own box, else the common one."""
        if cfg.name in {COMPILE_MODES[m] for m in self.compile_modes} and self.compile_mode_timeout_s is not None:
            return self.compile_mode_timeout_s
        return self.compile_timeout_s

    @property
    def singles(self) -> list[BenchConfig]:
        names = {c.name for c in self.repeat}
        return [c for c in self.comparison if c.name not in names]

    def recorded(self) -> dict[str, Any]:
        """The checked options under :class:`~fp16lab.labs.benchmark.options.BenchOptions`' names (the metadata's)."""
        return {
            "model": self.spec.name, "task": self.task, "configs": [c.name for c in self.comparison],
            "repeat": [c.name for c in self.repeat], "rounds": self.rounds if self.repeat else 0,
            "batch_sizes": self.sizes, "sweep_batch_sizes": sorted({b for _, b in self.sweep}),
            "sweep_configs": sorted({c.name for c, _ in self.sweep}), "explore": [c.name for c in self.explore],
            "profile": list(self.profile), "time_budget_s": self.time_budget_s,
            "compile_timeout_s": self.compile_timeout_s, "compile_modes": list(self.compile_modes),
            "compile_mode_timeout_s": self.compile_mode_timeout_s, **asdict(self.settings),
        }

    @property
    def units(self) -> int:
        """Progress units: opening or timing a round of a repeated configuration, or one single run."""
        per_size = len(self.repeat) * (self.rounds + 1) + len(self.singles)
        return per_size * len(self.sizes) + len(self.sweep) + len(self.explore)


def _optional_seconds(name: str, value: object) -> float | None:
    return None if value is None else positive_float(name, value)


def _filter(cfgs: list[BenchConfig], precisions: Sequence[str] | None) -> list[BenchConfig]:
    if precisions is None:
        return cfgs
    keep = set(sequence_of("precisions", precisions, example="['fp16', 'bf16']",
                           item=lambda name, p: parse_precision(p, name=name)))
    out = [c for c in cfgs if c.precision in keep]
    if not out:
        raise ValueError(
            f"no configuration in {[c.name for c in cfgs]!r} has a precision in {sorted(p.value for p in keep)!r}; "
            f"precisions of these configurations: {sorted({c.precision.value for c in cfgs})!r}"
        )
    return out


def compile_modes_arg(compile_modes: object) -> tuple[str, ...]:
    """``compile_modes`` as a tuple of :data:`~fp16lab.labs.benchmark.configs.COMPILE_MODES` keys, no repeats."""
    modes = sequence_of("compile_modes", compile_modes, example=f"[{next(iter(COMPILE_MODES))!r}]", allow_empty=True,
                        item=lambda name, m: one_of(name, m, tuple(COMPILE_MODES)))
    return tuple(distinct("compile_modes", modes))


def _with_modes(cfgs: list[BenchConfig], rep: list[BenchConfig], modes: tuple[str, ...],
                task: str) -> tuple[list[BenchConfig], list[BenchConfig]]:
    """Add each tried compile mode's recipe, and what it is compared with, to the comparison and the rounds."""
    if not modes:
        return cfgs, rep
    if task != "train":
        raise ValueError(f"compile_modes are tried on the training step (task='train'), got task={task!r}")
    extra = parse_configs(["article", COMPILED, *(COMPILE_MODES[m] for m in modes)], name="compile_modes")
    have, in_rounds = {c.name for c in cfgs}, {c.name for c in rep}
    return ([*cfgs, *(c for c in extra if c.name not in have)],
            [*rep, *(c for c in extra if c.name not in in_rounds)])


def make_plan(options: BenchOptions) -> Plan:
    """Every option checked before any work; see :func:`run_benchmark`."""
    o = instance("options", options, BenchOptions, "a BenchOptions")
    spec = parse_model(o.model)
    task = one_of("task", o.task, TASKS)
    modes = compile_modes_arg(o.compile_modes)
    mode_box = _optional_seconds("compile_mode_timeout_s", o.compile_mode_timeout_s)
    dev = choose_device(o.device)
    cfgs = _filter(parse_configs(o.configs if o.configs is not None else default_configs(dev)), o.precisions)
    if not cfgs:
        raise ValueError("configs is empty: give at least one configuration name (or None for the defaults)")
    names = [c.name for c in cfgs]
    if o.repeat is None:
        rep = [c for c in cfgs if c.name in REPEATED]
    else:
        rep = parse_configs(o.repeat, name="repeat")
        stray = [c.name for c in rep if c.name not in names]
        if stray:
            raise ValueError(f"repeat: {stray!r} are not among the configurations {names!r}; add them to configs")
    cfgs, rep = _with_modes(cfgs, rep, modes, task)
    names = [c.name for c in cfgs]
    sizes = validate_batch_sizes(o.batch_sizes)
    sweep_sizes = validate_batch_sizes(o.sweep_batch_sizes, name="sweep_batch_sizes", allow_empty=True)
    scfgs = parse_configs(o.sweep_configs, name="sweep_configs")  # checked even when unused: no silent wrong input
    scfgs = scfgs if sweep_sizes else []
    sweep = [(c, b) for c in scfgs for b in sweep_sizes if (c.name, b) not in {(n, s) for n in names for s in sizes}]
    exp = parse_configs(o.explore, name="explore")
    clash = [c.name for c in exp if c.name in names]
    if clash:
        raise ValueError(f"explore: {clash!r} are already in the comparison; an exploration row is measured once")
    prof = [c.name for c in parse_configs(o.profile, name="profile")]
    if any(n not in [c.name for c in rep] for n in prof):
        raise ValueError(f"profile: {prof!r} must be among the repeated configurations {[c.name for c in rep]!r}")
    s = default_settings() if o.settings is None else instance("settings", o.settings, BenchSettings, "a BenchSettings")
    return Plan(spec, dev, task, s, sizes, cfgs, rep, positive_int("rounds", o.rounds), sweep, exp,
                _optional_seconds("time_budget_s", o.time_budget_s),
                _optional_seconds("compile_timeout_s", o.compile_timeout_s), prof, modes, mode_box)


def _peak_and_flops(plan: Plan) -> dict[str, Any]:
    """The chip's dense FP16 peak (the real chip's under a hardware profile) and FLOPs per image, once."""
    out: dict[str, Any] = {"flop_method": FLOP_METHOD, "flops_per_image": None, "peak_tflops_fp16": None}
    if plan.dev.type == "cuda":
        from fp16lab.hardware import gpu_facts, peak_for

        facts = gpu_facts(plan.dev)
        peak = peak_for(facts.real_name) if facts is not None else None
        if peak is not None and peak.fp16 is not None:
            out.update(peak_tflops_fp16=peak.fp16, peak_gpu=peak.gpu, peak_source=peak.source)
    try:
        flops = model_flops(plan.spec, plan.settings.image_size, plan.settings.num_classes)
        out["flops_per_image"] = flops["train" if plan.task == "train" else "forward"]
    except Exception as e:  # a model the flop counter cannot run: no MFU, said so
        out["flop_error"] = f"{type(e).__name__}: {str(e).strip()[:200]}"
    return out


def _metadata(plan: Plan, extra: dict[str, Any] | None) -> dict[str, Any]:
    from fp16lab.labs.runtime.metadata import run_metadata
    from fp16lab.labs.runtime.quick import is_quick

    every = [*plan.comparison, *[c for c, _ in plan.sweep], *plan.explore]
    meta = run_metadata(plan.dev)
    meta["benchmark"] = {
        **plan.recorded(),
        "optimizer": ", ".join(sorted({c.optimizer for c in every})) if plan.task == "train" else "none",
        "data": "synthetic, device-resident (input pipeline not measured)",
        "timing": "fp16lab.timing.time_windows: " + ("CUDA events around each window" if plan.dev.type == "cuda"
                                                     else "perf_counter around each synchronised window"),
        "memory": "torch.cuda.max_memory_allocated above what was allocated before the configuration was "
                  "built, GB = 1e9 bytes",
        "spread": "images/s: (max - min) / median over windows (rounds: over round medians); targets: the "
                  "largest distance of a round's ratio from the median ratio",
        "quick": is_quick(), "recommended": RECOMMENDED, "compiled": COMPILED, **_peak_and_flops(plan),
    }
    meta.update(extra or {})
    return meta


def _aggregate(row: dict[str, Any], rounds: list[list[float]], batch: int, steps: int) -> dict[str, Any]:
    """The comparison row of a repeated configuration: the median over rounds of each round's median."""
    medians = [statistics.median(batch * steps / t for t in secs) for secs in rounds]
    every = [t for secs in rounds for t in secs]
    med = statistics.median(medians)
    row.update(status="ok", img_per_s=med, img_per_s_min=min(medians), img_per_s_max=max(medians),
               spread=(max(medians) - min(medians)) / med, step_ms=1e3 * statistics.median(every) / steps,
               window_s=[round(t, 6) for t in every], rounds=len(medians))
    return row


def _clean(value: Any) -> Any:
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, list):
        return [_clean(v) for v in value]
    return value


class BenchRunner:
    """Carries out a :class:`Plan`, adding rows (and saving them) as they come."""

    def __init__(self, plan: Plan, meta: dict[str, Any], out: Any, opener: Opener, progress: bool) -> None:
        from tqdm.auto import tqdm

        self.plan, self.out, self.opener = plan, out, opener
        self.rows: list[dict[str, Any]] = []
        self.result = BenchResult(pd.DataFrame(), meta)
        self.t0 = _clock()
        self.bar = tqdm(total=plan.units, desc=f"bench {plan.spec.name}", disable=not progress, unit="step")

    # -------------------------------------------------------------- bookkeeping

    def add(self, row: dict[str, Any], part: str, round_: int | None = None) -> None:
        self.rows.append(dict(row, part=part, round=round_))
        if self.out is not None:  # saved after every row: a crash or Ctrl-C keeps what was measured
            self.flush(final=False)

    def flush(self, final: bool = True) -> None:
        frame = pd.DataFrame(self.rows)
        b = self.result.metadata["benchmark"]
        if b.get("flops_per_image") and not frame.empty:
            frame = add_mfu(frame, b["flops_per_image"], b.get("peak_tflops_fp16"))
        self.result.frame = frame
        if final and self.plan.task == "train" and not frame.empty:
            t = targets_table(frame)
            self.result.metadata["targets"] = [{k: _clean(v) for k, v in r.items()} for r in t.to_dict("records")]
        if self.out is not None:
            self.result.save(self.out)

    def left(self) -> float:
        budget = self.plan.time_budget_s
        return math.inf if budget is None else budget - (_clock() - self.t0)

    def session(self, cfg: BenchConfig, batch: int) -> Session:
        p = self.plan
        return self.opener(p.spec, cfg, batch, p.settings, p.task, p.dev)

    def cannot_start(self, sess: Session) -> dict[str, Any] | None:
        """A skipped row when the device cannot run it or the time budget is spent, else None."""
        reason = sess.skip_reason()
        if reason is None and self.left() <= 0:
            reason = f"time budget of {self.plan.time_budget_s:.0f} s used up before it could start"
        return None if reason is None else skipped_row(sess, reason)

    def timeout(self, cfg: BenchConfig | None = None) -> float | None:
        box = self.plan.box(cfg) if cfg is not None else self.plan.compile_timeout_s
        left = self.left()
        return box if left == math.inf else min(box if box is not None else math.inf, max(left, 1.0))

    # -------------------------------------------------------------- the parts

    def single(self, cfg: BenchConfig, batch: int, part: str) -> None:
        self.bar.set_postfix_str(f"{cfg.name} b={batch}")
        sess = self.session(cfg, batch)
        row = self.cannot_start(sess) or measure_single(sess, self.timeout(cfg))
        self.add(row, part)
        self.bar.update(1)

    def rounds(self, batch: int) -> None:
        """Open every repeated configuration, then time them in turn, round after round."""
        open_: list[Session] = []
        for cfg in self.plan.repeat:
            self.bar.set_postfix_str(f"build {cfg.name} b={batch}")
            sess = self.session(cfg, batch)
            skipped = self.cannot_start(sess)
            if skipped is not None:
                self.add(skipped, "comparison")
            elif attempt(sess, functools.partial(self.open_session, sess), reset=False):
                open_.append(sess)
            else:
                self.add(sess.row, "comparison")
            self.bar.update(1)
        times: dict[int, list[list[float]]] = {id(s): [] for s in open_}
        for r in range(self.plan.rounds):
            if r and self.left() <= 0:
                self.result.metadata["benchmark"]["rounds_done"] = r
                print(f"bench: time budget used up: interleaved rounds stopped after {r}", file=sys.stderr)
                break
            for sess in list(open_):
                self.bar.set_postfix_str(f"round {r + 1}: {sess.cfg.name}")
                if self.time_round(sess, r, times[id(sess)]):
                    continue
                open_.remove(sess)
                self.add(sess.row, "comparison")
            self.bar.update(len(self.plan.repeat))
        for sess in open_:
            if sess.cfg.name in self.plan.profile and self.left() > 0:
                self._profile(sess, times[id(sess)])
            self.add(_aggregate(sess.close(), times[id(sess)], batch, self.plan.settings.steps), "comparison")
        release(self.plan.dev, any(c.compile for c in self.plan.repeat))

    def _profile(self, sess: Session, rounds: list[list[float]]) -> None:
        """Where the step's time goes (kernel kinds and GPU idle): stored in the metadata."""
        from fp16lab.labs.benchmark.profile import breakdown, profile_steps

        self.bar.set_postfix_str(f"profile {sess.cfg.name}")
        store = self.result.metadata.setdefault("step_profile", {})
        step_ms = 1e3 * statistics.median(t for secs in rounds for t in secs) / self.plan.settings.steps
        try:
            table = breakdown(profile_steps(sess), 5, step_ms)
            store[sess.cfg.name] = [{k: _clean(v) for k, v in r.items()} for r in table.to_dict("records")]
        except Exception as e:  # a profile is extra: its failure is recorded, the run goes on
            store[sess.cfg.name] = [{"kind": "error", "error": describe_error(e)}]

    def open_session(self, sess: Session) -> None:
        with time_box(self.timeout(sess.cfg) if sess.cfg.compile else None, sess.cfg.name):
            sess.open()

    def time_round(self, sess: Session, r: int, times: list[list[float]]) -> bool:
        secs: list[float] = []

        def one() -> None:
            sess.warm(1)  # untimed: the configuration ran last a round ago
            secs.extend(sess.time(self.plan.settings.windows))

        if not attempt(sess, one, reset=False):
            return False
        times.append(secs)
        self.add(finish_row(dict(sess.row), secs, sess.batch, self.plan.settings.steps), "repeat", r)
        return True

    def run(self) -> BenchResult:
        p = self.plan
        try:
            for b in p.sizes:
                self.rounds(b)
                for cfg in p.singles:
                    self.single(cfg, b, "comparison")
            for cfg, b in p.sweep:
                self.single(cfg, b, "sweep")
            for cfg in p.explore:
                self.single(cfg, p.sizes[0], "explore")
        except KeyboardInterrupt:
            self.result.interrupted = True
            self.flush()
            free_memory(p.dev)
            where = f"; {len(self.rows)} rows saved to {self.out}" if self.out is not None else ""
            print(f"interrupted (Ctrl-C) after {len(self.rows)} rows{where}", file=sys.stderr)
        finally:
            self.bar.close()
        self.result.metadata["benchmark"]["seconds"] = round(_clock() - self.t0, 1)
        self.flush()
        return self.result


def run_benchmark(
    model: ModelArg = "resnet50",
    configs: Sequence[ConfigArg] | None = None,
    batch_sizes: Sequence[int] = (256,),
    *,
    output: Any = None,
    progress: bool = True,
    metadata: dict[str, Any] | None = None,
    opener: Opener | None = None,
    **options: Any,
) -> BenchResult:
    """Measure the comparison at each batch size, then an optional sweep and exploration.

    ``model``, ``configs``, ``batch_sizes`` and the keyword ``**options`` are the fields of
    :class:`~fp16lab.labs.benchmark.options.BenchOptions` (an unknown name is refused); ``output``,
    ``progress``, ``metadata`` and ``opener`` say where and how the run reports.
    Defaults: ``model='resnet50'`` (or a model factory), ``configs=default_configs(device)``
    (names or :class:`~fp16lab.labs.benchmark.configs.BenchConfig` objects), ``batch_sizes=(256,)``.
    ``repeat`` (default: those of ``configs`` in :data:`~fp16lab.labs.benchmark.configs.REPEATED`) are all
    built and warmed up first, then timed in turn for ``rounds=3`` interleaved rounds; each round
    gives a row (part 'repeat') and their median the comparison row. No sweep by default
    (``sweep_batch_sizes=()``; ``sweep_configs`` the recommended recipe), no exploration
    (``explore=()``, single runs after everything else). ``precisions`` keeps only configurations
    of those precisions; ``settings=default_settings()``; ``task='train'``; ``output=None`` (else
    JSON + CSV, saved after every row); ``time_budget_s=None`` (when set, nothing new starts
    after it and rounds stop early); ``compile_timeout_s=None`` (a time box for building,
    compiling and warming up a compiled configuration; POSIX only); ``profile=()`` (repeated
    configurations whose kernel time by kind is profiled after the rounds, on CUDA, into the
    metadata's ``step_profile``: :mod:`fp16lab.labs.benchmark.profile`); ``compile_modes=()`` (torch.compile
    modes from :data:`~fp16lab.labs.benchmark.configs.COMPILE_MODES` to try the compiled recipe with: each
    mode's configuration joins the interleaved rounds beside the article's loop and the compiled recipe,
    added when missing; :meth:`BenchResult.compile_modes` reports them) and ``compile_mode_timeout_s=None``
    (their compile's time box; None: ``compile_timeout_s``'s). Every argument is checked
    before the first measurement. An OOM, a configuration the device cannot run, a failure or a
    time-out becomes a row saying so and the run goes on; Ctrl-C keeps (and saves) the rows so
    far with ``interrupted=True``. ``metadata`` is merged into the stored metadata; ``opener``
    replaces :class:`~fp16lab.labs.benchmark.measure.Session` (tests).
    """
    plan = make_plan(BenchOptions.of(model=model, configs=configs, batch_sizes=batch_sizes, **options))
    boolean("progress", progress)
    if metadata is not None:
        metadata_json(metadata)  # a dict JSON can hold: refused now, not when the first row is saved
    if opener is not None and not callable(opener):
        raise ValueError(f"opener must be a callable returning a Session, got {opener!r}")
    out = validate_output(output) if output is not None else None  # last: it creates the folder
    result = BenchRunner(plan, _metadata(plan, metadata), out, opener or Session, progress).run()
    if out is not None:
        result.path = out
    return result
