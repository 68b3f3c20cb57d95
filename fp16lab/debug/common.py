"""Checks and helpers shared by the debugging tools (validated once at each public entry point)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

from fp16lab.checks import function, instance
from fp16lab.device import is_oom
from fp16lab.precision import Precision, check_precision_supported, parse_precision

LossFn = Callable[[Any, Any], torch.Tensor]
OptimizerFactory = Callable[[Any], torch.optim.Optimizer]
MIB = 2**20


def check_module(model: object) -> nn.Module:
    checked: nn.Module = instance(  # type: ignore[assignment]
        "model", model, nn.Module, "a torch.nn.Module (wrap a function in a Module, or pass the model)")
    return checked


def check_loss_fn(value: object) -> LossFn:
    """``loss_fn`` (None: cross-entropy)."""
    fn: LossFn | None = function("loss_fn", value, "a function (outputs, targets) -> loss", n_args=2, optional=True)
    return fn or nn.functional.cross_entropy


def check_optimizer_factory(value: object) -> OptimizerFactory:
    """``optimizer``: a function (or optimizer class) params -> optimizer (None: Adam, lr 1e-3)."""
    if isinstance(value, torch.optim.Optimizer):
        raise ValueError(f"optimizer must be a function params -> optimizer (each trial builds a fresh one), got "
                         f"an {type(value).__name__} instance: pass e.g. lambda params: "
                         f"torch.optim.{type(value).__name__}(params, lr=...)")
    fn: OptimizerFactory | None = function("optimizer", value, "a function params -> optimizer", n_args=1,
                                           optional=True, classes=True)
    return fn or default_optimizer


def check_make_batch(value: object) -> Callable[[int], Any]:
    checked: Callable[[int], Any] = function("make_batch", value, "a function n -> (inputs, targets)", n_args=1)
    return checked


def check_trainable(model: nn.Module) -> None:
    """Refuse a model without trainable parameters (a training step would have nothing to update)."""
    if not any(p.requires_grad for p in model.parameters()):
        raise ValueError(f"model has no trainable parameters (none, or all with requires_grad=False): "
                         f"{type(model).__name__} cannot take a training step")


def tensors(obj: object) -> Iterator[torch.Tensor]:
    """Every tensor inside ``obj`` (tensors, tuples, lists, dicts, nested)."""
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (tuple, list)):
        for item in obj:
            yield from tensors(item)
    elif isinstance(obj, dict):
        for item in obj.values():
            yield from tensors(item)


def to_device(obj: Any, device: torch.device) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.to(device)
    if isinstance(obj, tuple):
        return tuple(to_device(o, device) for o in obj)
    if isinstance(obj, list):
        return [to_device(o, device) for o in obj]
    if isinstance(obj, dict):
        return {k: to_device(v, device) for k, v in obj.items()}
    return obj


def check_batch(example: object, what: str = "example_input") -> None:
    found = list(tensors(example))
    if not found:
        raise ValueError(
            f"{what} holds no tensor (got {type(example).__name__}: {example!r:.80}); "
            "pass a tensor, a tuple/list of positional inputs, or a dict of keyword inputs"
        )
    for t in found:
        if t.numel() == 0 or (t.dim() > 0 and t.shape[0] == 0):
            raise ValueError(f"{what} is empty (a tensor of shape {tuple(t.shape)}); pass at least one sample")


def check_precision(precision: object, device: torch.device) -> Precision:
    p = parse_precision(precision)  # type: ignore[arg-type]
    if device.type == "cuda":
        check_precision_supported(p, device)  # bf16/tf32 need sm_80+
    elif device.type == "mps" and p is Precision.TF32:
        raise ValueError("precision 'tf32' is an NVIDIA (Ampere or newer) matmul mode; on 'mps' use 'fp32', "
                         "'fp16' or 'bf16'")
    return p


def call(model: nn.Module, example: Any, what: str = "example_input") -> Any:
    """``model`` run on ``example`` (a dict: keyword inputs; a tuple/list: positional; else one input).

    An error raised by the model is re-raised as a ``ValueError`` that names ``what`` and
    describes the inputs (the original error chained); out-of-memory errors pass unchanged.
    """
    try:
        if isinstance(example, dict):
            return model(**example)
        if isinstance(example, (tuple, list)):
            return model(*example)
        return model(example)
    except Exception as exc:
        if is_oom(exc):
            raise
        raise ValueError(f"{what}: the model cannot run on it ({describe(example)}): {type(exc).__name__}: "
                         f"{str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ''}") from exc


def describe(example: Any) -> str:
    """Shapes and dtypes of the tensors in ``example``, e.g. ``tensor (3, 7) float32``."""
    found = [f"tensor {tuple(t.shape)} {str(t.dtype).replace('torch.', '')}" for t in tensors(example)]
    return ", ".join(found[:4]) + (" ..." if len(found) > 4 else "")


def dtype_names(obj: object) -> str:
    seen: list[str] = []
    for t in tensors(obj):
        name = str(t.dtype).replace("torch.", "")
        if name not in seen:
            seen.append(name)
    return ", ".join(seen)


@contextlib.contextmanager
def eval_mode(model: nn.Module) -> Iterator[None]:
    """Eval mode for the block (no BatchNorm statistics updated, no dropout), then restored."""
    modes = {m: m.training for m in model.modules()}
    model.eval()
    try:
        yield
    finally:
        for m, training in modes.items():
            m.train(training)


def module_names(model: nn.Module) -> dict[nn.Module, str]:
    names: dict[nn.Module, str] = {}
    for name, mod in model.named_modules(remove_duplicate=False):
        names.setdefault(mod, name or "(model)")
    return names


def split_batch(batch: Any, what: str = "batch") -> tuple[Any, Any]:
    if isinstance(batch, (tuple, list)) and len(batch) == 2:
        return batch[0], batch[1]
    size = len(batch) if hasattr(batch, "__len__") else "?"
    raise ValueError(f"{what} must be a pair (inputs, targets), got {type(batch).__name__} of length {size}")


def batch_size(x: Any) -> int:
    t = next(tensors(x))
    return int(t.shape[0]) if t.dim() else 1


@contextlib.contextmanager
def restored(model: nn.Module, restore: bool) -> Iterator[None]:
    """Put the model's weights, buffers and modes back after the block (when ``restore``)."""
    if not restore:
        yield
        return
    state = {k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()}
    modes = {m: m.training for m in model.modules()}
    try:
        yield
    finally:
        model.load_state_dict(state)
        for m, training in modes.items():
            m.train(training)
        for prm in model.parameters():
            prm.grad = None


def oom_message(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0][:160] if text else ''}"


def default_optimizer(params: Any) -> torch.optim.Optimizer:
    return torch.optim.Adam(params, lr=1e-3)
