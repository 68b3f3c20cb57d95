"""Device plumbing, the bottom layer: parse and choose a device, synchronise, free, find a model's.

Nothing here knows about GPU models or precisions (that is :mod:`fp16lab.hardware`); nothing
here imports another fp16lab module, so every other module can import it.

**What "device" means in fp16lab**, once for every helper: where the work runs. A helper that
takes a model works on the model's own device (:func:`model_device`): it moves its *data*
there and never moves the model (``fit``, ``train_step``, ``evaluate``, ``max_batch_size``).
Where such a helper also accepts ``device=``, it must be the model's device (or None). A helper
without a model (a matmul, a data set) runs on ``device``, default :func:`choose_device`.
"""

from __future__ import annotations

import gc

import torch
from torch import nn

__all__ = [
    "DEVICE_TYPES",
    "parse_device",
    "resolve_device",
    "choose_device",
    "mps_available",
    "synchronize",
    "free_memory",
    "model_device",
    "resolve_model_device",
    "OOM_ERRORS",
    "is_oom",
]

DEVICE_TYPES = ("cpu", "cuda", "mps")

# What "out of memory" raises: CUDA's allocator raises torch.OutOfMemoryError (the same class as
# torch.cuda.OutOfMemoryError); the CPU allocator raises MemoryError. MPS raises a plain
# RuntimeError whose message says so: :func:`is_oom` recognises that one too.
OOM_ERRORS: tuple[type[BaseException], ...] = (torch.cuda.OutOfMemoryError, MemoryError)


def parse_device(value: "torch.device | str", *, name: str = "device") -> torch.device:
    """``value`` as a ``torch.device`` of a type the series supports (cpu, cuda, mps); syntax only."""
    if not isinstance(name, str):
        raise ValueError(f"name must be the argument's name (a str), got {name!r}")
    if isinstance(value, torch.device):
        dev = value
    elif isinstance(value, str):
        try:
            dev = torch.device(value)
        except (RuntimeError, ValueError):
            raise ValueError(
                f"{name} {value!r} is not a device; allowed: {', '.join(DEVICE_TYPES)} "
                "(optionally with an index, e.g. 'cuda:0')"
            ) from None
    else:
        raise ValueError(f"{name} must be a str or torch.device, got {value!r} ({type(value).__name__})")
    if dev.type not in DEVICE_TYPES:
        raise ValueError(f"{name} {str(dev)!r} is not supported; allowed: {', '.join(DEVICE_TYPES)}")
    return dev


def mps_available() -> bool:
    """True when Apple's Metal backend is usable."""
    mps = getattr(torch.backends, "mps", None)
    return bool(mps and mps.is_available())


def resolve_device(value: "torch.device | str | None" = None, *, name: str = "device") -> torch.device:
    """A device that exists on this machine: ``value`` checked, or :func:`choose_device` when None."""
    if not isinstance(name, str):
        raise ValueError(f"name must be the argument's name (a str), got {name!r}")
    if value is None:
        return choose_device()
    dev = parse_device(value, name=name)
    if dev.type == "cuda":
        if not torch.cuda.is_available():
            raise ValueError(
                f"{name} {str(value)!r} requested but no CUDA GPU is visible here; "
                "use 'cpu' (or device=None to choose the best available)"
            )
        count = torch.cuda.device_count()
        if dev.index is not None and not 0 <= dev.index < count:
            raise ValueError(f"{name} {str(value)!r}: this machine has {count} CUDA GPU(s), indices 0..{count - 1}")
    elif dev.type == "mps" and not mps_available():
        raise ValueError(f"{name} {str(value)!r} requested but Apple MPS is not available here; use 'cpu'")
    if dev.type in ("cpu", "mps") and dev.index not in (None, 0):
        raise ValueError(f"{name} {str(value)!r}: there is one {dev.type} device, index 0; use {dev.type!r}")
    return dev


def choose_device(prefer: "torch.device | str | None" = None) -> torch.device:
    """The device lessons run on: ``prefer`` if given (checked), else cuda > mps > cpu."""
    if prefer is not None:
        return resolve_device(prefer, name="prefer")
    if torch.cuda.is_available():
        return torch.device("cuda")
    if mps_available():
        return torch.device("mps")
    return torch.device("cpu")


def synchronize(device: "torch.device | str") -> None:
    """Wait for queued work on ``device`` (a no-op on the CPU): timings must include it."""
    device = resolve_device(parse_device(device))  # a GPU this machine lacks: said so, not a driver error
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def free_memory(device: "torch.device | str") -> None:
    """Drop unreachable tensors and return cached blocks, so the next measurement starts clean."""
    device = resolve_device(parse_device(device))
    gc.collect()
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()
    elif device.type == "mps":
        torch.mps.empty_cache()


def model_device(model: nn.Module, default: "torch.device | None" = None) -> torch.device:
    """Where ``model`` lives: its first parameter's device, else its first buffer's, else ``default``."""
    if not isinstance(model, nn.Module):  # the bottom layer: checks' wording, without importing it
        raise ValueError(f"model must be a torch.nn.Module, got {model!r:.80} ({type(model).__name__})")
    if default is not None:
        default = parse_device(default, name="default")
    for p in model.parameters():
        return p.device
    for b in model.buffers():
        return b.device
    if default is not None:
        return default
    raise ValueError(
        f"the model ({type(model).__name__}) has no parameters or buffers, so its device is unknown; "
        "pass device= explicitly"
    )


def is_oom(exc: BaseException) -> bool:
    """True when ``exc`` is an out-of-memory error from any torch allocator."""
    if not isinstance(exc, BaseException):
        raise ValueError(f"exc must be an exception, got {exc!r:.80} ({type(exc).__name__})")
    if isinstance(exc, OOM_ERRORS):
        return True
    return isinstance(exc, RuntimeError) and "out of memory" in str(exc).lower()


def resolve_model_device(model: nn.Module, device: "torch.device | str | None") -> torch.device:
    """``device`` checked against where the model lives (default: the model's device, else the CPU)."""
    here = model_device(model, default=torch.device("cpu"))
    if device is None:
        return here
    dev = resolve_device(device)  # exists here, or a clear error
    has_state = any(True for _ in model.parameters()) or any(True for _ in model.buffers())
    if has_state and (here.type != dev.type or (dev.index is not None and here.index != dev.index)):
        raise ValueError(
            f"device: the model's parameters are on {str(here)!r} but device={str(dev)!r}; "
            f"move the model first (model.to({str(dev)!r})) or leave device=None"
        )
    return dev
