"""The workshop around the notebooks: the hand-out without solutions, one lab per student, the room's bench."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import nbformat
import pytest

from fp16lab.course import classroom, handout, workspace
from fp16lab.course.paths import lessons

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def handed_out(tmp_path_factory):
    dest = tmp_path_factory.mktemp("handout") / "fp16lab"
    files = handout.handout(dest, ROOT)
    return dest, files


def _solutions() -> list[tuple[str, str]]:
    out = []
    for lesson in lessons(ROOT / "notebooks"):
        for c in nbformat.read(lesson, as_version=4).cells:
            if "solution" in c.metadata.get("tags", []) and len(c.source.strip()) > 30:
                out.append((lesson.name, c.source.strip()))
    return out


def test_the_handout_has_no_solution_anywhere(handed_out):
    dest, files = handed_out
    sols = _solutions()
    assert len(sols) >= 20, "the lessons' solution cells were not found: this test would prove nothing"
    names = {f.as_posix() for f in files}
    assert not any(n.startswith("tests/") for n in names)
    assert "notebooks/INSTRUCTORS.md" not in names and not any(n.startswith("notebooks/zh/translations") for n in names)
    assert not [n for n in names if Path(n).parent.as_posix() in ("notebooks", "notebooks/zh")
                and Path(n).name[:2].isdigit()], "no lesson with its solutions"
    texts = [(n, (dest / n).read_text(encoding="utf-8", errors="ignore")) for n in names
             if Path(n).suffix in (".ipynb", ".md", ".py", ".json", ".txt", "")]
    for lesson, sol in sols:
        hits = [n for n, t in texts if sol in t]
        assert not hits, f"{lesson}'s solution is in the hand-out: {hits}"
    assert {f"notebooks/student/{p.name}" for p in lessons(ROOT / "notebooks")} <= names, "every student copy is in"
    assert "fp16lab/course/answers/__init__.py" in names and "results/README.md" in names, "what the copies need"
    assert "make doctor" in (dest / handout.NOTE).read_text(encoding="utf-8"), "the hand-out says what it is"


def test_the_handouts_start_pages_link_student_copies_only(handed_out):
    dest, _ = handed_out
    en = (dest / "notebooks" / "README.md").read_text(encoding="utf-8")
    zh = (dest / "notebooks" / "zh" / "README.md").read_text(encoding="utf-8")
    import re

    for page, folder in ((en, "work/student/"), (zh, "../work/zh/student/")):
        links = re.findall(r"\]\(([^)]*\.ipynb)", page)
        assert links and all(link.startswith(folder) for link in links), links
        assert "INSTRUCTORS" not in re.sub(r"`[^`]*`", "", "".join(re.findall(r"\]\(([^)]*)\)", page)))
    assert "](work/student/02_amp_training_loop.ipynb)" in en


def test_a_handout_makes_a_workspace_of_student_copies(handed_out, tmp_path):
    import shutil

    dest, _ = handed_out
    copy = tmp_path / "c"
    shutil.copytree(dest, copy)
    ws = workspace.prepare(copy)
    made = {p.relative_to(copy / "notebooks" / "work").as_posix() for p in ws.created}
    assert made and all(m.startswith("student/") for m in made), made


def test_handout_refuses_to_overwrite(tmp_path):
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "mine.txt").write_text("keep")
    with pytest.raises(ValueError, match="dest must be a new or empty folder"):
        handout.handout(tmp_path / "x", ROOT)
    with pytest.raises(ValueError, match="dest must be outside the repository"):
        handout.handout(ROOT / "fp16lab" / "newfolder", ROOT)
    assert not (ROOT / "fp16lab" / "newfolder").exists()


def test_the_handout_command(tmp_path, capsys):
    from fp16lab.__main__ import main

    assert main(["workshop", "handout", str(tmp_path / "h"), "--zip"]) == 0
    assert (tmp_path / "h.zip").is_file() and "student copies only" in capsys.readouterr().out


# ---- one lab per student ----------------------------------------------------------------------------

def _free_port_block(n: int) -> int:
    import socket

    for base in range(20000, 60000, 97):
        try:
            socks = []
            for k in range(1, n + 1):
                s = socket.socket()
                s.bind(("127.0.0.1", base + k))
                socks.append(s)
            return base
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError("no free port block")


def _status(url: str, token: str | None) -> int:
    headers = {"Authorization": f"token {token}"} if token else {}
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=5) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:  # not listening yet
        return 0


def test_classroom_refuses_before_writing(tmp_path):
    with pytest.raises(ValueError, match="students must be an int >= 1"):
        classroom.classroom(tmp_path / "a", 0)
    with pytest.raises(ValueError, match="base_port must leave room"):
        classroom.classroom(tmp_path / "a", 3, base_port=65534)
    with pytest.raises(ValueError, match="lang must be one of"):
        classroom.classroom(tmp_path / "a", 1, lang="fr")
    assert not (tmp_path / "a").exists()


def test_one_lab_per_student_with_its_own_token_and_workspace(tmp_path):
    """The recipe as an instructor runs it: classroom, start.sh, each lab answers its own token only, stop.sh."""
    pytest.importorskip("jupyterlab", reason="the labs are JupyterLab (a dependency of fp16lab; absent only on a "
                        "bare checkout run by another Python)")
    base = _free_port_block(2)
    dest = tmp_path / "room"
    seats = classroom.classroom(dest, 2, ip="127.0.0.1", base_port=base, gpus=["0", "1"], root=ROOT)
    roster = list(csv.DictReader(open(dest / "roster.csv", encoding="utf-8")))
    assert [r["student"] for r in roster] == ["student01", "student02"] and roster[1]["gpu"] == "1"
    assert oct(os.stat(dest / "roster.csv").st_mode)[-3:] == "600", "the tokens are private to the instructor"
    script = (dest / "start.sh").read_text()
    assert "--token" not in script and "IdentityProvider" not in script
    assert seats[0].token in script and "export" in script, "tokens travel in the environment"
    env = {k: v for k, v in os.environ.items() if k not in ("JUPYTER_TOKEN", "FP16LAB_ROOT")}
    for var, sub in (("JUPYTER_CONFIG_DIR", "c"), ("JUPYTER_RUNTIME_DIR", "r"), ("JUPYTER_DATA_DIR", "d")):
        env[var] = str(tmp_path / sub)
    subprocess.run(["sh", str(dest / "start.sh")], check=True, env=env, timeout=60, capture_output=True)
    try:
        deadline = time.monotonic() + 240
        for s in seats:
            url = f"http://127.0.0.1:{s.port}/api/status"
            while _status(url, s.token) != 200:
                assert time.monotonic() < deadline, (s.folder / "lab.log").read_text()[-3000:]
                time.sleep(1)
        a, b = seats
        assert _status(f"http://127.0.0.1:{a.port}/api/status", None) == 403, "no token, no lab"
        assert _status(f"http://127.0.0.1:{a.port}/api/status", b.token) == 403, "a neighbour's token does not open it"
        req = urllib.request.Request(f"http://127.0.0.1:{a.port}/api/contents/work/student",
                                     headers={"Authorization": f"token {a.token}"})
        listing = json.loads(urllib.request.urlopen(req, timeout=10).read())
        assert {m["name"] for m in listing["content"]} >= {"02_amp_training_loop.ipynb"}
        assert (a.folder / "notebooks" / "work" / "student").is_dir() and (b.folder / "notebooks" / "work").is_dir()
        assert not (a.folder / "notebooks" / "02_amp_training_loop.ipynb").exists(), "the hand-out, no solutions"
    finally:
        subprocess.run(["sh", str(dest / "stop.sh")], timeout=60, capture_output=True)
    deadline = time.monotonic() + 30
    while any(_alive(s) for s in seats) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert not any(_alive(s) for s in seats), "stop.sh left a lab running"


def _alive(seat) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{seat.port}/api/status", timeout=2):
            return True
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False


# ---- the room's bench results -------------------------------------------------------------------------

def _bench_file(path: Path, device: str, speeds: dict[str, list[float]], *, mode="full", device_type="cuda"):
    rows = [{"config": c, "label": c, "batch_size": 256, "status": "ok", "img_per_s": v, "peak_mem_gb": 9.0}
            for c, vs in speeds.items() for v in vs]
    rows.append({"config": "fp32_true", "label": "fp32", "batch_size": 256, "status": "oom", "img_per_s": None})
    meta = {"device": device, "real_device": device, "device_type": device_type, "mode": mode, "torch": "2.11",
            "capability": "sm_89", "memory_gib": 23.5, "date": "2026-12-05"}
    path.write_text(json.dumps({"metadata": meta, "rows": rows}))
    return path


def test_the_rooms_bench_results_merge_into_one_table_and_plot(tmp_path):
    a = _bench_file(tmp_path / "alice.json", "NVIDIA GeForce RTX 4090 D",
                    {"article": [1000.0, 1100.0, 1050.0], "fp16_cl_fused": [2000.0, 2100.0, 2300.0]})
    b = _bench_file(tmp_path / "bob.json", "CPU", {"article": [3.0], "fp16_cl_fused": [4.0]}, mode="quick",
                    device_type="cpu")
    frame = classroom.merge_bench([a, b])
    alice = frame[(frame.student == "alice") & (frame.config == "fp16_cl_fused")].iloc[0]
    assert alice.img_per_s == 2100.0 and alice.runs == 3, "the median of the student's runs"
    oom = frame[(frame.student == "alice") & (frame.config == "fp32_true")].iloc[0]
    assert oom.status == "oom" and oom.img_per_s != oom.img_per_s
    assert not frame[frame.student == "bob"].speed_comparable.any(), "a CPU quick-mode file is not a GPU speed"
    summary = classroom.room_summary(frame)
    assert summary.set_index("student").loc["alice", "speed-up"] == pytest.approx(2100 / 1050)
    png = classroom.plot_room(frame, tmp_path / "room.png")
    assert png.stat().st_size > 5000
    with pytest.raises(ValueError, match="is not a bench result file"):
        (tmp_path / "x.json").write_text("[1, 2]")
        classroom.merge_bench([tmp_path / "x.json"])
    with pytest.raises(ValueError, match="one name per file"):
        classroom.merge_bench([a, b], names=["alice"])


def test_bench_submit_and_merge_commands(tmp_path, capsys):
    from fp16lab.__main__ import main

    a = _bench_file(tmp_path / "results.json", "NVIDIA H200", {"article": [2900.0], "fp16_cl_fused": [6000.0]})
    inbox = tmp_path / "inbox"
    assert main(["workshop", "bench-submit", str(a), "--name", "Ana Li", "--inbox", str(inbox)]) == 0
    assert (inbox / "Ana_Li.json").is_file()
    assert main(["workshop", "bench-merge", str(inbox), "--out", str(tmp_path / "room")]) == 0
    out = capsys.readouterr().out
    assert "Ana_Li" in out and "NVIDIA H200" in out
    assert (tmp_path / "room.csv").is_file() and (tmp_path / "room.png").is_file()
    assert main(["workshop", "bench-submit", str(tmp_path / "nope.json"), "--name", "x", "--inbox", str(inbox)]) == 2
    assert "nope.json" in capsys.readouterr().err
