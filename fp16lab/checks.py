"""Argument validators: one place that says what a bad argument was and what is allowed.

Every public entry point checks its arguments with these, once, before any work starts;
private functions then take the parsed values. Each raises ``ValueError`` that names the
argument, quotes the value and says what is allowed. ``bool`` is never accepted as a number.
"""

from __future__ import annotations

import inspect
import math
import numbers
from collections.abc import Sequence
from typing import Any, TypeVar

__all__ = [
    "positive_int",
    "function",
    "non_negative_int",
    "positive_float",
    "one_of",
    "boolean",
    "instance",
    "distinct",
    "integer_tensor",
    "values_readable",
]

T = TypeVar("T")


def _is_int(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def positive_int(name: str, value: object, *, minimum: int = 1) -> int:
    """``value`` as an ``int`` >= ``minimum`` (default 1); bools and floats are refused."""
    if not _is_int(value) or int(value) < minimum:  # type: ignore[call-overload]
        raise ValueError(f"{name} must be an int >= {minimum}, got {value!r}")
    return int(value)  # type: ignore[call-overload]


def non_negative_int(name: str, value: object) -> int:
    """``value`` as an ``int`` >= 0; bools and floats are refused."""
    return positive_int(name, value, minimum=0)


def function(name: str, value: object, what: str, *, n_args: int, optional: bool = False,
             classes: bool = False) -> Any:
    """``value`` when it can be called with ``n_args`` positional arguments (None too with ``optional``).

    A class is refused unless ``classes`` (the usual slip: ``nn.CrossEntropyLoss`` for
    ``nn.CrossEntropyLoss()``); a function whose signature cannot take ``n_args`` arguments
    is refused before it is first called. Callables without a readable signature pass.
    """
    if value is None and optional:
        return None
    allowed = f"{what}{' or None' if optional else ''}"
    if not callable(value):
        raise ValueError(f"{name} must be {allowed}, got {_short(value)}")
    if isinstance(value, type) and not classes:
        raise ValueError(f"{name} must be {allowed}, got the class {value.__name__}: pass an instance, "
                         f"e.g. {value.__name__}()")
    try:
        sig = inspect.signature(value)
    except (TypeError, ValueError):  # builtins and C functions: nothing to check before the call
        return value
    try:
        sig.bind(*([None] * n_args))
    except TypeError as exc:
        raise ValueError(f"{name} must be {allowed}, called with {n_args} argument(s), but "
                         f"{getattr(value, '__qualname__', type(value).__name__)}{sig} cannot be ({exc})") from None
    return value


def positive_float(name: str, value: object, *, allow_zero: bool = False) -> float:
    """``value`` as a finite ``float`` > 0 (>= 0 with ``allow_zero``); bools are refused."""
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(float(value))
    if ok and (float(value) > 0 or (allow_zero and float(value) == 0)):  # type: ignore[arg-type]
        return float(value)  # type: ignore[arg-type]
    bound = ">= 0" if allow_zero else "> 0"
    raise ValueError(f"{name} must be a finite number {bound}, got {value!r}")


def one_of(name: str, value: object, allowed: Sequence[str]) -> str:
    """``value`` when it is one of the strings in ``allowed`` (exact match)."""
    if isinstance(value, str) and value in allowed:
        return value
    raise ValueError(f"{name} must be one of {', '.join(map(repr, allowed))}; got {value!r}")


def boolean(name: str, value: object) -> bool:
    """``value`` when it is a real ``bool`` (not 0/1, not a string)."""
    if isinstance(value, bool):
        return value
    raise ValueError(f"{name} must be True or False, got {value!r}")


def instance(name: str, value: T, types: "type | tuple[type, ...]", what: str) -> T:
    """``value`` when it is an instance of ``types``; else a ValueError saying ``what`` is expected."""
    if isinstance(value, types) and not (isinstance(value, bool) and bool not in _as_tuple(types)):
        return value
    raise ValueError(f"{name} must be {what}, got {_short(value)}")


def distinct(name: str, values: Sequence[T], key: "Any" = None) -> list[T]:
    """``values`` as a list when no entry repeats (by ``key(entry)``, default the entry): one row each."""
    seen: dict[Any, int] = {}
    for i, v in enumerate(values):
        k = key(v) if key is not None else v
        if k in seen:
            raise ValueError(f"{name} lists {k!r} twice (entries {seen[k]} and {i}); give each once")
        seen[k] = i
    return list(values)


def values_readable(t: Any) -> bool:
    """True when reading ``t``'s values is free: a CPU tensor in eager mode (no device sync, no graph break).

    Validators check value ranges only then; on a GPU, inside ``torch.compile`` or a CUDA-graph
    capture they check types and shapes only, so that a hot loop keeps running ahead.
    """
    import torch

    return t.device.type == "cpu" and not torch.compiler.is_compiling()


def integer_tensor(name: str, value: object, *, dims: "int | None" = None, dtypes: "tuple | None" = None,
                   high: "int | None" = None, shape: str = "", check_values: "bool | None" = None) -> Any:
    """``value`` when it is a tensor of integer ids: not float/bool/complex, ``dims`` dimensions, in ``[0, high)``.

    ``dtypes`` (default: any integer dtype) narrows the allowed dtypes; ``shape`` words the
    expected shape in the message (e.g. ``"(batch, seq_len)"``). The range is read only when
    ``check_values`` is True, or when it is None (default) and :func:`values_readable` holds.
    """
    import torch

    if not isinstance(value, torch.Tensor):
        raise ValueError(f"{name} must be a tensor of integer ids{' ' + shape if shape else ''}, got {_short(value)}")
    allowed = dtypes or (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8)
    if value.dtype not in allowed:
        names = ", ".join(str(d).replace("torch.", "") for d in allowed)
        raise ValueError(f"{name} must hold integer ids ({names}), got dtype {str(value.dtype).replace('torch.', '')}")
    if dims is not None and value.dim() != dims:
        raise ValueError(f"{name} must have {dims} dimension(s){' ' + shape if shape else ''}, got shape {tuple(value.shape)}")
    read = values_readable(value) if check_values is None else check_values
    if high is not None and read and value.numel():
        lo, hi = int(value.min()), int(value.max())
        if lo < 0 or hi >= high:
            bad = lo if lo < 0 else hi
            raise ValueError(f"{name} holds {bad}, outside the allowed 0 .. {high - 1}")
    return value


def _as_tuple(types: "type | tuple[type, ...]") -> tuple[type, ...]:
    return types if isinstance(types, tuple) else (types,)


def _short(value: Any) -> str:
    text = " ".join(repr(value).split())  # one line, also for multi-line reprs (optimizers, modules)
    if len(text) > 80:
        text = text[:77] + "..."
    return f"{text} ({type(value).__name__})"
