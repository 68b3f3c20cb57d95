"""The learner's workspace and lab: own copies in notebooks/work/, the reference read-only."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from fp16lab.course import lab, workspace
from fp16lab.course.outputs import is_reference_note, stamp

ROOT = Path(__file__).resolve().parent.parent


def _lesson(code: str = "x = 1", md: str = "# Lesson") -> nbformat.NotebookNode:
    v4 = nbformat.v4
    nb = v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                  "language": "python"}})
    nb.cells = [v4.new_markdown_cell(md), v4.new_code_cell(code)]
    nb.cells[1].outputs = [v4.new_output("stream", name="stdout", text="reference output\n")]
    stamp(nb)
    return nb


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    """A small copy of the repository layout: two lessons and one student copy."""
    nbdir = tmp_path / "notebooks"
    (nbdir / "student").mkdir(parents=True)
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "fp16lab"\n')
    nbformat.write(_lesson(), nbdir / "00_first.ipynb")
    nbformat.write(_lesson("y = 2"), nbdir / "01_second.ipynb")
    nbformat.write(nbformat.v4.new_notebook(), nbdir / "student" / "00_first.ipynb")
    (nbdir / "README.md").write_text("# Start\n")
    return tmp_path


def test_prepare_copies_what_is_missing_and_never_overwrites(repo):
    nbdir = repo / "notebooks"
    ref = {p: p.read_bytes() for p in nbdir.rglob("*.ipynb")}
    ws = workspace.prepare(repo)
    work = nbdir / "work"
    assert sorted(p.relative_to(work).as_posix() for p in ws.created) == [
        "00_first.ipynb", "01_second.ipynb", "student/00_first.ipynb"]
    assert ws.kept == [] and ws.behind == []
    mine = work / "00_first.ipynb"
    nb = nbformat.read(mine, as_version=4)
    nb.cells[1].source = "x = 'my own work'"
    nbformat.write(nb, mine)
    (work / "01_second.ipynb").unlink()
    ws2 = workspace.prepare(repo)
    assert [p.name for p in ws2.created] == ["01_second.ipynb"] and len(ws2.kept) == 2
    assert "my own work" in mine.read_text(), "existing work must be left alone"
    assert {p: p.read_bytes() for p in nbdir.rglob("*.ipynb") if "work" not in p.parts} == ref
    assert "new copies: 01_second.ipynb" in str(ws2) and "kept as they are" in str(ws2)


def test_a_copy_does_not_claim_the_reference_run(repo):
    workspace.prepare(repo)
    ref = nbformat.read(repo / "notebooks" / "00_first.ipynb", as_version=4)
    mine = nbformat.read(repo / "notebooks" / "work" / "00_first.ipynb", as_version=4)
    assert "fp16lab" not in mine.metadata, "the copy must not say it holds the reference machine's outputs"
    meta = mine.metadata[workspace.WORK_META]
    assert meta["copy_of"] == "notebooks/00_first.ipynb" and meta["reference_outputs"] == ref.metadata["fp16lab"]
    first = mine.cells[1].outputs
    assert is_reference_note(first[0]) and "This is your copy" in first[0]["data"]["text/plain"]
    assert first[1] == ref.cells[1].outputs[1], "the reference outputs stay, for reading before running"
    assert [c.source for c in mine.cells] == [c.source for c in ref.cells]
    nbformat.validate(mine)


def test_a_changed_lesson_is_reported_not_copied_over(repo):
    workspace.prepare(repo)
    lesson = repo / "notebooks" / "01_second.ipynb"
    nb = nbformat.read(lesson, as_version=4)
    nb.cells[1].source = "y = 3  # the lesson was updated"
    nbformat.write(nb, lesson)
    ws = workspace.prepare(repo)
    assert [p.name for p in ws.behind] == ["01_second.ipynb"] and not ws.created
    assert "--reset 01_second" in str(ws)
    assert "(yours moves to work/old/)" in str(ws)
    assert "y = 2" in (repo / "notebooks" / "work" / "01_second.ipynb").read_text()



def test_the_chinese_note_names_the_chinese_old_folder(tmp_path):
    work = tmp_path / "notebooks" / "work" / "zh"
    ws = workspace.Workspace(work, behind=[work / "01_second.ipynb"], lang="zh")
    assert "--lang zh --reset 01_second" in str(ws) and "work/zh/old/" in str(ws) and "work/old/" not in str(ws)
def test_reset_keeps_the_old_copy_and_refuses_unknown_names_first(repo):
    workspace.prepare(repo)
    work = repo / "notebooks" / "work"
    (work / "00_first.ipynb").write_text((work / "00_first.ipynb").read_text().replace("x = 1", "x = 'mine'"))
    before = sorted(p.as_posix() for p in work.rglob("*"))
    with pytest.raises(ValueError, match=r"got '07'.*Allowed: 00_first, 01_second, student/00_first"):
        workspace.reset(["00", "07"], repo)
    assert sorted(p.as_posix() for p in work.rglob("*")) == before, "a refused reset changes nothing"
    ((fresh, old),) = workspace.reset(["00"], repo)
    assert fresh == work / "00_first.ipynb" and "x = 1" in fresh.read_text()
    assert old is not None and old.parent == work / "old" and "mine" in old.read_text()
    ((fresh2, _),) = workspace.reset(["student/00_first.ipynb"], repo)
    assert fresh2 == work / "student" / "00_first.ipynb"


def test_reset_backs_up_only_a_changed_copy(repo):
    workspace.prepare(repo)
    work = repo / "notebooks" / "work"
    ((fresh, old),) = workspace.reset(["00"], repo)  # untouched: replaced, no backup
    assert old is None and not (work / "old").exists() and fresh.exists()
    mine = nbformat.read(work / "01_second.ipynb", as_version=4)
    mine.cells.append(nbformat.v4.new_markdown_cell("my notes"))  # any change of the learner's counts
    nbformat.write(mine, work / "01_second.ipynb")
    ((_, old),) = workspace.reset(["01"], repo)
    assert old is not None and old.exists() and old.parent == work / "old"


def test_prepare_needs_lessons(tmp_path):
    (tmp_path / "notebooks").mkdir()
    with pytest.raises(FileNotFoundError, match="no lessons found"):
        workspace.prepare(tmp_path)
    assert not (tmp_path / "notebooks" / "work").exists()


def test_work_folder_is_ignored_by_git_and_by_pytest(tmp_path):
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    for path in ("notebooks/work/02_amp_training_loop.ipynb", "notebooks/work/student/x.ipynb",
                 "wheelhouse/torch.whl"):
        assert subprocess.run(["git", "check-ignore", "-q", path], cwd=ROOT).returncode == 0, f"{path} not ignored"
    fake = tmp_path / "repo"
    (fake / "notebooks" / "work").mkdir(parents=True)
    shutil.copy(ROOT / "pyproject.toml", fake / "pyproject.toml")
    (fake / "tests").mkdir()
    for p in (fake / "notebooks" / "01_a.ipynb", fake / "notebooks" / "work" / "01_a.ipynb"):
        nbformat.write(_lesson(), p)
    out = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"],
                         cwd=fake, capture_output=True, text=True, timeout=120)
    assert "notebooks/01_a.ipynb" in out.stdout, out.stdout + out.stderr
    assert "work/01_a.ipynb" not in out.stdout, "pytest must not collect the learner's copies"


# ---- the lab command ------------------------------------------------------------------------

def test_lab_command_refuses_bad_arguments_naming_them(tmp_path):
    for kwargs, message in [({"port": 70000}, "port must be an int in 1..65535, got 70000"),
                            ({"port": True}, "port must be an int >= 1, got True"),
                            ({"open_browser": "yes"}, "open_browser must be"),
                            ({"token": 123}, "token must be a str, got 123"),
                            ({"start": None}, "start must be a str")]:
        with pytest.raises(ValueError, match=re.escape(message)):
            lab.lab_command(tmp_path, **kwargs)


def test_lab_command_is_localhost_with_a_token_and_read_only_reference(tmp_path):
    cmd = lab.lab_command(tmp_path, port=8899, open_browser=False)
    assert cmd[:4] == [sys.executable, "-m", "jupyter", "lab"]
    assert "--ServerApp.ip=127.0.0.1" in cmd and "--ServerApp.port=8899" in cmd and "--no-browser" in cmd
    assert not any("token=" in c for c in cmd), "JupyterLab's own random token stays on"
    assert f"--ServerApp.contents_manager_class={lab.CONTENTS_MANAGER}" in cmd
    assert f"--ServerApp.root_dir={tmp_path.resolve()}" in cmd
    assert "--LabApp.default_url=/lab/tree/README.md" in cmd
    assert f"--LabApp.app_settings_dir={tmp_path.resolve() / 'work' / '.lab-settings'}" in cmd
    assert "--LabApp.custom_css=True" in cmd, "the reference tabs' label is custom CSS"
    assert (f"--ServerApp.tornado_settings=static_custom_path={tmp_path.resolve() / 'work' / '.lab-settings' / 'custom'}"
            in cmd), "custom.css is served from the lab's own settings folder, not the user's ~/.jupyter"


def test_reference_tabs_are_labelled_in_the_labs_language(tmp_path, monkeypatch):
    import jupyterlab.commands

    monkeypatch.setattr(jupyterlab.commands, "get_app_dir", lambda: str(tmp_path / "app"))
    for lang, label in (("en", "reference · "), ("zh", "参考版 · ")):
        css = (lab.write_lab_settings(tmp_path / lang, lang=lang) / "custom" / "custom.css").read_text(encoding="utf-8")
        assert f'content: "{label}";' in css, css
        # the selector: a notebook's tab whose tooltip path is not under work/ (JupyterLab's "Path: …" caption)
        assert '[title*=".ipynb"]:not([title*=": work/"])' in css
        assert css.count("{") == css.count("}") == (4 if lang == "en" else 6), "the templates' braces survive str.format"
        badge = '[data-jp-item-name="read-only-indicator"] .jp-ToolbarLabelComponent::after'
        assert (badge in css) == (lang == "zh"), "JupyterLab's own badge is English in any language: ours in Chinese"
        if lang == "zh":
            assert 'content: "只读参考版";' in css
        student = "练习版 · " if lang == "zh" else "exercises · "
        assert f'content: "{student}";' in css and '[title*="work/student/"]' in css, \
            "a student copy's tab differs from the learner's copy of the same lesson"


def test_make_lab_runs_the_lab_command():
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    # under CI's own `make test` the child make inherits MAKEFLAGS/MAKELEVEL and prints directory lines
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    out = subprocess.run(["make", "--no-print-directory", "-n", "lab"], cwd=ROOT, capture_output=True,
                         text=True, check=True, env=env).stdout
    commands = [line for line in out.splitlines() if line.strip() and not line.startswith("make")]
    assert "-m fp16lab lab" in commands[-1], out
    dry = subprocess.run([sys.executable, "-m", "fp16lab", "lab", "--dry-run"], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert dry.returncode == 0 and "--ServerApp.ip=127.0.0.1" in dry.stdout, dry.stdout + dry.stderr
    assert not (ROOT / "notebooks" / "work" / "unexpected").exists()


def test_lab_settings_keep_widget_state_and_the_environments_own(tmp_path, monkeypatch):
    env = tmp_path / "app" / "settings"  # the environment's JupyterLab application settings
    (env / "overrides.d").mkdir(parents=True)
    (env / "overrides.d" / "a.json").write_text(json.dumps({"@x/theme:plugin": {"theme": "dark"}}))
    (env / "overrides.json").write_text(json.dumps(
        {"@jupyter-widgets/jupyterlab-manager:plugin": {"saveState": False}}))
    import jupyterlab.commands

    monkeypatch.setattr(jupyterlab.commands, "get_app_dir", lambda: str(tmp_path / "app"))
    folder = lab.write_lab_settings(tmp_path / "out")
    data = json.loads((folder / "overrides.json").read_text())
    assert data["@jupyter-widgets/jupyterlab-manager:plugin"]["saveState"] is True
    assert data["@jupyterlab/docmanager-extension:plugin"]["defaultViewers"]["markdown"] == "Markdown Preview"
    assert data["@x/theme:plugin"] == {"theme": "dark"}, "the environment's own overrides are kept"


# ---- the server side: everything outside work/ is read-only ----------------------------------

def test_reference_is_read_only_on_the_server(repo):
    from tornado import web

    from fp16lab.course.labserver import ReferenceContentsManager

    workspace.prepare(repo)
    root = repo / "notebooks"
    cm = ReferenceContentsManager(root_dir=str(root))
    ref_bytes = (root / "00_first.ipynb").read_bytes()

    async def scenario() -> None:
        ref = await cm.get("00_first.ipynb")
        mine = await cm.get("work/00_first.ipynb")
        assert ref["writable"] is False and mine["writable"] is True
        listing = await cm.get("", content=True)
        flags = {c["name"]: c["writable"] for c in listing["content"]}
        assert flags["00_first.ipynb"] is False and flags["work"] is True
        # one set of student copies in the browser: the learner's (work/student/), not the reference's
        assert (root / "student").is_dir() and "student" not in flags
        assert "student" in {c["name"] for c in (await cm.get("work", content=True))["content"]}
        assert (await cm.get("student", content=True))["type"] == "directory"  # still readable by path
        with pytest.raises(web.HTTPError, match="HTTP 403") as refused:
            await cm.save(ref, "00_first.ipynb")
        assert refused.value.status_code == 403 and "work/00_first.ipynb" in refused.value.log_message
        for call in (cm.rename_file("00_first.ipynb", "work/x.ipynb"), cm.delete_file("00_first.ipynb"),
                     cm.save({"type": "file", "format": "text", "content": "x"}, "new.txt")):
            with pytest.raises(web.HTTPError, match="HTTP 403"):
                await call
        content = mine["content"]
        content["cells"][1]["outputs"].append({
            "output_type": "display_data", "metadata": {},
            "data": {"application/vnd.jupyter.widget-view+json": {"model_id": "closed-bar", "version_major": 2,
                                                                  "version_minor": 0}, "text/plain": "0%"}})
        await cm.save({"type": "notebook", "content": content}, "work/00_first.ipynb")
        saved = await cm.get("work/00_first.ipynb")
        assert "closed-bar" not in json.dumps(saved["content"]), "a bar without saved state must not be kept"
        await cm.save({"type": "file", "format": "text", "content": "notes"}, "work/notes.txt")
        # a new file outside work/ is not "part of the reference": the message says so, and where to save
        with pytest.raises(web.HTTPError, match="403") as refused:
            await cm.save({"type": "file", "format": "text", "content": "x"}, "new.txt")
        assert "only work/ is yours" in refused.value.log_message and "reference" not in refused.value.log_message
        # a reference file without a copy of yours points at Save As, not at a copy that does not exist
        (root / "work" / "00_first.ipynb").unlink()
        with pytest.raises(web.HTTPError, match="403") as refused:
            await cm.save(ref, "00_first.ipynb")
        assert "File > Save As into work/" in refused.value.log_message
        assert "your copy, work/00_first" not in refused.value.log_message
        # File > New in the lab's root makes the file in work/
        made = await cm.new_untitled(path="", type="notebook")
        assert made["path"].startswith("work/") and (root / made["path"]).exists()

    asyncio.run(scenario())
    assert (root / "00_first.ipynb").read_bytes() == ref_bytes
    assert (root / "work" / "notes.txt").read_text() == "notes"


# ---- the Chinese edition: notebooks/zh/ -> notebooks/work/zh/, the lab in Chinese ----------------

@pytest.fixture
def zh_repo(repo: Path) -> Path:
    """The small repository with a Chinese edition: one lesson, its student copy, the start page."""
    zh = repo / "notebooks" / "zh"
    (zh / "student").mkdir(parents=True)
    nbformat.write(_lesson(md="# 第一课"), zh / "00_first.ipynb")
    nbformat.write(nbformat.v4.new_notebook(), zh / "student" / "00_first.ipynb")
    (zh / "README.md").write_text("# 从这里开始\n", encoding="utf-8")
    return repo


def test_chinese_copies_go_to_work_zh_with_a_chinese_note(zh_repo):
    nbdir = zh_repo / "notebooks"
    ws = workspace.prepare(zh_repo, lang="zh")
    work = nbdir / "work" / "zh"
    assert sorted(p.relative_to(work).as_posix() for p in ws.created) == ["00_first.ipynb", "student/00_first.ipynb"]
    assert not (nbdir / "work" / "00_first.ipynb").exists(), "the Chinese lab makes only the Chinese copies"
    mine = nbformat.read(work / "00_first.ipynb", as_version=4)
    assert mine.metadata[workspace.WORK_META]["copy_of"] == "notebooks/zh/00_first.ipynb"
    note = mine.cells[1].outputs[0]
    assert is_reference_note(note) and "这是你的副本" in note["data"]["text/plain"]
    (work / "00_first.ipynb").write_text((work / "00_first.ipynb").read_text().replace("x = 1", "x = '我的'"))
    again = workspace.prepare(zh_repo, lang="zh")
    assert not again.created and "我的" in (work / "00_first.ipynb").read_text(), "a learner's copy is never overwritten"
    assert str(ws).startswith("你的工作区：") and "新副本：" in str(ws) and "保持原样（你的成果）：2 个文件" in str(again), \
        "what `make lab LAB_LANG=zh` prints about the workspace is Chinese"
    ((fresh, old),) = workspace.reset(["00"], zh_repo, lang="zh")
    assert fresh == work / "00_first.ipynb" and old is not None and old.parent == work / "old"
    english = workspace.prepare(zh_repo)
    assert (nbdir / "work" / "00_first.ipynb") in english.created and "This is your copy" in \
        (nbdir / "work" / "00_first.ipynb").read_text()


def test_an_unknown_language_is_refused_before_any_copy(zh_repo, repo):
    with pytest.raises(ValueError, match="lang must be one of 'en', 'zh'; got 'fr'"):
        workspace.prepare(zh_repo, lang="fr")
    assert not (zh_repo / "notebooks" / "work").exists()
    shutil.rmtree(repo / "notebooks" / "zh")
    with pytest.raises(FileNotFoundError, match=r"no lessons found in '.*zh' to copy"):
        workspace.prepare(repo, lang="zh")


def test_the_chinese_lab_sets_its_language_for_kernels_and_jupyterlab(tmp_path, monkeypatch):
    import jupyterlab.commands

    monkeypatch.setattr(jupyterlab.commands, "get_app_dir", lambda: str(tmp_path / "app"))
    folder = lab.write_lab_settings(lab.lab_settings_dir(tmp_path, "zh"), lang="zh")
    assert folder == tmp_path / "work" / "zh" / lab.SETTINGS_DIR
    data = json.loads((folder / "overrides.json").read_text())
    assert data["@jupyterlab/translation-extension:plugin"] == {"locale": "zh_CN"}
    assert data["@jupyter-widgets/jupyterlab-manager:plugin"]["saveState"] is True
    english = json.loads((lab.write_lab_settings(tmp_path / "en") / "overrides.json").read_text())
    assert "@jupyterlab/translation-extension:plugin" not in english, "the English lab keeps JupyterLab's own choice"
    assert lab.lab_env("zh", {"FP16LAB_LANG": "en", "PATH": "/bin"}) == {"FP16LAB_LANG": "zh", "PATH": "/bin"}
    assert lab.lab_env("en", {"FP16LAB_LANG": "zh"})["FP16LAB_LANG"] == "en", "a lab's kernels speak its language"
    assert lab.start_page("zh") == "zh/README.md" and lab.start_page() == "README.md"


def test_lab_lang_on_the_command_line_and_in_make():
    dry = subprocess.run([sys.executable, "-m", "fp16lab", "lab", "--lang", "zh", "--dry-run"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert dry.returncode == 0, dry.stdout + dry.stderr
    assert dry.stdout.startswith("FP16LAB_LANG=zh ") and "--LabApp.default_url=/lab/tree/zh/README.md" in dry.stdout
    assert f"{os.sep}work{os.sep}zh{os.sep}.lab-settings" in dry.stdout
    bad = subprocess.run([sys.executable, "-m", "fp16lab", "lab", "--lang", "fr", "--dry-run"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "--lang must be one of 'en', 'zh'; got 'fr'" in bad.stderr, bad.stderr
    if shutil.which("make") is None:
        pytest.skip("make is not installed")
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MAKELEVEL", "MFLAGS")}
    out = subprocess.run(["make", "--no-print-directory", "-n", "lab", "LAB_LANG=zh"], cwd=ROOT,
                         capture_output=True, text=True, check=True, env=env).stdout
    assert "-m fp16lab lab --port=8888 --lang=zh" in out, out
    plain = subprocess.run(["make", "--no-print-directory", "-n", "lab"], cwd=ROOT, capture_output=True, text=True,
                           check=True, env=env).stdout
    assert "--lang" not in plain


def test_a_chinese_reference_file_names_the_chinese_copy(zh_repo):
    from tornado import web

    from fp16lab.course.labserver import ReferenceContentsManager

    workspace.prepare(zh_repo, lang="zh")
    cm = ReferenceContentsManager(root_dir=str(zh_repo / "notebooks"))

    async def scenario() -> None:
        ref = await cm.get("zh/00_first.ipynb")
        assert ref["writable"] is False
        with pytest.raises(web.HTTPError, match="403") as refused:
            await cm.save(ref, "zh/00_first.ipynb")
        assert "Work in your copy, work/zh/00_first.ipynb" in refused.value.log_message

    asyncio.run(scenario())


# ---- a lab on a shared server: --ip needs a token (issue 48) -------------------------------------------

def test_a_non_local_address_needs_a_token(tmp_path, monkeypatch):
    monkeypatch.delenv(lab.TOKEN_ENV, raising=False)
    assert lab.is_local("127.0.0.1") and lab.is_local("::1") and lab.is_local("localhost") and lab.is_local("127.0.0.2")
    assert not lab.is_local("0.0.0.0") and not lab.is_local("") and not lab.is_local("10.1.2.3")
    assert not lab.is_local("lab.example.org")
    with pytest.raises(ValueError, match=r"ip '0.0.0.0' can be reached from other machines.*at least 16 characters "
                                         r"\(got none\)"):
        lab.lab_command(tmp_path, ip="0.0.0.0")
    with pytest.raises(ValueError, match=r"got 5 characters"):
        lab.lab_command(tmp_path, ip="0.0.0.0", token="short")
    with pytest.raises(ValueError, match="token must not be empty"):
        lab.lab_command(tmp_path, token="")  # an empty token switches authentication off, even on localhost
    with pytest.raises(ValueError, match="ip must be an address or host name without spaces"):
        lab.lab_command(tmp_path, ip="0.0.0.0 --foo")
    token = lab.new_token()
    assert len(token) >= lab.MIN_TOKEN_CHARS and token != lab.new_token()
    cmd = lab.lab_command(tmp_path, ip="0.0.0.0", token=token, token_in_env=True)
    assert "--ServerApp.ip=0.0.0.0" in cmd
    assert not any(token in c for c in cmd), "the token stays off the command line (the process list shows it)"
    assert lab.lab_env("en", {}, token=token)[lab.TOKEN_ENV] == token
    monkeypatch.setenv(lab.TOKEN_ENV, token)
    assert lab.check_bind("0.0.0.0", None) == "0.0.0.0", "JUPYTER_TOKEN counts as the token"


def test_lab_on_a_shared_server_from_the_command_line(monkeypatch):
    env = {k: v for k, v in os.environ.items() if k != lab.TOKEN_ENV}
    run = [sys.executable, "-m", "fp16lab", "lab", "--dry-run", "--ip", "0.0.0.0"]
    refused = subprocess.run(run, cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert refused.returncode == 2 and "needs a token" in refused.stderr, refused.stderr
    ok = subprocess.run([*run, "--token", "auto"], cwd=ROOT, capture_output=True, text=True, timeout=120, env=env)
    assert ok.returncode == 0 and "--ServerApp.ip=0.0.0.0" in ok.stdout, ok.stdout + ok.stderr
    assert "JUPYTER_TOKEN=<hidden>" in ok.stdout and "IdentityProvider.token" not in ok.stdout


def test_lab_settings_switch_off_the_news_pop_up(tmp_path, monkeypatch):
    import jupyterlab.commands

    monkeypatch.setattr(jupyterlab.commands, "get_app_dir", lambda: str(tmp_path / "app"))
    data = json.loads((lab.write_lab_settings(tmp_path / "s") / "overrides.json").read_text())
    assert data["@jupyterlab/apputils-extension:notification"] == {"fetchNews": "false", "checkForUpdates": False}
    # the values must be what JupyterLab's own schema allows (fetchNews is a string: "true"/"false"/"none")
    found = list(Path(sys.prefix).glob("share/jupyter/lab/schemas/@jupyterlab/apputils-extension/notification.json"))
    if found:
        props = json.loads(found[0].read_text())["properties"]
        assert "false" in [o["const"] for o in props["fetchNews"]["oneOf"]]
        assert props["checkForUpdates"]["type"] == "boolean"


def test_a_fresh_copy_carries_this_kernels_metadata(repo):
    """JupyterLab writes the kernel's kernelspec and language_info into a notebook when its kernel starts:
    a copy carrying the reference machine's (another Python) would open marked unsaved."""
    ws = workspace.prepare(repo)
    meta = workspace.kernel_metadata()
    assert meta["language_info"]["version"] == ".".join(map(str, sys.version_info[:3]))
    for copy in ws.created:
        nb = nbformat.read(copy, as_version=4)
        assert nb.metadata["language_info"] == meta["language_info"]
        assert nb.metadata["kernelspec"] == meta["kernelspec"]
