"""JupyterLab in a real browser: lesson 00 runs through the UI with no error in any cell.

Starts ``jupyter lab`` from the project's own install on a free localhost port with a
token, opens a copy of lesson 00 in headless Chromium (Debian's ``chromium`` package,
driven by Playwright; no browser download, ever), clears it and runs all cells from the
Run menu, then checks every code cell ran and none has an error output. The server is
shut down whatever happens. ``make test`` installs chromium when it runs as root on
Debian/Ubuntu; elsewhere this test is skipped with the reason. ``FP16LAB_CHROMIUM`` may
point at another Chromium binary.
"""

from __future__ import annotations

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

ROOT = Path(__file__).resolve().parent.parent
LESSON = ROOT / "notebooks" / "00_setup_and_verify.ipynb"
BUDGET_S = 170.0  # the whole test must stay under 3 minutes
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


def _jupyter() -> Path:
    """The project's own install: .venv/bin/jupyter, else the one beside this Python."""
    venv = ROOT / ".venv" / "bin" / "jupyter"
    return venv if venv.exists() else Path(sys.executable).parent / "jupyter"


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
    if not _jupyter().exists():
        return f"no jupyter executable at {_jupyter()}: run `make setup`"
    if not LESSON.exists():
        return f"{LESSON} does not exist yet"
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
    """User settings for this throwaway lab: no autosave, no news or update checks."""
    files = {
        "@jupyterlab/docmanager-extension/plugin.jupyterlab-settings": {"autosave": False},
        "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
            "fetchNews": "false", "checkForUpdates": False},
    }
    for rel, data in files.items():
        p = folder / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(json.dumps(data))


class Server:
    """A ``jupyter lab`` process on a free localhost port with a random token."""

    def __init__(self, root_dir: Path, home: Path) -> None:
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
        cmd = [
            str(_jupyter()), "lab", "--no-browser",
            f"--ServerApp.root_dir={root_dir}", "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={self.port}", "--ServerApp.port_retries=0",
            f"--IdentityProvider.token={self.token}",
            "--LabApp.expose_app_in_browser=True",  # window.jupyterapp: read cell outputs from the model
            "--LabApp.check_for_updates_class=jupyterlab.handlers.announcements.NeverCheckForUpdate",
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            cmd.append("--ServerApp.allow_root=True")  # CI runs as root
        self.log = open(self.log_path, "w")  # noqa: SIM115 (closed in stop())
        self.proc = subprocess.Popen(cmd, stdout=self.log, stderr=subprocess.STDOUT, env=env,
                                     cwd=root_dir, start_new_session=True)

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
  return {phase: 'open', kernel: kernel ? kernel.status : 'none',
          connection: kernel ? kernel.connectionStatus : 'none', cells: cells};
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


def run_in_jupyterlab(notebook: Path, tmp_path: Path) -> tuple[int, float]:
    """Open ``notebook`` (a copy) in JupyterLab in Chromium, run all cells; (code cells, seconds).

    Fails (pytest.fail) with the failing cell's source and traceback on the first error output.
    """
    from playwright.sync_api import sync_playwright

    t0 = time.monotonic()
    deadline = t0 + BUDGET_S
    name = notebook.name
    root = tmp_path / "notebooks"
    root.mkdir(parents=True)
    shutil.copy2(notebook, root / name)  # the browser works on a copy: the lesson is never saved over
    server = Server(root, tmp_path / "jupyter-home")
    shot = tmp_path / "failure.png"
    page = None
    try:
        server.wait_ready()
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=_chromium(), headless=True, args=CHROMIUM_FLAGS)
            try:
                page = browser.new_page(viewport={"width": 1400, "height": 1000})
                page.goto(f"{server.base}/lab/tree/{name}?token={server.token}", timeout=60_000)
                _wait_for(page, lambda s: s["phase"] == "open" and s["kernel"] == "idle"
                          and s["connection"] == "connected", "opening the notebook with an idle kernel",
                          deadline, name)
                _click_menu(page, "Edit", "Clear Outputs of All Cells")
                state = _wait_for(page, lambda s: all(c["count"] is None and not c["errors"] for c in s["cells"]),
                                  "clearing all outputs", deadline, name)
                n_code = len(state["cells"])
                assert n_code > 0, f"{name} has no code cells"
                _click_menu(page, "Run", "Run All Cells")
                idle_since = None
                while True:
                    state = page.evaluate(STATE_JS, name)
                    failed = [c for c in state["cells"] if c["errors"]]
                    if failed:
                        c = failed[0]
                        pytest.fail(f"{name}: {_cell_text(c)}\nfailed in JupyterLab with:\n"
                                    f"{_error_text(c['errors'][0])}")
                    if state["kernel"] in ("dead", "unknown") or state["connection"] == "disconnected":
                        pytest.fail(f"{name}: the kernel is {state['kernel']}/{state['connection']}"
                                    f"\nserver log:\n{server.log_tail()}")
                    pending = [c for c in state["cells"] if c["count"] is None]
                    if not pending and state["kernel"] == "idle":
                        break
                    if state["kernel"] == "idle" and pending:
                        idle_since = idle_since or time.monotonic()
                        if time.monotonic() - idle_since > 15:
                            pytest.fail(f"{name}: Run All stopped with {len(pending)} cells not run, "
                                        f"the first:\n{_cell_text(pending[0])}")
                    else:
                        idle_since = None
                    if time.monotonic() > deadline:
                        running = [c for c in state["cells"] if c["state"] == "running"] or pending
                        where = _cell_text(running[0]) if running else "(no cell running)"
                        pytest.fail(f"{name}: still running after {BUDGET_S:.0f} s, at {where}")
                    time.sleep(0.5)
                counts = [c["count"] for c in state["cells"] if c["source"].strip()]
                assert counts == sorted(counts) and len(set(counts)) == len(counts), \
                    f"cells did not run once each, in order: {counts}"
                rendered = page.locator(".jp-Notebook .jp-CodeCell .jp-OutputArea-output").count()
                assert rendered > 0, "no output was rendered in the page"
            except BaseException:
                if page is not None:
                    try:
                        page.screenshot(path=str(shot), full_page=False)
                        print(f"screenshot of the page: {shot}", file=sys.stderr)
                    except Exception:  # noqa: BLE001
                        pass
                raise
            finally:
                browser.close()
    finally:
        server.stop()
        assert server.proc.poll() is not None, "jupyter lab is still running after shutdown"
    return n_code, time.monotonic() - t0


@needs_browser
def test_lesson_00_runs_in_jupyterlab(tmp_path, capsys):
    digest = hashlib.sha256(LESSON.read_bytes()).hexdigest()
    n_code, seconds = run_in_jupyterlab(LESSON, tmp_path)
    assert hashlib.sha256(LESSON.read_bytes()).hexdigest() == digest, "the committed lesson was modified"
    with capsys.disabled():
        print(f"\n[browser] {LESSON.name}: {n_code} code cells ran in JupyterLab + headless Chromium "
              f"without error; whole test {seconds:.1f} s (budget {BUDGET_S:.0f} s)")
    assert seconds < BUDGET_S + 10, f"the browser test took {seconds:.0f} s (must stay under 3 minutes)"


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
    with pytest.raises(pytest.fail.Exception) as info:
        run_in_jupyterlab(bad, tmp_path / "run")
    msg = str(info.value)
    assert "broken.ipynb: cell 1" in msg and "assert x == 41" in msg, msg
    assert "AssertionError" in msg and "x is 42, the broken cell says 41" in msg, msg
    assert "still running" not in msg and "budget" not in msg
    with capsys.disabled():
        print(f"\n[browser] a failing cell was reported with its source and traceback in "
              f"{time.monotonic() - t0:.1f} s")
