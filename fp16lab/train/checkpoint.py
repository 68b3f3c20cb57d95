"""Checkpoints that resume exactly, refuse cleanly, and do not grow with the run.

A checkpoint written by :func:`save_checkpoint` holds the model, optimizer, GradScaler and
scheduler states, the step, the torch RNG state and the classes of the optimizer and scheduler.
It is written atomically (a temporary file in the same folder, ``fsync``, ``os.replace``) and
read back with ``torch.load(weights_only=True)``, which runs no code from the file.

:func:`load_checkpoint` checks the whole file against the objects it is given *before* it
touches any of them (keys and shapes of the model, the optimizer's groups and state shapes,
the optimizer and scheduler classes, GradScaler present or not), so a refused load changes
nothing. A file that is empty, truncated, or not a checkpoint at all gets a ``ValueError``
that names the path.

:class:`HistoryFile` is the append-only sidecar (``<checkpoint>.history.jsonl``) in which
:func:`fp16lab.train.fit` stores its per-step history once: each save appends the rows since
the previous save, and the checkpoint records how many rows (and bytes) belong to it.
"""

from __future__ import annotations

import json
import os
import pickle
import secrets
import tempfile
import zipfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from fp16lab.checks import boolean, instance, module, non_negative_int, optimizer_holds, sequence_of
from fp16lab.device import model_device, resolve_device
from fp16lab.train.step import check_scheduler_drives

__all__ = [
    "CHECKPOINT_FORMAT",
    "HistoryFile",
    "save_checkpoint",
    "load_checkpoint",
    "read_checkpoint",
    "check_checkpoint_fits",
    "check_writable_folder",
]

CHECKPOINT_FORMAT = "fp16lab-checkpoint-2"
_READABLE_FORMATS = ("fp16lab-checkpoint-1", CHECKPOINT_FORMAT)
_KEYS = ("format", "step", "model", "optimizer", "scaler", "scheduler", "rng", "extra")
# optimizer state entries that have the shape of their parameter (Adam, AdamW, SGD, RMSprop, Adagrad, ...)
_MIRRORED_STATE = ("exp_avg", "exp_avg_sq", "max_exp_avg_sq", "momentum_buffer", "square_avg", "sum",
                   "acc_delta", "grad_avg")


# ---------------------------------------------------------------- checks


def _as_path(name: str, value: object) -> Path:
    if isinstance(value, (str, os.PathLike)) and str(value).strip():
        return Path(value)
    raise ValueError(f"{name} must be a file path (str or os.PathLike), got {value!r}")


def check_writable_folder(path: "str | os.PathLike[str]", *, name: str = "checkpoint") -> Path:
    """Raise ``ValueError`` unless ``path`` can be written as a file: its folder exists, is a
    folder, and a file can be created in it (tried, then removed), and ``path`` is not a folder.

    Called before any work starts, so a missing or read-only folder does not fail a run at
    its first save. Returns ``path`` as a :class:`~pathlib.Path`.
    """
    if not isinstance(name, str):
        raise ValueError(f"name must be the argument's name (a str), got {name!r}")
    p = _as_path(name, path)
    folder = p.parent
    if p.is_dir():
        raise ValueError(f"{name}={str(p)!r} is a folder; give the path of a file in it, e.g. {str(p / 'run.pt')!r}")
    if not folder.exists():
        raise ValueError(f"{name}={str(p)!r}: the folder {str(folder)!r} does not exist; create it first")
    if not folder.is_dir():
        raise ValueError(f"{name}={str(p)!r}: {str(folder)!r} is not a folder")
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=f".{p.name}.", suffix=".probe")
    except OSError as exc:
        raise ValueError(
            f"{name}={str(p)!r}: cannot write in the folder {str(folder)!r} ({exc.strerror or exc}); "
            "choose a writable folder"
        ) from None
    os.close(fd)
    os.unlink(probe)
    return p


def _check_plain(value: object, where: str) -> None:
    """Refuse what ``torch.load(weights_only=True)`` would refuse to read back."""
    if value is None or type(value) in (bool, int, float, str, bytes) or isinstance(value, torch.Tensor):
        return  # exact types: numpy.float64 is a float subclass that weights_only refuses
    if isinstance(value, (list, tuple)) and type(value) in (list, tuple):
        for i, v in enumerate(value):
            _check_plain(v, f"{where}[{i}]")
        return
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, (str, int)) or isinstance(k, bool):
                raise ValueError(f"{where} has the key {k!r}; keys must be str or int")
            _check_plain(v, f"{where}[{k!r}]")
        return
    hint = " (convert it: float(x), int(x) or x.tolist())" if isinstance(value, (np.generic, np.ndarray)) else ""
    raise ValueError(
        f"{where} is a {type(value).__module__}.{type(value).__qualname__}, which torch.load(weights_only=True) "
        f"cannot read back{hint}; allowed: None, bool, int, float, str, bytes, tensors, and lists/tuples/dicts of them"
    )


# ---------------------------------------------------------------- save


def save_checkpoint(
    path: "str | os.PathLike[str]",
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    *,
    scaler: torch.amp.GradScaler | None = None,
    scheduler: Any | None = None,
    step: int = 0,
    extra: Mapping[str, Any] | None = None,
) -> Path:
    """Write model, optimizer, scaler, scheduler, ``step`` and the torch RNG state to ``path``.

    Atomic: written to a temporary file in the same folder, flushed, then ``os.replace``d
    over ``path``, so a crash mid-save leaves the previous checkpoint intact. ``extra`` holds
    plain python data and tensors only (checked first: a numpy number would make the file
    unreadable with ``weights_only=True``). Defaults: no optimizer/scaler/scheduler, step 0.
    The scaler state matters: without it a resumed fp16 run restarts at scale 2**16 and
    skips steps again.
    """
    out = check_writable_folder(path, name="path")
    _check_objects(model, optimizer, scaler, scheduler)
    step = non_negative_int("step", step)
    if extra is not None:
        instance("extra", extra, Mapping, "a dict or None")
    _check_plain(dict(extra or {}), "extra")
    device = model_device(model, default=torch.device("cpu"))
    payload = {
        "format": CHECKPOINT_FORMAT,
        "step": int(step),
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict() if optimizer is not None else None,
        "scaler": scaler.state_dict() if scaler is not None else None,
        "scheduler": scheduler.state_dict() if scheduler is not None else None,
        "classes": {"optimizer": _class_name(optimizer), "scheduler": _class_name(scheduler)},
        "rng": rng_state(device),
        "torch": str(torch.__version__),
        "extra": dict(extra or {}),
    }
    _atomic_write(out, lambda fh: torch.save(payload, fh))
    return out


def _atomic_write(out: Path, write: Any) -> None:
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            write(fh)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _class_name(obj: object) -> str | None:
    return None if obj is None else type(obj).__qualname__


def _check_objects(model: "nn.Module", optimizer: "torch.optim.Optimizer | None", scaler: object,
                   scheduler: object) -> None:
    module("model", model)
    if optimizer is not None:
        instance("optimizer", optimizer, torch.optim.Optimizer, "a torch.optim.Optimizer or None")
    if scaler is not None:
        instance("scaler", scaler, torch.amp.GradScaler, "a torch.amp.GradScaler or None")
    if scheduler is not None and (isinstance(scheduler, type) or not (
            hasattr(scheduler, "state_dict") and hasattr(scheduler, "load_state_dict"))):
        raise ValueError(f"scheduler must be an LR scheduler (with state_dict/load_state_dict) or None, "
                         f"got {scheduler.__name__ + ' (a class: pass an instance)' if isinstance(scheduler, type) else type(scheduler).__name__}")
    if optimizer is not None and optimizer.param_groups and any(q.requires_grad for q in model.parameters()):
        optimizer_holds(model, optimizer, every=False)  # extra parameters (e.g. a loss's own) are fine
    if scheduler is not None:
        check_scheduler_drives(scheduler, optimizer)


# ---------------------------------------------------------------- read and check


def read_checkpoint(
    path: "str | os.PathLike[str]", *, map_location: "str | torch.device" = "cpu", weights_only: bool = True
) -> dict[str, Any]:
    """Read and structurally check a :func:`save_checkpoint` file; load it into nothing.

    Defaults: ``map_location="cpu"``, ``weights_only=True``. ``FileNotFoundError`` when the
    file is missing; ``ValueError`` naming the path when it is empty, truncated, not a torch
    file, not an fp16lab checkpoint, or misses a part.
    """
    p = _as_path("path", path)
    boolean("weights_only", weights_only)
    dev = resolve_device(map_location, name="map_location")
    if not p.exists():
        raise FileNotFoundError(f"path: no checkpoint at {str(p)!r} (no such file)")
    if p.is_dir():
        raise ValueError(f"path: {str(p)!r} is a folder, not a checkpoint file")
    invalid = f"{str(p)!r} is not a valid, complete fp16lab checkpoint"
    size = p.stat().st_size
    if size == 0:
        raise ValueError(f"{invalid}: the file is empty (0 bytes); a save that never finished, or a wrong path?")
    try:
        payload = torch.load(p, map_location=dev, weights_only=weights_only)
    except pickle.UnpicklingError as exc:
        if weights_only and zipfile.is_zipfile(p) and "global" in str(exc).lower():
            raise ValueError(
                f"{str(p)!r} is a torch file, but it holds python objects that weights_only=True refuses "
                f"({_first_line(exc)}). If you trust the file: load_checkpoint(..., weights_only=False)."
            ) from exc
        raise ValueError(f"{invalid} (it is not a torch.save file: {_first_line(exc)})") from exc
    except (PermissionError, FileNotFoundError):
        raise
    except (EOFError, RuntimeError, KeyError, ValueError, OSError, zipfile.BadZipFile, UnicodeDecodeError) as exc:
        raise ValueError(
            f"{invalid} ({size} bytes; truncated, or not a torch.save file: {type(exc).__name__}: {_first_line(exc)})"
        ) from exc
    if not isinstance(payload, dict) or payload.get("format") not in _READABLE_FORMATS:
        found = payload.get("format") if isinstance(payload, dict) else type(payload).__name__
        raise ValueError(f"{invalid} (expected format {CHECKPOINT_FORMAT!r}, found {found!r})")
    missing = [k for k in _KEYS if k not in payload]
    if missing or not isinstance(payload["model"], Mapping) or not isinstance(payload["extra"], Mapping):
        raise ValueError(f"{invalid} (missing or malformed: {', '.join(missing) or 'model/extra'})")
    return payload


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0] if text else repr(exc))[:200]


def check_checkpoint_fits(
    payload: Mapping[str, Any],
    path: "str | os.PathLike[str]",
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    *,
    scaler_enabled: bool | None = None,
    scheduler: Any | None = None,
) -> None:
    """Raise ``ValueError`` unless the checkpoint ``payload`` loads into these objects.

    Checks, without changing anything: the model's keys and shapes; the optimizer's class,
    groups and per-parameter state shapes; the scheduler's class; and, when ``scaler_enabled``
    is not None, that a GradScaler state is present exactly when one is enabled.
    """
    if not isinstance(payload, Mapping) or any(k not in payload for k in _KEYS):
        raise ValueError("payload must be a checkpoint as read_checkpoint returns it (a dict with the keys "
                         f"{', '.join(_KEYS)}), got {str(payload)[:60]!r} ({type(payload).__name__})")
    where = f"the checkpoint {str(_as_path('path', path))!r}"
    _check_objects(model, optimizer, None, scheduler)
    if scaler_enabled is not None:
        boolean("scaler_enabled", scaler_enabled)
    _check_model_state(payload["model"], model, where)
    classes = payload.get("classes") or {}
    for name, obj in (("optimizer", optimizer), ("scheduler", scheduler)):
        if obj is None:
            continue
        if payload[name] is None:
            raise ValueError(f"{where} has no {name} state, but a {name} was given (pass {name}=None)")
        saved = classes.get(name)
        if saved is not None and saved != type(obj).__qualname__:
            raise ValueError(f"{where} holds a {saved} {name} state; the {name} given is a {type(obj).__qualname__}")
    if optimizer is not None:
        _check_optimizer_state(payload["optimizer"], optimizer, where)
    if scaler_enabled is not None and bool(payload["scaler"]) != scaler_enabled:
        raise ValueError(
            f"scaler mismatch: {where} was trained "
            f"{'with an enabled GradScaler (fp16)' if payload['scaler'] else 'without a GradScaler (fp32/tf32/bf16)'}, "
            f"the scaler given is {'enabled' if scaler_enabled else 'disabled'} "
            "(resume with the precision the checkpoint was trained in)"
        )


def _check_model_state(saved: Mapping[str, Any], model: nn.Module, where: str) -> None:
    mine = model.state_dict()
    missing = [k for k in mine if k not in saved]
    unexpected = [k for k in saved if k not in mine]
    shapes = [
        f"{k}: checkpoint {tuple(saved[k].shape)}, model {tuple(v.shape)}"
        for k, v in mine.items()
        if k in saved and isinstance(v, torch.Tensor) and isinstance(saved[k], torch.Tensor) and saved[k].shape != v.shape
    ]
    if missing or unexpected or shapes:
        parts = []
        if missing:
            parts.append(f"missing in the checkpoint: {', '.join(missing[:5])}{' ...' if len(missing) > 5 else ''}")
        if unexpected:
            parts.append(f"not in the model: {', '.join(unexpected[:5])}{' ...' if len(unexpected) > 5 else ''}")
        if shapes:
            parts.append(f"different shapes: {'; '.join(shapes[:5])}{' ...' if len(shapes) > 5 else ''}")
        raise ValueError(f"{where} does not fit this model ({' | '.join(parts)}); nothing was loaded")


def _check_optimizer_state(saved: Any, optimizer: torch.optim.Optimizer, where: str) -> None:
    if not isinstance(saved, Mapping) or "param_groups" not in saved or "state" not in saved:
        raise ValueError(f"{where} has a malformed optimizer state")
    groups = optimizer.param_groups
    if len(saved["param_groups"]) != len(groups):
        raise ValueError(f"{where}: the optimizer state has {len(saved['param_groups'])} parameter group(s), "
                         f"the optimizer given has {len(groups)}")
    by_id: dict[Any, torch.Tensor] = {}
    for i, (sg, g) in enumerate(zip(saved["param_groups"], groups, strict=True)):
        if len(sg["params"]) != len(g["params"]):
            raise ValueError(f"{where}: optimizer parameter group {i} holds {len(sg['params'])} parameters in the "
                             f"checkpoint and {len(g['params'])} in the optimizer given")
        by_id.update(zip(sg["params"], g["params"], strict=True))
    for pid, state in saved["state"].items():
        param = by_id.get(pid)
        if param is None or not isinstance(state, Mapping):
            continue
        for key in _MIRRORED_STATE:
            value = state.get(key)
            if isinstance(value, torch.Tensor) and value.shape != param.shape:
                raise ValueError(f"{where}: optimizer state {key!r} has shape {tuple(value.shape)}, its parameter "
                                 f"{tuple(param.shape)} (was the optimizer built from another model?)")


def apply_checkpoint(
    payload: Mapping[str, Any],
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    *,
    scaler: torch.amp.GradScaler | None = None,
    scheduler: Any | None = None,
    restore_rng: bool = True,
) -> None:
    """Load a checked payload (:func:`check_checkpoint_fits` first) into the objects."""
    model.load_state_dict(payload["model"])
    if optimizer is not None:
        optimizer.load_state_dict(payload["optimizer"])
    if scheduler is not None:
        scheduler.load_state_dict(payload["scheduler"])
    if scaler is not None and payload["scaler"]:
        scaler.load_state_dict(payload["scaler"])
    if restore_rng:
        set_rng_state(payload["rng"], model_device(model, default=torch.device("cpu")))


def load_checkpoint(
    path: "str | os.PathLike[str]",
    model: nn.Module,
    optimizer: torch.optim.Optimizer | None = None,
    *,
    scaler: torch.amp.GradScaler | None = None,
    scheduler: Any | None = None,
    map_location: "str | torch.device" = "cpu",
    restore_rng: bool = True,
    weights_only: bool = True,
) -> dict[str, Any]:
    """Load a :func:`save_checkpoint` file into the given objects; return the payload.

    Everything is checked first (see :func:`check_checkpoint_fits`); a refused load changes
    nothing. Defaults: ``map_location="cpu"`` (state is copied onto the model's device by
    ``load_state_dict``), the RNG state restored, ``torch.load(weights_only=True)`` (no
    arbitrary code from the file; pass False only for files you trust whose scheduler state
    holds python objects). The returned dict has ``step`` and ``extra``.
    """
    _check_objects(model, optimizer, scaler, scheduler)
    if not isinstance(restore_rng, bool):
        raise ValueError(f"restore_rng must be True or False, got {restore_rng!r}")
    payload = read_checkpoint(path, map_location=map_location, weights_only=weights_only)
    check_checkpoint_fits(payload, path, model, optimizer, scheduler=scheduler,
                          scaler_enabled=scaler.is_enabled() if scaler is not None else None)
    apply_checkpoint(payload, model, optimizer, scaler=scaler, scheduler=scheduler, restore_rng=restore_rng)
    return payload


# ---------------------------------------------------------------- RNG


def rng_state(device: torch.device) -> dict[str, Any]:
    """The CPU RNG state, and the CUDA one of ``device`` when it is a GPU."""
    state: dict[str, Any] = {"cpu": torch.get_rng_state()}
    if device.type == "cuda":
        state["cuda"] = torch.cuda.get_rng_state(device)
    return state


def set_rng_state(state: Mapping[str, Any], device: torch.device) -> None:
    """Restore :func:`rng_state` (RNG states must be CPU ByteTensors, also when loaded onto a GPU)."""
    torch.set_rng_state(state["cpu"].cpu())
    if device.type == "cuda" and state.get("cuda") is not None:
        torch.cuda.set_rng_state(state["cuda"].cpu(), device)


# ---------------------------------------------------------------- history sidecar

_HISTORY_FORMAT = "fp16lab-history-1"


@dataclass(frozen=True)
class HistoryMark:
    """Where a checkpoint's history ends in its sidecar: run id, rows and bytes."""

    run: str
    rows: int
    bytes: int

    def as_dict(self) -> dict[str, Any]:
        return {"run": self.run, "rows": self.rows, "bytes": self.bytes}


class HistoryFile:
    """The per-step history of a :func:`fp16lab.train.fit` run, written once, appended at each save.

    One JSON object a line; the first line names the format and a run id that the checkpoint
    records too, so a history file of another run is never mixed in. Rows after the
    checkpoint's mark (a crash between the append and the checkpoint) are cut at resume.
    """

    def __init__(self, checkpoint: "str | os.PathLike[str]") -> None:
        checkpoint = _as_path("checkpoint", checkpoint)
        self.path = checkpoint.with_name(checkpoint.name + ".history.jsonl")
        self.mark: HistoryMark | None = None

    def save(self, rows: Sequence[Mapping[str, Any]]) -> HistoryMark:
        """Make the file hold ``rows`` (appending the new ones); return the new mark."""
        rows = sequence_of("rows", rows, example="[{'step': 1, 'loss': 2.3}]", allow_empty=True,
                           item=lambda n, r: instance(n, r, Mapping, "a dict (one history row)"))
        if self.mark is None:  # first save of this run: a new file, atomically
            run = secrets.token_hex(8)
            body = _jsonl([{"format": _HISTORY_FORMAT, "run": run}, *rows])
            _atomic_write(self.path, lambda fh: fh.write(body))
            self.mark = HistoryMark(run, len(rows), len(body))
            return self.mark
        new = rows[self.mark.rows:]
        with open(self.path, "ab") as fh:
            fh.truncate(self.mark.bytes)  # anything past the last mark was never committed
            fh.write(_jsonl(new))
            fh.flush()
            os.fsync(fh.fileno())
            size = fh.tell()
        self.mark = HistoryMark(self.mark.run, len(rows), size)
        return self.mark

    def read(self, mark: Mapping[str, Any], step: int) -> list[dict[str, Any]]:
        """The rows up to a checkpoint's mark, checked; nothing is changed."""
        instance("mark", mark, Mapping, "a history mark (the dict a checkpoint records)")
        step = non_negative_int("step", step)
        where = f"the history file {str(self.path)!r}"
        if not self.path.is_file():
            raise ValueError(f"{where} is missing: it holds the checkpoint's history; copy it next to the checkpoint")
        run, n, size = mark.get("run"), mark.get("rows"), mark.get("bytes")
        if not isinstance(n, int) or not isinstance(size, int) or self.path.stat().st_size < size:
            raise ValueError(f"{where} is shorter than its checkpoint says ({size} bytes): it is incomplete")
        with open(self.path, "rb") as fh:
            lines = fh.read(size).decode("utf-8").splitlines()
        try:
            head = json.loads(lines[0])
            if head != {"format": _HISTORY_FORMAT, "run": run}:
                raise ValueError(f"{where} belongs to another run than its checkpoint (run {head.get('run')!r}, "
                                 f"the checkpoint's run {run!r})")
            rows = [json.loads(line) for line in lines[1:]]
        except (json.JSONDecodeError, IndexError, AttributeError) as exc:
            raise ValueError(f"{where} is not a valid fp16lab history file ({exc})") from None
        if len(rows) != n or (rows and rows[-1].get("step") != step):
            raise ValueError(f"{where} holds {len(rows)} rows up to its mark, its checkpoint says {n} up to step {step}")
        return rows

    def continue_from(self, mark: Mapping[str, Any]) -> None:
        """Append after ``mark`` from now on (rows past it are cut at the next save)."""
        self.mark = HistoryMark(str(mark["run"]), int(mark["rows"]), int(mark["bytes"]))


def _jsonl(rows: Sequence[Mapping[str, Any]]) -> bytes:
    return "".join(json.dumps(dict(r), allow_nan=True) + "\n" for r in rows).encode("utf-8")

