"""What autocast did, layer by layer: dtypes in and out, and the first inf/NaN in a forward pass."""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Any

import pandas as pd
import torch
from torch import nn

from fp16lab.checks import boolean, say
from fp16lab.debug.common import (
    call,
    check_batch,
    check_module,
    check_precision,
    dtype_names,
    eval_mode,
    module_names,
    tensors,
    to_device,
)
from fp16lab.device import resolve_model_device
from fp16lab.precision import Precision, autocast, precision_context

__all__ = ["dtype_trace", "first_nonfinite", "NonFiniteReport", "FP16_MAX"]

FP16_MAX = float(torch.finfo(torch.float16).max)  # 65504


def _is_leaf(mod: nn.Module) -> bool:
    return next(iter(mod.children()), None) is None


# ---------------------------------------------------------------------------- dtype trace


def dtype_trace(
    model: nn.Module,
    example_input: Any,
    precision: "Precision | str" = "fp16",
    device: "torch.device | str | None" = None,
    *,
    leaves_only: bool = True,
) -> pd.DataFrame:
    """Run ``model`` once on ``example_input`` under autocast and list each module's dtypes.

    Shows what autocast actually did (which layers ran in fp16/bf16, which stayed fp32)
    instead of what one assumes. ``example_input`` is a tensor, a tuple/list of positional
    inputs or a dict of keyword inputs; it is moved to ``device`` (default ``None``: the
    model's device). ``precision`` defaults to ``"fp16"``; ``"fp32"``/``"tf32"`` trace with
    autocast off. ``leaves_only=True`` (default) lists modules without children; ``False``
    lists containers too. The model runs in eval mode under ``torch.no_grad()`` (no
    BatchNorm statistics change) and its mode is restored afterwards.

    Returns a DataFrame, one row per module call in execution order, with columns
    ``module``, ``type``, ``input_dtypes``, ``output_dtypes``, ``param_dtypes`` and
    ``low_precision`` (the output is in the autocast dtype); ``frame.attrs`` holds
    precision, device and autocast dtype.
    """
    model = check_module(model)
    dev = resolve_model_device(model, device)
    p = check_precision(precision, dev)
    leaves_only = boolean("leaves_only", leaves_only)
    check_batch(example_input)
    example = to_device(example_input, dev)
    low = p.autocast_dtype
    names = module_names(model)
    rows: list[dict[str, Any]] = []

    def hook(mod: nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
        if leaves_only and not _is_leaf(mod):
            return
        params = dtype_names(list(mod.parameters(recurse=False)))
        out_dtypes = [t.dtype for t in tensors(output) if t.is_floating_point()]
        rows.append(
            {
                "module": names.get(mod, "?"),
                "type": type(mod).__name__,
                "input_dtypes": dtype_names((args, kwargs)),
                "output_dtypes": dtype_names(output),
                "param_dtypes": params or "-",
                "low_precision": bool(low is not None and out_dtypes and all(d == low for d in out_dtypes)),
            }
        )

    handles = [m.register_forward_hook(hook, with_kwargs=True) for m in model.modules()]
    try:
        with eval_mode(model), torch.no_grad(), precision_context(p), autocast(p, dev):
            call(model, example)
    finally:
        for h in handles:
            h.remove()
    frame = pd.DataFrame(
        rows, columns=["module", "type", "input_dtypes", "output_dtypes", "param_dtypes", "low_precision"]
    )
    frame.attrs.update(
        {"precision": p.value, "device": str(dev), "autocast_dtype": str(low).replace("torch.", "") if low else None}
    )
    return frame


# ---------------------------------------------------------------------------- non-finite


@dataclass
class NonFiniteReport:
    """Where inf/NaN first appeared in a forward pass, and each layer's largest magnitude.

    ``first`` is the qualified name of the first module (in the order modules finished
    their forward) whose output holds inf or NaN, ``"(input)"`` when the input already
    did, or ``None`` when every output was finite. ``table`` has one row per module call.
    """

    first: str | None
    table: pd.DataFrame
    precision: str
    device: str

    @property
    def found(self) -> bool:
        """True when some output (or the input) held inf or NaN."""
        return self.first is not None

    @property
    def first_row(self) -> pd.Series | None:
        """The table row of the first non-finite output (None when all finite)."""
        bad = self.table[~self.table["finite"]]
        return None if bad.empty else bad.iloc[0]

    def __str__(self) -> str:
        if self.first is None:
            peak = self.table["max_abs"].max() if len(self.table) else float("nan")
            return say("all outputs finite under {precision} (largest |value| {peak:.4g})", precision=self.precision,
                       peak=peak)
        row = self.first_row
        assert row is not None
        return say("first non-finite output under {precision}: {first} ({type}, {dtype}): {n_inf} inf, {n_nan} NaN",
                   precision=self.precision, first=self.first, type=row["type"], dtype=row["dtype"],
                   n_inf=row["n_inf"], n_nan=row["n_nan"])

    def __repr__(self) -> str:
        return f"NonFiniteReport({self})"

    def _repr_html_(self) -> str:
        colour = "#1a7f37" if self.first is None else "#cf222e"
        styled = self.table.style.apply(
            lambda r: ["background-color:#ffd7d5" if not r["finite"] else "" for _ in r], axis=1
        ).format({"max_abs": "{:.4g}", "vs_fp16_max": "{:.3g}"})
        return (
            f'<div style="border-left:4px solid {colour};padding:4px 8px">{html.escape(str(self))}</div>'
            + styled.to_html()
        )


def _stats(mod_name: str, mod: nn.Module, output: Any) -> dict[str, Any] | None:
    found = [t.detach() for t in tensors(output) if t.is_floating_point() or t.is_complex()]
    if not found:
        return None
    n_inf = n_nan = 0
    max_abs = 0.0
    for t in found:
        a = t.abs()
        finite = torch.isfinite(a)
        n_inf += int(torch.isinf(a).sum())
        n_nan += int(torch.isnan(a).sum())
        if bool(finite.any()):
            max_abs = max(max_abs, float(a[finite].max().float()))
    return {
        "module": mod_name,
        "type": type(mod).__name__,
        "dtype": dtype_names(found),
        "max_abs": max_abs,
        "vs_fp16_max": max_abs / FP16_MAX,
        "n_inf": n_inf,
        "n_nan": n_nan,
        "finite": n_inf == 0 and n_nan == 0,
    }


def first_nonfinite(
    model: nn.Module,
    example_input: Any,
    precision: "Precision | str" = "fp16",
    device: "torch.device | str | None" = None,
) -> NonFiniteReport:
    """Run ``model`` once under autocast and report the first module whose output has inf/NaN.

    Forward hooks on every module (containers too: a custom module whose own code, e.g. a
    hand-written ``exp``, overflows is found even when its children are finite) record,
    in the order modules finish, the output dtype, the largest finite magnitude
    (``max_abs``, and as a fraction of fp16's maximum 65504) and the inf/NaN counts.
    Defaults: ``precision="fp16"``, ``device=None`` (the model's device). Runs in eval
    mode under ``torch.no_grad()``; the model's mode is restored.
    """
    model = check_module(model)
    dev = resolve_model_device(model, device)
    p = check_precision(precision, dev)
    check_batch(example_input)
    example = to_device(example_input, dev)
    names = module_names(model)
    rows: list[dict[str, Any]] = []
    first_in = _stats("(input)", model, example)
    if first_in is not None:
        first_in["type"] = "input"
        rows.append(first_in)

    def hook(mod: nn.Module, args: tuple, output: Any) -> None:
        row = _stats(names.get(mod, "?"), mod, output)
        if row is not None:
            rows.append(row)

    handles = [m.register_forward_hook(hook) for m in model.modules()]
    try:
        with eval_mode(model), torch.no_grad(), precision_context(p), autocast(p, dev):
            call(model, example)
    finally:
        for h in handles:
            h.remove()
    cols = ["module", "type", "dtype", "max_abs", "vs_fp16_max", "n_inf", "n_nan", "finite"]
    table = pd.DataFrame(rows, columns=cols)
    bad = table[~table["finite"].astype(bool)]
    first = None if bad.empty else str(bad.iloc[0]["module"])
    return NonFiniteReport(first=first, table=table, precision=p.value, device=str(dev))
