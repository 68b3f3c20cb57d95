"""Execute lesson notebooks in place and stamp where their outputs came from.

``python -m fp16lab.outputs run notebooks/00_setup_and_verify.ipynb`` executes a notebook
with nbclient, strips noise (per-cell timing, widget state), and writes into its metadata
under ``"fp16lab"`` the machine (GPU name or CPU), quick/full mode, torch version, date and
a SHA-256 digest of its code cells. ``python -m fp16lab.outputs check`` verifies that every
notebook's code is unchanged since its outputs were made (tests/test_outputs.py does too).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["code_digest", "strip_noise", "stamp", "execute", "stale", "main"]

KEY = "fp16lab"


def code_digest(nb: Any) -> str:
    """SHA-256 over the source of every code cell, in order."""
    h = hashlib.sha256()
    for cell in nb.cells:
        if cell.cell_type == "code":
            src = cell.source if isinstance(cell.source, str) else "".join(cell.source)
            h.update(src.rstrip().encode("utf-8"))
            h.update(b"\n\x1e\n")
    return h.hexdigest()


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def strip_noise(nb: Any) -> Any:
    """Drop per-cell execution timing, widgets and other run-to-run noise.

    Widget outputs (tqdm.auto's progress bars) go too: their state is not kept, so a saved
    bar would show its first frame ("0%") to a reader, as if the run had stalled.
    """
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        for k in ("execution", "ExecuteTime", "collapsed", "scrolled"):
            cell.metadata.pop(k, None)
        if cell.get("cell_type") == "code":
            cell.outputs = [o for o in cell.get("outputs", []) if WIDGET_VIEW not in o.get("data", {})]
    return nb


def stamp(nb: Any, *, seconds: float | None = None) -> Any:
    """Record in ``nb.metadata['fp16lab']`` where and how the outputs were made."""
    from fp16lab.env import run_metadata

    meta = run_metadata()
    nb.metadata[KEY] = {
        "outputs_from": f"{meta['device']} ({meta['mode']} mode)",
        "device": meta["device"],
        "capability": meta["capability"],
        "mode": meta["mode"],
        "torch": meta["torch"],
        "cuda": meta["cuda"],
        "python": meta["python"],
        "date": meta["date"],
        "seconds": None if seconds is None else round(seconds, 1),
        "code_sha256": code_digest(nb),
        "made_by": "python -m fp16lab.outputs run",
    }
    return nb


def execute(path: "str | Path", *, timeout: int = 1200) -> float:
    """Run the notebook at ``path`` top to bottom, strip noise, stamp it and save it."""
    import nbformat
    from nbclient import NotebookClient

    p = Path(path)
    nb = nbformat.read(p, as_version=4)
    client = NotebookClient(
        nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(p.parent)}}
    )
    t0 = time.perf_counter()
    client.execute()
    seconds = time.perf_counter() - t0
    strip_noise(nb)
    stamp(nb, seconds=seconds)
    nbformat.write(nb, p)
    return seconds


def stale(path: "str | Path") -> str | None:
    """Why the stored outputs of ``path`` are not current, or None when they are."""
    import nbformat

    nb = nbformat.read(Path(path), as_version=4)
    meta = nb.metadata.get(KEY)
    if not meta or "code_sha256" not in meta:
        return "no fp16lab metadata: run `python -m fp16lab.outputs run` on it"
    if meta["code_sha256"] != code_digest(nb):
        return (
            "code changed after its outputs were made "
            f"(outputs from {meta.get('outputs_from')}, {meta.get('date')}): "
            "re-run `python -m fp16lab.outputs run` on it"
        )
    return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fp16lab.outputs", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="execute notebooks in place and stamp them")
    run.add_argument("notebooks", nargs="+")
    run.add_argument("--timeout", type=int, default=1200, help="seconds per cell (default 1200)")
    run.add_argument("--reference", action="store_true",
                     help="a reference run: lessons save measurements to results/ (not results/local/)")
    chk = sub.add_parser("check", help="list notebooks whose outputs are stale")
    chk.add_argument("notebooks", nargs="*")
    args = parser.parse_args(argv)
    if args.command == "run":
        if args.reference:
            import os

            os.environ["FP16LAB_REFERENCE_RUN"] = "1"  # inherited by the kernels
        for nb in args.notebooks:
            print(f"running {nb} ...", flush=True)
            print(f"  done in {execute(nb, timeout=args.timeout):.1f} s", flush=True)
        return 0
    paths = args.notebooks or sorted(str(p) for p in Path("notebooks").glob("[0-9]*.ipynb"))
    bad = [(p, why) for p in paths if (why := stale(p))]
    for p, why in bad:
        print(f"STALE {p}: {why}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
