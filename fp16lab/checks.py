"""Argument validators: one place that says what a bad argument was and what is allowed.

Every public entry point checks its arguments with these, once, before any work starts;
private functions then take the parsed values. Each raises ``ValueError`` that names the
argument, quotes the value and says what is allowed. ``bool`` is never accepted as a number.
"""

from __future__ import annotations

import inspect
import math
import numbers
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TypeVar

__all__ = [
    "say",
    "install_catalogue",
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
    "sequence_of",
    "module",
    "existing_path",
    "file_to_write",
    "optimizer_holds",
    "notebook",
    "notebook_cell",
    "path",
    "text",
]

T = TypeVar("T")


def _is_int(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def positive_int(name: str, value: object, *, minimum: int = 1) -> int:
    """``value`` as an ``int`` >= ``minimum`` (default 1); bools and floats are refused."""
    _label(name)
    if not _is_int(minimum):
        raise ValueError(f"minimum must be an int, got {_short(minimum)}")
    if not _is_int(value) or int(value) < minimum:  # type: ignore[call-overload]
        raise ValueError(say("{name} must be an int >= {minimum}, got {value!r}", name=name, minimum=minimum, value=value))
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
    _label(name)
    _flags(what=(what, str), n_args=(n_args, int), optional=(optional, bool), classes=(classes, bool))
    non_negative_int("n_args", n_args)
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
    _label(name)
    _flags(allow_zero=(allow_zero, bool))
    ok = isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(float(value))
    if ok and (float(value) > 0 or (allow_zero and float(value) == 0)):  # type: ignore[arg-type]
        return float(value)  # type: ignore[arg-type]
    if allow_zero:
        raise ValueError(say("{name} must be a finite number >= 0, got {value!r}", name=name, value=value))
    raise ValueError(say("{name} must be a finite number > 0, got {value!r}", name=name, value=value))


def one_of(name: str, value: object, allowed: "Sequence[str] | str") -> str:
    """``value`` when it is one of the strings in ``allowed`` (exact match; a string ``allowed`` is one name)."""
    _label(name)
    if not isinstance(allowed, (str, tuple, list, frozenset, set)) or not all(isinstance(a, str) for a in allowed):
        raise ValueError(f"allowed must be a str or a list of str, got {_short(allowed)}")
    names = (allowed,) if isinstance(allowed, str) else tuple(allowed)  # never a substring test
    if isinstance(value, str) and value in names:
        return value
    raise ValueError(say("{name} must be one of {names}; got {value}", name=name,
                         names=say(", ").join(map(repr, names)), value=_short(value)))


def sequence_of(name: str, value: object, *, example: str = "['fp16']", item: "Callable[[str, Any], Any] | None" = None,
                allow_empty: bool = False, single: bool = False) -> list[Any]:
    """``value`` as a list: a list, tuple or other iterable, never a bare string read letter by letter.

    ``item(f"{name}[i]", entry)`` checks (and may convert) each entry. A bare string, bytes,
    dict, tensor or non-iterable is refused with "pass a list, e.g. ``example``"; with
    ``single`` a bare string (or an entry ``item`` accepts) is taken as a list of one, where a
    helper documents that. Empty is refused unless ``allow_empty``.
    """
    _label(name)
    _flags(example=(example, str), allow_empty=(allow_empty, bool), single=(single, bool))
    function("item", item, "a function (name, entry) -> entry", n_args=2, optional=True)
    if single and isinstance(value, str):
        value = [value]
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable) or _is_tensor(value):
        raise ValueError(f"{name} must be a list, got {_short(value)}: pass a list, e.g. {example}")
    out = list(value)
    if not out and not allow_empty:
        raise ValueError(f"{name} is empty: pass a list with at least one entry, e.g. {example}")
    return [item(f"{name}[{i}]", v) for i, v in enumerate(out)] if item is not None else out


def boolean(name: str, value: object) -> bool:
    """``value`` when it is a real ``bool`` (not 0/1, not a string)."""
    _label(name)
    if isinstance(value, bool):
        return value
    raise ValueError(say("{name} must be True or False, got {value!r}", name=name, value=value))


def instance(name: str, value: T, types: "type | tuple[type, ...]", what: str) -> T:
    """``value`` when it is an instance of ``types``; else a ValueError saying ``what`` is expected."""
    _label(name)
    _flags(what=(what, str))
    if not all(isinstance(t, type) for t in _as_tuple(types)):
        raise ValueError(f"types must be a class or a tuple of classes, got {_short(types)}")
    if isinstance(value, types) and not (isinstance(value, bool) and bool not in _as_tuple(types)):
        return value
    raise ValueError(f"{name} must be {what}, got {_short(value)}")


def distinct(name: str, values: Sequence[T], key: "Any" = None) -> list[T]:
    """``values`` as a list when no entry repeats (by ``key(entry)``, default the entry): one row each."""
    _label(name)
    items = sequence_of(name, values, allow_empty=True)
    if key is not None and not callable(key):
        raise ValueError(f"key must be a function of one entry or None, got {_short(key)}")
    seen: dict[Any, int] = {}
    for i, v in enumerate(items):
        k = key(v) if key is not None else v
        if k in seen:
            raise ValueError(f"{name} lists {k!r} twice (entries {seen[k]} and {i}); give each once")
        seen[k] = i
    return items


def values_readable(t: Any) -> bool:
    """True when reading ``t``'s values is free: a CPU tensor in eager mode (no device sync, no graph break).

    Validators check value ranges only then; on a GPU, inside ``torch.compile`` or a CUDA-graph
    capture they check types and shapes only, so that a hot loop keeps running ahead.
    """
    import torch

    if not isinstance(t, torch.Tensor):
        raise ValueError(f"t must be a torch.Tensor, got {_short(t)}")
    return t.device.type == "cpu" and not torch.compiler.is_compiling()


def integer_tensor(name: str, value: object, *, dims: "int | None" = None, dtypes: "tuple | None" = None,
                   high: "int | None" = None, shape: str = "", check_values: "bool | None" = None) -> Any:
    """``value`` when it is a tensor of integer ids: not float/bool/complex, ``dims`` dimensions, in ``[0, high)``.

    ``dtypes`` (default: any integer dtype) narrows the allowed dtypes; ``shape`` words the
    expected shape in the message (e.g. ``"(batch, seq_len)"``). The range is read only when
    ``check_values`` is True, or when it is None (default) and :func:`values_readable` holds.
    """
    _label(name)
    _flags(shape=(shape, str))
    for opt_name, opt in (("dims", dims), ("high", high)):
        if opt is not None and not (_is_int(opt) and int(opt) >= (0 if opt_name == "dims" else 1)):
            bound = ">= 0" if opt_name == "dims" else ">= 1"
            raise ValueError(f"{opt_name} must be an int {bound} or None, got {_short(opt)}")
    if dtypes is not None and not isinstance(dtypes, tuple):
        raise ValueError(f"dtypes must be a tuple of torch dtypes or None, got {_short(dtypes)}")
    if check_values is not None:
        _flags(check_values=(check_values, bool))
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


def module(name: str, value: T) -> T:
    """``value`` when it is a ``torch.nn.Module`` (an instance, not its class)."""
    _label(name)
    from torch import nn

    if isinstance(value, nn.Module):
        return value
    hint = f": pass an instance, e.g. {value.__name__}(...)" if isinstance(value, type) else ""
    raise ValueError(f"{name} must be a torch.nn.Module, got {_short(value)}{hint}")


def path(name: str, value: object) -> Path:
    """``value`` (a non-empty str or os.PathLike) as a Path; whether it exists is the caller's question."""
    _label(name)
    if isinstance(value, (str, os.PathLike)) and str(value).strip():
        return Path(value)
    raise ValueError(f"{name} must be a path (str or os.PathLike), got {_short(value)}")


def text(name: str, value: object) -> str:
    """``value`` when it is a str."""
    _label(name)
    if isinstance(value, str):
        return value
    raise ValueError(f"{name} must be a str, got {_short(value)}")


def existing_path(name: str, value: object, *, kind: str = "any") -> Path:
    """``value`` (a str or os.PathLike) as a Path that exists; ``kind`` 'file' or 'dir' narrows it.

    A missing path is an error, never an empty answer: a typo must not read as "nothing there".
    """
    _label(name)
    one_of("kind", kind, ("any", "file", "dir"))
    p = path(name, value)
    if not p.exists():
        raise FileNotFoundError(f"{name}: {str(p)!r} does not exist")
    if kind == "file" and not p.is_file():
        raise ValueError(f"{name}: {str(p)!r} is a folder, not a file")
    if kind == "dir" and not p.is_dir():
        raise ValueError(f"{name}: {str(p)!r} is a file, not a folder")
    return p


def file_to_write(name: str, value: object) -> Path:
    """``value`` (a str or os.PathLike) as the Path of a file to write: never an existing folder.

    Whether its folder exists is the caller's rule (most writers create it); an existing folder
    is refused here, so the write does not fail with IsADirectoryError after the work is done.
    """
    p = path(name, value)
    if p.is_dir():
        raise ValueError(f"{name}: {str(p)!r} is a folder; give the path of a file in it, e.g. {str(p / 'x.json')!r}")
    return p


def optimizer_holds(model: object, optimizer: object, *, every: bool = True, only_model: bool = False,
                    name: str = "optimizer") -> list[Any]:
    """The model's trainable parameters that ``optimizer`` holds, when it is an optimizer built for ``model``.

    ``every`` (default): it must hold every trainable parameter (else some would never be
    updated); otherwise at least one (two optimizers may share a model). ``only_model``: it may
    hold no parameter outside the model (else its state counts another model's). One check,
    used by every helper that takes a model and its optimizer.
    """
    _label(name)
    _flags(every=(every, bool), only_model=(only_model, bool))
    import torch

    module("model", model)
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise ValueError(f"{name} must be a torch.optim.Optimizer, got {_short(optimizer)}")
    held = {id(q) for g in optimizer.param_groups for q in g["params"]}
    params: list[Any] = []
    missing: list[str] = []
    mine: set[int] = set()
    for n, q in model.named_parameters():  # type: ignore[attr-defined]
        mine.add(id(q))
        if q.requires_grad:
            (params if id(q) in held else missing).append(q if id(q) in held else n)
    if not params and not missing:
        raise ValueError("the model has no trainable parameters (all have requires_grad=False)")
    if every and missing:
        raise ValueError(
            f"{name} does not hold {len(missing)} of the model's {len(params) + len(missing)} trainable parameters "
            f"({', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''}): they would never be updated. Build the "
            f"{name} from model.parameters() after changing the model (e.g. after fp16lab.align.pad_layers); "
            "to train only part of the model, freeze the rest with requires_grad_(False)")
    if not params:
        raise ValueError(f"{name} holds none of this model's parameters that train ({len(missing)} trainable; it "
                         f"holds {len(held)} others): it was built on another model, or before the model was "
                         f"changed; build it from model.parameters()")
    foreign = len(held - mine)
    if only_model and foreign:
        raise ValueError(f"{name} holds {foreign} parameter(s) that are not this model's (it was built on another "
                         "model, or before the model was changed); build it from model.parameters()")
    return params


def notebook(name: str, value: T, *, plain: bool = False) -> T:
    """``value`` when it is a notebook as nbformat reads it (``.cells`` a list, ``.metadata`` a dict).

    ``plain``: the same notebook as a plain JSON dict (``json.load``, what the Jupyter server saves)
    is accepted too.
    """
    _label(name)
    _flags(plain=(plain, bool))
    if plain and isinstance(value, Mapping):
        cells, meta = value.get("cells"), value.get("metadata", {})
    else:
        cells, meta = getattr(value, "cells", None), getattr(value, "metadata", None)
    if isinstance(value, Mapping) and isinstance(cells, list) and isinstance(meta, Mapping):
        return value
    also = " or its JSON dict" if plain else ""
    raise ValueError(f"{name} must be a notebook (nbformat.read(path, as_version=4)){also}, got {_short(value)}")


def notebook_cell(name: str, value: T) -> T:
    """``value`` when it is one notebook cell (a dict with ``cell_type`` and ``source``)."""
    _label(name)
    if isinstance(value, Mapping) and "cell_type" in value and isinstance(value.get("source"), (str, list)):
        return value
    raise ValueError(f"{name} must be a notebook cell (nb.cells[i]), got {_short(value)}")


def _label(name: object) -> None:
    """The argument name a validator is given must be a str: it is what every message starts with."""
    if not isinstance(name, str) or not name:
        raise ValueError(f"name must be the argument's name (a non-empty str), got {_short(name)}")


def _flags(**given: "tuple[object, type]") -> None:
    """Each option ``(value, type)`` has that type (bool is not an int)."""
    for opt, (value, kind) in given.items():
        ok = isinstance(value, kind) and (kind is bool or not isinstance(value, bool))
        if not ok:
            raise ValueError(f"{opt} must be a {kind.__name__}, got {_short(value)}")


def _is_tensor(value: object) -> bool:
    torch = __import__("sys").modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def _as_tuple(types: "type | tuple[type, ...]") -> tuple[type, ...]:
    return types if isinstance(types, tuple) else (types,)


def _short(value: Any) -> str:
    text = " ".join(repr(value).split())  # one line, also for multi-line reprs (optimizers, modules)
    if len(text) > 80:
        text = text[:77] + "..."
    return f"{text} ({type(value).__name__})"


# ---- the library's reports and errors, in the learner's language ----------------------------------------------------
# The library imports no catalogue (labs and course import the library, never the reverse): its reports and errors
# go through say(), English until fp16lab.labs.runtime.i18n installs its tr() (on import; every lesson imports it).

_CATALOGUE: list[Callable[..., str]] = []


def say(msgid: str, /, **fields: object) -> str:
    """``msgid`` (the English text) with its ``{fields}`` filled in, in the learner's language once a catalogue is
    installed (:func:`install_catalogue`), else English. Without fields the text is returned as it is."""
    if _CATALOGUE:
        return _CATALOGUE[0](msgid, **fields)
    return msgid.format(**fields) if fields else msgid


def install_catalogue(translate: Callable[..., str]) -> None:
    """Route :func:`say` through ``translate(msgid, **fields)`` (fp16lab.labs.runtime.i18n installs its ``tr``)."""
    if not callable(translate):
        raise ValueError(f"translate must be a function like tr(msgid, **fields), got {translate!r}")
    _CATALOGUE[:] = [translate]
