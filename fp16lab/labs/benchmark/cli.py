"""``python -m fp16lab bench``: the comparison from the command line, and the reference run."""

from __future__ import annotations

import argparse
import os
import sys
from dataclasses import fields, replace
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from fp16lab.labs.benchmark.configs import (
    ARTICLE_CLAIM,
    COMPARISON,
    COMPILE_MODES,
    COMPILED,
    CONFIGS,
    EXPLORE,
    RECOMMENDED,
    REPEATED,
    BenchSettings,
    default_settings,
)
from fp16lab.labs.benchmark.flags import Flag, flag
from fp16lab.labs.benchmark.options import COMPILE_MODE_TIMEOUT_S, OPTION_NAMES, BenchOptions
from fp16lab.labs.benchmark.report import BenchResult, plot_results, profile_table, readme_section
from fp16lab.labs.benchmark.run import run_benchmark
from fp16lab.labs.runtime.quick import is_quick, pick

__all__ = ["add_bench_parser", "REFERENCE", "COMPILE_MODE_TIMEOUT_S", "CLI_FLAGS"]

REFERENCE = BenchOptions(
    model="resnet50", configs=tuple(COMPARISON), batch_sizes=(256,), repeat=tuple(REPEATED), rounds=5,
    sweep_batch_sizes=(64, 128, 512), sweep_configs=(RECOMMENDED,), explore=tuple(EXPLORE), time_budget_s=480.0,
    compile_timeout_s=150.0, profile=("article", RECOMMENDED, COMPILED),
    settings=BenchSettings(image_size=224, warmup=5, steps=10, windows=3),
)
"""The committed reference run (``--reference``): ResNet-50 at batch 256, every comparison row, the
targets' configurations in 5 interleaved rounds (the article's loop and both recipes profiled after
them: where the step's time goes), a sweep of the recipe, and the exploration; no
new measurement starts after 480 s and a compile gets at most 150 s, so it ends within about 9 minutes."""


def _reference_output(model: str, dev: torch.device) -> Path:
    from fp16lab.hardware import gpu_facts, peak_for
    from fp16lab.labs.runtime.results import RESULTS_DIR

    facts = gpu_facts(dev) if dev.type == "cuda" else None
    if facts is None:
        raise ValueError(f"--reference needs a CUDA GPU, got device {str(dev)!r}: a reference is a GPU measurement")
    if facts.profile is not None:
        raise ValueError(f"--reference refuses a hardware profile ({facts.profile!r}): unset FP16LAB_PROFILE")
    if is_quick():
        raise ValueError("--reference needs full mode: unset FP16LAB_QUICK / CI (or set FP16LAB_QUICK=0)")
    peak = peak_for(facts.real_name)
    slug = (peak.gpu if peak else facts.real_name).lower().replace("nvidia", "").strip().replace(" ", "_")
    return RESULTS_DIR / f"bench_{model}_{slug}.json"


def _given(value: Any, default: Any) -> Any:
    return default if value is None else value


def _settings(args: argparse.Namespace, base: BenchSettings) -> BenchSettings:
    """``base`` with each settings flag given (a ``--no-...`` switch sets the opposite of its field)."""
    given: dict[str, Any] = {}
    for f in fields(BenchSettings):
        spec: Flag | None = f.metadata.get("flag")
        if spec is not None:
            value = getattr(args, spec.dest(f.name))
            if spec.negates:
                given[f.name] = not value
            elif value is not None:
                given[f.name] = value
    return replace(base, **given)


# the command line's own flags: where the run goes and how it reports, not what it measures (BenchOptions)
CLI_FLAGS = {
    "explore_default": flag("--explore", 90, f"also run the compiled-recipe exploration: {', '.join(EXPLORE)}",
                            action="store_true")["flag"],
    "reference": flag("--reference", 110, "the committed reference run (see fp16lab.labs.benchmark.cli.REFERENCE); "
                      "writes results/bench_<model>_<gpu>.json, .csv and .png unless --output",
                      action="store_true")["flag"],
    "output": flag("--output", 130, "results JSON (default results/local/bench_<model>.json; a CSV beside it)")["flag"],
    "no_progress": flag("--no-progress", 260, "no progress bar", action="store_true")["flag"],
    "readme_from": flag("--readme-from", 270, "print the README section for this results file and write its PNG; "
                        "no benchmark")["flag"],
    "png": flag("--png", 280, "with --readme-from: plot path (default: results path with .png)")["flag"],
}


def _flags() -> list[tuple[str | None, str, Flag]]:
    """(argparse dest, or None for the field's own; the name; its Flag): every option's and setting's field that
    carries one, and the command line's own flags."""
    fielded = [(None, f.name, f.metadata["flag"]) for cls in (BenchOptions, BenchSettings) for f in fields(cls)
               if "flag" in f.metadata]
    return [*fielded, *((dest, dest, f) for dest, f in CLI_FLAGS.items())]


def _defaults(args: argparse.Namespace, dev: torch.device) -> BenchOptions:
    """The run the flags start from: the reference, or this mode's (quick or full) comparison."""
    if args.reference:
        return REFERENCE
    return BenchOptions(
        model=pick(quick="resnet18", full="resnet50"), batch_sizes=pick(quick=[8], full=[256]),
        rounds=pick(quick=3, full=5, smoke=3), sweep_batch_sizes=pick(quick=[], full=[64, 128, 512]),
        sweep_configs=["fp32_default", RECOMMENDED] if dev.type == "cuda" else ["fp32_default"],
        explore=list(EXPLORE) if args.explore_default else [], settings=default_settings(),
    )


def _options(args: argparse.Namespace, dev: torch.device) -> BenchOptions:
    """The run the flags ask for: each flag given replaces the option of the same name in :func:`_defaults`."""
    base = _defaults(args, dev)
    given = {n: getattr(args, n) for n in OPTION_NAMES if getattr(args, n, None) is not None}
    modes = [] if args.compile_modes is None else (args.compile_modes or list(COMPILE_MODES))
    box = _given(args.compile_mode_timeout_s, COMPILE_MODE_TIMEOUT_S) if modes else None
    opts = base.but(**{**given, "settings": _settings(args, base.settings or default_settings()), "device": dev,
                       "compile_modes": modes, "compile_mode_timeout_s": box})
    tried = {COMPILE_MODES[m] for m in modes if m in COMPILE_MODES}
    return opts.but(explore=[c for c in opts.explore if c not in tried])  # a tried mode runs in the rounds instead


def bench_command(args: argparse.Namespace) -> int:
    from fp16lab.device import choose_device
    from fp16lab.labs.runtime.results import output_path

    try:
        if args.readme_from:
            print(readme_section(args.readme_from, args.png))
            return 0
        dev = choose_device(args.device)
        opts = _options(args, dev)
        if args.reference:
            output = Path(args.output) if args.output else _reference_output(str(opts.model), dev)
        else:
            output = Path(args.output) if args.output else output_path(f"bench_{opts.model}")
        launched = bool(sys.argv) and Path(sys.argv[0]).name in ("__main__.py", "fp16lab")
        cmd = "python -m fp16lab " + " ".join(sys.argv[1:]) if launched else None
        _announce(dev)
        res = run_benchmark(output=output, metadata={"command": cmd} if cmd else None, progress=not args.no_progress,
                            **opts.as_kwargs())
        rc = _report(res, args, dev)
    except (ValueError, FileNotFoundError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if launched and not res.frame.empty and (res.frame["status"] == "timeout").any():
        # A compile stopped by its time box leaves torch.compile's worker threads with queued kernel
        # compilations, which a normal exit would wait for. The results are saved: exit now.
        print("a compile was stopped by its time box: exiting without waiting for its workers", file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(rc)
    return rc


def _announce(dev: torch.device) -> None:
    from fp16lab.labs.runtime.quick import mode

    print(mode())
    if dev.type != "cuda":
        print(f"NOTE: running on {dev.type.upper()}: these timings are {dev.type.upper()} numbers, not FP16 "
              "speed-ups (configurations that need CUDA are skipped with the reason; the committed GPU "
              "reference shows them).")


def _report(res: BenchResult, args: argparse.Namespace, dev: torch.device) -> int:
    m, o = res.metadata, res.options()
    s = o.settings or default_settings()
    quick = is_quick() and dev.type != "cuda"
    with pd.option_context("display.width", 200, "display.max_columns", 20, "display.max_colwidth", 60):
        print(f"\n{o.model} {o.task}, {m['device']} ({'QUICK CPU MODE' if quick else m['mode'] + ' mode'}), "
              f"{s.windows} windows x {s.steps} steps, median" + (f"; {o.rounds} interleaved rounds of "
                                                                 f"{', '.join(map(str, o.repeat))}" if o.repeat else ""))
        print(res.table().drop(columns=["label"]).to_string(index=False))
        for part, title in (("sweep", "batch-size sweep"), ("explore", "exploration (single runs)")):
            if (res.frame.get("part") == part).any():
                print(f"\n{title}")
                print(res.table(part).drop(columns=["label"]).to_string(index=False))
        modes = res.compile_modes()
        if not modes.empty:
            box = o.compile_mode_timeout_s
            print("\ntorch.compile modes of the compiled recipe (interleaved with it; each compile time-boxed"
                  + (f" to {box:g} s)" if box else ")"))
            print(modes.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
        prof = profile_table(m)
        if not prof.empty:
            print("\nshare of a step by kind of kernel (profiled after the rounds)")
            print(prof.to_string(float_format=lambda v: f"{v:.1%}"))
        if o.task == "train":
            print("\ntargets (set for the H200 at batch 256)")
            print(res.targets().drop(columns=["values", "batch"]).to_string(index=False))
        print("\nthe article (RTX 4090D, cited): " + ", ".join(
            f"{r['precision']} {r['img_per_s']:.0f} img/s {r['memory_gb']} GB" for r in ARTICLE_CLAIM["rows"]))
    if res.path is not None:
        print(f"results: {res.path} (and .csv)")
        if args.reference:
            import matplotlib

            matplotlib.use("Agg")
            plot_results(res.frame, res.path.with_suffix(".png"), title=f"{o.model} training, {m['device']}, {m['date']}")
            print(f"plot: {res.path.with_suffix('.png')}; README section: "
                  f"python -m fp16lab bench --readme-from {res.path}")
    return 130 if res.interrupted else 0


def add_bench_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Register ``python -m fp16lab bench`` on a subparsers object."""
    p = sub.add_parser(
        "bench",
        help="benchmark ResNet training at FP32/TF32/FP16/BF16, channels_last, fused Adam, torch.compile",
        description=(
            "Training throughput (images/s), MFU and peak memory of a torchvision model per configuration, "
            "on synthetic device-resident data, CUDA-event timing, median of windows; the targets' "
            "configurations in interleaved rounds. Full mode (GPU): resnet50, batch 256, the whole comparison "
            "(5 rounds) and a batch-size sweep (a few minutes). Quick mode (CPU or FP16LAB_QUICK=1): resnet18 "
            "at 32 px, batch 8 (under a minute). --reference: the committed reference run, with the "
            f"compiled-recipe exploration (about 9 minutes on an H200). Configurations: {', '.join(CONFIGS)}."
        ),
    )
    for dest, name, f in sorted(_flags(), key=lambda t: t[2].order):
        kwargs = dict(f.kwargs)
        if kwargs.get("action") != "store_true":
            kwargs.setdefault("default", None)
        p.add_argument(f.spelling, dest=f.dest(name) if dest is None else dest, help=f.help, **kwargs)
    p.set_defaults(func=bench_command)
