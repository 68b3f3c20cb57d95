"""Padding layers: output heads and vocabularies computed at an aligned size, the same function.

:func:`pad_layers` is the entry point. It pads what :func:`fp16lab.align.audit` marks as
paddable (``nn.Linear`` output sizes, ``nn.Embedding`` vocabularies, tied or shared ones
together) and refuses, before changing anything, what it cannot do safely. An optimizer
already holding the old parameters would keep updating detached tensors, so the padded
layers would silently stop training: pass it as ``optimizer=`` to re-point it, or build
the optimizer after padding.
"""

from __future__ import annotations

import gc
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from fp16lab.align.sizes import check_multiple, round_up
from fp16lab.checks import instance, sequence_of, text

__all__ = ["PaddedLinear", "pad_linear", "pad_embedding", "pad_layers"]

_PADDABLE = (nn.Linear, nn.Embedding)


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
        if isinstance(out_features, bool) or not isinstance(out_features, int) or not 1 <= out_features <= inner.out_features:
            raise ValueError(f"out_features must be an int in 1..{inner.out_features}, got {out_features!r}")
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
    ``multiple`` follows :func:`fp16lab.align.check_multiple` (a power of two or a multiple of 8).
    """
    if not isinstance(linear, nn.Linear):
        raise ValueError(f"linear: pad_linear needs an nn.Linear, got {type(linear).__name__}")
    return _pad_linear(linear, check_multiple(multiple))


def _pad_linear(linear: nn.Linear, multiple: int) -> PaddedLinear:
    w = linear.weight
    new_out = round_up(linear.out_features, multiple)
    inner = nn.Linear(linear.in_features, new_out, bias=linear.bias is not None, device=w.device, dtype=w.dtype)
    inner.weight = _padded_rows(w, new_out)
    if linear.bias is not None:
        inner.bias = _padded_rows(linear.bias, new_out)
    inner.train(linear.training)
    return PaddedLinear(inner, linear.out_features).train(linear.training)


def pad_embedding(embedding: nn.Embedding, multiple: int = 8) -> nn.Embedding:
    """A copy of ``embedding`` with ``num_embeddings`` padded to ``multiple`` (default 8).

    The extra rows are zero and are never looked up by valid indices (< the original
    ``num_embeddings``), so outputs and gradients of the original rows are unchanged.
    ``padding_idx``, ``max_norm``, ``scale_grad_by_freq`` and ``sparse`` are kept.
    """
    if not isinstance(embedding, nn.Embedding):
        raise ValueError(f"embedding: pad_embedding needs an nn.Embedding, got {type(embedding).__name__}")
    return _pad_embedding(embedding, check_multiple(multiple))


def _pad_embedding(embedding: nn.Embedding, multiple: int) -> nn.Embedding:
    w = embedding.weight
    rows = round_up(embedding.num_embeddings, multiple)
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
    return new.train(embedding.training)


# ------------------------------------------------------------------ who shares what


@dataclass(frozen=True)
class Sharing:
    """Which module objects have which names, and which modules hold each weight (tied weights)."""

    names: dict[int, list[str]]  # id(module) -> every name it is registered under
    holders: dict[int, list[nn.Module]]  # id(weight Parameter) -> distinct modules holding it as .weight

    @classmethod
    def of(cls, model: nn.Module) -> Sharing:
        names: dict[int, list[str]] = {}
        for name, mod in model.named_modules(remove_duplicate=False):
            if name not in names.setdefault(id(mod), []):
                names[id(mod)].append(name)
        holders: dict[int, list[nn.Module]] = {}
        for mod in model.modules():  # each module object once
            w = mod._parameters.get("weight")
            if isinstance(w, nn.Parameter) and all(h is not mod for h in holders.setdefault(id(w), [])):
                holders[id(w)].append(mod)
        return cls(names, holders)

    def label(self, mod: nn.Module) -> str:
        """A module's first name, and its other names when it is registered under several."""
        n = self.names.get(id(mod), ["?"])
        return repr(n[0]) if len(n) == 1 else f"{n[0]!r} (also registered as {', '.join(map(repr, n[1:]))})"

    def group(self, mod: nn.Module) -> "tuple[list[nn.Module], str | None]":
        """The module objects to pad together with ``mod`` (tied weights), and why not, if it cannot be.

        Used by :func:`fp16lab.align.audit` for its advice and by :func:`pad_layers` for
        its check, so what the audit advises is what padding accepts.
        """
        w = mod._parameters.get("weight")
        holders = self.holders.get(id(w), [mod]) if isinstance(w, nn.Parameter) else [mod]
        if any(self.names.get(id(h), [""])[0] == "" for h in holders):
            return holders, ("the layer is the model itself, which pad_layers cannot replace in place; "
                             "use pad_linear(model) or pad_embedding(model), which return a padded copy")
        for h in holders:
            if type(h) not in _PADDABLE:
                if h is mod:
                    return holders, f"it is a {type(h).__name__}; pad_layers pads nn.Linear and nn.Embedding only"
                return holders, (f"its weight is tied to {self.label(h)}, a {type(h).__name__}, which pad_layers "
                                 "cannot pad")
        return holders, None

    def call(self, holders: Sequence[nn.Module], multiple: int) -> str:
        """The ``pad_layers`` call that pads ``holders`` (one name per module object)."""
        return f"pad_layers(model, {[self.names[id(h)][0] for h in holders]!r}, multiple={multiple})"


# ------------------------------------------------------------------ optimizers


def _optimizer_classes() -> set[type]:
    out: set[type] = {torch.optim.Optimizer}
    todo: list[type] = [torch.optim.Optimizer]
    while todo:
        subs: list[type] = todo.pop().__subclasses__()
        for sub in subs:
            if sub not in out:
                out.add(sub)
                todo.append(sub)
    return out


def _scan(params: set[int]) -> list[torch.optim.Optimizer]:
    classes = _optimizer_classes()  # a set lookup by exact type: fast, and never touches proxies
    return [
        obj for obj in gc.get_objects()
        if type(obj) in classes and any(id(p) in params for g in obj.param_groups for p in g["params"])
    ]


def _optimizers_holding(params: set[int]) -> list[torch.optim.Optimizer]:
    """Every live optimizer whose param groups hold one of the parameters (by id)."""
    found = _scan(params)
    if found:  # confirm: unreachable garbage in a reference cycle is not an optimizer to protect
        del found
        gc.collect()
        found = _scan(params)
    return found


def _check_state(opt: torch.optim.Optimizer, old: dict[int, nn.Parameter]) -> None:
    """Refuse (before any change) optimizer state that cannot be padded row-wise."""
    for p in old.values():
        for key, value in opt.state.get(p, {}).items():
            if isinstance(value, torch.Tensor) and value.dim() > 0 and value.shape != p.shape:
                raise ValueError(
                    f"optimizer: its state {key!r} for a parameter of shape {tuple(p.shape)} has shape "
                    f"{tuple(value.shape)} and cannot be padded; build the optimizer after padding"
                )


def _repoint(opt: torch.optim.Optimizer, old_to_new: dict[int, tuple[nn.Parameter, nn.Parameter]]) -> None:
    """Replace the old parameters by the padded ones in ``opt``; pad their state with zero rows."""
    for group in opt.param_groups:
        group["params"] = [old_to_new[id(p)][1] if id(p) in old_to_new else p for p in group["params"]]
    for old, new in old_to_new.values():
        if old in opt.state:
            state = opt.state.pop(old)
            opt.state[new] = {
                k: _padded_rows(v, new.shape[0]).detach() if isinstance(v, torch.Tensor) and v.dim() > 0 else v
                for k, v in state.items()
            }


# ------------------------------------------------------------------ pad_layers


@dataclass
class _Plan:
    """What pad_layers will do, worked out and checked before anything changes."""

    modules: list[nn.Module]  # distinct module objects to pad, in order
    sharing: Sharing


def _plan(model: nn.Module, names: list[str], multiple: int) -> _Plan:
    sharing = Sharing.of(model)
    by_name = dict(model.named_modules(remove_duplicate=False))
    chosen: list[nn.Module] = []
    for n in names:
        if not isinstance(n, str):
            raise ValueError(f"names must be module names (str), got {n!r}")
        if n not in by_name or n == "":
            close = [k for k in by_name if k and k.split(".")[-1] == n.split(".")[-1]]
            raise ValueError(f"names: no module named {n!r} in the model; similar: {close[:5] or 'none'}")
        m = by_name[n]
        if isinstance(m, PaddedLinear):
            raise ValueError(f"names: {n!r} is already padded ({m.extra_repr()})")
        outer = n.rpartition(".")[0]
        if outer in by_name and isinstance(by_name[outer], PaddedLinear):
            raise ValueError(f"names: {n!r} is the inside of the padded layer {outer!r}, which is already padded")
        size = getattr(m, "num_embeddings" if isinstance(m, nn.Embedding) else "out_features", None)
        if type(m) in _PADDABLE and isinstance(size, int) and size % multiple == 0:
            raise ValueError(f"names: {n!r} has {size} {'rows' if isinstance(m, nn.Embedding) else 'outputs'}, "
                             f"already a multiple of {multiple}: nothing to pad (audit(model).pad_names() lists "
                             "what needs padding)")
        if all(c is not m for c in chosen):
            chosen.append(m)
    for m in chosen:
        holders, why = sharing.group(m)
        if why is not None:
            raise ValueError(f"names: cannot pad {sharing.label(m)}: {why}. Change its size in the model's "
                             "definition instead (e.g. the vocabulary or output size in its config)")
        missing = [h for h in holders if all(h is not c for c in chosen)]
        if missing:
            raise ValueError(
                f"names: {sharing.label(m)} shares its weight with {', '.join(sharing.label(h) for h in missing)} "
                f"(tied weights); padding it alone would untie them. Pad them together: "
                f"{sharing.call(holders, multiple)}"
            )
    return _Plan(chosen, sharing)


def _old_params(modules: Sequence[nn.Module]) -> dict[int, nn.Parameter]:
    return {id(p): p for m in modules for p in m.parameters(recurse=False)}


def _check_optimizers(old: dict[int, nn.Parameter], optimizer: "torch.optim.Optimizer | None") -> None:
    holding = [o for o in _optimizers_holding(set(old)) if o is not optimizer]
    if holding:
        kinds = ", ".join(sorted({type(o).__name__ for o in holding}))
        pass_it = "" if optimizer is not None else " or pass it as pad_layers(..., optimizer=opt) to re-point it"
        raise ValueError(
            f"optimizer: {len(holding)} optimizer(s) ({kinds}) hold the parameters of the layers to pad; after "
            "padding they would update the old, detached weights and the padded layers would never train. "
            f"Build the optimizer after padding{pass_it}"
        )
    if optimizer is not None:
        _check_state(optimizer, old)


def pad_layers(
    model: nn.Module,
    names: "str | Sequence[str]",
    multiple: int = 8,
    *,
    optimizer: "torch.optim.Optimizer | None" = None,
) -> nn.Module:
    """Pad the named Linear (output side) and Embedding layers of ``model`` in place; return it.

    Linears become :class:`PaddedLinear` (output sliced back), Embeddings get extra zero
    rows: the model computes the same function on the original outputs. A module
    registered under several names is one layer: it is padded once and replaced under
    every name. Tied weights (different modules sharing one weight) must be padded
    together: pass all their names (e.g. ``["wte", "lm_head"]``); they then share one
    padded weight again. :meth:`fp16lab.align.AuditReport.pad_names` lists what to pass.

    ``multiple`` (default 8) must be a power of two or a multiple of 8
    (:func:`fp16lab.align.check_multiple`); 64 is a common choice for vocabularies
    (50257 -> 50304). ``optimizer`` (default None): an optimizer built before padding,
    re-pointed at the padded parameters (its state padded with zero rows). Without it,
    a live optimizer holding the old parameters makes the call refuse: build the
    optimizer after padding. Everything is checked before anything changes.
    Limit: code that reads ``layer.weight`` directly (e.g. ``F.linear(x, wte.weight)``)
    sees the padded weight and is not sliced.
    """
    instance("model", model, nn.Module, "a torch.nn.Module")
    names = sequence_of("names", names, example="['lm_head']", item=text, single=True)
    multiple = check_multiple(multiple)
    if optimizer is not None:
        instance("optimizer", optimizer, torch.optim.Optimizer, "a torch.optim.Optimizer (or None)")
    plan = _plan(model, list(names), multiple)
    old = _old_params(plan.modules)
    _check_optimizers(old, optimizer)

    new_weight: dict[int, nn.Parameter] = {}  # id(old weight) -> padded weight, re-shared by tied layers
    old_to_new: dict[int, tuple[nn.Parameter, nn.Parameter]] = {}
    for m in plan.modules:
        new = _pad_embedding(m, multiple) if isinstance(m, nn.Embedding) else _pad_linear(m, multiple)  # type: ignore[arg-type]
        target = new.inner if isinstance(new, PaddedLinear) else new
        key = id(m.weight)
        if key in new_weight:
            target.weight = new_weight[key]
        new_weight.setdefault(key, target.weight)  # type: ignore[arg-type]
        for pname, p in m.named_parameters(recurse=False):
            old_to_new[id(p)] = (p, getattr(target, pname))
        for n in plan.sharing.names[id(m)]:
            _set_submodule(model, n, new)
    if optimizer is not None:
        _repoint(optimizer, old_to_new)
    return model


def _set_submodule(model: nn.Module, name: str, new: nn.Module) -> None:
    parent_name, _, child = name.rpartition(".")
    parent = model.get_submodule(parent_name) if parent_name else model
    setattr(parent, child, new)
