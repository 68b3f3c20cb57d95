"""The model audit: every Linear/Embedding/Conv size that misses Tensor Core alignment, and the fix.

Each :class:`Finding` says whether :func:`fp16lab.align.pad_layers` can fix it
(``paddable``: output heads and vocabularies, tied ones together) and otherwise what to
change (``fix``): input widths and convolution channels are the model's design, and the
rows reaching a layer are the batch size times the tokens.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
import torch
from torch import nn

from fp16lab.align.pad import Sharing
from fp16lab.align.sizes import parsed_alignment, round_up
from fp16lab.checks import instance, say
from fp16lab.debug.common import call, check_batch
from fp16lab.precision import Precision, parse_precision

__all__ = ["Finding", "Skipped", "AuditReport", "audit"]

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
    """One size of one layer checked against the Tensor Core alignment, and how to fix it.

    ``paddable`` is True when :func:`fp16lab.align.pad_layers` fixes it: ``pad_with`` then
    holds the layer names to pass (tied layers together). Otherwise ``fix`` says what to
    change instead.
    """

    module: str
    type: str
    dim: str
    size: int
    multiple: int
    suggested: int
    reason: str
    paddable: bool = False
    pad_with: tuple[str, ...] = ()
    fix: str = ""

    @property
    def aligned(self) -> bool:
        return self.size % self.multiple == 0


@dataclass(frozen=True)
class Skipped:
    """A module the audit did not check, and why."""

    module: str
    type: str
    reason: str


_COLUMNS = ["module", "type", "dim", "size", "multiple", "aligned", "suggested", "paddable", "fix", "reason"]


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

    def pad_names(self) -> list[str]:
        """The names to pass to :func:`fp16lab.align.pad_layers` to fix every paddable finding."""
        out: list[str] = []
        for f in self.misaligned:
            for n in f.pad_with if f.paddable else ():
                if n not in out:
                    out.append(n)
        return out

    def to_frame(self, include_aligned: bool = False) -> pd.DataFrame:
        """The findings as a DataFrame; only misaligned ones unless ``include_aligned``."""
        rows = self.findings if include_aligned else self.misaligned
        return pd.DataFrame(
            [(f.module, f.type, f.dim, f.size, f.multiple, f.aligned, f.suggested, f.paddable, f.fix, f.reason)
             for f in rows],
            columns=_COLUMNS,
        )

    def skipped_frame(self) -> pd.DataFrame:
        return pd.DataFrame([(s.module, s.type, s.reason) for s in self.skipped], columns=["module", "type", "reason"])

    def summary(self) -> str:
        pad = self.pad_names()
        fix = say("; pad_layers(model, {pad!r}) fixes the paddable ones", pad=pad) if pad else ""
        return say("{n} layers checked for {precision} (multiple of {multiple}): {bad} misaligned size(s) of {sizes} "
                   "checked, {skipped} module(s) skipped{fix}", n=self.modules_checked, precision=self.precision,
                   multiple=self.multiple, bad=len(self.misaligned), sizes=len(self.findings),
                   skipped=len(self.skipped), fix=fix)

    def __str__(self) -> str:
        lines = [self.summary()]
        if self.misaligned:
            lines.append(self.to_frame().drop(columns=["reason"]).to_string(index=False))
        if self.skipped:
            lines.append(say("skipped:"))
            lines.append(self.skipped_frame().to_string(index=False))
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)

    def _repr_html_(self) -> str:
        parts = [f"<p><b>{say('Alignment audit')}</b> &mdash; {html.escape(self.summary())}</p>"]
        if self.misaligned:
            parts.append(self.to_frame().to_html(index=False))
        else:
            parts.append(f"<p>{say('Every checked size is aligned.')}</p>")
        if self.skipped:
            parts.append(f"<p>{say('Skipped:')}</p>" + self.skipped_frame().to_html(index=False))
        return "".join(parts)


def _reason(dim: str, m: int) -> str:
    """Why ``dim`` matters to the Tensor Cores (the ``reason`` column, in the learner's language, via say)."""
    if dim == "in_features":
        return say("K of y = x·Wᵀ: the leading dimension of x and W")
    if dim == "out_features":
        return say("N of y = x·Wᵀ: the leading dimension of y (an output head or vocabulary)")
    if dim == "num_embeddings":
        return say("the vocabulary: N of the logits matmul when tied to an output head (the lookup alone is memory-bound)")
    if dim == "embedding_dim":
        return say("the hidden size: K of every matmul that reads these vectors")
    if dim == "in_channels":
        return say("C of the input: K of the implicit GEMM (cuDNN Tensor Core kernels want C % {m} == 0)", m=m)
    if dim == "out_channels":
        return say("K filters: N of the implicit GEMM")
    return say("rows of x (batch × tokens): M of the forward matmul, K of the weight-gradient one (not a leading "
               "dimension: costs less than a misaligned width)")
def _fix(dim: str, s: int, m: int) -> str:
    """The ``fix`` column's text for a size the model must change (in the learner's language, via say)."""
    if dim == "in_features":
        return say("change the model: the layer before must produce {s} features (e.g. the hidden size in its config)",
                   s=s)
    if dim == "embedding_dim":
        return say("change the model: set the hidden size to {s} in its config", s=s)
    if dim == "in_channels":
        return say("change the model: the layer before must produce {s} channels (pad_layers pads no convolutions)",
                   s=s)
    if dim == "out_channels":
        return say("change the model: give this convolution {s} output channels (pad_layers pads no convolutions)",
                   s=s)
    if dim == "rows":
        return say("choose a batch size × tokens that is a multiple of {m}", m=m)
    return ""


class _Auditor:
    """Collects findings for one model (one :class:`Sharing` computed once)."""

    def __init__(self, model: nn.Module, report: AuditReport) -> None:
        self.report = report
        self.sharing = Sharing.of(model)

    def add(self, name: str, m: nn.Module, dim: str, size: int, extra: str = "") -> None:
        a, prec = self.report.multiple, self.report.precision
        suggested = round_up(int(size), a)
        paddable, fix = False, _fix(dim, suggested, a)
        pad_with: tuple[str, ...] = ()
        if dim in ("out_features", "num_embeddings"):
            holders, why = self.sharing.group(m)
            if why is None:
                paddable = True
                pad_with = tuple(self.sharing.names[id(h)][0] for h in holders)
                fix = self.sharing.call(holders, a)
            else:
                fix = say("pad_layers cannot: {why}; change the size to {s} in the model's definition", why=why,
                          s=suggested)
            extra += self._note(m, holders)
        reason = say("{reason}; {precision} Tensor Cores want multiples of {m}{extra}", reason=_reason(dim, a),
                     precision=prec, m=a, extra=extra)
        self.report.findings.append(Finding(name, type(m).__name__, dim, int(size), a, suggested, reason,
                                            paddable, pad_with, fix))

    def _note(self, m: nn.Module, holders: list[nn.Module]) -> str:
        others = [h for h in holders if h is not m]
        note = say(" (weight tied with {others}: pad them together)",
                   others=say(", ").join(self.sharing.label(h) for h in others)) if others else ""
        also = self.sharing.names.get(id(m), [])[1:]
        if also:
            note += say(" (one module, also registered as {names}: padding it pads every name)",
                        names=say(", ").join(map(repr, also)))
        return note

    def check(self, name: str, m: nn.Module) -> None:
        typ = type(m).__name__
        if isinstance(getattr(m, "weight", None), nn.parameter.UninitializedParameter):
            self.report.skipped.append(Skipped(name, typ, say("lazy module not initialised yet: run one forward pass first")))
            return
        if isinstance(m, nn.Linear):
            self.add(name, m, "in_features", m.in_features)
            self.add(name, m, "out_features", m.out_features)
        elif isinstance(m, _EMBED):
            self.add(name, m, "num_embeddings", m.num_embeddings)
            self.add(name, m, "embedding_dim", m.embedding_dim)
        elif isinstance(m, _CONV):
            g = m.groups
            if g > 1 and g == m.in_channels:
                self.report.skipped.append(Skipped(
                    name, typ, say("depthwise convolution: memory-bound, not a Tensor Core GEMM; alignment does not "
                                   "apply")))
                return
            per = say(" per group") if g > 1 else ""
            cin, cout = m.in_channels // g, m.out_channels // g
            small = say(" (an RGB/grey first layer is usual: cuDNN pads small C itself; one layer of many)") \
                if cin <= 4 else ""
            self.add(name, m, "in_channels", cin, per + small)
            self.add(name, m, "out_channels", cout, per)
        self.report.modules_checked += 1


def _describe_params(m: nn.Module) -> str:
    ps = [f"{n}{list(p.shape)}" for n, p in m.named_parameters(recurse=False)]
    return ", ".join(ps[:4]) + (" ..." if len(ps) > 4 else "")


def audit(
    model: nn.Module,
    example_input: Any = None,
    precision: "Precision | str" = "fp16",
) -> AuditReport:
    """Report every Linear/Embedding/Conv size that misses Tensor Core alignment, and its fix.

    Defaults: ``example_input=None`` (only layer sizes are checked); given a tensor, a tuple
    of positional arguments or a dict of keyword arguments, the model is run once under
    ``torch.no_grad()`` with forward hooks and the rows (batch × tokens) reaching each
    Linear are checked too. ``precision="fp16"`` (multiple of 8; bf16 8, tf32 4). Modules
    with their own parameters that the audit does not understand (e.g. RNNs, the fused
    in-projection of MultiheadAttention) are listed as skipped, never an error. Output
    sizes of Linear and Embedding layers are ``paddable`` (:meth:`AuditReport.pad_names`
    is what to pass to :func:`fp16lab.align.pad_layers`); other findings say what to change.
    """
    instance("model", model, nn.Module, "a torch.nn.Module")
    if example_input is not None:
        check_batch(example_input)
    p = parse_precision(precision)
    report = AuditReport(precision=p.value, multiple=parsed_alignment(p))
    auditor = _Auditor(model, report)
    checked: list[tuple[str, nn.Module]] = []
    for name, mod in model.named_modules():
        name = name or "<root>"
        try:
            if isinstance(mod, (nn.Linear, *_EMBED, *_CONV)):
                auditor.check(name, mod)
                checked.append((name, mod))
            elif not isinstance(mod, _NOT_GEMM) and any(True for _ in mod.parameters(recurse=False)):
                report.skipped.append(Skipped(
                    name, type(mod).__name__, f"type not understood by the audit; own parameters: {_describe_params(mod)}"))
        except Exception as exc:  # noqa: BLE001 - never crash on an odd module: report it
            report.skipped.append(Skipped(name, type(mod).__name__, f"could not inspect: {type(exc).__name__}: {exc}"))
    if example_input is not None:
        _audit_rows(model, example_input, auditor, checked)
    return report


def _audit_rows(model: nn.Module, example_input: Any, auditor: _Auditor, checked: list[tuple[str, nn.Module]]) -> None:
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
            call(model, example_input)
    finally:
        for h in handles:
            h.remove()
    for name, mod in checked:
        for rows in seen.get(name, []):
            auditor.add(name, mod, "rows", rows)
