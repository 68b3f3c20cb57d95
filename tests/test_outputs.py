"""Outputs policy: every lesson carries outputs made from its current code, stamped."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from fp16lab.outputs import code_digest, stale, stamp, strip_noise

ROOT = Path(__file__).resolve().parent.parent
LESSONS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def test_there_are_lessons():
    assert LESSONS, "no notebooks/NN_*.ipynb found"


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name)
def test_outputs_are_fresh_and_clean(path):
    why = stale(path)
    assert why is None, f"{path.name}: {why}"
    nb = nbformat.read(path, as_version=4)
    meta = nb.metadata["fp16lab"]
    assert meta["outputs_from"] and meta["torch"] and meta["mode"] in ("quick", "full")
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.outputs or not c.source.strip() for c in code[:1]), "first code cell has no output"
    for c in code:
        assert "execution" not in c.metadata, "per-cell timing metadata was not stripped"
        errors = [o for o in c.outputs if o.output_type == "error"]
        assert not errors, f"{path.name}: stored error output in cell:\n{c.source[:200]}"
        assert "torch.cuda.amp" not in c.source, f"{path.name}: deprecated torch.cuda.amp in code"
    assert "widgets" not in nb.metadata


def _nb(src: str):
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# t"), nbformat.v4.new_code_cell(src)]
    return nb


def test_digest_tracks_code_only():
    a, b = _nb("x = 1"), _nb("x = 1")
    b.cells[0].source = "# other words"
    assert code_digest(a) == code_digest(b)
    b.cells[1].source = "x = 2"
    assert code_digest(a) != code_digest(b)


def test_strip_noise_drops_progress_bar_widgets_only():
    nb = _nb("x = 1")
    bar = nbformat.v4.new_output("display_data", data={
        "application/vnd.jupyter.widget-view+json": {"model_id": "abc", "version_major": 2, "version_minor": 0},
        "text/plain": "fp32:   0%|          | 0/1200"})
    text = nbformat.v4.new_output("stream", name="stdout", text="fp32: 10.5 s\n")
    nb.cells[1].outputs = [bar, text]
    strip_noise(nb)
    assert nb.cells[1].outputs == [text]
    nbformat.validate(nb)


def test_stale_detects_edits(tmp_path):
    nb = _nb("x = 1")
    nb.cells[1].metadata["execution"] = {"iopub.status.busy": "2026"}
    nb.metadata["widgets"] = {"state": {}}
    strip_noise(nb)
    assert "execution" not in nb.cells[1].metadata and "widgets" not in nb.metadata
    p = tmp_path / "n.ipynb"
    nbformat.write(nb, p)
    assert "no fp16lab metadata" in stale(p)
    stamp(nb)
    nbformat.write(nb, p)
    assert stale(p) is None
    nb.cells[1].source = "x = 3"
    nbformat.write(nb, p)
    assert "code changed" in stale(p)
