"""The Chinese edition's text: one file per lesson, each translated markdown cell keyed by its id.

English is the source of truth. ``notebooks/zh/translations/<lesson>.md`` holds, for each markdown
cell of ``notebooks/<lesson>.ipynb`` that has been translated, a header line naming the cell's id and
a digest of the English source it was translated from, then the Chinese text::

    <!-- cell 672d1d40 en:3f2a9c1b0d4e -->
    中文正文……

A cell whose English changed after its translation is *stale*: its digest no longer matches.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Entry", "digest", "parse", "render", "markdown_cells", "skeleton", "HEADER"]

HEADER = re.compile(r"^<!-- cell (?P<id>[A-Za-z0-9_-]+) en:(?P<digest>[0-9a-f]{12}) -->$")
_TITLE = "<!-- fp16lab translation of notebooks/{name} into Chinese (zh). One block per markdown cell. -->"


@dataclass(frozen=True)
class Entry:
    """One translated cell: the English cell's id, the digest of the English it came from, the Chinese."""

    cell_id: str
    en_digest: str
    text: str


def digest(source: str) -> str:
    """12 hex digits of SHA-256 of a cell's English source: enough to notice any change."""
    return hashlib.sha256(source.encode("utf-8")).hexdigest()[:12]


def parse(text: str) -> dict[str, Entry]:
    """The entries of one translation file, by cell id (the title line and blank edges ignored)."""
    entries: dict[str, Entry] = {}
    current: tuple[str, str] | None = None
    body: list[str] = []

    def close() -> None:
        if current is not None:
            if current[0] in entries:
                raise ValueError(f"cell {current[0]!r} is translated twice")
            entries[current[0]] = Entry(current[0], current[1], "\n".join(body).strip("\n"))

    for line in text.splitlines():
        m = HEADER.match(line)
        if m:
            close()
            current, body = (m["id"], m["digest"]), []
        elif current is not None:
            body.append(line)
    close()
    return entries


def render(name: str, entries: list[Entry]) -> str:
    """The file text for ``entries`` in the given order (the lesson's cell order)."""
    blocks = [_TITLE.format(name=name)]
    blocks += [f"<!-- cell {e.cell_id} en:{e.en_digest} -->\n{e.text.strip()}" for e in entries]
    return "\n\n".join(blocks) + "\n"


def markdown_cells(notebook: Path) -> list[tuple[str, str]]:
    """(id, source) of each markdown cell of an English lesson, in order."""
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    return [(c["id"], "".join(c["source"])) for c in nb["cells"] if c["cell_type"] == "markdown"]


def skeleton(notebook: Path) -> str:
    """A translation file with the English text in place of each translation: a translator's start."""
    cells = markdown_cells(notebook)
    return render(notebook.name, [Entry(i, digest(s), s) for i, s in cells])
