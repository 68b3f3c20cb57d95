"""Save and load result tables together with the metadata of the run that made them.

A results file is JSON: ``{"metadata": {...}, "rows": [{...}, ...]}``; a CSV copy can be
written beside it for spreadsheets. Reference runs live in the repository's ``results/``.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from fp16lab.labs.runtime.i18n import tr

__all__ = [
    "save_results",
    "load_results",
    "load_reference",
    "reference_path",
    "output_path",
    "Measured",
    "measure_or_reference",
    "RESULTS_DIR",
]

_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def _check_name(name: object, what: str = "name", *, suffix: str = "") -> str:
    """A bare results name: letters, digits, '_', '-', '.', no folder, no '..' (``suffix``: required ending)."""
    text = name if isinstance(name, str) else ""
    ok = _NAME.fullmatch(text) is not None and ".." not in text
    if ok and suffix:
        ok = text.endswith(suffix) and len(text) > len(suffix)
    elif ok:
        ok = not text.endswith(".json")
    if not ok:
        example = "'align_sweep.json'" if suffix else "'align_sweep'"
        raise ValueError(f"{what} must be a bare name like {example} (letters, digits, _ - .; no folders), "
                         f"got {name!r}")
    return text


def _check_path(path: object, what: str = "path") -> Path:
    if not isinstance(path, (str, os.PathLike)) or (isinstance(path, str) and not path.strip()):
        raise ValueError(f"{what} must be a file path (str or pathlib.Path), got {path!r}")
    return Path(path)


# The repository's results/ folder; FP16LAB_RESULTS_DIR points elsewhere (tests, drafts).
RESULTS_DIR = Path(os.environ.get("FP16LAB_RESULTS_DIR") or Path(__file__).resolve().parents[3] / "results")


def save_results(
    frame: pd.DataFrame, path: "str | os.PathLike[str]", metadata: dict[str, Any], *, csv: bool = False
) -> Path:
    """Write ``frame`` and ``metadata`` to JSON at ``path`` atomically (and a .csv beside it if ``csv``).

    Defaults: ``csv=False``. Everything is checked before anything is written: ``frame``
    a pandas DataFrame, ``path`` ending in ``.json`` in an existing folder, ``metadata`` a
    dict that JSON can hold (numbers, strings, lists, dicts; numpy/torch scalars and paths
    are stored as plain numbers and strings). An index that carries information (named, several
    levels, or labels that are not integers) is stored as columns, as ``frame.reset_index()``
    gives them; an unnamed integer index is row numbers and is not stored.
    """
    if not isinstance(frame, pd.DataFrame):
        raise ValueError(f"frame must be a pandas DataFrame, got {type(frame).__name__}")
    frame = _index_as_columns(frame)
    out = _check_path(path)
    if out.suffix != ".json":
        raise ValueError(f"path must end in .json, got {str(out)!r}")
    if out.is_dir():
        raise ValueError(f"path {str(out)!r} is a folder; give a file name ending in .json")
    if not out.parent.is_dir():
        raise ValueError(f"path: folder {str(out.parent)!r} does not exist; create it first")
    meta_json = metadata_json(metadata)
    if not isinstance(csv, bool):
        raise ValueError(f"csv must be True or False, got {csv!r}")
    payload = {"metadata": meta_json, "rows": _rows_json(frame)}
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=out.name, suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(payload, fh, indent=1, sort_keys=False)
            fh.write("\n")
        os.chmod(tmp, 0o644)  # mkstemp makes 0600 files; results are meant to be shared
        os.replace(tmp, out)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if csv:
        frame.to_csv(out.with_suffix(".csv"), index=False)
    return out


def _index_as_columns(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with an informative index moved into columns (a copy); row numbers are left as they are."""
    idx = frame.index
    if idx.nlevels == 1 and idx.name is None and pd.api.types.is_integer_dtype(idx.dtype):
        return frame
    clash = [n for n in (idx.names if idx.nlevels > 1 else [idx.name or "index"]) if n in frame.columns]
    if clash:
        raise ValueError(f"frame: its index would be stored as column(s) {clash!r}, which it already has; "
                         "rename the index or call frame.reset_index(drop=True) to leave it out")
    return frame.reset_index()


def _jsonable(value: Any) -> Any:
    """numpy/torch scalars, paths, dtypes and devices, as plain JSON values; TypeError for the rest."""
    if hasattr(value, "item") and callable(value.item):
        try:
            return value.item()
        except (ValueError, RuntimeError):  # an array or tensor of more than one value
            raise TypeError(f"{type(value).__name__} {value!r:.60} is not JSON (not a single number; "
                            "store .tolist())") from None
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    import torch

    if isinstance(value, (torch.dtype, torch.device)):
        return str(value)
    raise TypeError(f"{type(value).__name__} {value!r:.60} is not JSON (use numbers, strings, lists, dicts)")


def metadata_json(metadata: object) -> dict[str, Any]:
    """``metadata`` as JSON would store it; ValueError naming ``metadata`` for what JSON cannot hold.

    Keys must be strings at every depth (JSON would silently turn ``1`` into ``'1'``).
    """
    if not isinstance(metadata, dict):
        raise ValueError(f"metadata must be a dict (e.g. fp16lab.course.env.run_metadata()), got {type(metadata).__name__}")
    bad = _non_str_key(metadata)
    if bad is not None:
        raise ValueError(f"metadata keys must be strings (JSON turns other keys into text), got key {bad!r}")
    try:
        out: dict[str, Any] = json.loads(json.dumps(metadata, default=_jsonable))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"metadata cannot be stored as JSON: {exc}") from None
    return out


def _non_str_key(value: Any) -> Any:
    """The first dict key, at any depth, that is not a string (None when all are)."""
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                return k
            bad = _non_str_key(v)
            if bad is not None:
                return bad
    elif isinstance(value, (list, tuple)):
        for v in value:
            bad = _non_str_key(v)
            if bad is not None:
                return bad
    return None


def _rows_json(frame: pd.DataFrame) -> list[Any]:
    """``frame``'s rows as JSON records; ValueError naming ``frame`` when a cell or the columns cannot be stored."""
    try:
        rows: list[Any] = json.loads(frame.to_json(orient="records", default_handler=_jsonable))
    except (TypeError, ValueError, OverflowError) as exc:
        raise ValueError(f"frame cannot be stored as JSON records: {exc}") from None
    return rows


def load_results(path: "str | os.PathLike[str]") -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read a file written by :func:`save_results`: (table, metadata)."""
    p = _check_path(path)
    if p.is_dir():
        raise FileNotFoundError(f"path {str(p)!r} is a folder, not a results file (.json)")
    if not p.is_file():
        raise FileNotFoundError(f"path: no results file at {str(p)!r}")
    try:
        payload = json.loads(p.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"path: {str(p)!r} is not an fp16lab results file: not valid JSON ({exc})") from None
    ok = isinstance(payload, dict) and isinstance(payload.get("rows"), list) and isinstance(payload.get("metadata"), dict)
    if ok and not all(isinstance(r, dict) for r in payload["rows"]):
        ok = False
    if not ok:
        raise ValueError(f"path: {str(p)!r} is not an fp16lab results file (needs 'metadata' and 'rows')")
    return pd.DataFrame(payload["rows"]), payload["metadata"]


def reference_path(name: str) -> Path:
    """Path of a committed reference result, e.g. ``reference_path('align_h200.json')``."""
    p = RESULTS_DIR / _check_name(name, suffix=".json")
    if not p.exists():
        have = sorted(x.name for x in RESULTS_DIR.glob("*.json")) if RESULTS_DIR.exists() else []
        raise FileNotFoundError(
            f"no reference result {name!r} in {str(RESULTS_DIR)!r}; available: {have}. "
            "Reference files ship with the repository checkout (install with `pip install -e .`)."
        )
    return p


def output_path(name: str) -> Path:
    """Where a lesson saves the numbers it just measured.

    ``results/<name>.json`` during a reference run (``FP16LAB_REFERENCE_RUN=1``, set by
    ``python -m fp16lab.course.outputs run --reference``), otherwise ``results/local/<name>.json``
    (git-ignored), so a learner's run never overwrites the committed reference.
    """
    _check_name(name)
    folder = RESULTS_DIR if os.environ.get("FP16LAB_REFERENCE_RUN") == "1" else RESULTS_DIR / "local"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{name}.json"


def load_reference(name: str) -> "tuple[pd.DataFrame, dict[str, Any]] | tuple[None, None]":
    """Load the committed GPU reference ``results/<name>.json`` and print where it was measured.

    Returns ``(None, None)`` and prints a notice saying so when that reference has not been
    recorded yet (a lesson section whose GPU run is still to come), so a lesson can show
    everything else in quick mode. Anything else wrong with the file raises.
    """
    _check_name(name)
    try:
        path = reference_path(f"{name}.json")
    except FileNotFoundError:
        print(tr("NO GPU REFERENCE YET: results/{name}.json has not been recorded on a GPU, so this "
                 "section has nothing to show on this machine. It needs a CUDA GPU: run the lesson on "
                 "one (full mode) to measure it.", name=name) + _similar_names(name))
        return None, None
    frame, meta = load_results(path)
    sms = tr(", {n} SMs", n=meta["sm_count"]) if meta.get("sm_count") else ""
    mode = {"quick": tr("quick"), "full": tr("full")}.get(str(meta.get("mode")), meta.get("mode"))  # zh: 完整模式
    print(tr("COMMITTED GPU REFERENCE {name}.json: {device} ({capability}{sms}), torch {torch}, CUDA {cuda}, "
             "cuDNN {cudnn}, {date}, {mode} mode. Not measured on this machine.", name=name,
             device=meta.get("device"), capability=meta.get("capability"), sms=sms, torch=meta.get("torch"),
             cuda=meta.get("cuda"), cudnn=meta.get("cudnn"), date=meta.get("date"), mode=mode))
    if meta.get("device_type") != "cuda":
        print(tr("WARNING: results/{name}.json was not measured on a CUDA GPU (device_type {device_type!r}): it "
                 "is a stand-in, not a reference. Re-record it on a GPU with "
                 "`python -m fp16lab.course.outputs run --reference <lesson>`.", name=name,
                 device_type=meta.get("device_type")))
    return frame, meta


def _similar_names(name: str) -> str:
    """A hint naming recorded references close to ``name`` (a typo reads as "not recorded yet")."""
    import difflib

    have = [p.stem for p in RESULTS_DIR.glob("*.json")] if RESULTS_DIR.is_dir() else []
    close = difflib.get_close_matches(name, have, n=3, cutoff=0.8)
    found = ", ".join(map(repr, close))
    return tr(" (Recorded references with similar names: {found}: a typo?)", found=found) if close else ""


@dataclass
class Measured:
    """A table measured here (``live``) or read from the committed reference, with its metadata.

    ``frame`` and ``meta`` are None when there is no GPU here and no reference was recorded yet.
    """

    frame: pd.DataFrame | None
    meta: dict[str, Any] | None
    live: bool

    @property
    def available(self) -> bool:
        """True when there is a table to show."""
        return self.frame is not None

    def __iter__(self) -> Iterator[Any]:
        """Unpack as ``frame, meta, live = measure_or_reference(...)``."""
        return iter((self.frame, self.meta, self.live))


def measure_or_reference(name: str, measure: Callable[[], pd.DataFrame]) -> Measured:
    """Run ``measure()`` and save it as ``name`` when a GPU runs live, else load the committed reference.

    The one place lessons decide "measured here, or the reference": live means
    :func:`fp16lab.labs.runtime.quick.live_gpu` (full mode on a CUDA GPU). A live table is saved with
    :func:`fp16lab.course.env.run_metadata` to :func:`output_path`; otherwise :func:`load_reference`
    prints where the reference was measured (or that none is recorded yet).
    """
    from fp16lab.checks import function
    from fp16lab.labs.runtime.quick import live_gpu

    _check_name(name)
    function("measure", measure, "a function of no arguments returning a DataFrame", n_args=0)

    if not live_gpu():
        frame, meta = load_reference(name)
        return Measured(frame, meta, live=False)
    from fp16lab.labs.runtime.metadata import run_metadata

    frame = measure()
    if not isinstance(frame, pd.DataFrame):
        raise ValueError(f"measure() must return a pandas DataFrame, got {type(frame).__name__}")
    meta = run_metadata("cuda")
    save_results(frame, output_path(name), meta)
    return Measured(frame, meta, live=True)
