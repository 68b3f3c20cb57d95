"""Tensor Core alignment: round sizes up, measure the matmul sawtooth, audit and pad models.

Tensor Cores read their operands in 16-byte pieces. A matrix whose leading dimension is
not a multiple of 16 bytes (8 fp16/bf16 elements, 4 tf32 elements) forces cuBLAS/cuDNN
onto slower kernels, or on older stacks off Tensor Cores entirely. This module finds
such sizes in a model (:func:`audit`), measures what they cost (:func:`matmul_sweep`) and
pads output heads and vocabularies without changing what the model computes
(:func:`pad_layers`).
"""

from __future__ import annotations

import html
import math
import re
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import torch
from torch import nn

from fp16lab.precision import Precision, check_precision_supported, parse_precision
from fp16lab.timing import matmul_tflops

__all__ = [
    "ALIGNMENT_BYTES",
    "alignment_for",
    "pad_to_multiple",
    "is_aligned",
    "wave_quantization",
    "matmul_sweep",
    "Finding",
    "Skipped",
    "AuditReport",
    "audit",
    "PaddedLinear",
    "pad_linear",
    "pad_embedding",
    "pad_layers",
    "tensor_core_kind",
    "cuda_kernels",
]

#: Tensor Cores want every leading dimension to be a multiple of 16 bytes.
ALIGNMENT_BYTES = 16

_ELEMENT_BYTES = {Precision.FP16: 2, Precision.BF16: 2, Precision.TF32: 4}
_TC_PRECISIONS = tuple(p.value for p in _ELEMENT_BYTES)


def _positive_int(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


def alignment_for(precision: "Precision | str" = "fp16") -> int:
    """Elements per 16 bytes for a Tensor Core precision: 8 for fp16/bf16, 4 for tf32.

    Default ``precision="fp16"``. True ``fp32`` does not run on Tensor Cores at all, so it
    has no Tensor Core alignment and is refused with a ``ValueError`` (use ``tf32``).
    """
    p = parse_precision(precision)
    if p not in _ELEMENT_BYTES:
        raise ValueError(
            f"precision {p.value!r} (true FP32) does not use Tensor Cores, so it has no Tensor "
            f"Core alignment; allowed: {', '.join(map(repr, _TC_PRECISIONS))}"
        )
    return ALIGNMENT_BYTES // _ELEMENT_BYTES[p]


def pad_to_multiple(n: int, multiple: int = 8) -> int:
    """Smallest multiple of ``multiple`` (default 8) that is >= ``n``: 50257 -> 50264."""
    _positive_int("n", n)
    _positive_int("multiple", multiple)
    return -(-n // multiple) * multiple


def is_aligned(n: int, multiple: int = 8) -> bool:
    """True when ``n`` is a multiple of ``multiple`` (default 8)."""
    return pad_to_multiple(n, multiple) == n


def wave_quantization(m: int, n: int, sm_count: int, tile: tuple[int, int] = (128, 128)) -> dict[str, float]:
    """How well an m×n output fills the GPU when cut into ``tile`` blocks (default 128×128).

    A GEMM kernel gives each output tile to one SM; ``sm_count`` tiles run at once (one
    *wave*). A last, partly filled wave costs a full wave of time. Tile sizes are chosen
    by cuBLAS per problem, so this is a model for reasoning, not a prediction. Returns
    tiles, waves (fractional), full_waves (rounded up) and efficiency (0..1]: the share
    of the launched waves doing useful work, times the share of each tile inside the matrix.
    """
    _positive_int("m", m)
    _positive_int("n", n)
    _positive_int("sm_count", sm_count)
    tm, tn = (_positive_int("tile[0]", tile[0]), _positive_int("tile[1]", tile[1]))
    tiles = math.ceil(m / tm) * math.ceil(n / tn)
    waves = tiles / sm_count
    full_waves = math.ceil(waves)
    tile_fill = (m * n) / (tiles * tm * tn)
    return {
        "m": m,
        "n": n,
        "tiles": tiles,
        "waves": waves,
        "full_waves": full_waves,
        "wave_efficiency": waves / full_waves,
        "tile_efficiency": tile_fill,
        "efficiency": waves / full_waves * tile_fill,
    }


# ---------------------------------------------------------------------------- sweep


def _as_shape(s: object) -> tuple[int, int, int]:
    if isinstance(s, int) and not isinstance(s, bool):
        s = (s, s, s)
    if not isinstance(s, Sequence) or isinstance(s, str) or len(s) != 3:
        raise ValueError(f"a shape is an int n (for n×n×n) or a tuple (m, n, k); got {s!r}")
    m, n, k = s
    return (_positive_int("m", m), _positive_int("n", n), _positive_int("k", k))


def matmul_sweep(
    shapes: Iterable["int | tuple[int, int, int]"],
    precisions: "Iterable[Precision | str] | Precision | str" = ("fp16",),
    device: "torch.device | str | None" = None,
    *,
    min_run_time: float = 0.1,
    seed: int = 0,
    progress: bool = True,
) -> pd.DataFrame:
    """Achieved TFLOP/s of (m×k)@(k×n) for every shape × precision, as a DataFrame.

    Each point is timed by :func:`fp16lab.timing.matmul_tflops` (fresh random inputs,
    warm-up, synchronised blocks, the median). ``shapes`` are ints n (n×n×n) or (m, n, k)
    tuples. Defaults: ``precisions=("fp16",)``, ``device=None`` (cuda > mps > cpu),
    ``min_run_time=0.1`` s per point, ``seed=0``, a tqdm progress bar. Columns: m, n, k,
    precision, seconds, iqr_s, tflops, aligned (all of m, n, k multiples of the
    precision's Tensor Core alignment; NA for fp32), peak_tflops and pct_of_peak (NaN when
    the chip is not in :data:`fp16lab.hardware.PEAK_TFLOPS` or not a CUDA GPU), device.
    """
    from tqdm.auto import tqdm

    from fp16lab.device import choose_device
    from fp16lab.hardware import gpu_facts

    shape_list = [_as_shape(s) for s in shapes]
    if not shape_list:
        raise ValueError("shapes is empty; give at least one int n or (m, n, k)")
    if isinstance(precisions, (str, Precision)):
        precisions = [precisions]
    prec_list = [parse_precision(p) for p in precisions]
    if not prec_list:
        raise ValueError("precisions is empty; allowed: 'fp32', 'tf32', 'fp16', 'bf16'")
    if min_run_time <= 0:
        raise ValueError(f"min_run_time must be > 0, got {min_run_time!r}")
    dev = choose_device(device)
    facts = gpu_facts(dev) if dev.type == "cuda" else None
    if facts is not None:
        name, peak = facts.label, facts.peak
    else:
        name, peak = dev.type.upper(), None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # CPU half-precision warning: said once below
        for p in prec_list:
            check_precision_supported(p, dev)
    if dev.type == "cpu" and any(p in (Precision.FP16, Precision.BF16) for p in prec_list):
        warnings.warn(
            "fp16/bf16 matmuls on the CPU are slow and use no Tensor Cores; these are not FP16 "
            "speed figures",
            stacklevel=2,
        )
    rows = []
    jobs = [(p, s) for p in prec_list for s in shape_list]
    for p, (m, n, k) in tqdm(jobs, desc="matmul sweep", disable=not progress, leave=False):
        r = matmul_tflops(m, n, k, p, dev, min_run_time=min_run_time, seed=seed)
        if p in _ELEMENT_BYTES:
            a = alignment_for(p)
            r["aligned"] = all(x % a == 0 for x in (m, n, k))
        else:
            r["aligned"] = pd.NA
        pk = getattr(peak, p.value, None) if peak is not None else None
        r["peak_tflops"] = float(pk) if pk else math.nan
        r["pct_of_peak"] = 100.0 * r["tflops"] / pk if pk else math.nan  # type: ignore[operator]
        r["device"] = name
        rows.append(r)
    return pd.DataFrame(rows)


# ---------------------------------------------------------------------------- audit

_CONV = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)
_EMBED = (nn.Embedding, nn.EmbeddingBag)
# Elementwise/normalisation layers with parameters: they never run on Tensor Cores.
_NOT_GEMM = tuple(
    t
    for t in (
        getattr(nn, n, None)
        for n in (
            "LayerNorm", "GroupNorm", "RMSNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d",
            "InstanceNorm1d", "InstanceNorm2d", "InstanceNorm3d", "LocalResponseNorm", "PReLU",
            "SyncBatchNorm",
        )
    )
    if t is not None
)


@dataclass(frozen=True)
class Finding:
    """One size of one layer checked against the Tensor Core alignment."""

    module: str
    type: str
    dim: str
    size: int
    multiple: int
    suggested: int
    reason: str

    @property
    def aligned(self) -> bool:
        return self.size % self.multiple == 0


@dataclass(frozen=True)
class Skipped:
    """A module the audit did not check, and why."""

    module: str
    type: str
    reason: str


@dataclass
class AuditReport:
    """What :func:`audit` found; renders as a table of the misaligned sizes in Jupyter."""

    precision: str
    multiple: int
    findings: list[Finding] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)
    modules_checked: int = 0

    @property
    def misaligned(self) -> list[Finding]:
        return [f for f in self.findings if not f.aligned]

    @property
    def ok(self) -> bool:
        """True when every checked size is aligned."""
        return not self.misaligned

    def to_frame(self, include_aligned: bool = False) -> pd.DataFrame:
        """The findings as a DataFrame; only misaligned ones unless ``include_aligned``."""
        rows = self.findings if include_aligned else self.misaligned
        cols = ["module", "type", "dim", "size", "multiple", "aligned", "suggested", "reason"]
        return pd.DataFrame(
            [(f.module, f.type, f.dim, f.size, f.multiple, f.aligned, f.suggested, f.reason) for f in rows],
            columns=cols,
        )

    def skipped_frame(self) -> pd.DataFrame:
        return pd.DataFrame([(s.module, s.type, s.reason) for s in self.skipped], columns=["module", "type", "reason"])

    def summary(self) -> str:
        return (
            f"{self.modules_checked} layers checked for {self.precision} (multiple of {self.multiple}): "
            f"{len(self.misaligned)} misaligned size(s) of {len(self.findings)} checked, "
            f"{len(self.skipped)} module(s) skipped"
        )

    def __str__(self) -> str:
        lines = [self.summary()]
        if self.misaligned:
            lines.append(self.to_frame().to_string(index=False))
        if self.skipped:
            lines.append("skipped:")
            lines.append(self.skipped_frame().to_string(index=False))
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        parts = [f"<p><b>Alignment audit</b> &mdash; {html.escape(self.summary())}</p>"]
        if self.misaligned:
            parts.append(self.to_frame().to_html(index=False))
        else:
            parts.append("<p>Every checked size is aligned.</p>")
        if self.skipped:
            parts.append("<p>Skipped:</p>" + self.skipped_frame().to_html(index=False))
        return "".join(parts)


_REASONS = {
    "in_features": "K of y = x·Wᵀ: the leading dimension of x and W",
    "out_features": "N of y = x·Wᵀ: the leading dimension of y (an output head or vocabulary)",
    "num_embeddings": "the vocabulary: N of the logits matmul when tied to an output head (the lookup alone is memory-bound)",
    "embedding_dim": "the hidden size: K of every matmul that reads these vectors",
    "in_channels": "C of the input: K of the implicit GEMM (cuDNN Tensor Core kernels want C % {m} == 0)",
    "out_channels": "K filters: N of the implicit GEMM",
    "rows": "rows of x (batch × tokens): M of the forward matmul, K of the weight-gradient one (not a leading dimension: costs less than a misaligned width)",
}


def _reason(dim: str, multiple: int, precision: str, extra: str = "") -> str:
    base = _REASONS[dim].format(m=multiple)
    return f"{base}; {precision} Tensor Cores want multiples of {multiple}{extra}"


def _describe_params(m: nn.Module) -> str:
    ps = [f"{n}{list(p.shape)}" for n, p in m.named_parameters(recurse=False)]
    return ", ".join(ps[:4]) + (" ..." if len(ps) > 4 else "")


def _check(report: AuditReport, name: str, m: nn.Module, tied: Mapping[int, list[str]]) -> None:
    a, prec = report.multiple, report.precision
    typ = type(m).__name__
    weight = getattr(m, "weight", None)
    if isinstance(weight, nn.parameter.UninitializedParameter):
        report.skipped.append(Skipped(name, typ, "lazy module not initialised yet: run one forward pass first"))
        return

    def add(dim: str, size: int, extra: str = "") -> None:
        report.findings.append(Finding(name, typ, dim, int(size), a, pad_to_multiple(int(size), a), _reason(dim, a, prec, extra)))

    share = ""
    if isinstance(weight, torch.Tensor) and len(tied.get(id(weight), [])) > 1:
        others = [o for o in tied[id(weight)] if o != name]
        share = f" (weight tied with {', '.join(others)}: pad them together)"
    if isinstance(m, nn.Linear):
        add("in_features", m.in_features)
        add("out_features", m.out_features, share)
    elif isinstance(m, _EMBED):
        add("num_embeddings", m.num_embeddings, share)
        add("embedding_dim", m.embedding_dim)
    elif isinstance(m, _CONV):
        g = m.groups
        if g > 1 and g == m.in_channels:
            report.skipped.append(
                Skipped(name, typ, "depthwise convolution: memory-bound, not a Tensor Core GEMM; alignment does not apply")
            )
            return
        per = " per group" if g > 1 else ""
        cin, cout = m.in_channels // g, m.out_channels // g
        extra_in = ""
        if cin <= 4:
            extra_in = " (an RGB/grey first layer is usual: cuDNN pads small C itself; one layer of many)"
        add("in_channels", cin, per + extra_in)
        add("out_channels", cout, per + share)
    report.modules_checked += 1


def audit(
    model: nn.Module,
    example_input: Any = None,
    precision: "Precision | str" = "fp16",
) -> AuditReport:
    """Report every Linear/Embedding/Conv size that misses Tensor Core alignment.

    Defaults: ``example_input=None`` (only layer sizes are checked); given a tensor, a tuple
    of positional arguments or a dict of keyword arguments, the model is run once under
    ``torch.no_grad()`` with forward hooks and the rows (batch × tokens) reaching each
    Linear are checked too. ``precision="fp16"`` (multiple of 8; bf16 8, tf32 4). Modules
    with their own parameters that the audit does not understand (e.g. RNNs, the fused
    in-projection of MultiheadAttention) are listed as skipped, never an error.
    """
    if not isinstance(model, nn.Module):
        raise ValueError(f"model must be a torch.nn.Module, got {type(model).__name__}")
    p = parse_precision(precision)
    report = AuditReport(precision=p.value, multiple=alignment_for(p))

    tied: dict[int, list[str]] = {}
    for mname, mod in model.named_modules(remove_duplicate=False):
        for pname, par in mod.named_parameters(recurse=False):
            if pname == "weight":
                tied.setdefault(id(par), [])
                if (mname or "<root>") not in tied[id(par)]:
                    tied[id(par)].append(mname or "<root>")

    checked: list[tuple[str, nn.Module]] = []
    for name, mod in model.named_modules():
        name = name or "<root>"
        try:
            if isinstance(mod, (nn.Linear, *_EMBED, *_CONV)):
                _check(report, name, mod, tied)
                checked.append((name, mod))
            elif isinstance(mod, _NOT_GEMM):
                continue
            elif any(True for _ in mod.parameters(recurse=False)):
                report.skipped.append(
                    Skipped(name, type(mod).__name__, f"type not understood by the audit; own parameters: {_describe_params(mod)}")
                )
        except Exception as exc:  # never crash on an odd module: report it
            report.skipped.append(Skipped(name, type(mod).__name__, f"could not inspect: {type(exc).__name__}: {exc}"))

    if example_input is not None:
        _audit_rows(model, example_input, report, checked)
    return report


def _audit_rows(model: nn.Module, example_input: Any, report: AuditReport, checked: list[tuple[str, nn.Module]]) -> None:
    seen: dict[str, list[int]] = {}
    handles = []

    def hook_for(name: str, mod: nn.Linear) -> Callable[..., None]:
        def hook(_m: nn.Module, args: tuple[Any, ...]) -> None:
            x = args[0] if args else None
            if isinstance(x, torch.Tensor) and x.dim() >= 1 and x.shape[-1] == mod.in_features:
                rows = x.numel() // max(mod.in_features, 1)
                if rows >= 1 and rows not in seen.setdefault(name, []):
                    seen[name].append(rows)

        return hook

    for name, mod in checked:
        if isinstance(mod, nn.Linear):
            handles.append(mod.register_forward_pre_hook(hook_for(name, mod)))
    try:
        with torch.no_grad():
            if isinstance(example_input, Mapping):
                model(**example_input)
            elif isinstance(example_input, tuple):
                model(*example_input)
            else:
                model(example_input)
    finally:
        for h in handles:
            h.remove()
    a, prec = report.multiple, report.precision
    for name, mod in checked:
        for rows in seen.get(name, []):
            report.findings.append(
                Finding(name, type(mod).__name__, "rows", rows, a, pad_to_multiple(rows, a), _reason("rows", a, prec))
            )


# --------------------------------------------------------------------------- padding


class PaddedLinear(nn.Module):
    """A Linear computed at a padded width whose output is sliced back to the original width.

    ``inner`` has ``padded_features`` outputs (the extra rows of its weight and bias start
    at zero and receive zero gradient); :meth:`forward` returns the first ``out_features``
    columns, so downstream code (softmax, loss) sees exactly the original function.
    """

    def __init__(self, inner: nn.Linear, out_features: int) -> None:
        super().__init__()
        if not isinstance(inner, nn.Linear):
            raise ValueError(f"inner must be an nn.Linear, got {type(inner).__name__}")
        if not 1 <= out_features <= inner.out_features:
            raise ValueError(f"out_features must be in 1..{inner.out_features}, got {out_features!r}")
        self.inner = inner
        self.out_features = out_features

    @property
    def in_features(self) -> int:
        return self.inner.in_features

    @property
    def padded_features(self) -> int:
        return self.inner.out_features

    @property
    def weight(self) -> torch.Tensor:
        """The padded weight (``padded_features`` × ``in_features``)."""
        return self.inner.weight

    @property
    def bias(self) -> "nn.Parameter | None":
        return self.inner.bias

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.inner(x)[..., : self.out_features]

    def extra_repr(self) -> str:
        return f"out_features={self.out_features} (computed at {self.padded_features})"


def _padded_rows(weight: torch.Tensor, rows: int) -> nn.Parameter:
    new = torch.zeros((rows, *weight.shape[1:]), dtype=weight.dtype, device=weight.device)
    with torch.no_grad():
        new[: weight.shape[0]].copy_(weight)
    return nn.Parameter(new, requires_grad=weight.requires_grad)


def pad_linear(linear: nn.Linear, multiple: int = 8) -> PaddedLinear:
    """A :class:`PaddedLinear` copy of ``linear`` with ``out_features`` padded to ``multiple`` (default 8).

    Only the output side is padded: padding ``in_features`` would need the layer before
    to produce the extra columns (pad the hidden size in the model's config instead).
    """
    if not isinstance(linear, nn.Linear):
        raise ValueError(f"pad_linear needs an nn.Linear, got {type(linear).__name__}")
    _positive_int("multiple", multiple)
    w = linear.weight
    new_out = pad_to_multiple(linear.out_features, multiple)
    inner = nn.Linear(linear.in_features, new_out, bias=linear.bias is not None, device=w.device, dtype=w.dtype)
    inner.weight = _padded_rows(w, new_out)
    if linear.bias is not None:
        b = linear.bias
        nb = torch.zeros(new_out, dtype=b.dtype, device=b.device)
        with torch.no_grad():
            nb[: linear.out_features].copy_(b)
        inner.bias = nn.Parameter(nb, requires_grad=b.requires_grad)
    return PaddedLinear(inner, linear.out_features)


def pad_embedding(embedding: nn.Embedding, multiple: int = 8) -> nn.Embedding:
    """A copy of ``embedding`` with ``num_embeddings`` padded to ``multiple`` (default 8).

    The extra rows are zero and are never looked up by valid indices (< the original
    ``num_embeddings``), so outputs and gradients of the original rows are unchanged.
    ``padding_idx``, ``max_norm``, ``scale_grad_by_freq`` and ``sparse`` are kept.
    """
    if not isinstance(embedding, nn.Embedding):
        raise ValueError(f"pad_embedding needs an nn.Embedding, got {type(embedding).__name__}")
    _positive_int("multiple", multiple)
    w = embedding.weight
    rows = pad_to_multiple(embedding.num_embeddings, multiple)
    new = nn.Embedding(
        rows,
        embedding.embedding_dim,
        padding_idx=embedding.padding_idx,
        max_norm=embedding.max_norm,
        norm_type=embedding.norm_type,
        scale_grad_by_freq=embedding.scale_grad_by_freq,
        sparse=embedding.sparse,
        device=w.device,
        dtype=w.dtype,
    )
    new.weight = _padded_rows(w, rows)
    return new


def _set_submodule(model: nn.Module, name: str, new: nn.Module) -> None:
    parent_name, _, child = name.rpartition(".")
    parent = model.get_submodule(parent_name) if parent_name else model
    setattr(parent, child, new)


def pad_layers(model: nn.Module, names: "str | Sequence[str]", multiple: int = 8) -> nn.Module:
    """Pad the named Linear (output side) and Embedding layers of ``model`` in place; return it.

    Linears become :class:`PaddedLinear` (output sliced back), Embeddings get extra zero
    rows: the model computes the same function on the original outputs. Tied weights:
    a layer whose weight is shared with another module must be padded together with it
    (pass both names, e.g. ``["wte", "lm_head"]``); the padded layers then share one
    padded weight again. Naming only one of them raises ``ValueError``. Default
    ``multiple=8``; 64 is a common choice for vocabularies (50257 -> 50304).
    Limit: code that reads ``layer.weight`` directly (e.g. ``F.linear(x, wte.weight)``)
    sees the padded weight and is not sliced.
    """
    if isinstance(names, str):
        names = [names]
    names = list(names)
    if not names:
        raise ValueError("names is empty; give the qualified names of Linear/Embedding layers to pad")
    _positive_int("multiple", multiple)
    all_names = dict(model.named_modules())
    mods: dict[str, nn.Module] = {}
    for n in names:
        if n not in all_names:
            close = [k for k in all_names if k and k.split(".")[-1] == n.split(".")[-1]]
            raise ValueError(f"no module named {n!r} in the model; similar: {close[:5] or 'none'}")
        m = all_names[n]
        if isinstance(m, PaddedLinear):
            raise ValueError(f"{n!r} is already padded ({m.extra_repr()})")
        if type(m) not in (nn.Linear, nn.Embedding):
            raise ValueError(f"{n!r} is a {type(m).__name__}; pad_layers pads nn.Linear and nn.Embedding only")
        mods[n] = m

    # Which modules hold each named layer's weight? (tied / shared layers)
    holders: dict[int, list[str]] = {}
    for mname, mod in model.named_modules(remove_duplicate=False):
        for pname, par in mod.named_parameters(recurse=False):
            if pname == "weight" and mname not in holders.setdefault(id(par), []):
                holders[id(par)].append(mname)
    for n, m in mods.items():
        sharers = holders.get(id(m.weight), [n])
        missing = [s for s in sharers if s not in mods]
        if missing:
            raise ValueError(
                f"{n!r} shares its weight with {missing} (tied/shared layer); padding it alone would "
                f"untie them. Pad them together: pad_layers(model, {sorted(set(sharers))!r}, multiple={multiple})"
            )

    new_weight: dict[int, nn.Parameter] = {}
    for n, m in mods.items():
        key = id(m.weight)
        if isinstance(m, nn.Embedding):
            new: nn.Module = pad_embedding(m, multiple)
        else:
            new = pad_linear(m, multiple)  # type: ignore[arg-type]
        if key in new_weight:  # tied: re-share the padded weight
            if new.weight.shape != new_weight[key].shape:
                raise ValueError(f"tied layers {holders[key]} pad to different shapes; cannot re-tie")
            target = new.inner if isinstance(new, PaddedLinear) else new
            target.weight = new_weight[key]
        else:
            w = new.weight
            assert isinstance(w, nn.Parameter)
            new_weight[key] = w
        _set_submodule(model, n, new)
    return model


# ---------------------------------------------------------------------------- kernels

_NOT_TC = re.compile(r"sgemm|dgemm|gemv|_sss_|ffma|gemmSN", re.I)
_TC = re.compile(r"nvjet|xmma|gmma|hmma|wmma|tensorop|h884|h1688|h16816|s1688|s16816|16832|s161616|tf32", re.I)
_GEMM = re.compile(r"gemm|nvjet|xmma|cutlass|matmul|conv|wgrad|dgrad|fprop", re.I)


def tensor_core_kind(kernel_name: str) -> str:
    """Guess from a CUDA kernel's name whether it is a Tensor Core GEMM/conv.

    Returns "tensor core", "CUDA cores" or "not a GEMM". It is a reading of NVIDIA's
    naming habits (nvjet/xmma/gmma/hmma/tensorop/h16816... mark Tensor Core kernels;
    sgemm/gemv mark CUDA-core ones), a heuristic rather than a measurement.
    """
    if not isinstance(kernel_name, str):
        raise ValueError(f"kernel_name must be a str, got {kernel_name!r}")
    if _NOT_TC.search(kernel_name):
        return "CUDA cores"
    if _TC.search(kernel_name):
        return "tensor core"
    if _GEMM.search(kernel_name):
        return "CUDA cores"
    return "not a GEMM"


def cuda_kernels(fn: Callable[[], object], *, warmup: int = 2) -> pd.DataFrame:
    """Run ``fn()`` once under ``torch.profiler`` and list the CUDA kernels it launched.

    Default ``warmup=2`` unprofiled calls first (so autotuning is not what is seen).
    Columns: kernel, calls, total_us, kind (:func:`tensor_core_kind`). Needs a CUDA GPU.
    """
    if not torch.cuda.is_available():
        raise RuntimeError("cuda_kernels needs a CUDA GPU: on the CPU no CUDA kernels run")
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    agg: dict[str, list[float]] = {}
    for e in prof.events():
        if e.device_type == DeviceType.CUDA:
            a = agg.setdefault(e.name, [0, 0.0])
            a[0] += 1
            a[1] += e.time_range.elapsed_us()
    rows = [(k, int(c), float(t), tensor_core_kind(k)) for k, (c, t) in agg.items()]
    df = pd.DataFrame(rows, columns=["kernel", "calls", "total_us", "kind"])
    return df.sort_values("total_us", ascending=False, ignore_index=True)
