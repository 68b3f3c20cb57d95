"""Outputs policy: every lesson carries outputs made from its current code, stamped, with the note."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest

from fp16lab.course.outputs import (
    code_digest,
    is_reference_note,
    note_text,
    set_reference_note,
    stale,
    stamp,
    strip_noise,
)

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
    note = code[0].outputs[0]
    assert is_reference_note(note), "the first output must say whose outputs these are"
    assert meta["outputs_from"] in note["data"]["text/plain"] and "not on your computer" in note["data"]["text/plain"]
    for c in code:
        assert "execution" not in c.metadata, "per-cell timing metadata was not stripped"
        errors = [o for o in c.outputs if o.output_type == "error"]
        assert not errors, f"{path.name}: stored error output in cell:\n{c.source[:200]}"
        assert "torch.cuda.amp" not in c.source, f"{path.name}: deprecated torch.cuda.amp in code"
    assert "widgets" not in nb.metadata
    if meta["mode"] == "full":  # a kernel given a non-inline matplotlib backend stores no figure, and says nothing
        lost = [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and "plt.show()" in c.source
                and not any("image/png" in o.get("data", {}) for o in c.outputs)]
        assert not lost, f"{path.name}: cells {lost} show a figure but store none (was MPLBACKEND set for the run?)"


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
    nb.cells[1].outputs = nb.cells[1].outputs[1:]  # the note removed (e.g. a merge took another version)
    nbformat.write(nb, p)
    assert "reference note" in stale(p) and "outputs note" in stale(p)
    set_reference_note(nb)
    nbformat.write(nb, p)
    assert stale(p) is None
    nb.cells[1].source = "x = 3"
    nbformat.write(nb, p)
    assert "code changed" in stale(p)


def test_stamp_puts_the_reference_note_first_once():
    nb = _nb("print(1)")
    nb.cells[1].outputs = [nbformat.v4.new_output("stream", name="stdout", text="1\n")]
    stamp(nb)
    stamp(nb)  # again: still one note, refreshed
    outs = nb.cells[1].outputs
    assert [is_reference_note(o) for o in outs] == [True, False]
    meta = nb.metadata["fp16lab"]
    md, plain = note_text(meta)
    assert outs[0]["data"] == {"text/markdown": md, "text/plain": plain}
    assert meta["device"] in plain and meta["date"] in plain and "notebooks/work/" in plain
    assert "read-only reference" in plain
    copy_md, copy_plain = note_text(meta, copy=True)
    assert "This is your copy" in copy_plain and "not on your computer" in copy_plain
    nbformat.validate(nb)


def test_note_needs_a_stamp_and_a_free_first_cell(tmp_path):
    with pytest.raises(ValueError, match="no fp16lab stamp"):
        set_reference_note(_nb("x = 1"))
    nb = _nb("# NBVAL_CHECK_OUTPUT\nprint(1)")
    nb.metadata["fp16lab"] = {"outputs_from": "CPU (quick mode)"}
    with pytest.raises(ValueError, match="NBVAL_CHECK_OUTPUT"):
        set_reference_note(nb)
    from fp16lab.course.outputs import execute

    p = tmp_path / "checked.ipynb"
    nbformat.write(nb, p)
    before = p.read_bytes()
    with pytest.raises(ValueError, match="NBVAL_CHECK_OUTPUT"):
        execute(p)  # refused before running: the file is untouched
    assert p.read_bytes() == before
    plain = nbformat.writes(nb)
    with pytest.raises(ValueError, match="NBVAL_CHECK_OUTPUT"):
        stamp(nb)  # refused before the stamp is written: the notebook is unchanged
    assert nbformat.writes(nb) == plain


@pytest.mark.parametrize(("call", "match"), [
    (lambda: code_digest("notebooks/00_setup_and_verify.ipynb"), r"nb must be a notebook \(nbformat.read"),
    (lambda: strip_noise({"cells": []}), "nb must be a notebook"),
    (lambda: stamp(_nb("x = 1"), seconds=-1.0), "seconds must be a finite number >= 0, got -1.0"),
    (lambda: note_text("CPU"), r"meta must be a stamp dict \(nb.metadata\['fp16lab'\]\), got 'CPU'"),
    (lambda: note_text({}, copy="yes"), "copy must be True or False, got 'yes'"),
    (lambda: set_reference_note(_nb("x = 1"), meta=["CPU"]), "meta must be a stamp dict"),
    (lambda: set_reference_note(_nb("x = 1"), meta={"device": "CPU"}, copy=1), "copy must be True or False, got 1"),
    (lambda: is_reference_note("output"), r"output must be a notebook output \(cell.outputs\[i\]\)"),
])
def test_a_wrong_argument_is_named_before_anything_changes(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_drop_orphan_widgets_takes_a_notebook_or_its_json_only():
    from fp16lab.course.outputs import drop_orphan_widgets

    assert drop_orphan_widgets({"cells": [], "metadata": {}}) == 0
    with pytest.raises(ValueError, match=r"nb must be a notebook \(nbformat.read\(path, as_version=4\)\) or its JSON"):
        drop_orphan_widgets("lesson.ipynb")
    with pytest.raises(ValueError, match="nb must be a notebook"):
        drop_orphan_widgets({"cells": "x"})


def test_cli_note_refreshes_without_running(tmp_path):
    from fp16lab.__main__ import main as cli

    def main(argv):
        return cli(["outputs", *argv])

    nb = _nb("x = 1")
    stamp(nb)
    nb.cells[1].outputs = []
    p = tmp_path / "n.ipynb"
    nbformat.write(nb, p)
    assert main(["check", str(p)]) == 1
    assert main(["note", str(p)]) == 0
    assert stale(p) is None and main(["check", str(p)]) == 0
    bare = tmp_path / "bare.ipynb"
    nbformat.write(_nb("y = 2"), bare)
    before = p.read_bytes()
    assert main(["note", str(p), str(bare)]) == 2  # refused as a whole: nothing written
    assert p.read_bytes() == before


def _bar(model_id: str):
    return nbformat.v4.new_output("display_data", data={
        "application/vnd.jupyter.widget-view+json": {"model_id": model_id, "version_major": 2, "version_minor": 0},
        "text/plain": "fit fp16:   0%|          | 0/50"})


def test_drop_orphan_widgets_keeps_bars_whose_state_is_saved():
    from fp16lab.course.outputs import drop_orphan_widgets

    nb = _nb("x = 1")
    text = nbformat.v4.new_output("stream", name="stdout", text="done\n")
    nb.cells[1].outputs = [_bar("kept"), _bar("closed"), text]
    nb.metadata["widgets"] = {"application/vnd.jupyter.widget-state+json": {
        "state": {"kept": {"model_name": "HBoxModel"}}, "version_major": 2, "version_minor": 0}}
    assert drop_orphan_widgets(nb) == 1
    assert [o.get("data", {}).get("application/vnd.jupyter.widget-view+json", {}).get("model_id")
            for o in nb.cells[1].outputs] == ["kept", None]
    del nb.metadata["widgets"]  # no state saved at all: every bar would say "model not found"
    assert drop_orphan_widgets(nb) == 1 and nb.cells[1].outputs == [text]
    plain = nbformat.writes(nb)  # the server works on plain JSON dicts
    import json

    d = json.loads(plain)
    d["cells"][1]["outputs"].insert(0, dict(_bar("x")))
    assert drop_orphan_widgets(d) == 1 and len(d["cells"][1]["outputs"]) == 1
