"""Save and load result tables together with the metadata of the run that made them.

A results file is JSON: ``{"metadata": {...}, "rows": [{...}, ...]}``; a CSV copy can be
written beside it for spreadsheets. Reference runs live in the repository's ``results/``.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

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

# The repository's results/ folder; FP16LAB_RESULTS_DIR points elsewhere (tests, drafts).
RESULTS_DIR = Path(os.environ.get("FP16LAB_RESULTS_DIR") or Path(__file__).resolve().parent.parent / "results")


def save_results(
    frame: pd.DataFrame, path: "str | os.PathLike[str]", metadata: dict[str, Any], *, csv: bool = False
) -> Path:
    """Write ``frame`` and ``metadata`` to JSON at ``path`` atomically (and a .csv if asked)."""
    out = Path(path)
    if out.suffix != ".json":
        raise ValueError(f"results path must end in .json, got {str(out)!r}")
    if not out.parent.exists():
        raise ValueError(f"folder {str(out.parent)!r} does not exist; create it first")
    payload = {"metadata": metadata, "rows": json.loads(frame.to_json(orient="records"))}
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


def load_results(path: "str | os.PathLike[str]") -> tuple[pd.DataFrame, dict[str, Any]]:
    """Read a file written by :func:`save_results`: (table, metadata)."""
    p = Path(path)
    if not p.exists():
        raise FileNotFoundError(f"no results file at {str(p)!r}")
    payload = json.loads(p.read_text())
    if not isinstance(payload, dict) or "rows" not in payload or "metadata" not in payload:
        raise ValueError(f"{str(p)!r} is not an fp16lab results file (needs 'metadata' and 'rows')")
    return pd.DataFrame(payload["rows"]), payload["metadata"]


def reference_path(name: str) -> Path:
    """Path of a committed reference result, e.g. ``reference_path('align_h200.json')``."""
    p = RESULTS_DIR / name
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
    ``python -m fp16lab.outputs run --reference``), otherwise ``results/local/<name>.json``
    (git-ignored), so a learner's run never overwrites the committed reference.
    """
    if not name or "/" in name or name.endswith(".json"):
        raise ValueError(f"name must be a bare name like 'align_sweep', got {name!r}")
    folder = RESULTS_DIR if os.environ.get("FP16LAB_REFERENCE_RUN") == "1" else RESULTS_DIR / "local"
    folder.mkdir(parents=True, exist_ok=True)
    return folder / f"{name}.json"


def load_reference(name: str) -> "tuple[pd.DataFrame, dict[str, Any]] | tuple[None, None]":
    """Load the committed GPU reference ``results/<name>.json`` and print where it was measured.

    Returns ``(None, None)`` and prints a notice saying so when that reference has not been
    recorded yet (a lesson section whose GPU run is still to come), so a lesson can show
    everything else in quick mode. Anything else wrong with the file raises.
    """
    try:
        path = reference_path(f"{name}.json")
    except FileNotFoundError:
        print(
            f"NO GPU REFERENCE YET: results/{name}.json has not been recorded on a GPU, so this "
            "section has nothing to show on this machine. It needs a CUDA GPU: run the lesson on "
            "one (full mode) to measure it."
        )
        return None, None
    frame, meta = load_results(path)
    sms = f", {meta['sm_count']} SMs" if meta.get("sm_count") else ""
    print(
        f"COMMITTED GPU REFERENCE {name}.json: {meta.get('device')} ({meta.get('capability')}{sms}), "
        f"torch {meta.get('torch')}, CUDA {meta.get('cuda')}, cuDNN {meta.get('cudnn')}, {meta.get('date')}, "
        f"{meta.get('mode')} mode. Not measured on this machine."
    )
    if meta.get("device_type") != "cuda":
        print(
            f"WARNING: results/{name}.json was not measured on a CUDA GPU (device_type "
            f"{meta.get('device_type')!r}): it is a stand-in, not a reference. Re-record it on a GPU with "
            "`python -m fp16lab.outputs run --reference <lesson>`."
        )
    return frame, meta


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
    :func:`fp16lab.config.live_gpu` (full mode on a CUDA GPU). A live table is saved with
    :func:`fp16lab.env.run_metadata` to :func:`output_path`; otherwise :func:`load_reference`
    prints where the reference was measured (or that none is recorded yet).
    """
    if not isinstance(name, str) or not name or "/" in name or name.endswith(".json"):
        raise ValueError(f"name must be a bare results name like 'align_sweep', got {name!r}")
    if not callable(measure):
        raise ValueError(f"measure must be a function returning a DataFrame, got {measure!r}")
    from fp16lab.config import live_gpu

    if not live_gpu():
        frame, meta = load_reference(name)
        return Measured(frame, meta, live=False)
    from fp16lab.env import run_metadata

    frame = measure()
    if not isinstance(frame, pd.DataFrame):
        raise ValueError(f"measure() must return a pandas DataFrame, got {type(frame).__name__}")
    meta = run_metadata("cuda")
    save_results(frame, output_path(name), meta)
    return Measured(frame, meta, live=True)
