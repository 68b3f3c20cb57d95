"""Run lessons in place and stamp where their outputs came from.

``python -m fp16lab outputs run notebooks/00_setup_and_verify.ipynb`` executes a lesson with
nbclient, strips noise (per-cell timing, widget outputs and state), and writes into its metadata
under ``"fp16lab"`` the machine (GPU name or CPU), quick/full mode, torch version, date and a
SHA-256 digest of its code cells. It also puts a *reference note* first among the first code
cell's outputs: "these outputs come from <machine>, <date>; not from your computer". A
learner who opens the lesson before running it reads that first; running the cell replaces it
with their own output.

``python -m fp16lab outputs check`` lists lessons whose code changed since their outputs were
made, or that lack the note (tests/test_outputs.py checks the same);
``python -m fp16lab outputs note`` refreshes the note from the stored metadata, without running.
"""

from __future__ import annotations

import argparse
import hashlib
import time
from pathlib import Path
from typing import Any

from fp16lab import checks
from fp16lab.course import paths as _paths
from fp16lab.labs.runtime.i18n import check_lang, tr

__all__ = [
    "KEY",
    "NOTE_KEY",
    "code_digest",
    "strip_noise",
    "drop_orphan_widgets",
    "note_text",
    "reference_note",
    "set_reference_note",
    "is_reference_note",
    "stamp",
    "execute",
    "stale",
    "configure",
    "add_parser",

]

KEY = "fp16lab"
NOTE_KEY = "fp16lab_note"  # output metadata that marks the reference note
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def code_digest(nb: Any) -> str:
    """SHA-256 over the source of every code cell, in order."""
    checks.notebook("nb", nb)
    h = hashlib.sha256()
    for cell in nb.cells:
        if cell.cell_type == "code":
            src = cell.source if isinstance(cell.source, str) else "".join(cell.source)
            h.update(src.rstrip().encode("utf-8"))
            h.update(b"\n\x1e\n")
    return h.hexdigest()


def strip_noise(nb: Any) -> Any:
    """Drop per-cell execution timing, widgets and other run-to-run noise.

    Widget outputs (tqdm.auto's progress bars) go too: their state is not kept, so a saved
    bar would show "Error displaying widget: model not found" (or its first frame) to a reader.
    """
    checks.notebook("nb", nb)
    nb.metadata.pop("widgets", None)
    for cell in nb.cells:
        for k in ("execution", "ExecuteTime", "collapsed", "scrolled"):
            cell.metadata.pop(k, None)
        if cell.get("cell_type") == "code":
            cell.outputs = [o for o in cell.get("outputs", []) if WIDGET_VIEW not in o.get("data", {})]
    return nb


def drop_orphan_widgets(nb: Any) -> int:
    """Remove widget outputs whose widget state is not saved with ``nb``; return how many went.

    A progress bar is a widget: its output only names a model, and the model's state lives in
    the kernel, or in ``metadata.widgets`` when JupyterLab saves widget state. A bar that was closed
    (tqdm's ``leave=False``), or any bar when no state is saved, leaves an output that reads
    "Error displaying widget: model not found" once the notebook is reopened. Its ``text/plain``
    fallback is the bar's first frame ("0%"), which would mislead, so the whole output goes.
    Works on notebook nodes and on plain JSON dicts (what the Jupyter server saves).
    """
    checks.notebook("nb", nb, plain=True)
    state = ((nb.get("metadata") or {}).get("widgets") or {}).get(WIDGET_STATE) or {}
    live = set((state.get("state") or {}).keys())
    removed = 0
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        keep = []
        for out in cell.get("outputs", []):
            view = (out.get("data") or {}).get(WIDGET_VIEW)
            if view is not None and view.get("model_id") not in live:
                removed += 1
                continue
            keep.append(out)
        cell["outputs"] = keep
    return removed


def note_text(meta: dict[str, Any], *, copy: bool = False, lang: str = "en") -> tuple[str, str]:
    """The reference note for stamp metadata ``meta``: (markdown, plain text).

    ``copy=True`` gives the wording for a learner's copy in notebooks/work/ (default False:
    the wording for the reference lesson itself). ``lang``: the notebook's language, "en" (default)
    or "zh" (:mod:`fp16lab.labs.runtime.i18n`); the Chinese note points at the Chinese copies, notebooks/work/zh/.
    """
    return _note_text(*_note_args(meta, copy, lang))


def _note_args(meta: object, copy: object, lang: object) -> tuple[dict[str, Any], bool, str]:
    """A note's arguments, checked once: ``meta`` a stamp dict, ``copy`` a bool, ``lang`` a known language."""
    checks.instance("meta", meta, dict, "a stamp dict (nb.metadata['fp16lab'])")
    return meta, checks.boolean("copy", copy), check_lang(lang)  # type: ignore[return-value]


def _note_text(meta: dict[str, Any], copy: bool, lang: str) -> tuple[str, str]:
    if lang == "en":
        where = meta.get("outputs_from") or f"{meta.get('device')} ({meta.get('mode')} mode)"
        details = [f"torch {meta['torch']}" if meta.get("torch") else None, meta.get("date")]
        sep, wrap, wrap_plain = ", ", " ({})", ", {}"
    else:  # the mode joins torch and the date inside one pair of brackets: NVIDIA H200（完整模式，torch …，日期）
        modes = {"quick": tr("quick", lang=lang), "full": tr("full", lang=lang),
                 "full-smoke": tr("full, fewer steps (smoke)", lang=lang)}
        where = str(meta.get("device") or meta.get("outputs_from"))
        details = [modes.get(str(meta.get("mode")), meta.get("mode")),
                   f"torch {meta['torch']}" if meta.get("torch") else None, meta.get("date")]
        sep, wrap, wrap_plain = "，", "（{}）", "（{}）"
    detail = sep.join(str(x) for x in details if x)
    none = " " if lang == "zh" else ""  # 在 CPU 上: a space between Latin and Chinese when no bracket follows
    head_md = tr("**Stored outputs from {where}**{detail}, **not from your computer.**", lang=lang, where=where,
                 detail=wrap.format(detail) if detail else none)
    head = tr("Stored outputs: made on {where}{detail}, not on your computer.", lang=lang, where=where,
              detail=wrap_plain.format(detail) if detail else none)
    if copy:
        tail = tr("This is your copy: run it (Run > Run All Cells) and these outputs become yours. The reference "
                  "stays unchanged in notebooks/.", lang=lang)
        tail_md = tr("This is your copy: run it (*Run → Run All Cells*) and these outputs become yours. The "
                     "reference stays unchanged in `notebooks/`.", lang=lang)
    else:
        tail = tr("This is the read-only reference: to run it, open your copy in notebooks/work/ (`make lab` "
                  "or `python -m fp16lab lab` makes it).", lang=lang)
        tail_md = tr("This is the read-only reference: to run it, open your copy in `notebooks/work/` "
                     "(`make lab` or `python -m fp16lab lab` makes it).", lang=lang)
    space = "" if lang == "zh" else " "  # Chinese sentences follow each other without a space
    return f"{head_md}{space}{tail_md}", f"{head}{space}{tail}"


def reference_note(meta: dict[str, Any], *, copy: bool = False, lang: str = "en") -> Any:
    """The note as a notebook output (display data, marked with :data:`NOTE_KEY`), in ``lang``."""
    return _reference_note(*_note_args(meta, copy, lang))


def _reference_note(meta: dict[str, Any], copy: bool, lang: str) -> Any:
    import nbformat

    markdown, plain = _note_text(meta, copy, lang)
    return nbformat.v4.new_output("display_data", data={"text/markdown": markdown, "text/plain": plain},
                                  metadata={NOTE_KEY: True})


def is_reference_note(output: Any) -> bool:
    """True for the output that :func:`set_reference_note` put there."""
    checks.instance("output", output, dict, "a notebook output (cell.outputs[i])")
    return _is_note(output)


def _is_note(output: Any) -> bool:
    return bool(output.get("metadata", {}).get(NOTE_KEY))


def _first_code(nb: Any) -> Any | None:
    return next((c for c in nb.cells if c.cell_type == "code"), None)


def _refuse_checked_output(cell: Any) -> None:
    if "NBVAL_CHECK_OUTPUT" in (cell.source if isinstance(cell.source, str) else "".join(cell.source)):
        raise ValueError("the first code cell is marked NBVAL_CHECK_OUTPUT, so nbval compares its outputs "
                         "and the reference note would fail that check; move the checked output to a later cell")


def set_reference_note(nb: Any, *, meta: dict[str, Any] | None = None, copy: bool = False,
                       lang: str = "en") -> Any:
    """Put (or refresh) the reference note first in the first code cell's outputs.

    Uses ``meta`` (default: the stamp in ``nb.metadata['fp16lab']``); raises ValueError when
    there is none. ``copy=True``: the wording for a learner's copy; ``lang``: its language ("en" or "zh").
    """
    check_lang(lang)
    checks.notebook("nb", nb)
    copy = checks.boolean("copy", copy)
    if meta is not None:
        checks.instance("meta", meta, dict, "a stamp dict (nb.metadata['fp16lab']) or None")
        if not meta:
            raise ValueError("meta is empty ({}): pass a stamp dict (nb.metadata['fp16lab']), or None to use the "
                             "notebook's own")
    return _set_note(nb, meta if meta is not None else nb.metadata.get(KEY), copy, lang)


def _set_note(nb: Any, meta: Any, copy: bool, lang: str) -> Any:
    if not meta:
        raise ValueError("the notebook has no fp16lab stamp (metadata 'fp16lab'): run "
                         "`python -m fp16lab outputs run` on it first")
    checks.instance(f"the notebook's metadata[{KEY!r}]", meta, dict, "a stamp dict")  # read from a file
    cell = _first_code(nb)
    if cell is None:
        raise ValueError("the notebook has no code cell to carry the reference note")
    _refuse_checked_output(cell)
    cell.outputs = [_reference_note(meta, copy, lang)] + [o for o in cell.outputs if not _is_note(o)]
    return nb


def stamp(nb: Any, *, seconds: float | None = None) -> Any:
    """Record in ``nb.metadata['fp16lab']`` where and how the outputs were made, and add the note."""
    from fp16lab.labs.runtime.metadata import run_metadata

    checks.notebook("nb", nb)
    if seconds is not None:
        seconds = checks.positive_float("seconds", seconds, allow_zero=True)
    first = _first_code(nb)
    if first is not None:
        _refuse_checked_output(first)  # before the stamp is written: a refused call changes nothing
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
        "made_by": "python -m fp16lab outputs run",
    }
    if first is not None:
        _set_note(nb, nb.metadata[KEY], False, "en")
    return nb


def execute(path: "str | Path", *, timeout: int = 1200) -> float:
    """Run the notebook at ``path`` top to bottom, strip noise, stamp it and save it.

    The kernel runs in the notebook's folder. Default timeout: 1200 s a cell. Returns seconds.
    """
    import nbformat
    from nbclient import NotebookClient

    p = _paths.notebook_path("path", path)
    timeout = checks.positive_int("timeout", timeout)
    nb = _paths.read_notebook("path", p)
    first = _first_code(nb)
    if first is not None:
        _refuse_checked_output(first)  # before the (long) run, not after it
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
    """Why the stored outputs of ``path`` are not current, or None when they are.

    Stale: no stamp, code changed after the stamp, or the reference note missing or outdated.
    """
    nb = _paths.read_notebook("path", path)
    meta = nb.metadata.get(KEY)
    if not meta or "code_sha256" not in meta:
        return "no fp16lab metadata: run `python -m fp16lab outputs run` on it"
    if meta["code_sha256"] != code_digest(nb):
        return (
            "code changed after its outputs were made "
            f"(outputs from {meta.get('outputs_from')}, {meta.get('date')}): "
            "re-run `python -m fp16lab outputs run` on it"
        )
    cell = _first_code(nb)
    if cell is not None:
        first = cell.outputs[0] if cell.outputs else None
        if first is None or not _is_note(first) or first.get("data") != _reference_note(meta, False, "en").data:
            return ("the first code cell does not start with the reference note for its stamp: "
                    "run `python -m fp16lab outputs note` on it (no re-run needed)")
    return None


def _run(args: argparse.Namespace) -> int:
    if args.reference:
        import os

        os.environ["FP16LAB_REFERENCE_RUN"] = "1"  # inherited by the kernels
    for nb in args.notebooks:
        print(f"running {nb} ...", flush=True)
        print(f"  done in {execute(nb, timeout=args.timeout):.1f} s", flush=True)
    return 0


def _check(args: argparse.Namespace) -> int:
    lessons = [Path(p) for p in args.notebooks] or _paths.lessons()
    bad = [(p, why) for p in lessons if (why := stale(p))]
    for p, why in bad:
        print(f"STALE {p}: {why}")
    return 1 if bad else 0


def _note(args: argparse.Namespace) -> int:
    import nbformat

    lessons = [Path(p) for p in args.notebooks] or _paths.lessons()
    books = [(p, set_reference_note(nbformat.read(p, as_version=4))) for p in lessons]  # all or nothing
    for p, nb in books:
        nbformat.write(nb, p)
        print(f"noted {p}")
    return 0


def configure(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the outputs subcommands to ``parser`` (used by both command lines)."""
    sub = parser.add_subparsers(dest="outputs_command", required=True, metavar="COMMAND")
    run = sub.add_parser("run", help="execute notebooks in place and stamp them")
    run.add_argument("notebooks", nargs="+", type=_paths.notebook_file)
    run.add_argument("--timeout", type=_paths.positive_seconds, default=1200, help="seconds per cell (default 1200)")
    run.add_argument("--reference", action="store_true",
                     help="a reference run: lessons save measurements to results/ (not results/local/)")
    run.set_defaults(func=_run)
    chk = sub.add_parser("check", help="list notebooks whose outputs are stale (exit 1 if any)")
    chk.add_argument("notebooks", nargs="*", type=_paths.notebook_file, help="default: every notebooks/NN_*.ipynb")
    chk.set_defaults(func=_check)
    note = sub.add_parser("note", help="refresh the reference note from the stored stamp (no re-run)")
    note.add_argument("notebooks", nargs="*", type=_paths.notebook_file, help="default: every notebooks/NN_*.ipynb")
    note.set_defaults(func=_note)
    return parser


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Register ``outputs`` as a subcommand of ``python -m fp16lab``."""
    p = sub.add_parser("outputs", help="run lessons in place and stamp where their outputs came from",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    configure(p)
