"""Lesson 08's exercise checks: a batch for a latency budget, a graph method for a process, a plan per card.

Each check computes the expected answer itself (from the learner's own measurement, the lesson's
table or the card facts of :mod:`fp16lab.hardware`) and shows only the verdict and a hint.
"""

from __future__ import annotations

import copy
import math
import numbers
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn

from fp16lab.course.answers import WrongAnswer, require, verdict
from fp16lab.labs.runtime.i18n import tr

__all__ = ["SHORT_CALLS", "LONG_CALLS", "PLAN_OPTIONS", "PLAN_CARDS", "check_batch_for_budget",
           "check_graph_method", "check_card_plan"]

SHORT_CALLS = 1_000  # calls one process serves before it is restarted (exercise 2)
LONG_CALLS = 10_000_000
PLAN_OPTIONS = ("fp32", "fp16 cast", "bf16 cast", "fp16 cast + fp32 island", "bf16 cast + fp32 island")
PLAN_CARDS = ("a100-40gb", "t4")
_TOLERANCE = 0.01  # of FP32's largest |output|


def _expected_precision(device: str) -> str:
    """Exercise 1's EX_PRECISION, from the same rule as the lesson: FP32 in quick mode, else BF16 where native."""
    from fp16lab.labs.inference.infer import supports
    from fp16lab.labs.runtime.quick import pick

    return pick(quick="fp32", full="bf16" if supports("bf16", device) else "fp16")


def _expected_input_shape() -> str:
    """One training image's shape in the lesson (3 channels, S["image_size"] square), as latency_sweep writes it."""
    from fp16lab.labs.runtime.quick import pick

    size = pick(quick=16, full=32)
    return f"3x{size}x{size}"


def _expected_device() -> str:
    """The lesson's ``device`` (choose_device(): cuda > mps > cpu), as a device type."""
    from fp16lab.device import choose_device

    return choose_device().type


# ------------------------------------------------------------------ exercise 1


def check_batch_for_budget(sweep: Any, batch: Any, budget_x: float) -> None:
    """The batch with the most items/s among the rows of ``sweep`` that take at most ``budget_x`` × batch 1's time."""
    require(isinstance(sweep, pd.DataFrame) and len(sweep) > 0, tr("assign latency_sweep's table to ex_sweep"))
    need = {"batch", "status", "ms_per_batch", "items_per_s"}
    require(need <= set(sweep.columns), tr("ex_sweep should be the table latency_sweep returns"))
    ok = sweep[sweep["status"] == "ok"]
    require(ok["batch"].nunique() == len(ok) and len(ok) >= 4,
            tr("sweep one precision at four or more batch sizes (one row per batch)"))
    if "device" in ok.columns and len(ok):  # the service runs on the lesson's device, not wherever the sweep ran
        want, got = _expected_device(), torch.device(str(ok["device"].iloc[0])).type
        require(got == want, tr("the service runs on this machine's device ({want}), your sweep ran on {got}: "
                                "latency and throughput are a device's own, so sweep on device", want=want, got=got))
    if "input_shape" in ok.columns and len(ok):  # latency_sweep's table records what each row fed the model
        want, shapes = _expected_input_shape(), sorted(set(map(str, ok["input_shape"])))
        require(shapes == [want], tr("the service gets images shaped like the training images ({want} per item), "
                                     "your sweep fed {got}: make_input sets the work per item, so shape it like "
                                     "the training images", want=want, got=", ".join(shapes)))
    if {"precision", "device"} <= set(ok.columns):  # latency_sweep's table says which precision and device it ran
        want, got = _expected_precision(str(ok["device"].iloc[0])), str(ok["precision"].iloc[0])
        require(got == want, tr("the service runs in EX_PRECISION ({want}), your sweep in {got}: latency and "
                                "throughput depend on the precision, so sweep precisions=[EX_PRECISION]",
                                want=want, got=got))
    require(1 in set(ok["batch"]), tr("include batch 1: the budget is a multiple of its latency"))
    budget_ms = budget_x * float(ok.loc[ok["batch"] == 1, "ms_per_batch"].iloc[0])
    require(bool((ok["ms_per_batch"] > budget_ms).any()),
            tr("measure past the budget: include batch sizes whose latency exceeds it, to show where it binds"))
    require(isinstance(batch, numbers.Real) and not isinstance(batch, (bool, np.bool_)),  # numpy scalars too
            tr("assign the batch size you choose (a number) to ex_batch"))
    row = ok[ok["batch"] == batch]
    require(len(row) == 1, tr("choose one of the batch sizes your table measured"))
    require(float(row["ms_per_batch"].iloc[0]) <= budget_ms,
            tr("that batch takes longer than the budget: a request waits for its whole batch (ms_per_batch)"))
    best = ok.loc[ok["ms_per_batch"] <= budget_ms, "items_per_s"].max()
    require(float(row["items_per_s"].iloc[0]) >= 0.9 * best,
            tr("within the budget a larger batch serves more items per second: take the most throughput that fits"))
    verdict(True, "")


# ------------------------------------------------------------------ exercise 2


def _total_s(row: pd.Series, calls: int) -> float:
    setup = 0.0 if pd.isna(row.get("setup_s")) else float(row["setup_s"])
    return setup + calls * float(row["ms"]) / 1e3


def _ties(ok: pd.DataFrame, answer: str, best: str, calls: int) -> bool:
    """Whether ``answer`` and ``best`` tie for ``calls`` calls: their totals, round by round, inside the spread.

    Needs the table's per-round times (``ms_rounds``, from interleaved rounds); without them, no tie is known.
    """
    from fp16lab.labs.runtime.verdicts import paired_verdict

    if "ms_rounds" not in ok.columns:
        return False
    a, b = ok.loc[answer, "ms_rounds"], ok.loc[best, "ms_rounds"]
    if not isinstance(a, (list, tuple)) or not isinstance(b, (list, tuple)) or len(a) != len(b) or len(a) < 2:
        return False
    setup = {m: 0.0 if pd.isna(ok.loc[m].get("setup_s")) else float(ok.loc[m, "setup_s"]) for m in (answer, best)}
    try:
        ratios = [(setup[answer] + calls * float(x) / 1e3) / (setup[best] + calls * float(y) / 1e3)
                  for x, y in zip(a, b, strict=True)]
        return paired_verdict(ratios, null=1.0, above="slower", below="faster").verdict.startswith("tie")
    except (TypeError, ValueError, ZeroDivisionError):  # a round that is not a number: no tie can be shown
        return False


def _best(ok: pd.DataFrame, cost: Any) -> str:
    """The method with the least ``cost(row)`` (ties: the first in the table)."""
    costs = {m: cost(r) for m, r in ok.iterrows()}
    return min(costs, key=costs.__getitem__)


def check_graph_method(frame: Any, short: Any, long: Any) -> None:
    """For each process length, the method with the least setup + calls × time per call in ``frame``.

    Where ``frame`` holds every round's time (``ms_rounds``), a method whose total ties the best one's
    inside the rounds' spread is accepted too: the measurement cannot tell them apart.
    """
    require(isinstance(frame, pd.DataFrame) and {"method", "status", "ms"} <= set(frame.columns),
            tr("pass the CUDA-graph table (graphs.frame)"))
    ok = frame[frame["status"] == "ok"].set_index("method")
    for name, answer in (("ex_method_short", short), ("ex_method_long", long)):
        require(isinstance(answer, str) and answer in ok.index,
                tr("{name}: use one of the table's method names: {methods}", name=name, methods=list(ok.index)))
    right = {calls: _best(ok, lambda r, c=calls: _total_s(r, c)) for calls in (SHORT_CALLS, LONG_CALLS)}
    ok_short = (_total_s(ok.loc[short], SHORT_CALLS) <= 1.02 * _total_s(ok.loc[right[SHORT_CALLS]], SHORT_CALLS)
                or _ties(ok, short, right[SHORT_CALLS], SHORT_CALLS))  # a tie inside the rounds' spread is right too
    ok_long = (_total_s(ok.loc[long], LONG_CALLS) <= 1.02 * _total_s(ok.loc[right[LONG_CALLS]], LONG_CALLS)
               or _ties(ok, long, right[LONG_CALLS], LONG_CALLS))
    swapped = (not ok_short and not ok_long and short == right[LONG_CALLS] and long == right[SHORT_CALLS])
    require(not swapped, tr("ex_method_short and ex_method_long are swapped: the short process has fewer calls "
                            "to pay back a setup"))
    setup = ok["setup_s"].fillna(0) if "setup_s" in ok else pd.Series(0.0, index=ok.index)
    for name, answer, calls, fine in (("ex_method_short", short, SHORT_CALLS, ok_short),
                                      ("ex_method_long", long, LONG_CALLS, ok_long)):
        if fine:
            continue
        no_setup = _best(ok, lambda r, c=calls: c * float(r["ms"]))
        mixed = _best(ok, lambda r, c=calls, s=setup: float(s[r.name]) + c * float(r["ms"]))  # ms read as seconds
        if answer == mixed and answer != no_setup:
            hint = tr("{name}: units: ms is milliseconds per call, setup_s is seconds: convert (calls × ms / 1000) "
                      "before adding them", name=name)
        elif answer == mixed:  # ignoring the setup and adding ms to seconds pick the same method: name both
            hint = tr("{name}: count the setup too, in the same unit: setup_s is seconds, ms is milliseconds per "
                      "call, so a process of {calls:,} calls takes setup_s + calls × ms / 1000 seconds",
                      name=name, calls=calls)
        elif answer == no_setup:
            hint = tr("{name}: count the setup too: a process of {calls:,} calls takes setup_s + calls × ms / 1000 "
                      "seconds", name=name, calls=calls)
        elif answer == "eager":
            hint = tr("{name}: eager is the baseline, not the default: total every method, the hand-captured graph "
                      "too, not only torch.compile against eager (setup_s + calls × ms / 1000 seconds)", name=name)
        else:
            hint = tr("{name}: a setup is paid once, the time per call {calls:,} times: total each method as "
                      "setup_s + calls × ms / 1000 seconds and take the smallest", name=name, calls=calls)
        raise WrongAnswer(hint)
    verdict(True, "")


# ------------------------------------------------------------------ exercise 3


def _card_runs(card: str) -> set[str]:
    """The precisions a profile's card runs natively (its capability, from fp16lab.hardware)."""
    from fp16lab.hardware import PROFILES, chip_features

    p = PROFILES[card]
    bf16 = chip_features(p.capability, p.name)["bf16_native"]
    return {"fp32", "fp16", "bf16"} if bf16 else {"fp32", "fp16"}


def _build(net: nn.Module, option: str) -> tuple[nn.Module, torch.dtype]:
    from fp16lab.labs.inference.islands import keep_in_fp32

    m = copy.deepcopy(net)
    if option == "fp32":
        return m, torch.float32
    dtype = torch.float16 if option.startswith("fp16") else torch.bfloat16
    if option.endswith("island"):
        keep_in_fp32(m, [_island_name(net)])
    return m.to(dtype), dtype


def _island_name(net: nn.Module) -> str:
    """The block the exercise's net overflows in: the submodule holding the LayerNorm."""
    for name, module in net.named_children():
        if any(isinstance(m, nn.LayerNorm) for m in module.modules()):
            return name
    raise ValueError("net has no LayerNorm block")


def _error(model: nn.Module, dtype: torch.dtype, net: nn.Module, x: torch.Tensor) -> float:
    with torch.no_grad():
        out = model(x.to(dtype)).float()
        ref = net(x)
    if not bool(torch.isfinite(out).all()):
        return math.inf
    return float((out - ref).abs().max() / ref.abs().max())


def _fp32_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.dtype == torch.float32)


def _untouched(net: nn.Module) -> bool:
    """ex_net as its cell built it: every weight FP32 and no island, so the options can be rebuilt from it."""
    from fp16lab.labs.inference.islands import FP32Island

    return (all(p.dtype == torch.float32 for p in net.parameters())
            and not any(isinstance(m, FP32Island) for m in net.modules()))


def _best_plan(net: nn.Module, x: torch.Tensor, card: str) -> str:
    """Among the options the card runs natively and that stay within tolerance: the fewest FP32 weights."""
    runs = _card_runs(card)
    scored = []
    for option in PLAN_OPTIONS:
        if option.split()[0] not in runs:
            continue
        model, dtype = _build(net, option)
        if _error(model, dtype, net, x) <= _TOLERANCE:
            scored.append((_fp32_params(model), PLAN_OPTIONS.index(option), option))
    return min(scored)[2]


def check_card_plan(plan: Any, model: Any, net: nn.Module, x: torch.Tensor) -> None:
    """``plan`` names the right option per card; ``model`` is a correct FP16 model for the T4."""
    require(isinstance(plan, dict) and set(plan) == set(PLAN_CARDS),
            tr("ex_plan must be a dict with one entry per card: {cards}", cards=list(PLAN_CARDS)))
    for card in PLAN_CARDS:
        require(plan[card] in PLAN_OPTIONS, tr("ex_plan[{card!r}] must be one of {options}", card=card,
                                                     options=list(PLAN_OPTIONS)))
        require(plan[card].split()[0] in _card_runs(card),
                tr("ex_plan[{card!r}]: that card does not run {precision} natively (chip_features)", card=card,
                   precision=plan[card].split()[0]))
    require(_untouched(net), tr("ex_net was changed in place (cast or given an island): rebuild it by re-running "
                                "its cell, and work on copies (copy.deepcopy(ex_net))"))
    for card in PLAN_CARDS:
        require(plan[card] == _best_plan(net, x, card),
                tr("ex_plan[{card!r}]: among what the card runs natively and stays within 1 %, "
                   "keep the fewest weights in FP32 (measure each option's error)", card=card))
    require(isinstance(model, nn.Module), tr("assign the model you would ship to the T4 to ex_t4_model"))
    require(model is not net, tr("work on a copy (copy.deepcopy): ex_net must stay as it is"))
    params = list(model.named_parameters())
    require(any(p.dtype == torch.float16 for _, p in params), tr("cast the T4 model to FP16 (.half())"))
    block = _island_name(net)
    fp32 = [n for n, p in params if p.dtype == torch.float32]
    require(_fp32_params(model) <= sum(p.numel() for p in net.get_submodule(block).parameters()),
            tr("keep less in FP32: only the block that overflows"))
    require(all(n.startswith(f"{block}.") for n in fp32),
            tr("the FP32 island is in the wrong place: keep the block that overflows (first_nonfinite) in FP32, "
               "cast the rest to FP16"))
    try:
        err = _error(model, torch.float16, net, x)
    except Exception as exc:  # the learner's model failing: its error as a hint, not the checker's traceback
        raise WrongAnswer(tr("ex_t4_model(ex_x.half()) failed: {exc}", exc=exc)) from None
    require(math.isfinite(err), tr("the output still has inf/NaN: does the island reach from the layer that "
                                   "makes the large values to the one that shrinks them?"))
    kept = dict(net.named_parameters())
    exact = all(torch.equal(p, kept[n.replace(".module.", ".")]) for n, p in model.named_parameters()
                if n in fp32 and n.replace(".module.", ".") in kept)
    require(exact and err <= _TOLERANCE, tr("the island's weights were rounded: make the island before casting"))
    verdict(True, "")
