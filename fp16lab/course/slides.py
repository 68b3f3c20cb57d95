"""A talk track per lesson, rendered as slides by Jupyter's own exporter (``jupyter nbconvert --to slides``).

``python -m fp16lab workshop slides [LESSONS] --out DIR [--lang zh]`` builds, for each lesson, a talk-track
notebook from the lesson itself and renders it with nbconvert's reveal.js slides (``--no-input``):

- a title slide: the lesson's title, its "What you will learn" list, the minutes the two-day plan gives it;
- one slide per section (``## `` heading): the heading and the section's opening paragraph, the first
  figure or table the reference run stored in that section (the GPU outputs, not typed), and the rest of
  the section's first text as speaker notes (press ``s`` in the slides); sections the one-day plan leaves
  for self-study say so;
- the exercises' headings, and the summary.

The talk-track notebook (``DIR/NN_name.talk.ipynb``) stays beside the HTML to edit and render again with
``jupyter nbconvert --to slides --no-input``. The HTML loads reveal.js from its CDN (nbconvert's default);
offline, pass ``--reveal-prefix`` a local copy (npm's ``reveal.js``).
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path
from typing import Any

from fp16lab import checks
from fp16lab.course import paths as _paths
from fp16lab.labs.runtime.i18n import check_lang

__all__ = ["talk_track", "render_slides"]

_WORDS = {"en": {"learn": "What you will learn", "minutes": "Two-day plan: {talk} min talk, {ex} min exercises",
                 "self": "(self-study in the one-day plan)", "exercises": "Exercises"},
          "zh": {"learn": "你将学到", "minutes": "两天的日程：讲解 {talk} 分钟，练习 {ex} 分钟",
                 "self": "（一天的日程中留作自学）", "exercises": "练习"}}


def _paragraphs(text: str) -> list[str]:
    return [p.strip() for p in re.split(r"\n\s*\n", text) if p.strip()]


def _figure(cell: Any) -> Any | None:
    """A copy of ``cell`` keeping only its first image or HTML table output, or None."""
    import copy

    for out in cell.get("outputs", []):
        data = out.get("data", {})
        if "image/png" in data or "text/html" in data:
            keep = copy.deepcopy(cell)
            keep.outputs = [out]
            keep.execution_count = None
            keep.metadata = {"slideshow": {"slide_type": "fragment"}}
            return keep
    return None


def talk_track(lesson: "str | Path", *, lang: str = "en") -> Any:
    """The talk-track notebook of ``lesson`` (an English lesson path; ``lang="zh"`` reads its Chinese edition)."""
    from nbformat.v4 import new_markdown_cell, new_notebook

    from fp16lab.course.plans import PLANS, section_headings

    src = checks.existing_path("lesson", lesson, kind="file")
    lang = check_lang(lang)
    words = _WORDS[lang]
    path = src.parent / "zh" / src.name if lang == "zh" else src
    nb = _paths.read_notebook("lesson", path)
    stem = src.stem
    two = next((b for day in PLANS["two-day"] for b in day if b.lesson == stem), None)
    one = next((b for day in PLANS["one-day"] for b in day if b.lesson == stem), None)
    english = section_headings(src)
    skipped = {i for f in (one.skip if one else ()) for i, h in enumerate(english) if f.lower() in h.lower()}

    def slide(text: str, kind: str = "slide") -> Any:
        return new_markdown_cell(text, metadata={"slideshow": {"slide_type": kind}})

    cells: list[Any] = []
    title = next((m.group(1) for c in nb.cells if c.cell_type == "markdown"
                  for m in [re.search(r"^#\s+(.+)$", c.source, flags=re.M)] if m), stem)
    learn = ""
    for c in nb.cells:  # "**What you will learn**" or "## What you will learn", then its list
        m = re.search(r"^(?:\*\*|#+\s*)(?:What you will learn|你将学到)\**[:：]?\s*\n+((?:(?:[-*] |[ \t]+\S).*(?:\n|$))+)",
                      c.source, flags=re.M | re.I) if c.cell_type == "markdown" else None
        if m:
            learn = m.group(1).strip()
            break
    intro = f"# {title}\n\n" + (f"**{words['learn']}**\n\n{learn}" if learn else "")
    if two:
        intro += "\n\n*" + words["minutes"].format(talk=two.talk, ex=two.exercises) + "*"
    cells.append(slide(intro))
    count = 0  # ``## `` headings seen so far (section_headings' numbering)
    started = figure_shown = False
    for c in nb.cells:
        heads = list(re.finditer(r"^##\s+(.+)$", c.source, flags=re.M)) if c.cell_type == "markdown" else []
        if heads:
            index, count = count, count + len(heads)
            name = heads[0].group(1).strip()
            if re.search(r"Further reading|延伸阅读|扩展阅读", name, flags=re.I):
                break
            if re.search(r"What you will learn|Prerequisites|你将学到|预备知识|前置知识", name, flags=re.I):
                continue  # on the title slide
            started = True
            text = re.split(r"^##\s+(?:Further reading|延伸阅读|扩展阅读).*$", c.source, flags=re.M | re.I)[0]
            body = _paragraphs(text[heads[0].end():])
            head = f"## {name}" + (f" {words['self']}" if index in skipped else "")
            cells.append(slide(head + (f"\n\n{body[0]}" if body else "")))
            if len(body) > 1:
                cells.append(slide("\n\n".join(body[1:]), "notes"))
            figure_shown = False
            continue
        if started and c.cell_type == "code" and not figure_shown:
            fig = _figure(c)
            if fig is not None:
                cells.append(fig)
                figure_shown = True
    talk = new_notebook(cells=cells, metadata={"kernelspec": nb.metadata.get("kernelspec", {}),
                                               "fp16lab_talk_track": {"lesson": src.name, "lang": lang}})
    return talk


def render_slides(lessons: "list[Path] | None" = None, out: "str | Path" = "slides", *, lang: str = "en",
                  reveal_prefix: str | None = None) -> list[Path]:
    """Write each lesson's talk track and its slides (HTML, by ``jupyter nbconvert --to slides``) into ``out``."""
    import nbformat

    todo = _paths.lessons() if lessons is None else checks.sequence_of(
        "lessons", lessons, example="['notebooks/02_amp_training_loop.ipynb']",
        item=_paths.notebook_path)
    folder = checks.path("out", out)
    if folder.exists() and not folder.is_dir():
        raise ValueError(f"out {str(folder)!r} is a file: name a folder for the slides (made when missing)")
    lang = check_lang(lang)
    prefix = checks.text("reveal_prefix", reveal_prefix) if reveal_prefix is not None else None
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for lesson in todo:
        talk = folder / f"{Path(lesson).stem}{'' if lang == 'en' else '.zh'}.talk.ipynb"
        nbformat.write(talk_track(lesson, lang=lang), talk)
        cmd = [sys.executable, "-m", "jupyter", "nbconvert", "--to", "slides", "--no-input", "--output-dir",
               str(folder), str(talk)]
        if prefix:
            cmd.append(f"--SlidesExporter.reveal_url_prefix={prefix}")
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"nbconvert failed on {talk.name}: {done.stderr[-2000:]}")
        written.append(folder / f"{talk.stem}.slides.html")
    return written
