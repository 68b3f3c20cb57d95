"""What the course's website adds to Sphinx + MyST-NB + sphinx-book-theme (a Sphinx extension; see conf.py).

- Two editions, built one at a time into ``build/site/en`` and ``build/site/zh``: :data:`EDITIONS` names
  each one's pages (repository paths, so that every relative link means on the site what it means in
  the repository). The results page and the reuse page have no Chinese text: the Chinese edition
  carries them in English, with its own navigation and search.
- A language switch on every page (``_templates/fp16lab-lang-switch.html``): the same page in the
  other edition (:data:`TWINS`).
- Links between the editions (the Chinese start page's ``../INSTRUCTORS.md#agenda``) and links to a
  learner's own copy (``work/02_amp_training_loop.ipynb``, made by ``make lab``, absent on the site)
  are resolved here: to the other edition's page, and to the lesson's own page.
- Each lesson says where its stored outputs were measured (the notebook's ``fp16lab`` metadata:
  ``outputs_from``, ``date``, ``torch``) and links to the notebook itself, copied beside the page.
- Exercises: a solution cell (tagged ``solution``) is folded away behind "Show solution".
- Chinese search: the glossary's terms (术语表 on the Chinese start page) join jieba's dictionary,
  so that a term such as 损失缩放 is one word in the search index.
- ``site-sources.json`` in each edition's folder: the SHA-256 of every page's source and of this
  configuration, so that the tests can tell a site built from the files in the checkout from a stale one.
"""

from __future__ import annotations

import hashlib
import json
import logging as pylogging
import posixpath
import re
import shutil
from pathlib import Path
from typing import Any

from docutils import nodes
from docutils.transforms import Transform
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util import logging

LOGGER = logging.getLogger(__name__)
LESSONS = [
    "00_setup_and_verify", "01_fp16_numerics", "02_amp_training_loop", "03_tensor_core_alignment",
    "04_pitfalls_numerics", "05_pitfalls_speed_memory", "06_benchmarking", "07_transformers",
    "08_inference", "09_fp8", "10_multi_gpu",
]
EDITIONS: dict[str, dict[str, Any]] = {
    "en": {
        "language": "en", "title": "fp16lab: FP16 mixed-precision training", "root": "notebooks/README",
        "label": "English",
        "pages": ["notebooks/README.md", "notebooks/[0-9][0-9]_*.ipynb", "results/README.md",
                  "notebooks/INSTRUCTORS.md", "notebooks/REUSE.md", "notebooks/FAQ.md",
                  "notebooks/workshop/MESSAGE.md", "README.md"],
        "nav": [("Lessons", [f"/notebooks/{n}" for n in LESSONS]),
                ("Reference", ["/results/README", "/notebooks/REUSE", "/notebooks/FAQ", "/README"]),
                ("Teaching", ["/notebooks/INSTRUCTORS", "/notebooks/workshop/MESSAGE"])],
    },
    "zh": {
        "language": "zh_CN", "title": "fp16lab：FP16 混合精度训练", "root": "notebooks/zh/README",
        "label": "中文",
        "pages": ["notebooks/zh/README.md", "notebooks/zh/[0-9][0-9]_*.ipynb", "results/README.md",
                  "notebooks/zh/INSTRUCTORS.md", "notebooks/REUSE.md", "notebooks/zh/FAQ.md",
                  "notebooks/workshop/MESSAGE.zh-CN.md", "README.zh-CN.md"],
        "nav": [("课程", [f"/notebooks/zh/{n}" for n in LESSONS]),
                ("参考", ["/results/README", "/notebooks/REUSE", "/notebooks/zh/FAQ", "/README.zh-CN"]),
                ("讲课", ["/notebooks/zh/INSTRUCTORS", "/notebooks/workshop/MESSAGE.zh-CN"])],
    },
}
# Each English page and its Chinese twin (the same docname where the Chinese edition carries the English text).
TWINS = {
    "README": "README.zh-CN", "notebooks/README": "notebooks/zh/README",
    "notebooks/INSTRUCTORS": "notebooks/zh/INSTRUCTORS", "notebooks/FAQ": "notebooks/zh/FAQ",
    "notebooks/REUSE": "notebooks/REUSE", "results/README": "results/README",
    "notebooks/workshop/MESSAGE": "notebooks/workshop/MESSAGE.zh-CN",
    "search": "search",
    **{f"notebooks/{n}": f"notebooks/zh/{n}" for n in LESSONS},
}
ENGLISH_ONLY = {"notebooks/REUSE", "results/README"}  # carried in English by the Chinese edition
# The learner's copies (`make lab`) are not on the site: a link to one goes to the lesson's own page, and a
# link to the folder to the README's quick start, which says how to make them.
WORK = {"en": ("notebooks/work/", "notebooks/", "README", "quickstart"),
        "zh": ("notebooks/work/zh/", "notebooks/zh/", "README.zh-CN", "快速开始")}
TEXT = {
    "en": {
        "measured": "Outputs measured on {outputs_from}, {date}, torch {torch}",
        "stored": ": stored in the notebook and shown as they are, not re-run for this page.",
        "run": "Run it yourself: download the notebook ",
        "clone": ", or, in a clone of the repository, ",
        "copy": " gives you your own copy, ",
        "lab": "make lab",
        "solution": ("Show solution", "Hide solution"),
        "english_only": "This page has no Chinese text yet: it is the English page.",
        "switch": "Read this page in English",
    },
    "zh": {
        "measured": "本页输出测自 {outputs_from}，{date}，torch {torch}",
        "stored": "：它们存储在 notebook 中，原样显示，生成本页时没有重新运行。",
        "run": "自己运行：下载 notebook ",
        "clone": "，或者在仓库的克隆中运行 ",
        "copy": "，得到你自己的副本 ",
        "lab": "make lab LAB_LANG=zh",
        "solution": ("显示答案", "隐藏答案"),
        "english_only": "本页还没有中文版，下面是英文原文。",
        "switch": "阅读本页的中文版",
    },
}
MODES_ZH = {"(full mode)": "（完整模式）", "(quick mode)": "（快速模式）"}


def _edition(app: Sphinx) -> str:
    return str(app.config.fp16lab_edition)


def _lesson(docname: str) -> str | None:
    name = docname.rpartition("/")[2]
    return name if name in LESSONS else None


def other_edition(edition: str) -> str:
    return "zh" if edition == "en" else "en"


def twin(docname: str, edition: str) -> str | None:
    """The docname of ``docname``'s page in the other edition (None if it has none)."""
    if edition == "en":
        return TWINS.get(docname)
    return next((en for en, zh in TWINS.items() if zh == docname), None)


def _href(from_doc: str, from_edition: str, to_doc: str, to_edition: str, anchor: str | None = None) -> str:
    """A relative URL from one page of the site to another (editions side by side in build/site/)."""
    here = posixpath.dirname(f"{from_edition}/{from_doc}.html")
    url = posixpath.relpath(f"{to_edition}/{to_doc}.html", here)
    return url + (f"#{anchor}" if anchor else "")


# ---- sources: the navigation, solutions folded -----------------------------------------------------


def _toctree(edition: str) -> str:
    blocks = []
    for caption, docs in EDITIONS[edition]["nav"]:
        blocks.append("\n\n```{toctree}\n:hidden:\n:caption: " + caption + "\n\n" + "\n".join(docs) + "\n```\n")
    return "".join(blocks)


def on_source_read(app: Sphinx, docname: str, source: list[str]) -> None:
    edition = _edition(app)
    if docname == EDITIONS[edition]["root"]:
        source[0] += _toctree(edition)
    if _lesson(docname) and source[0].lstrip().startswith("{"):
        nb = json.loads(source[0])
        show, hide = TEXT[edition]["solution"]
        for cell in nb["cells"]:
            meta = cell.setdefault("metadata", {})
            if "solution" in meta.get("tags", []):
                meta["tags"] = [*meta["tags"], "hide-input"]
                meta["mystnb"] = {**meta.get("mystnb", {}), "code_prompt_show": show, "code_prompt_hide": hide}
        source[0] = json.dumps(nb)


# ---- links: the other edition and the learner's copies -------------------------------------------


class EditionLinks(SphinxPostTransform):
    """Markdown links to a page of the other edition, or to a learner's copy in ``notebooks/work/``.

    Runs before MyST's own resolver (priority 9): a link to a copy becomes a link to the lesson's page
    (MyST then checks it, anchor and all); a link to the other edition becomes a relative URL, which
    the site's offline link check (tests/test_site.py) follows with its anchor.
    """

    default_priority = 8

    def run(self, **kwargs: Any) -> None:
        edition = _edition(self.app)
        other = other_edition(edition)
        docs = set(self.env.found_docs)
        for node in list(self.document.findall(addnodes.pending_xref)):
            if node.get("reftype") != "myst":
                continue
            target = self._docname(node)
            if target is None or target in docs:
                continue
            anchor = node.get("reftargetid")
            work, lessons, readme, quickstart = WORK[edition]
            if target.startswith(work):
                rest = target[len(work):].strip("/")
                if rest:
                    node["refdomain"], node["reftarget"], node["reftargetid"] = "doc", lessons + rest, anchor
                else:
                    node["refdomain"], node["reftarget"], node["reftargetid"] = "doc", readme, quickstart
                continue
            if target in self._pages(other):
                ref = nodes.reference("", "", internal=False,
                                      refuri=_href(self.env.docname, edition, target, other, anchor))
                ref += node[0].deepcopy() if len(node) else nodes.Text(target)
                node.replace_self(ref)

    def _docname(self, node: addnodes.pending_xref) -> str | None:
        target = str(node.get("reftarget", ""))
        if node.get("refdomain") == "doc":
            return target
        if node.get("refdomain") or target.startswith(("#", "http:", "https:", "mailto:")):
            return None
        path = target.split("#", 1)[0]
        if not path:
            return None
        base = posixpath.dirname(str(node.get("refdoc", self.env.docname)))
        resolved = posixpath.normpath(posixpath.join(base, path))
        if "#" in target:
            node["reftargetid"] = target.split("#", 1)[1]
        return resolved.removesuffix(".ipynb").removesuffix(".md") + ("/" if path.endswith("/") else "")

    _cache: dict[str, set[str]] = {}

    def _pages(self, edition: str) -> set[str]:
        """The docnames of an edition's pages, from its patterns (the other edition is not in this build)."""
        if edition not in self._cache:
            from sphinx.util.matching import get_matching_files

            files = get_matching_files(self.app.srcdir, include_patterns=EDITIONS[edition]["pages"],
                                       exclude_patterns=self.config.exclude_patterns)
            self._cache[edition] = {re.sub(r"\.(md|ipynb)$", "", str(f)) for f in files}
        return self._cache[edition]


class RawAnchors(Transform):
    """``<a id="mirrors"></a>`` in a page's Markdown (how a page gives GitHub an anchor for a Chinese heading)
    becomes a target that Sphinx and MyST know, so that ``README.zh-CN.md#mirrors`` resolves and is checked."""

    default_priority = 200  # before MyST resolves anchors (879)
    ANCHOR = re.compile(r'^\s*<a\s+id="([^"]+)"\s*>\s*(</a>)?\s*$')

    def apply(self, **kwargs: Any) -> None:
        for raw in list(self.document.findall(nodes.raw)):
            found = self.ANCHOR.match(raw.astext()) if "html" in raw.get("format", "").split() else None
            if not found:
                continue
            closing = raw.next_node(descend=False, siblings=True)
            if not found.group(2):  # MyST parses the inline form as two raw nodes, <a id="..."> and </a>
                if not (isinstance(closing, nodes.raw) and closing.astext().strip() == "</a>"):
                    continue
                closing.parent.remove(closing)
            target = nodes.target("", "")
            target["names"].append(found.group(1))
            self.document.note_explicit_target(target, target)
            raw.replace_self(target)


# ---- where the outputs come from, and the notebook ------------------------------------------------


def _provenance(app: Sphinx, docname: str) -> nodes.Element | None:
    lesson = _lesson(docname)
    if lesson is None:
        return None
    edition = _edition(app)
    text = TEXT[edition]
    meta = json.loads(Path(app.env.doc2path(docname)).read_text(encoding="utf-8"))["metadata"].get("fp16lab")
    if not meta:
        LOGGER.warning("%s has no fp16lab metadata: where its outputs were measured is unknown", docname,
                       location=docname)
        return None
    outputs_from = str(meta["outputs_from"])
    if edition == "zh":
        for en, zh in MODES_ZH.items():
            outputs_from = outputs_from.replace(f" {en}", zh)
    box = nodes.container(classes=["fp16lab-provenance"])
    para = nodes.paragraph()
    para += nodes.strong(text=text["measured"].format(outputs_from=outputs_from, date=meta["date"],
                                                      torch=meta["torch"]))
    para += nodes.Text(text["stored"])
    box += para
    run = nodes.paragraph()
    run += nodes.Text(text["run"])
    run += nodes.reference("", f"{lesson}.ipynb", internal=False, refuri=f"{lesson}.ipynb",
                           classes=["fp16lab-notebook"])
    run += nodes.Text(text["clone"])
    run += nodes.literal(text=text["lab"])
    run += nodes.Text(text["copy"])
    run += nodes.literal(text=f"{WORK[edition][0]}{lesson}.ipynb")
    run += nodes.Text("." if edition == "en" else "。")
    box += run
    return box


def _english_only(app: Sphinx, docname: str) -> nodes.Element | None:
    if _edition(app) != "zh" or docname not in ENGLISH_ONLY:
        return None
    note = nodes.container(classes=["fp16lab-english-only"])
    note += nodes.paragraph(text=TEXT["zh"]["english_only"])
    return note


def on_doctree_read(app: Sphinx, doctree: nodes.document) -> None:
    docname = app.env.docname
    box = _provenance(app, docname) or _english_only(app, docname)
    if box is None:
        return
    section = next(iter(doctree.findall(nodes.section)), None)
    if section is None or not isinstance(section[0], nodes.title):
        LOGGER.warning("%s has no title to put its note under", docname, location=docname)
        return
    section.insert(1, box)


# ---- the language switch ------------------------------------------------------------------------------


def on_page_context(app: Sphinx, pagename: str, templatename: str, context: dict, doctree: Any) -> None:
    edition = _edition(app)
    other = other_edition(edition)
    target = twin(pagename, edition)
    if target is None:
        target = EDITIONS[other]["root"]
    context["fp16lab_lang"] = {
        "here": EDITIONS[edition]["label"], "other": EDITIONS[other]["label"],
        "other_lang": "zh-CN" if other == "zh" else "en", "url": _href(pagename, edition, target, other),
        "title": TEXT[other]["switch"],
    }


# ---- after the build: the notebooks beside their pages, the Chinese dictionary, the source digests ----


def glossary_terms(root: Path) -> list[str]:
    """The Chinese terms of the glossary (术语表) on the Chinese start page: each cell of its 中文 column,
    split at " / " and cut before a parenthesis, kept where it has a Chinese character."""
    text = (root / "notebooks" / "zh" / "README.md").read_text(encoding="utf-8")
    section = text.split("## 术语表", 1)[1].split("\n## ", 1)[0]
    terms: list[str] = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) < 2 or not line.startswith("|") or set(cells[1]) <= set("-: "):
            continue
        for part in cells[1].split(" / "):
            word = re.split(r"[（(]", part, maxsplit=1)[0].strip()
            if re.search(r"[\u4e00-\u9fff]", word) and " " not in word and word not in terms:
                terms.append(word)
    return terms


def on_config_inited(app: Sphinx, config: Any) -> None:
    if _edition(app) == "zh":
        import jieba  # the Chinese search's word splitter (Sphinx's zh search uses it when it is installed)

        jieba.setLogLevel(pylogging.WARNING)  # not its "Building prefix dict" lines on every build
        terms = glossary_terms(Path(app.srcdir))
        if not terms:
            raise RuntimeError("no terms found in the glossary (术语表) of notebooks/zh/README.md")
        path = Path(app.doctreedir) / "glossary.dict"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(f"{t} 1000 n\n" for t in terms), encoding="utf-8")
        config.html_search_options = {"dict": str(path)}


def on_build_finished(app: Sphinx, exception: Exception | None) -> None:
    if exception is not None:
        return
    out, src = Path(app.outdir), Path(app.srcdir)
    digests = {}
    for docname in sorted(app.env.found_docs):
        path = Path(app.env.doc2path(docname))
        rel = path.relative_to(src).as_posix()
        digests[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
        if _lesson(docname):
            (out / docname).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, out / f"{docname}.ipynb")
    for path in sorted(Path(app.confdir).rglob("*")):  # this configuration too
        if path.is_file() and "__pycache__" not in path.parts:
            digests[path.relative_to(src).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    (out / "site-sources.json").write_text(json.dumps(
        {"edition": _edition(app), "sources": digests}, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_config_value("fp16lab_edition", "en", "env")
    app.connect("config-inited", on_config_inited)
    app.connect("source-read", on_source_read)
    app.connect("doctree-read", on_doctree_read)
    app.connect("html-page-context", on_page_context)
    app.connect("build-finished", on_build_finished)
    app.add_transform(RawAnchors)
    app.add_post_transform(EditionLinks)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
