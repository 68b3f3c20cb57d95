"""JupyterLab in a real browser: a learner's session, as `make lab` starts it.

Prepares a learner's workspace in a temporary copy of ``notebooks/``, starts JupyterLab with the
command ``python -m fp16lab lab`` uses (free localhost port, a token, the reference read-only,
widget state saved) and drives it in headless Chromium (Debian's ``chromium`` package, driven by
Playwright; no browser download, ever): the start page opens rendered; its link opens the
learner's copy of lesson 02; Run All runs it without error; it is saved, its kernel shut down and
reopened, and no progress bar says "model not found"; a student copy's Run All stops at the
first unanswered check; the reference lesson is read-only in the lab, its tab labelled "reference",
and unchanged on disk. The
Chinese edition (when notebooks/zh/00_setup_and_verify.ipynb is in the checkout): ``lab --lang zh``
opens the Chinese start page with JupyterLab's interface in Chinese, the learner's copy of lesson 00
runs green from the Chinese menus, a wrong exercise answer shows the Chinese hint, and the reference
lesson's tab reads 参考版 (the English one's "reference") where the learner's copy's does not. The
server is shut down whatever happens. ``make test`` installs chromium when it runs as root on
Debian/Ubuntu; elsewhere this test is skipped with the reason. ``FP16LAB_CHROMIUM`` may point at
another Chromium binary.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from fp16lab.course import lab, workspace
from fp16lab.labs.runtime.i18n import tr

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = ROOT / "notebooks"
LESSON = NOTEBOOKS / "02_amp_training_loop.ipynb"  # a lesson with exercises; the test adds its own tqdm bar (a widget)
BUDGET_S = 170.0  # one notebook run must stay under 3 minutes
SESSION_BUDGET_S = 480.0  # the learner's whole session (about 2 minutes on an idle 2-core machine)
CHROMIUM_FLAGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-dev-shm-usage",
]
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")


def _chromium() -> str | None:
    """FP16LAB_CHROMIUM if set (must exist), else chromium on PATH, else /usr/bin/chromium."""
    explicit = os.environ.get("FP16LAB_CHROMIUM")
    if explicit:
        return explicit if Path(explicit).is_file() else None
    for name in ("chromium", "chromium-browser"):
        found = shutil.which(name)
        if found:
            return found
    return "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None


def _skip_reason() -> str | None:
    if _chromium() is None:
        if os.environ.get("FP16LAB_CHROMIUM"):
            return f"FP16LAB_CHROMIUM={os.environ['FP16LAB_CHROMIUM']!r} is not a file"
        return ("no Chromium found (Debian/Ubuntu: `sudo apt-get install chromium`, which `make test` "
                "does by itself when run as root; or set FP16LAB_CHROMIUM=/path/to/chromium)")
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        return "the Python package `playwright` is missing: `pip install -e '.[dev]'` (or `make setup`)"
    try:
        import jupyterlab  # noqa: F401
    except ImportError:
        return "JupyterLab is not installed in this environment: run `make setup`"
    for needed in (LESSON, NOTEBOOKS / "README.md"):
        if not needed.exists():
            return f"{needed} does not exist yet"
    return None


needs_browser = pytest.mark.skipif(_skip_reason() is not None, reason=f"browser test skipped: {_skip_reason()}")


def test_skip_reason_says_what_is_missing(monkeypatch, tmp_path):
    monkeypatch.setenv("FP16LAB_CHROMIUM", str(tmp_path / "no-such-chromium"))
    assert _chromium() is None
    assert "no-such-chromium" in _skip_reason() and "is not a file" in _skip_reason()
    monkeypatch.delenv("FP16LAB_CHROMIUM")
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setattr(Path, "exists", lambda self: False)
    assert "apt-get install chromium" in _skip_reason()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _request(url: str, token: str, method: str = "GET") -> int:
    req = urllib.request.Request(url, method=method, headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(req, timeout=5) as resp:  # localhost only
        return int(resp.status)


def _settings(folder: Path) -> None:
    """User settings for this throwaway lab: no autosave, no news or update checks, and every cell
    rendered at once (no windowing), so that the page shows every output the test looks for."""
    files = {
        "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
        "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {"windowingMode": "none"},
        "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
            "fetchNews": "false", "checkForUpdates": False},
    }
    for rel, data in files.items():
        p = folder / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(data))


class Server:
    """A learner's ``jupyter lab`` (the command ``python -m fp16lab lab`` runs) on ``notebooks``.

    A free localhost port and a random token; JupyterLab's user settings and runtime files in
    ``home`` (no autosave, no news), so nothing of the machine's own Jupyter set-up is used or changed.
    """

    def __init__(self, notebooks: Path, home: Path, lang: str = "en") -> None:
        self.port, self.token = _free_port(), secrets.token_hex(24)
        self.base = f"http://127.0.0.1:{self.port}"
        self.log_path = home / "jupyter.log"
        env = dict(os.environ)
        for var, sub in (("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_RUNTIME_DIR", "runtime"),
                         ("JUPYTERLAB_SETTINGS_DIR", "settings"), ("JUPYTERLAB_WORKSPACES_DIR", "workspaces"),
                         ("IPYTHONDIR", "ipython")):
            env[var] = str(home / sub)
            (home / sub).mkdir(parents=True, exist_ok=True)
        _settings(home / "settings")
        env.setdefault("FP16LAB_QUICK", "1")  # small sizes: the browser path is what is tested here
        env = lab.lab_env(lang, env)  # FP16LAB_LANG for the kernels, as `python -m fp16lab lab` sets it
        settings = lab.write_lab_settings(lab.lab_settings_dir(notebooks, lang), lang=lang)
        cmd = lab.lab_command(notebooks, port=self.port, open_browser=False, token=self.token,
                              start=lab.start_page(lang), settings_dir=settings) + [
            "--ServerApp.port_retries=0",
            "--LabApp.expose_app_in_browser=True",  # window.jupyterapp: read cell outputs from the model
            "--LabApp.check_for_updates_class=jupyterlab.handlers.announcements.NeverCheckForUpdate",
        ]
        self.log = open(self.log_path, "w")  # noqa: SIM115 (closed in stop())
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env,
                                     cwd=notebooks, start_new_session=True)

    def log_tail(self, n: int = 3000) -> str:
        self.log.flush()
        return self.log_path.read_text(errors="replace")[-n:]

    def wait_ready(self, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"jupyter lab exited with code {self.proc.returncode}:\n{self.log_tail()}")
            try:
                if _request(f"{self.base}/api/status", self.token) == 200:
                    return
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.3)
        pytest.fail(f"jupyter lab did not answer on {self.base} within {timeout:.0f} s:\n{self.log_tail()}")

    def stop(self) -> None:
        """Shut down via the API (kernels included), then make sure the process is gone."""
        if self.proc.poll() is None:
            try:
                _request(f"{self.base}/api/shutdown", self.token, method="POST")
                self.proc.wait(timeout=15)
            except Exception:  # noqa: BLE001 (any failure: fall through to signals)
                pass
        for sig in (signal.SIGTERM, signal.SIGKILL):
            if self.proc.poll() is not None:
                break
            try:
                os.killpg(self.proc.pid, sig)
                self.proc.wait(timeout=10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                pass
        self.log.close()


# JavaScript run in the page: the state of the open notebook, from JupyterLab's own model.
STATE_JS = """
(path) => {
  const app = window.jupyterapp;
  if (!app || !app.shell) return {phase: 'loading'};
  const w = app.shell.currentWidget;
  if (!w || !w.context || w.context.path !== path || !w.content || !w.content.model) return {phase: 'opening'};
  const kernel = w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
  const cells = [];
  let i = 0;
  for (const c of w.content.model.cells) {
    if (c.type === 'code') {
      const j = c.toJSON();
      const src = Array.isArray(j.source) ? j.source.join('') : j.source;
      cells.push({index: i, count: j.execution_count, state: c.executionState || null, source: src,
                  errors: (j.outputs || []).filter(o => o.output_type === 'error')});
    }
    i += 1;
  }
  const model = w.context.contentsModel;
  return {phase: 'open', kernel: kernel ? kernel.status : 'none',
          connection: kernel ? kernel.connectionStatus : 'none', cells: cells,
          writable: model ? model.writable : null};
}
"""


def _cell_text(cell: dict) -> str:
    return f"cell {cell['index']} (execution count {cell['count']}):\n{cell['source']}"


def _error_text(err: dict) -> str:
    tb = ANSI.sub("", "\n".join(err.get("traceback") or []))
    return tb or f"{err.get('ename')}: {err.get('evalue')}"


def _click_menu(page, menu: str, label: str) -> None:
    """Open a top menu by its label and click one of its items, like a user."""
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(f"^{re.escape(menu)}$")).first.click()
    item = page.locator(".lm-Menu-content .lm-Menu-item",
                        has=page.locator(".lm-Menu-itemLabel", has_text=re.compile(f"^{re.escape(label)}$")))
    try:
        item.first.wait_for(state="visible", timeout=10_000)
    except Exception as exc:  # noqa: BLE001
        pytest.fail(f"JupyterLab's {menu} menu has no item {label!r} ({type(exc).__name__})")
    item.first.click()


def _wait_for(page, predicate, what: str, deadline: float, path: str):
    while time.monotonic() < deadline:
        state = page.evaluate(STATE_JS, path)
        if predicate(state):
            return state
        time.sleep(0.25)
    pytest.fail(f"{what} did not happen before the time budget ran out; last state: {page.evaluate(STATE_JS, path)}")


def _open_notebook(page, server: Server, path: str, deadline: float) -> dict:
    """Open ``path`` (relative to the lab's root) and wait for its kernel to be idle."""
    page.goto(f"{server.base}/lab/tree/{path}?token={server.token}", timeout=60_000)
    return _wait_for(page, lambda s: s["phase"] == "open" and s["kernel"] == "idle"
                     and s["connection"] == "connected", f"opening {path} with an idle kernel", deadline, path)


def _run_all(page, server: Server, path: str, deadline: float, *, stops_at_error: bool = False,
             menu: tuple[str, str] = ("Run", "Run All Cells")) -> dict:
    """Run -> Run All Cells (``menu``: its labels in the lab's language), then wait until the kernel is idle
    with every cell run (or, with ``stops_at_error``, until Run All has stopped at an error). Fails on an
    unexpected error."""
    _click_menu(page, *menu)
    idle_since = None
    time.sleep(1.0)
    while True:
        state = page.evaluate(STATE_JS, path)
        failed = [c for c in state["cells"] if c["errors"]]
        if failed and not stops_at_error:
            c = failed[0]
            pytest.fail(f"{path}: {_cell_text(c)}\nfailed in JupyterLab with:\n{_error_text(c['errors'][0])}")
        if state["kernel"] in ("dead", "unknown") or state["connection"] == "disconnected":
            pytest.fail(f"{path}: the kernel is {state['kernel']}/{state['connection']}"
                        f"\nserver log:\n{server.log_tail()}")
        pending = [c for c in state["cells"] if c["count"] is None and c["source"].strip()]
        running = [c for c in state["cells"] if c["state"] == "running"]
        if state["kernel"] == "idle" and not running:
            if not pending:
                return state
            idle_since = idle_since or time.monotonic()
            if time.monotonic() - idle_since > (4 if stops_at_error else 15):
                if stops_at_error:
                    return state
                pytest.fail(f"{path}: Run All stopped with {len(pending)} cells not run, "
                            f"the first:\n{_cell_text(pending[0])}")
        else:
            idle_since = None
        if time.monotonic() > deadline:
            where = _cell_text((running or pending)[0]) if (running or pending) else "(no cell running)"
            pytest.fail(f"{path}: still running when the time budget ran out, at {where}")
        time.sleep(0.5)


# JavaScript: {path: the ::before content of its tab's label} for every open document tab (JupyterLab's tab
# tooltip is its "Name: …\nPath: …" caption; 'none' means no label was added)
TAB_LABELS_JS = """
() => {
  const out = {};
  for (const tab of document.querySelectorAll('.lm-DockPanel-tabBar .lm-TabBar-tab')) {
    const m = /\\n[^\\n:]*:\\s*([^\\n]+)/.exec(tab.getAttribute('title') || '');
    const label = tab.querySelector('.lm-TabBar-tabLabel');
    if (m && label) out[m[1].trim()] = getComputedStyle(label, '::before').content;
  }
  return out;
}
"""


def _tab_label(page, path: str, deadline: float) -> str:
    """The ::before content of the tab of the open document ``path`` ('none' if the tab has no label)."""
    while True:
        labels = page.evaluate(TAB_LABELS_JS)
        if path in labels or time.monotonic() > deadline:
            break
        time.sleep(0.25)
    assert path in labels, f"no tab for {path}; tabs: {labels}"
    return str(labels[path])


def _screenshot_on_failure(page, shot: Path) -> None:
    if page is None:
        return
    try:
        page.screenshot(path=str(shot), full_page=False)
        print(f"screenshot of the page: {shot}", file=sys.stderr)
    except Exception:  # noqa: BLE001
        pass


class _LabBrowser:
    """A learner's lab (:class:`Server`) and a headless Chromium on it; ``page`` is the page now open."""

    def __init__(self, server: Server, browser) -> None:
        self.server, self.browser = server, browser
        self.page = self.new_page()

    def new_page(self):
        """A fresh page (a new tab, as a learner who closed the last one would open)."""
        self.page = self.browser.new_page(viewport={"width": 1400, "height": 1000})
        return self.page


@contextlib.contextmanager
def lab_browser(root: Path, home: Path, shot: Path, lang: str = "en"):
    """JupyterLab on ``root`` as ``python -m fp16lab lab`` starts it, with Chromium on it: a screenshot of the open
    page into ``shot`` on failure, the browser closed and the server shut down whatever happens."""
    from playwright.sync_api import sync_playwright

    server = Server(root, home, lang=lang)
    try:
        server.wait_ready()
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=_chromium(), headless=True, args=CHROMIUM_FLAGS)
            session = None
            try:
                session = _LabBrowser(server, browser)
                yield session
            except BaseException:
                _screenshot_on_failure(session.page if session else None, shot)
                raise
            finally:
                browser.close()
    finally:
        server.stop()
        assert server.proc.poll() is not None, "jupyter lab is still running after shutdown"


def run_in_jupyterlab(notebook: Path, tmp_path: Path) -> tuple[int, float]:
    """Open ``notebook`` (a copy) in JupyterLab in Chromium, run all cells; (code cells, seconds).

    Fails (pytest.fail) with the failing cell's source and traceback on the first error output.
    """
    t0 = time.monotonic()
    deadline = t0 + BUDGET_S
    name = notebook.name
    root = tmp_path / "notebooks"
    (root / "work").mkdir(parents=True)
    shutil.copy2(notebook, root / "work" / name)  # the browser works on a copy: the lesson is never saved over
    path = f"work/{name}"
    with lab_browser(root, tmp_path / "jupyter-home", tmp_path / "failure.png") as session:
        server, page = session.server, session.page
        _open_notebook(page, server, path, deadline)
        _click_menu(page, "Edit", "Clear Outputs of All Cells")
        state = _wait_for(page, lambda s: all(c["count"] is None and not c["errors"] for c in s["cells"]),
                          "clearing all outputs", deadline, path)
        n_code = len(state["cells"])
        assert n_code > 0, f"{name} has no code cells"
        state = _run_all(page, server, path, deadline)
        counts = [c["count"] for c in state["cells"] if c["source"].strip()]
        assert counts == sorted(counts) and len(set(counts)) == len(counts), \
            f"cells did not run once each, in order: {counts}"
        rendered = page.locator(".jp-Notebook .jp-CodeCell .jp-OutputArea-output").count()
        assert rendered > 0, "no output was rendered in the page"
    return n_code, time.monotonic() - t0


def _digests(folder: Path) -> dict[str, str]:
    return {p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and "work" not in p.relative_to(folder).parts
            and ".ipynb_checkpoints" not in p.parts}


def _api(server: Server, method: str, path: str, body: dict | None = None) -> tuple[int, object]:
    """A call to the lab's REST API, as the page would make it: (status, JSON reply or message)."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(f"{server.base}/api/{path}", data=data, method=method,
                                 headers={"Authorization": f"token {server.token}",
                                          "Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:  # localhost only
            raw = resp.read()
            return int(resp.status), json.loads(raw) if raw else None
    except urllib.error.HTTPError as exc:
        return int(exc.code), exc.read().decode(errors="replace")


WIDGET_ERRORS = ("model not found", "Error displaying widget")


def _student_copy():
    """The student copy of a small lesson with two exercises, as `python -m fp16lab workshop write`
    makes it (its checks carry ``# NBVAL_RAISES_EXCEPTION``, not the ``raises-exception`` tag)."""
    import nbformat

    from fp16lab.course.student import make_student_copy

    v4 = nbformat.v4
    nb = v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                  "language": "python"}})
    nb.cells = [
        v4.new_markdown_cell("# 90 · Exercises"),
        v4.new_code_cell("data = [3, 1, 2]"),
        v4.new_markdown_cell("**Exercise 1.** Sort `data` into `answer`."),
        v4.new_code_cell("answer = sorted(data)", metadata={"tags": ["solution"]}),
        v4.new_code_cell("assert answer is not None, 'assign answer'\nassert answer == [1, 2, 3], 'sort it'\n"
                         "print('correct')", metadata={"tags": ["check"]}),
        v4.new_markdown_cell("**Exercise 2.** The largest value, into `top`."),
        v4.new_code_cell("top = max(data)", metadata={"tags": ["solution"]}),
        v4.new_code_cell("assert top is not None, 'assign top'\nassert top == 3\nprint('correct')",
                         metadata={"tags": ["check"]}),
        v4.new_markdown_cell("## Summary"),
        v4.new_code_cell("print('the end')"),
    ]
    return make_student_copy(nb, name="90_exercises.ipynb")


@needs_browser
def test_a_learners_session_in_jupyterlab(tmp_path, capsys):
    """Start page -> own copy of lesson 02 -> Run All -> save -> kernel gone -> reopen: widgets render;
    a student copy stops at its first check; the reference is read-only, its tab says so, and it is unchanged on disk."""
    t0 = time.monotonic()
    deadline = t0 + SESSION_BUDGET_S
    repo_before = _digests(NOTEBOOKS)
    root = tmp_path / "notebooks"
    shutil.copytree(NOTEBOOKS, root, ignore=shutil.ignore_patterns("work", ".ipynb_checkpoints"))
    reference_before = _digests(root)
    workspace.prepare(tmp_path)  # what `make lab` does first
    mine = f"work/{LESSON.name}"
    import nbformat

    theirs = "work/student/90_exercises.ipynb"  # a student copy, made by the generator the workshop uses
    nbformat.write(_student_copy(), root / theirs)
    own = nbformat.read(root / mine, as_version=4)  # the learner adds a cell of their own: a bar that stays
    own.cells.append(nbformat.v4.new_code_cell("from tqdm.auto import tqdm\n\nfor _ in tqdm(range(5), desc='my bar'):\n"
                                               "    pass"))
    own.cells.append(nbformat.v4.new_code_cell("for _ in tqdm(range(5), desc='a closed bar', leave=False):\n"
                                               "    pass"))  # closed when done, as fit's ProgressBar leaves it
    nbformat.write(own, root / mine)
    with lab_browser(root, tmp_path / "jupyter-home", tmp_path / "failure.png") as session:
        server, page = session.server, session.page
        # 1. the lab opens at the start page, rendered (not in the text editor)
        page.goto(f"{server.base}/?token={server.token}", timeout=60_000)
        heading = page.locator(".jp-RenderedMarkdown h1", has_text="start here")
        heading.first.wait_for(state="visible", timeout=60_000)
        assert "/lab/tree/README.md" in page.url, page.url
        stages = {"start page": time.monotonic() - t0}
        # 2. its link opens the learner's own copy of lesson 02
        page.locator(".jp-RenderedMarkdown a", has_text="the AMP training loop").first.click()
        state = _wait_for(page, lambda s: s["phase"] == "open" and s["kernel"] == "idle"
                          and s["connection"] == "connected", "opening the lesson from the start page",
                          deadline, mine)
        assert state["cells"] and state["writable"] is True, "the learner's copy must be writable"
        time.sleep(2)  # JupyterLab writes the kernel's kernelspec/language_info just after the kernel starts
        assert page.evaluate("() => window.jupyterapp.shell.currentWidget.context.model.dirty") is False, \
            "a fresh copy must open saved (its kernelspec and language_info are this environment's)"
        # 3. Run All, then save
        _run_all(page, server, mine, deadline)
        _click_menu(page, "File", "Save Notebook")
        saved = tmp_path / "notebooks" / mine
        while True:
            try:
                nb = json.loads(saved.read_text())
            except json.JSONDecodeError:  # read while JupyterLab was writing it (it saves in place): look again
                nb = {"metadata": {}, "cells": []}
            if nb["metadata"].get("widgets") and all(
                    c.get("execution_count") for c in nb["cells"] if c["cell_type"] == "code"
                    and "".join(c["source"]).strip()):
                break
            if time.monotonic() > deadline:
                pytest.fail(f"{mine} was not saved with its outputs and widget state; metadata keys: "
                            f"{sorted(nb['metadata'])}")
            time.sleep(0.5)
        views = [o for c in nb["cells"] if c["cell_type"] == "code" for o in c.get("outputs", [])
                 if "application/vnd.jupyter.widget-view+json" in o.get("data", {})]
        assert views, "the learner's own progress bar was not saved: this test needs a widget to check"
        assert f"fp16lab: {mine}: dropped" in server.log_tail(200_000), \
            "a closed progress bar (leave=False) was not dropped on save"
        assert "fp16lab" not in nb["metadata"], "the saved copy must not claim the reference run"
        stages["lesson 02 run and saved"] = time.monotonic() - t0
        # 4. the kernel goes away (a new day, a restarted lab); reopen: no widget error
        page.close()
        status, sessions = _api(server, "GET", "sessions")
        assert status == 200 and isinstance(sessions, list)
        for sess in sessions:
            assert _api(server, "DELETE", f"sessions/{sess['id']}")[0] == 204
        page = session.new_page()
        _open_notebook(page, server, mine, deadline)
        text = ""
        for _ in range(40):  # widgets load from the saved state once the page has settled
            text = page.locator(".jp-Notebook").inner_text()
            if "Loading widget" not in text:
                break
            time.sleep(0.5)
        bad = [e for e in WIDGET_ERRORS if e in text]
        state_ids = set(nb["metadata"]["widgets"].get(
            "application/vnd.jupyter.widget-state+json", {}).get("state", {}))
        ids = [o["data"]["application/vnd.jupyter.widget-view+json"]["model_id"] for o in views]
        assert not bad, (f"{mine} shows {bad} after a save and reopen; saved widget outputs: {len(ids)}, "
                         f"with saved state: {sum(i in state_ids for i in ids)}")
        assert all(i in state_ids for i in ids), "the save kept a widget output without its state"
        assert page.locator(".jp-Notebook .widget-progress, .jp-Notebook .jupyter-widgets").count() > 0, \
            "no progress bar was rendered from the saved widget state"
        stages["reopened"] = time.monotonic() - t0
        # 5. a student copy: Run All stops at the first unanswered check
        _open_notebook(page, server, theirs, deadline)
        state = _run_all(page, server, theirs, deadline, stops_at_error=True)
        failed = [c for c in state["cells"] if c["errors"]]
        assert failed, f"{theirs}: Run All ran through without stopping at an unanswered check"
        first = failed[0]
        assert first["source"].startswith("# NBVAL_RAISES_EXCEPTION") and \
            first["errors"][0]["ename"] == "AssertionError", _cell_text(first)
        after = [c for c in state["cells"] if c["index"] > first["index"]]
        before = [c for c in state["cells"] if c["index"] < first["index"] and c["source"].strip()]
        assert after and all(c["count"] is None for c in after), "Run All went on past the check"
        assert all(c["count"] for c in before), "cells before the first check did not all run"
        stages["student copy"] = time.monotonic() - t0
        # 6. the reference: read-only in the lab, refused by the server
        state = _open_notebook(page, server, LESSON.name, deadline)
        assert state["writable"] is False, "the reference lesson must be read-only in the lab"
        page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) .jp-Toolbar-item"
                     "[data-jp-item-name='read-only-indicator']").first.wait_for(state="visible",
                                                                                 timeout=20_000)
        # its tab says "reference", the learner's copy of the same name does not
        assert _tab_label(page, LESSON.name, deadline) == '"reference · "', page.evaluate(TAB_LABELS_JS)
        assert _tab_label(page, mine, deadline) == "none", page.evaluate(TAB_LABELS_JS)
        assert _tab_label(page, theirs, deadline) == '"exercises · "', \
            "the student copy's tab differs from the learner's copy of a lesson of the same name"
        status, model = _api(server, "GET", f"contents/{LESSON.name}")
        assert status == 200 and isinstance(model, dict) and model["writable"] is False
        status, message = _api(server, "PUT", f"contents/{LESSON.name}", model)
        assert status == 403 and f"work/{LESSON.name}" in str(message), (status, message)
    assert _digests(root) == reference_before, "a reference file changed during the session"
    assert _digests(NOTEBOOKS) == repo_before, "the repository's notebooks/ changed"
    seconds = time.monotonic() - t0
    with capsys.disabled():
        print(f"\n[browser] learner session: start page, {LESSON.name} run, saved and reopened without a "
              f"widget error, a student copy stopped at its first check, reference read-only; {seconds:.1f} s "
              f"({', '.join(f'{k} at {v:.0f} s' for k, v in stages.items())})")


@needs_browser
def test_a_failing_cell_is_reported_with_its_text_and_error(tmp_path, capsys):
    import nbformat

    v4 = nbformat.v4
    nb = v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                  "language": "python"}})
    nb.cells = [v4.new_code_cell("x = 40 + 2"),
                v4.new_code_cell("assert x == 41, f'x is {x}, the broken cell says 41'"),
                v4.new_code_cell("print('never reached')")]
    bad = tmp_path / "broken.ipynb"
    nbformat.write(nb, bad)
    t0 = time.monotonic()
    with pytest.raises(pytest.fail.Exception, match=".") as info:
        run_in_jupyterlab(bad, tmp_path / "run")
    msg = str(info.value)
    assert "broken.ipynb: cell 1" in msg and "assert x == 41" in msg, msg
    assert "AssertionError" in msg and "x is 42, the broken cell says 41" in msg, msg
    assert "still running" not in msg and "budget" not in msg
    with capsys.disabled():
        print(f"\n[browser] a failing cell was reported with its source and traceback in "
              f"{time.monotonic() - t0:.1f} s")


# ---- the Chinese edition ---------------------------------------------------------------------------

ZH_LESSON = NOTEBOOKS / "zh" / "00_setup_and_verify.ipynb"  # short (about 10 s in quick mode), with exercises
ZH_BUDGET_S = 240.0
ZH_MENUS = {"File": "文件", "Edit": "编辑", "Run": "运行", "Run All Cells": "运行所有单元格",
            "Clear Outputs of All Cells": "清除所有单元格的输出"}  # the zh-CN language pack's labels


def _zh_skip_reason() -> str | None:
    reason = _skip_reason()
    if reason:
        return reason
    if not ZH_LESSON.exists():
        return f"{ZH_LESSON.relative_to(ROOT)} is not in this checkout (the Chinese edition's lessons)"
    if not (NOTEBOOKS / "zh" / "README.md").exists():
        return "notebooks/zh/README.md (the Chinese start page) does not exist"
    try:
        import jupyterlab_language_pack_zh_CN  # noqa: F401
    except ImportError:
        return "JupyterLab's Chinese language pack is missing: `pip install jupyterlab-language-pack-zh-CN` (or `make setup`)"
    return None


# JavaScript: put ``source`` in cell ``index`` of the open notebook, run it and the next cell (its check).
RUN_TWO_JS = """
async ([index, source]) => {
  const app = window.jupyterapp;
  const panel = app.shell.currentWidget;
  panel.content.model.cells.get(index).sharedModel.setSource(source);
  panel.content.activeCellIndex = index;
  await app.commands.execute('notebook:run-cell-and-select-next');
  await app.commands.execute('notebook:run-cell-and-select-next');
}
"""


def _first_exercise(copy: Path) -> tuple[int, str]:
    """(index of the first solution cell, its first wrong answer) in a lesson copy (a wrong answer's hint is named
    in the solution cell's metadata; a copy without it takes the English lesson's, by cell id)."""
    cells = json.loads(copy.read_text())["cells"]
    index = next(i for i, c in enumerate(cells) if "solution" in c.get("metadata", {}).get("tags", []))
    assert "check" in cells[index + 1]["metadata"].get("tags", []), "a solution cell is followed by its check"
    wrong = cells[index]["metadata"].get("wrong_answers")
    if not wrong:
        english = json.loads((NOTEBOOKS / copy.name).read_text())["cells"]
        wrong = next(c["metadata"]["wrong_answers"] for c in english if c.get("id") == cells[index].get("id"))
    return index, wrong[0]


@pytest.mark.skipif(_zh_skip_reason() is not None, reason=f"Chinese browser test skipped: {_zh_skip_reason()}")
def test_the_chinese_lab_in_jupyterlab(tmp_path, capsys):
    """lab --lang zh: the Chinese start page in a Chinese interface -> the learner's copy of lesson 00 runs
    green from the Chinese menus, its checks say 正确 -> a wrong answer shows the Chinese hint -> the reference
    lesson's tab says 参考版."""
    t0 = time.monotonic()
    deadline = t0 + ZH_BUDGET_S
    root = tmp_path / "notebooks"
    shutil.copytree(NOTEBOOKS, root, ignore=shutil.ignore_patterns("work", ".ipynb_checkpoints"))
    workspace.prepare(tmp_path, lang="zh")  # what `python -m fp16lab lab --lang zh` does first
    mine = f"work/zh/{ZH_LESSON.name}"
    index, wrong = _first_exercise(root / mine)
    with lab_browser(root, tmp_path / "jupyter-home", tmp_path / "failure.png", lang="zh") as session:
        server, page = session.server, session.page
        # 1. the Chinese start page, rendered, in JupyterLab's Chinese interface
        page.goto(f"{server.base}/?token={server.token}", timeout=60_000)
        heading = page.locator(".jp-RenderedMarkdown h1").first
        heading.wait_for(state="visible", timeout=60_000)
        assert "/lab/tree/zh/README.md" in page.url, page.url
        assert re.search(r"[\u4e00-\u9fff]", heading.inner_text()), heading.inner_text()
        menus = page.locator(".lm-MenuBar-itemLabel")
        labels = [menus.nth(i).inner_text() for i in range(menus.count())]
        assert ZH_MENUS["File"] in labels, f"JupyterLab's menus are not in Chinese: {labels}"
        # 2. the learner's Chinese copy of lesson 00: cleared, then Run All from the Chinese menu
        _open_notebook(page, server, mine, deadline)
        _click_menu(page, ZH_MENUS["Edit"], ZH_MENUS["Clear Outputs of All Cells"])
        _wait_for(page, lambda s: all(c["count"] is None and not c["errors"] for c in s["cells"]),
                  "clearing all outputs", deadline, mine)
        _run_all(page, server, mine, deadline, menu=(ZH_MENUS["Run"], ZH_MENUS["Run All Cells"]))
        verdict = page.locator(".jp-Notebook .jp-OutputArea-output", has_text="✓ " + tr("correct", lang="zh"))
        assert verdict.count() > 0, "the checks' verdicts are not in Chinese: FP16LAB_LANG did not reach the kernel"
        # 3. a wrong answer in the first exercise: its check shows the Chinese hint
        page.evaluate(RUN_TWO_JS, [index, wrong])
        state = _wait_for(page, lambda s: any(c["index"] == index + 1 and c["errors"] for c in s["cells"]),
                          "the check of the wrong answer failing", deadline, mine)
        err = next(c for c in state["cells"] if c["index"] == index + 1)["errors"][0]
        assert err["ename"] == "WrongAnswer" and err["evalue"].startswith("提示："), err  # the hint alone
        shown = page.locator(".jp-Notebook .jp-OutputArea-output", has_text=err["evalue"][:20])
        shown.first.wait_for(state="visible", timeout=20_000)
        # 4. the Chinese reference lesson's tab says 参考版, the learner's copy's does not
        reference = f"zh/{ZH_LESSON.name}"
        _open_notebook(page, server, reference, deadline)
        assert _tab_label(page, reference, deadline) == f'"{tr("reference · ", lang="zh")}"', \
            page.evaluate(TAB_LABELS_JS)
        badge = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden) [data-jp-item-name='read-only-indicator'] "
                             ".jp-ToolbarLabelComponent").first
        badge.wait_for(state="attached", timeout=20_000)  # JupyterLab's text is English: ours is shown instead
        shown = badge.evaluate("e => getComputedStyle(e, '::after').content")
        assert shown == f'"{tr("read-only reference", lang="zh")}"', shown
        assert _tab_label(page, mine, deadline) == "none", page.evaluate(TAB_LABELS_JS)
    with capsys.disabled():
        print(f"\n[browser] Chinese lab: zh start page with the Chinese interface, {ZH_LESSON.name} run green from "
              f"the Chinese menus, a wrong answer showed the hint {err['evalue'][:30]!r}...; "
              f"{time.monotonic() - t0:.1f} s")
