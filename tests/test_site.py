"""The course as a website (`make site`): both editions, checked offline and in a real browser.

``make site`` builds ``build/site/`` (Sphinx + MyST-NB + sphinx-book-theme, configured in ``site/``) from the
committed notebooks and their stored outputs. These tests read what it built: every page of both editions is
there with its language switch; each lesson says where its outputs were measured (its ``fp16lab`` metadata)
and carries the notebook beside it; its plots and tables are on the page and its solutions are folded away;
every internal link and anchor of the whole site resolves (html.parser over the built files, no network);
the search index finds English and Chinese words. Then headless Chromium (Debian's, driven by Playwright,
as in test_browser.py) reads the site from a localhost server: the English start page -> lesson 09 -> its FP8
plot -> the Chinese twin of that plot in three clicks; the Chinese start page -> a lesson -> English; both
search pages; a folded solution opens.

Without a site built from the files in this checkout the tests are skipped with the reason (``make site``
first); under CI (``CI`` set, where ``.ci/run`` builds it before ``make test``) that is a failure.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import html
import http.server
import json
import os
import re
import threading
import time
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "build" / "site"
LESSONS = sorted(p.stem for p in (ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
# Each edition's pages (repository paths without the suffix; the page is <edition>/<path>.html).
PAGES = {
    "en": ["notebooks/README", *(f"notebooks/{n}" for n in LESSONS), "results/README", "notebooks/INSTRUCTORS",
           "notebooks/REUSE", "notebooks/FAQ", "README"],
    "zh": ["notebooks/zh/README", *(f"notebooks/zh/{n}" for n in LESSONS), "results/README",
           "notebooks/zh/INSTRUCTORS", "notebooks/REUSE", "notebooks/zh/FAQ", "README.zh-CN"],
}
START = {"en": "en/notebooks/README.html", "zh": "zh/notebooks/zh/README.html"}
SOLUTION_PROMPT = {"en": "Show solution", "zh": "显示答案"}
FOLDED = '<details class="admonition hide above-input">'


def _site_problem() -> str | None:
    """Why build/site cannot be checked (None: it was built from the files in this checkout)."""
    if not (SITE / "index.html").is_file():
        return "no website in build/site: run `make site` first"
    for edition in ("en", "zh"):
        info = SITE / edition / "site-sources.json"
        if not info.is_file():
            return f"{info.relative_to(ROOT)} is missing: run `make site` again"
        for rel, digest in json.loads(info.read_text(encoding="utf-8"))["sources"].items():
            path = ROOT / rel
            if not path.is_file() or hashlib.sha256(path.read_bytes()).hexdigest() != digest:
                return f"build/site is older than {rel}: run `make site` again"
    return None


@pytest.fixture(scope="module")
def site() -> Path:
    problem = _site_problem()
    if problem:
        if os.environ.get("CI"):
            pytest.fail(f"{problem} (CI builds the site before `make test`: .ci/run)")
        pytest.skip(problem)
    return SITE


def _notebook(edition: str, lesson: str) -> dict:
    folder = ROOT / "notebooks" / ("zh" if edition == "zh" else "")
    return json.loads((folder / f"{lesson}.ipynb").read_text(encoding="utf-8"))


def _lesson_page(edition: str, lesson: str) -> Path:
    return SITE / edition / "notebooks" / ("zh" if edition == "zh" else "") / f"{lesson}.html"


class _Page(HTMLParser):
    """The ids a page defines and the URLs it refers to (a, img, link, script, source, iframe)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.urls: list[tuple[str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if a.get("id"):
            self.ids.add(str(a["id"]))
        if tag == "a" and a.get("name"):
            self.ids.add(str(a["name"]))
        for key in ("href", "src"):
            if a.get(key) is not None and tag in ("a", "img", "link", "script", "source", "iframe"):
                self.urls.append((tag, str(a[key])))


@functools.cache
def _parse(path: Path) -> _Page:
    page = _Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


def _html_pages() -> list[Path]:
    """Every page of the site (not the theme's template fragments under _static/)."""
    return sorted(p for p in SITE.rglob("*.html") if "_static" not in p.relative_to(SITE).parts)


def _text(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", fragment))


# ---- what was built ------------------------------------------------------------------------------


def test_both_editions_have_every_page_with_a_language_switch(site):
    for edition, pages in PAGES.items():
        for page in pages:
            path = site / edition / f"{page}.html"
            assert path.is_file(), f"{edition} edition: no page for {page} ({path.relative_to(ROOT)})"
    other = {"en": "zh", "zh": "en"}
    for path in _html_pages():
        rel = path.relative_to(site)
        if len(rel.parts) == 1:  # build/site/index.html: the entry, which sends the reader to the English start page
            continue
        edition = rel.parts[0]
        source = path.read_text(encoding="utf-8")
        found = re.search(r'<a class="fp16lab-lang-other" href="([^"]+)"', source)
        assert found, f"{rel}: no language switch"
        target = (path.parent / unquote(found.group(1))).resolve()
        assert target.is_relative_to(site / other[edition]), f"{rel}: the switch leads to {target}"
    for lesson in LESSONS:  # a lesson's switch leads to its twin
        for edition in ("en", "zh"):
            source = _lesson_page(edition, lesson).read_text(encoding="utf-8")
            href = re.search(r'<a class="fp16lab-lang-other" href="([^"]+)"', source).group(1)
            twin = (_lesson_page(edition, lesson).parent / href).resolve()
            assert twin == _lesson_page(other[edition], lesson).resolve(), f"{edition} {lesson}: switch to {href}"


@pytest.mark.parametrize("edition", ["en", "zh"])
def test_each_lesson_says_where_its_outputs_were_measured_and_carries_its_notebook(site, edition):
    for lesson in LESSONS:
        nb = _notebook(edition, lesson)
        meta = nb["metadata"]["fp16lab"]
        source = _lesson_page(edition, lesson).read_text(encoding="utf-8")
        box = re.search(r'<div class="fp16lab-provenance[^"]*">(.*?)</div>', source, re.S)
        assert box, f"{edition} {lesson}: no note saying where its outputs were measured"
        said = _text(box.group(1))
        device = meta["outputs_from"].split(" (")[0]
        for fact in (device, meta["date"], meta["torch"]):
            assert fact in said, f"{edition} {lesson}: the note does not say {fact!r}: {said!r}"
        assert f'href="{lesson}.ipynb"' in box.group(1), f"{edition} {lesson}: no link to the notebook"
        beside = _lesson_page(edition, lesson).with_suffix(".ipynb")
        assert json.loads(beside.read_text(encoding="utf-8")) == nb, f"{beside} is not the committed notebook"


@pytest.mark.parametrize("edition", ["en", "zh"])
def test_outputs_render_and_solutions_are_folded_away(site, edition):
    for lesson in LESSONS:
        nb = _notebook(edition, lesson)
        source = _lesson_page(edition, lesson).read_text(encoding="utf-8")
        outputs = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])]
        plots = sum("image/png" in o.get("data", {}) for o in outputs)
        tables = sum("<table" in "".join(o.get("data", {}).get("text/html", "")) for o in outputs)
        shown = re.findall(r'<img [^>]*src="\.\./(?:\.\./)?_images/[^"]+"', source)
        assert len(shown) == plots, f"{edition} {lesson}: {plots} plots in the notebook, {len(shown)} on the page"
        assert source.count("<table") >= tables, f"{edition} {lesson}: fewer tables on the page than outputs"
        solutions = [c for c in nb["cells"] if "solution" in c["metadata"].get("tags", [])]
        folded = source.split(FOLDED)[1:]
        assert len(folded) == len(solutions) >= 3, \
            f"{edition} {lesson}: {len(solutions)} solution cells, {len(folded)} folded away"
        for cell, block in zip(solutions, folded, strict=True):
            block = block.split("</details>", 1)[0]
            assert SOLUTION_PROMPT[edition] in block, f"{edition} {lesson}: a fold not labelled as a solution"
            first = next(line for line in "".join(cell["source"]).splitlines() if line.strip())
            assert first.strip() in _text(block), f"{edition} {lesson}: the fold does not hold the solution {first!r}"
        checks = [c for c in nb["cells"] if "check" in c["metadata"].get("tags", [])]
        assert checks and all("".join(c["source"]).splitlines()[0] in _text(source) for c in checks)
    card = _lesson_page(edition, "00_setup_and_verify").read_text(encoding="utf-8")
    outputs = re.findall(r'<div class="cell_output docutils container">(.*?)</div>\s*</div>', card, re.S)
    assert any("On your card" in _text(o) for o in outputs), "lesson 00's card box is not among its outputs"


def test_every_internal_link_and_anchor_resolves(site):
    broken: list[str] = []
    checked = anchors = 0
    for path in _html_pages():
        for tag, url in _parse(path).urls:
            parts = urlsplit(url)
            if parts.scheme or parts.netloc or url.startswith(("mailto:", "javascript:", "data:")):
                continue  # an outside address: not checked offline
            where = f"{path.relative_to(site)}: <{tag}> {url}"
            target = (path.parent / unquote(parts.path)).resolve() if parts.path else path
            if not target.is_relative_to(site):
                broken.append(f"{where} (outside the site)")
                continue
            if target.is_dir():
                target = target / "index.html"
            checked += 1
            if not target.is_file():
                broken.append(f"{where} (no such file)")
            elif parts.fragment and target.suffix == ".html":
                anchors += 1
                if unquote(parts.fragment) not in _parse(target).ids:
                    broken.append(f"{where} (no id {unquote(parts.fragment)!r} in {target.relative_to(site)})")
    assert not broken, f"{len(broken)} broken links:\n" + "\n".join(broken[:40])
    assert checked > 2000 and anchors > 500, f"only {checked} links ({anchors} with an anchor) checked"


def _search_index(edition: str) -> dict:
    text = (SITE / edition / "searchindex.js").read_text(encoding="utf-8")
    return json.loads(text[text.index("(") + 1: text.rindex(")")])


def _pages_with(index: dict, term: str) -> set[str]:
    """The pages whose text or titles have ``term`` (Sphinx keeps the words of titles apart)."""
    pages: set[str] = set()
    for kind in ("terms", "titleterms"):
        found = index[kind].get(term, [])
        pages |= {index["docnames"][i] for i in ([found] if isinstance(found, int) else found)}
    return pages


def test_search_index_finds_english_and_chinese_words(site):
    en, zh = _search_index("en"), _search_index("zh")
    # "GradScaler" as Sphinx's search looks it up: lower-cased and stemmed (Snowball English) in both editions
    assert "notebooks/02_amp_training_loop" in _pages_with(en, "gradscal")
    assert "notebooks/zh/02_amp_training_loop" in _pages_with(zh, "gradscal")
    # Chinese words are words (jieba), and the glossary's terms are whole: 损失缩放, not 损失 + 缩放 only
    assert {"notebooks/zh/01_fp16_numerics", "notebooks/zh/02_amp_training_loop"} <= _pages_with(zh, "损失缩放")
    assert "notebooks/zh/07_transformers" in _pages_with(zh, "主权重"), \
        "the glossary's 主权重 (master weights) is not one word: jieba alone cuts it into 主权 + 重"


# ---- in a browser --------------------------------------------------------------------------------


def _browser_skip_reason() -> str | None:
    from test_browser import _chromium  # the lab's browser test: the same Chromium, found the same way

    if _chromium() is None:
        return "no Chromium (Debian/Ubuntu: `sudo apt-get install chromium`, or `make browser` as root)"
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the Python package `playwright` is missing: `pip install -e '.[dev]'` (or `make setup`)"
    return None


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 (the base class's name)
        pass


@contextlib.contextmanager
def _serve(folder: Path):
    """build/site on a free localhost port, as a static host would serve it; shut down whatever happens."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def _plot_section(nb: dict, words: str) -> tuple[int, str]:
    """(index of the markdown cell, its heading) of the section whose heading has ``words``."""
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "markdown":
            for line in "".join(cell["source"]).splitlines():
                if line.startswith("## ") and words in line:
                    return i, line[3:].strip()
    raise AssertionError(f"no section with {words!r}")


def _heading_of_cell(nb: dict, index: int) -> str:
    return next(line[3:].strip() for line in "".join(nb["cells"][index]["source"]).splitlines()
                if line.startswith("## "))


SECTION_JS = """
(heading) => {
  const h = Array.from(document.querySelectorAll('article.bd-article section > h2'))
    .find(e => e.textContent.replace(/#$/, '').trim() === heading);
  if (!h) return null;
  const section = h.parentElement, img = section.querySelector('img');
  img && img.scrollIntoView({block: 'center'});
  const top = h.getBoundingClientRect().top;
  return {img: img ? img.getAttribute('src') : null, loaded: !!(img && img.complete && img.naturalWidth > 0),
          top: top, lang: document.documentElement.lang};
}
"""


def _section_state(page, heading: str, scroll: bool = True) -> dict:
    deadline = time.monotonic() + 20
    while True:
        state = page.evaluate(SECTION_JS.replace("img && img.scrollIntoView({block: 'center'});", "")
                              if not scroll else SECTION_JS, heading)
        if (state and state["loaded"]) or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert state, f"{page.url}: no section headed {heading!r}"
    assert state["img"] and state["loaded"], f"{page.url}: the plot of {heading!r} did not load: {state}"
    return state


def _search(page, base: str, edition: str, query: str) -> list[str]:
    page.goto(f"{base}/{edition}/search.html?q={query}")
    results = page.locator("#search-results li a")
    results.first.wait_for(state="attached", timeout=20_000)
    return [str(results.nth(i).get_attribute("href")) for i in range(results.count())]


@pytest.mark.skipif(_browser_skip_reason() is not None, reason=f"site browser test skipped: {_browser_skip_reason()}")
def test_a_reader_in_a_browser(site, tmp_path, capsys):
    """English start page -> lesson 09 -> its FP8 plot -> the Chinese twin of that plot (three clicks); the Chinese
    start page -> a lesson with its plot -> English; a folded solution opens; both editions' search pages."""
    from playwright.sync_api import sync_playwright
    from test_browser import CHROMIUM_FLAGS, _chromium

    t0 = time.monotonic()
    en09, zh09 = _notebook("en", "09_fp8"), _notebook("zh", "09_fp8")
    index, heading = _plot_section(en09, "raw FP8 matmul")
    zh_heading = _heading_of_cell(zh09, index)
    with _serve(site) as base, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=_chromium(), headless=True, args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        try:
            # the site's address opens the English start page
            page.goto(f"{base}/")
            page.wait_for_url(f"**/{START['en']}")
            page.locator("article h1", has_text="start here").wait_for()
            # click 1: lesson 09 from the start page's table of lessons
            page.locator("article a", has_text=re.compile(r"^FP8$")).first.click()
            page.wait_for_url("**/en/notebooks/09_fp8.html")
            assert "NVIDIA H200" in page.locator(".fp16lab-provenance").inner_text()
            # click 2: the FP8 matmul section in the page's contents; its plot is loaded
            page.locator(".bd-sidebar-secondary a.nav-link", has_text=heading).first.click()
            page.wait_for_url(re.compile(r"09_fp8\.html#"))
            state = _section_state(page, heading, scroll=False)
            assert -5 <= state["top"] <= 200, f"the section is not where the click took the reader: {state}"
            _section_state(page, heading)
            # click 3: 中文, at the same section of the Chinese lesson, with its plot loaded
            page.locator("a.fp16lab-lang-other").click()
            page.wait_for_url(re.compile(r"/zh/notebooks/zh/09_fp8\.html#fp16lab-section-"))
            page.wait_for_load_state("load")
            state = _section_state(page, zh_heading, scroll=False)
            assert state["lang"] == "zh-CN" and -5 <= state["top"] <= 200, \
                f"the Chinese twin did not open at {zh_heading!r}: {state}"
            path = "three clicks: start page -> lesson 09 -> its FP8 plot -> 中文, at the same plot"
            # a folded solution opens on a click
            fold = page.locator("details.hide.above-input").first
            assert fold.get_attribute("open") is None and not fold.locator("pre").first.is_visible()
            fold.locator("summary").click()
            assert fold.locator("pre").first.is_visible()
            # the Chinese start page: a lesson with its plot, then English
            page.goto(f"{base}/{START['zh']}")
            assert re.search(r"[\u4e00-\u9fff]", page.locator("article h1").first.inner_text())
            page.locator("article a[href$='02_amp_training_loop.html']").first.click()
            page.wait_for_url("**/zh/notebooks/zh/02_amp_training_loop.html")
            img = page.locator("article img").first
            img.scroll_into_view_if_needed()
            page.wait_for_function("(i) => i.complete && i.naturalWidth > 0", arg=img.element_handle())
            page.locator("a.fp16lab-lang-other").click()
            page.wait_for_url(re.compile(r"/en/notebooks/02_amp_training_loop\.html"))
            # search: an English word in the English edition, a Chinese one in the Chinese edition
            assert any("02_amp_training_loop" in h for h in _search(page, base, "en", "GradScaler"))
            assert any("zh/02_amp_training_loop" in h for h in _search(page, base, "zh", "损失缩放"))
        except BaseException:
            with contextlib.suppress(Exception):
                page.screenshot(path=str(tmp_path / "failure.png"))
                print(f"screenshot of the page: {tmp_path / 'failure.png'}")
            raise
        finally:
            browser.close()
    with capsys.disabled():
        print(f"\n[site] {path}; Chinese start page -> lesson 02 -> English; a solution unfolded; "
              f"search found GradScaler and 损失缩放; {time.monotonic() - t0:.1f} s")


# ---- publishing ------------------------------------------------------------------------------------


def test_the_github_pages_workflow_publishes_what_make_site_builds():
    """.github/workflows/site.yml (what the instructor guide offers for GitHub Pages) runs `make site` on a Python
    that Sphinx 8.2 supports and publishes the folder the Makefile builds; everything but GitHub's own steps."""
    yaml = pytest.importorskip("yaml")
    flow = yaml.safe_load((ROOT / ".github" / "workflows" / "site.yml").read_text(encoding="utf-8"))
    triggers = flow[True] if True in flow else flow["on"]  # YAML 1.1 reads the key `on` as True
    assert triggers["push"]["branches"] == ["main"] and "workflow_dispatch" in triggers
    assert flow["permissions"] == {"contents": "read", "pages": "write", "id-token": "write"}
    build, deploy = flow["jobs"]["build"]["steps"], flow["jobs"]["deploy"]
    assert [s["run"] for s in build if "run" in s] == ["make site"]
    python = next(s for s in build if s.get("uses", "").startswith("actions/setup-python"))
    assert tuple(int(x) for x in python["with"]["python-version"].split(".")) >= (3, 11)
    upload = next(s for s in build if s.get("uses", "").startswith("actions/upload-pages-artifact"))
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    out = re.search(r"^SITE_OUT\s*\?=\s*(\S+)", makefile, re.M)
    assert out and upload["with"]["path"] == out.group(1) == SITE.relative_to(ROOT).as_posix()
    assert deploy["needs"] == "build" and deploy["steps"][0]["uses"].startswith("actions/deploy-pages")
    assert "cp site/index.html $(SITE_OUT)/index.html" in makefile  # the folder's entry page is part of the upload
