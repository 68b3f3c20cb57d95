"""FP32 islands: run chosen submodules of an FP16/BF16 model in FP32.

Why: a model can hold a layer whose activations exceed FP16's 65504 (common in models trained in
BF16, which has FP32's range). Keeping the span from the layer that produces the large values to
the one that brings them back in FP32, and the rest in 16 bits, fixes it at little cost; find the
layer with :func:`fp16lab.debug.first_nonfinite`.

- :class:`FP32Island`: a wrapper that runs its module in FP32 (autocast off) and keeps its weights
  FP32 when the surrounding model is cast;
- :func:`keep_in_fp32`: wrap submodules by name, every name checked first.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from fp16lab.checks import instance, sequence_of
from fp16lab.precision import autocast

__all__ = ["FP32Island", "keep_in_fp32"]


def _map_floating(obj: Any, dtype: torch.dtype | None) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.to(dtype) if (dtype is not None and obj.is_floating_point()) else obj
    if isinstance(obj, tuple):
        return tuple(_map_floating(o, dtype) for o in obj)
    if isinstance(obj, list):
        return [_map_floating(o, dtype) for o in obj]
    if isinstance(obj, dict):
        return {k: _map_floating(o, dtype) for k, o in obj.items()}
    return obj


def _first_floating_dtype(obj: Any) -> torch.dtype | None:
    if isinstance(obj, torch.Tensor):
        return obj.dtype if obj.is_floating_point() else None
    items = obj.values() if isinstance(obj, dict) else obj if isinstance(obj, (tuple, list)) else ()
    for o in items:
        found = _first_floating_dtype(o)
        if found is not None:
            return found
    return None


class FP32Island(nn.Module):
    """Runs ``module`` in FP32 inside a lower-precision model: weights FP32, autocast off.

    Floating-point inputs are cast to FP32 on the way in and the outputs back to the first
    floating input's dtype on the way out, so the surrounding FP16/BF16 model is unchanged.
    Casting the whole model later (``model.half()``, ``model.to(torch.bfloat16)``) leaves the
    island's weights in FP32 (device moves and memory formats still apply), as Hugging Face's
    ``_keep_in_fp32_modules`` does: make the island *before* casting, so its weights are never
    rounded. For forward passes (a KV cache inside an island would have the model's dtype).
    """

    def __init__(self, module: nn.Module) -> None:
        instance("module", module, nn.Module, "a torch.nn.Module (the submodule to run in FP32)")
        if isinstance(module, FP32Island):
            raise ValueError("module is already an FP32Island; wrap it once")
        super().__init__()
        self.module = module.float()

    def _apply(self, fn: Callable[[torch.Tensor], torch.Tensor], recurse: bool = True) -> "FP32Island":
        def keep_dtype(t: torch.Tensor) -> torch.Tensor:
            out = fn(t)
            if not (isinstance(out, torch.Tensor) and t.is_floating_point() and out.dtype != t.dtype):
                return out
            kept = t.to(out.device, copy=True)  # the unrounded FP32 values, on the new device
            if out.dim() == 4 and not out.is_contiguous() and out.is_contiguous(memory_format=torch.channels_last):
                kept = kept.contiguous(memory_format=torch.channels_last)
            return kept

        return super()._apply(keep_dtype, recurse)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        dtype = _first_floating_dtype((args, kwargs))
        first = next(iter(self.module.parameters()), None)
        dev_type = first.device.type if first is not None else "cpu"
        with autocast("fp32", dev_type):  # autocast off inside the island
            out = self.module(*_map_floating(args, torch.float32), **_map_floating(kwargs, torch.float32))
        return _map_floating(out, dtype)


def keep_in_fp32(model: nn.Module, names: Sequence[str]) -> nn.Module:
    """Wrap the submodules ``names`` of ``model`` in :class:`FP32Island` (in place); returns ``model``.

    The usual fix for a layer whose activations exceed FP16's 65504 (find it with
    :func:`fp16lab.debug.first_nonfinite`): the island must reach from the layer that produces
    the large values to the one that brings them back into range. Every name is checked
    before anything changes.
    """
    instance("model", model, nn.Module, "a torch.nn.Module")
    wanted = sequence_of("names", names, example="['blocks.3.mlp']")
    modules = dict(model.named_modules())
    for n in wanted:
        if not isinstance(n, str) or not n or n not in modules:
            near = [k for k in modules if k and isinstance(n, str) and (k.startswith(n[:2]) or n in k)][:8]
            near = near or [k for k in modules if k][:8]
            raise ValueError(f"names: {n!r} is not a submodule of the model; some that exist: {near}")
        if isinstance(modules[n], FP32Island):
            raise ValueError(f"names: {n!r} is already an FP32Island")
        inside = [p for p, m in modules.items() if isinstance(m, FP32Island) and (not p or n.startswith(p + "."))]
        if inside:
            raise ValueError(f"names: {n!r} lies inside the FP32Island {inside[0]!r}, which already runs it in FP32")
    if len(set(wanted)) != len(wanted):
        raise ValueError(f"names has duplicates: {wanted}")
    for a in wanted:
        for b in wanted:
            if a != b and b.startswith(a + "."):
                raise ValueError(f"names: {b!r} lies inside {a!r}; list only the outer one")
    for n in wanted:
        parent_name, _, child = n.rpartition(".")
        parent = modules[parent_name] if parent_name else model
        setattr(parent, child, FP32Island(modules[n]))
    return model
