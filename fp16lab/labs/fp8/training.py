"""FP8 training measured against its high-precision baseline: loss curves, tokens/s, memory, per layer.

Why: FP8 is worth it only if a model trains as well as in BF16 and measurably faster. These helpers
run the same GPT on the same batches with and without ``torchao.float8`` (through
:mod:`fp16lab.labs.transformers.lm`, which they wrap, unchanged), time single linear layers of growing size to show
where FP8 starts paying, and decide, for a lesson, whether to measure here or show the committed
reference (:func:`fp8_measure`): a GPU without FP8 gets a statement and the reference.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable, Sequence
from typing import Any

import pandas as pd
import torch
from torch import nn

from fp16lab.checks import (
    boolean,
    distinct,
    function,
    instance,
    non_negative_int,
    one_of,
    positive_float,
    positive_int,
    sequence_of,
    text,
)
from fp16lab.data import SyntheticLanguage
from fp16lab.device import OOM_ERRORS, free_memory, model_device, resolve_device
from fp16lab.labs.fp8.layers import RECIPES, Fp8Filter, filter_fn_of, to_fp8_training, torchao_status
from fp16lab.labs.fp8.matmul import fp8_capable
from fp16lab.labs.runtime.i18n import tr
from fp16lab.labs.runtime.results import Measured, load_reference, measure_or_reference
from fp16lab.labs.transformers.lm import lm_throughput, train_lm
from fp16lab.precision import autocast, parse_precision
from fp16lab.timing import time_fn

__all__ = ["fp8_measure", "fp8_curves", "fp8_throughput", "linear_speed", "break_even_width"]

ModelFactory = Callable[[], nn.Module]


def _config_name(precision: str, recipe: str | None) -> str:
    return precision if recipe is None else f"fp8 {recipe}"


def _check_factory(make_model: object) -> None:
    if isinstance(make_model, nn.Module):
        raise ValueError(f"make_model must be a function returning a fresh GPT (each run needs a new one), "
                         f"got a model ({type(make_model).__name__}): pass e.g. lambda: GPT(cfg)")
    function("make_model", make_model, "a function of no arguments returning a fresh GPT", n_args=0, classes=True)


def _check_fp8_layers(make_model: ModelFactory, module_filter: Any) -> None:
    """Before any run: ``make_model()`` builds a module in which the filter selects a layer (built once, dropped)."""
    fn = filter_fn_of(module_filter)
    torch.manual_seed(0)
    model = make_model()
    try:
        if not isinstance(model, nn.Module):
            raise ValueError(f"make_model must return a torch.nn.Module (a fresh GPT), it returned {type(model).__name__}")
        if not any(isinstance(m, nn.Linear) and fn(m, n) for n, m in model.named_modules()):
            raise ValueError("module_filter selects no nn.Linear layer of make_model()'s model: the FP8 runs would "
                             "have nothing in FP8 (see fp8_plan(make_model(), module_filter) for the reasons)")
    finally:
        dev = model_device(model, torch.device("cpu")) if isinstance(model, nn.Module) else torch.device("cpu")
        del model
        free_memory(dev)


def _recipes(recipes: Sequence[str]) -> list[str]:
    out = sequence_of("recipes", recipes, example="['tensorwise']", single=True,
                      item=lambda n, r: one_of(n, r, RECIPES))  # one recipe name is a list of one
    return out


def _checked(measure: Callable[[], pd.DataFrame]) -> Callable[[], pd.DataFrame]:
    """``measure`` with its result checked: a DataFrame, else one clear error on every path (live GPU or not)."""
    def run() -> pd.DataFrame:
        frame = measure()
        if not isinstance(frame, pd.DataFrame):
            raise ValueError(f"measure must return a pandas DataFrame, it returned {type(frame).__name__}")
        return frame

    return run


def fp8_measure(
    name: str, measure: Callable[[], pd.DataFrame], *, device: "torch.device | str",
    needs_torchao: bool = True, gpu_only: bool = True,
) -> Measured:
    """Measure an FP8 effect here, or show the committed reference ``results/<name>.json`` with a reason.

    ``gpu_only=True`` (speeds, CUDA memory): measured only where :func:`fp16lab.labs.runtime.quick.live_gpu`
    holds *and* the GPU has FP8 (sm_89+) *and* (``needs_torchao``) torchao imports; a GPU without
    FP8 or without torchao gets a one-line statement, then the reference, never a traceback.
    ``gpu_only=False`` (numerics, loss curves): measured on any device that runs FP8 (the CPU too,
    at quick-mode sizes), saved as the reference only in a live GPU run.
    """
    from fp16lab.labs.runtime.quick import live_gpu

    text("name", name)
    function("measure", measure, "a function of no arguments returning a DataFrame", n_args=0)
    boolean("needs_torchao", needs_torchao)
    boolean("gpu_only", gpu_only)
    dev = resolve_device(device)
    measure = _checked(measure)
    if gpu_only and not live_gpu():
        return measure_or_reference(name, measure)  # quick mode or no GPU: the reference
    support = fp8_capable(dev)
    status = torchao_status() if needs_torchao else None
    blocked = support.said if not support.ok else ""  # in the reader's language, as the banner below
    if not blocked and status is not None and not status.available:
        blocked = str(status)
    if blocked:
        print(tr("NOT MEASURED HERE: {blocked}. Showing the committed reference instead.", blocked=blocked))
        frame, meta = load_reference(name)
        return Measured(frame, meta, live=False)
    if gpu_only or live_gpu():
        return measure_or_reference(name, measure)  # live GPU: measured and saved
    frame = measure()
    from fp16lab.labs.runtime.metadata import run_metadata

    return Measured(frame, run_metadata(dev), live=True)


def _run_curve(make_model: ModelFactory, lang: SyntheticLanguage, recipe: str | None, module_filter: Any,
               kwargs: dict[str, Any], seed: int = 0) -> pd.DataFrame:
    torch.manual_seed(seed)
    model = make_model()
    if recipe is not None:
        to_fp8_training(model, recipe, module_filter)
    h = train_lm(model, lang, seed=seed, **kwargs)
    cols = [c for c in ("step", "loss", "excess", "eval_loss", "eval_excess", "time_s") if c in h]
    return pd.DataFrame(h[cols]).assign(entropy_floor=h.attrs["entropy_floor"])


def fp8_curves(
    make_model: ModelFactory, lang: SyntheticLanguage, *, steps: int, batch: int,
    recipes: Sequence[str] = ("tensorwise", "rowwise"), precision: str = "bf16", lr: float = 3e-3,
    module_filter: "Callable[[nn.Module, str], bool] | None" = None, eval_batches: int = 4,
    eval_every: int | None = None, progress: bool = True, seeds: Sequence[int] = (0,),
) -> pd.DataFrame:
    """Train ``make_model()`` in ``precision`` and with each FP8 recipe, once per seed, on the same batches.

    For each seed in ``seeds`` (default ``(0,)``; several seeds measure the run-to-run spread that
    an FP8 difference must exceed to mean anything), every run starts from ``torch.manual_seed(seed)``
    and :func:`fp16lab.labs.transformers.lm.train_lm` with that seed (same seed: same initial weights and
    batches, warm-up + cosine LR peaking at ``lr``); FP8 runs convert the layers ``module_filter``
    selects (default ``Fp8Filter()``) first. ``precision`` (default "bf16") is the autocast of the
    baseline and of everything the FP8 runs keep in high precision (on a CPU use "fp32": CPU BF16
    is slow). Defaults: recipes tensorwise and rowwise, ``lr=3e-3``, ``eval_batches=4``,
    ``eval_every=steps // 10``. Returns one long table: run, seed, step, loss, excess, eval_excess,
    ..., with an ``error`` column for an FP8 run this device refused (a row, not a raise).
    """
    from tqdm.auto import tqdm

    _check_factory(make_model)
    steps, batch = positive_int("steps", steps), positive_int("batch", batch)
    p = parse_precision(precision).value
    boolean("progress", progress)
    instance("lang", lang, SyntheticLanguage, "a fp16lab.data.SyntheticLanguage")
    runs: list[str | None] = [None, *_recipes(recipes)]
    kwargs = {"steps": steps, "batch": batch, "precision": p, "lr": positive_float("lr", lr), "progress": False,
              "eval_batches": positive_int("eval_batches", eval_batches), "eval_every": eval_every}
    if eval_every is not None:
        positive_int("eval_every", eval_every)
    seed_list = _seeds(seeds)
    _check_fp8_layers(make_model, module_filter)
    frames = []
    for seed, recipe in tqdm([(s, r) for s in seed_list for r in runs], desc="runs", disable=not progress, leave=False):
        label = _config_name(p, recipe)
        try:
            frames.append(_run_curve(make_model, lang, recipe, module_filter, kwargs, seed).assign(
                run=label, seed=seed, error=""))
        except (RuntimeError, NotImplementedError) as err:
            if recipe is None:
                raise
            frames.append(pd.DataFrame([{"run": label, "seed": seed,
                                         "error": f"{type(err).__name__}: {str(err)[:100]}"}]))
    frame = pd.concat(frames, ignore_index=True)
    return frame[["run", *[c for c in frame if c != "run"]]]


def _seeds(seeds: object) -> list[int]:
    return distinct("seeds", sequence_of("seeds", seeds, example="[0, 1, 2]", item=non_negative_int))


def _throughput_row(make_model: ModelFactory, recipe: str | None, module_filter: Any, compiled: bool,
                    kwargs: dict[str, Any]) -> dict[str, Any]:
    model, dev = None, torch.device("cpu")
    try:
        torch.manual_seed(0)
        model = make_model()
        dev = model_device(model)
        if recipe is not None:
            to_fp8_training(model, recipe, module_filter)
        return {**lm_throughput(model, compile=compiled, **kwargs), "error": ""}
    except OOM_ERRORS:
        return {"error": "out of memory"}
    except (RuntimeError, NotImplementedError, AssertionError) as err:  # a kernel or compiler this GPU refuses
        if recipe is None and not compiled:
            raise
        return {"error": f"{type(err).__name__}: {str(err).splitlines()[0][:100] if str(err) else ''}"}
    finally:
        del model
        if compiled:
            torch._dynamo.reset()  # each model compiles afresh, within the recompile limit
        free_memory(dev)


def fp8_throughput(
    make_model: ModelFactory, batch: int, *, recipes: Sequence[str] = ("tensorwise", "rowwise"),
    precision: str = "bf16", compile: bool = True, module_filter: "Callable[[nn.Module, str], bool] | None" = None,
    steps: int = 10, warmup: int = 3, peak_tflops: float | None = None, progress: bool = True,
) -> pd.DataFrame:
    """Training tokens/s, MFU and peak memory of ``make_model()`` in ``precision`` and with each FP8 recipe.

    Each row is :func:`fp16lab.labs.transformers.lm.lm_throughput` (full steps: forward, backward, fused AdamW) on a
    fresh model; ``compile=True`` (default) compiles every configuration, the baseline too (eager
    FP8 spends more time casting than it saves). Defaults: recipes tensorwise and rowwise,
    ``precision="bf16"``, ``module_filter=Fp8Filter()``, ``steps=10`` timed after ``warmup=3``,
    ``peak_tflops=None`` (given: MFU against it, e.g. the chip's BF16 peak). Columns: config,
    lm_throughput's, ``speedup`` (tokens/s over the baseline's) and ``error`` (an OOM or a refused
    configuration: a row).
    """
    from tqdm.auto import tqdm

    _check_factory(make_model)
    p = parse_precision(precision).value
    boolean("compile", compile)
    boolean("progress", progress)
    kwargs: dict[str, Any] = {"batch": positive_int("batch", batch), "precision": p,
                              "steps": positive_int("steps", steps), "warmup": positive_int("warmup", warmup),
                              "peak_tflops": None if peak_tflops is None else positive_float("peak_tflops", peak_tflops)}
    configs = [None, *_recipes(recipes)]
    _check_fp8_layers(make_model, module_filter)
    rows = []
    for recipe in tqdm(configs, desc="configurations", disable=not progress, leave=False):
        row = _throughput_row(make_model, recipe, module_filter, compile, kwargs)
        rows.append({"config": _config_name(p, recipe), "compiled": compile, **row})
    frame = pd.DataFrame(rows)
    base = frame.loc[0, "tokens_per_s"] if "tokens_per_s" in frame else math.nan
    frame["speedup"] = frame["tokens_per_s"] / base if "tokens_per_s" in frame else math.nan
    return frame


def _layer_step(layer: nn.Module, x: torch.Tensor, precision: str, compiled: bool) -> Callable[[], None]:
    def forward(inp: torch.Tensor) -> torch.Tensor:
        return layer(inp)

    fwd = torch.compile(forward) if compiled else forward

    def step() -> None:
        with autocast(precision, x.device):
            y = fwd(x)
        y.backward(torch.ones_like(y))
        layer.weight.grad = None
        x.grad = None

    return step


def _layer_row(d: int, tokens: int, recipe: str, precision: str, compiled: bool, dev: torch.device,
               min_run_time: float) -> dict[str, Any]:
    row: dict[str, Any] = {"features": d, "tokens": tokens, "gflop": 6.0 * tokens * d * d / 1e9}
    try:
        torch.manual_seed(0)
        base = nn.Linear(d, d, bias=False, device=dev)
        x = torch.randn(tokens, d, device=dev, requires_grad=True)
        for label in ("hp", "fp8"):
            layer: nn.Module = base
            if label == "fp8":
                layer = to_fp8_training(copy.deepcopy(base), recipe, Fp8Filter(skip=(), min_features=0))
            if compiled:
                torch._dynamo.reset()
            t = time_fn(_layer_step(layer, x, precision, compiled), warmup=3, min_run_time=min_run_time)
            row[f"{label}_ms"] = 1e3 * t.median_s
        row["speedup"] = row["hp_ms"] / row["fp8_ms"]
        row["error"] = ""
    except OOM_ERRORS:
        row["error"] = "out of memory"
    except (RuntimeError, NotImplementedError, AssertionError) as err:
        row["error"] = f"{type(err).__name__}: {str(err).splitlines()[0][:100] if str(err) else ''}"
    finally:
        free_memory(dev)
    return row


def linear_speed(
    sizes: Sequence[int], tokens: int, *, recipe: str = "tensorwise", precision: str = "bf16",
    compile: bool = True, device: "torch.device | str | None" = None, min_run_time: float = 0.2,
    progress: bool = True,
) -> pd.DataFrame:
    """Time one ``nn.Linear(d, d)`` training step (forward + both gradients) in ``precision`` and in FP8, per ``d``.

    The input is ``(tokens, d)`` and needs its gradient, as an activation inside a model does, so
    all three matmuls run. Defaults: ``recipe="tensorwise"``, ``precision="bf16"`` (autocast),
    ``compile=True`` (each layer compiled on its own), ``device`` = the best available,
    ``min_run_time=0.2`` s per timing. Columns: features, tokens, gflop (per step), hp_ms, fp8_ms,
    speedup (hp_ms / fp8_ms: below 1, FP8 is slower) and error (a row, not a raise).
    """
    from tqdm.auto import tqdm

    size_list = sequence_of("sizes", sizes, example="[512, 1024, 4096]", item=positive_int)
    odd = [d for d in size_list if d % 16]
    if odd:
        raise ValueError(f"sizes must be multiples of 16 (FP8 kernels need it), got {odd}")
    boolean("progress", progress)
    tokens = positive_int("tokens", tokens)
    one_of("recipe", recipe, RECIPES)
    p = parse_precision(precision).value
    boolean("compile", compile)
    positive_float("min_run_time", min_run_time)
    dev = resolve_device(device)
    rows = [_layer_row(d, tokens, recipe, p, compile, dev, min_run_time)
            for d in tqdm(size_list, desc="layer sizes", disable=not progress, leave=False)]
    return pd.DataFrame(rows).assign(recipe=recipe, precision=p, compiled=compile)


def break_even_width(layers: "pd.DataFrame | None") -> int | None:
    """The narrowest measured width from which FP8 is never slower: the ``min_features`` a filter should use.

    ``layers`` is :func:`linear_speed`'s table; rows with an error are ignored. None when no table,
    or when FP8 is slower at the widest width measured (then no measured width pays).
    """
    if layers is None:
        return None
    if not isinstance(layers, pd.DataFrame) or not {"features", "speedup"} <= set(layers.columns):
        raise ValueError("layers must be linear_speed's DataFrame (columns features and speedup), "
                         f"got {type(layers).__name__}")
    ok = layers[layers["error"].fillna("") == ""] if "error" in layers else layers
    ok = ok.dropna(subset=["speedup"]).sort_values("features")
    width = None
    for features, speedup in zip(reversed(ok.features.tolist()), reversed(ok.speedup.tolist()), strict=True):
        if speedup < 1.0:
            break
        width = int(features)
    return width
