"""Classroom kit on the command line: student copies, the agenda, proofs of the exercises.

From anywhere inside the repository::

    python -m fp16lab workshop write     # (re)generate notebooks/student/ and the agenda
    python -m fp16lab workshop check     # exit 1 when a student copy or the agenda is stale
    python -m fp16lab workshop agenda    # print the agenda table (measured lesson times)
    python -m fp16lab workshop verify    # prove each exercise: None is rejected, the solution passes
    python -m fp16lab workshop time-quick NOTEBOOK  # time a GPU-stamped lesson in quick mode here
    python -m fp16lab workshop lint      # measured-looking numbers in lesson markdown, next-lesson links
    python -m fp16lab workshop agenda --plan one-day --lang zh   # a day plan from the measured times
    python -m fp16lab workshop handout DEST --zip                # the student hand-out, no solutions
    python -m fp16lab workshop classroom DEST --students 12      # one lab per student on a server
    python -m fp16lab workshop wheelhouse DEST --platform windows # wheels for an offline room
    python -m fp16lab workshop bench-merge INBOX                 # the room's bench results: table, plot
    python -m fp16lab workshop slides --out slides               # a talk track per lesson, as slides
    python -m fp16lab workshop posttest --answers 1b,2a,...      # the end-of-day post-test, graded

 The work itself lives in
:mod:`fp16lab.course.student`, :mod:`fp16lab.course.verify` and :mod:`fp16lab.course.agenda`.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path

from fp16lab.course import paths as _paths

__all__ = ["configure", "add_parser"]

HELP = "student copies, the agenda with measured times, proofs of the exercises"


def _lessons(names: Sequence[str]) -> list[Path]:
    return [Path(p) for p in names] or _paths.lessons()


def _write(args: argparse.Namespace) -> int:
    from fp16lab.course.agenda import record_timings, update_agenda
    from fp16lab.course.student import write_student_copies

    for p in write_student_copies(args.notebooks or None, args.out):
        print(f"wrote {p}")
    if not args.notebooks and args.out is None:
        record_timings()
        guide = _paths.instructors_guide()
        if guide.exists() and update_agenda(guide):
            print(f"updated the agenda in {guide}")
        from fp16lab.course.plans import update_plans

        try:
            for g in update_plans():
                print(f"updated the plans in {g}")
        except ValueError as exc:  # a section the plans name was renamed: the rest is written, say what to fix
            print(f"the workshop plans were not updated: {exc}. Update the section names in fp16lab/course/plans.py")
            return 1
    return 0


def _check(args: argparse.Namespace) -> int:
    from fp16lab.course.agenda import agenda_problems
    from fp16lab.course.student import stale_student_copies

    problems = stale_student_copies(args.notebooks or None)
    if not args.notebooks:
        from fp16lab.course.plans import plan_problems

        problems += agenda_problems() + plan_problems()
    for p in problems:
        print(f"STALE {p}")
    return 1 if problems else 0


def _agenda(args: argparse.Namespace) -> int:
    from fp16lab.course.agenda import agenda_table
    from fp16lab.course.plans import plan_table
    from fp16lab.labs.runtime.i18n import check_lang

    lang = check_lang(args.lang, "--lang")
    if args.plan:
        print(plan_table(args.plan, lang=lang))
    else:
        print(agenda_table(lang=lang))
    return 0


def _time_quick(args: argparse.Namespace) -> int:
    from fp16lab.course.agenda import time_quick_mode, update_agenda

    for name, secs in time_quick_mode(args.notebooks or None).items():
        print(f"{name}: {secs:.1f} s in quick mode")
    guide = _paths.instructors_guide()
    if guide.exists() and update_agenda(guide):
        print(f"updated the agenda in {guide}")
    from fp16lab.course.plans import update_plans

    for g in update_plans():
        print(f"updated the plans in {g}")
    return 0


def _verify(args: argparse.Namespace) -> int:
    from fp16lab.course.student import student_path
    from fp16lab.course.verify import verify_student_copy

    failed = 0
    for lesson in _lessons(args.notebooks):
        try:
            for r in verify_student_copy(student_path(lesson), lesson):
                print(f"{lesson.name} exercise {r.number} ({', '.join(r.names)}): rejects None "
                      f"({r.rejects_none}), accepts the solution")
        except AssertionError as exc:
            failed += 1
            print(f"FAILED {exc}")
    return 1 if failed else 0


def _lint(args: argparse.Namespace) -> int:
    from fp16lab.course.prose import lint_lesson

    bad = 0
    for lesson in _lessons(args.notebooks):
        for problem in lint_lesson(lesson):
            bad += 1
            print(f"{lesson.name}: {problem}")
    if bad:
        print(f"{bad} problem(s); mark a cited number with the word 'cited' (e.g. '(cited: NVIDIA datasheet)'), "
              "'(article)' or '<!-- not measured -->' on the same line (CONTRIBUTING.md)")
    return 1 if bad else 0


def _pages(args: argparse.Namespace) -> int:
    from fp16lab.course.readme import write_pages

    changed = write_pages()
    print(f"updated {', '.join(changed)}" if changed else "the generated pages are current")
    return 0


def _handout(args: argparse.Namespace) -> int:
    import shutil

    from fp16lab.course.handout import handout

    files = handout(args.dest)
    print(f"wrote {len(files)} files to {args.dest}: student copies only (no lessons, solutions, tests or "
          "instructor guide); the start pages link the student copies")
    if args.zip:
        archive = shutil.make_archive(str(Path(args.dest)), "zip", root_dir=Path(args.dest).parent,
                                      base_dir=Path(args.dest).name)
        print(f"zipped: {archive}")
    return 0


def _classroom(args: argparse.Namespace) -> int:
    from fp16lab.course.classroom import classroom

    gpus = [g for g in args.gpus.split(",") if g.strip()] if args.gpus else None
    seats = classroom(args.dest, args.students, ip=args.ip, base_port=args.base_port, gpus=gpus, lang=args.lang,
                      solutions=args.solutions, host=args.host)
    print(f"prepared {len(seats)} labs in {args.dest} (ports {seats[0].port}-{seats[-1].port}"
          f"{', GPUs ' + args.gpus if gpus else ''}); start them: {args.dest}/start.sh, stop: {args.dest}/stop.sh; "
          f"URLs with tokens to hand out: {args.dest}/roster.csv")
    return 0


def _bench_submit(args: argparse.Namespace) -> int:
    import re
    import shutil

    from fp16lab.course.classroom import read_bench

    meta, rows = read_bench(args.result)
    name = re.sub(r"[^\w.-]+", "_", args.name.strip()).strip("._")
    if not name:
        raise ValueError(f"--name must contain a letter or digit, got {args.name!r}")
    inbox = Path(args.inbox)
    inbox.mkdir(parents=True, exist_ok=True)
    dest = inbox / f"{name}.json"
    shutil.copyfile(args.result, dest)
    print(f"submitted {len(rows)} rows ({meta.get('real_device') or meta.get('device')}, {meta.get('mode')} mode) "
          f"as {dest}")
    return 0


def _bench_merge(args: argparse.Namespace) -> int:
    from fp16lab.course.classroom import merge_bench, plot_room, room_summary

    files: list[Path] = []
    for item in args.files:
        p = Path(item)
        files += sorted(p.glob("*.json")) if p.is_dir() else [p]
    frame = merge_bench(files)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(out.with_suffix(".csv"), index=False)
    plot_room(frame, out.with_suffix(".png"))
    print(room_summary(frame).to_string(index=False))
    print(f"wrote {out.with_suffix('.csv')} and {out.with_suffix('.png')} (files in quick mode or on a CPU are "
          "listed, not plotted: their images/s is not a GPU speed)")
    return 0


def _wheelhouse(args: argparse.Namespace) -> int:
    from fp16lab.course.wheelhouse import build_wheelhouse, install_commands

    cmds = build_wheelhouse(args.dest, args.platform, python=args.python, constraints=args.constraints,
                            torch_index=args.torch_index, dry_run=args.dry_run)
    if args.dry_run:
        for cmd in cmds:
            print(" ".join(cmd))
        return 0
    print(f"wheelhouse ready: {args.dest}. Students, network off, from the repository root:")
    for line in install_commands(Path(args.dest).name, args.platform):
        print("  " + line)
    return 0


def _posttest(args: argparse.Namespace) -> int:
    from fp16lab.course.posttest import grade, render
    from fp16lab.labs.runtime.i18n import check_lang

    lang = check_lang(args.lang, "--lang")
    if args.answers is None:
        print(render(lang))
        return 0
    right, lines = grade(args.answers, lang)
    print("\n".join(lines))
    return 0


def _slides(args: argparse.Namespace) -> int:
    from fp16lab.course.slides import render_slides
    from fp16lab.labs.runtime.i18n import check_lang

    for path in render_slides(_lessons(args.notebooks), args.out, lang=check_lang(args.lang, "--lang"),
                              reveal_prefix=args.reveal_prefix):
        print(f"wrote {path} (its talk track: {path.name.replace('.slides.html', '.ipynb')})")
    return 0


def configure(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add the workshop subcommands to ``parser`` (used by both command lines)."""
    sub = parser.add_subparsers(dest="workshop_command", required=True, metavar="COMMAND")
    w = sub.add_parser("write", help="write student copies (and, for all lessons, the agenda)")
    w.add_argument("notebooks", nargs="*", type=_paths.notebook_file, help="lessons (default: every notebooks/NN_*.ipynb)")
    w.add_argument("--out", default=None, help="folder for the copies (default notebooks/student)")
    w.set_defaults(func=_write)
    c = sub.add_parser("check", help="exit 1 when a student copy or the agenda is out of date")
    c.add_argument("notebooks", nargs="*", type=_paths.notebook_file, help="lessons (default: every lesson, and the agenda)")
    c.set_defaults(func=_check)
    a = sub.add_parser("agenda", help="print the agenda table from the recorded timings, or a day plan (--plan)")
    a.add_argument("--plan", choices=["one-day", "two-day"], default=None,
                   help="a workshop plan: blocks with talk, measured run and exercise time, sections to skip, GPU needs")
    a.add_argument("--lang", default="en", help="en (default) or zh")
    a.set_defaults(func=_agenda)
    t = sub.add_parser("time-quick", help="run lessons in quick mode here (unsaved) and record their run time")
    t.add_argument("notebooks", nargs="*", type=_paths.notebook_file, help="lessons (default: every notebooks/NN_*.ipynb)")
    t.set_defaults(func=_time_quick)
    v = sub.add_parser("verify", help="run student copies in a kernel: checks reject None, accept the solution")
    v.add_argument("notebooks", nargs="*", type=_paths.notebook_file, help="lessons (default: every notebooks/NN_*.ipynb)")
    v.set_defaults(func=_verify)
    r = sub.add_parser("pages", help="rebuild the generated pages: results/README.md's tables from the results "
                                     "files, notebooks/REUSE.md from the README's reuse guide")
    r.set_defaults(func=_pages)
    lint = sub.add_parser("lint", help="flag measured-looking numbers in lesson markdown and missing next-lesson links")
    lint.add_argument("notebooks", nargs="*", type=_paths.notebook_file, help="lessons (default: every notebooks/NN_*.ipynb)")
    lint.set_defaults(func=_lint)
    h = sub.add_parser("handout", help="the student hand-out: the course without lessons, solutions, tests or the "
                                       "instructor guide; start pages link the student copies")
    h.add_argument("dest", help="a new folder (outside the repository)")
    h.add_argument("--zip", action="store_true", help="also write DEST.zip")
    h.set_defaults(func=_handout)
    room = sub.add_parser("classroom", help="one lab per student on a shared server: folders, tokens, ports, GPUs, "
                                            "start.sh/stop.sh and a roster")
    room.add_argument("dest", help="a new folder for the students' labs")
    room.add_argument("--students", type=int, required=True, help="how many labs")
    room.add_argument("--ip", default="0.0.0.0", help="address the labs bind (default 0.0.0.0: every interface)")
    room.add_argument("--base-port", type=int, default=9000, help="student n gets port BASE+n (default 9000)")
    room.add_argument("--gpus", default=None, metavar="0,1", help="GPU indices handed out round-robin "
                      "(default: every lab sees every GPU)")
    room.add_argument("--lang", default="en", help="en (default) or zh")
    room.add_argument("--solutions", action="store_true", help="give the full lessons too (default: the hand-out)")
    room.add_argument("--host", default=None, help="host name in the roster's URLs (default: this machine's)")
    room.set_defaults(func=_classroom)
    bs = sub.add_parser("bench-submit", help="a student hands in a `python -m fp16lab bench` result file")
    bs.add_argument("result", help="the bench result JSON (default place: results/local/bench_resnet50.json)")
    bs.add_argument("--name", required=True, help="the student's name (the file's name in the inbox)")
    bs.add_argument("--inbox", required=True, help="the folder the instructor collects from (a share, a USB stick)")
    bs.set_defaults(func=_bench_submit)
    bm = sub.add_parser("bench-merge", help="the room's bench results in one table (CSV) and one plot (PNG)")
    bm.add_argument("files", nargs="+", help="result files, or folders of them (the inbox)")
    bm.add_argument("--out", default="room", help="output name without suffix (default: room -> room.csv, room.png)")
    bm.set_defaults(func=_bench_merge)
    wh = sub.add_parser("wheelhouse", help="download every wheel for an offline room, at the tested versions "
                                          "(constraints.txt), for Linux (CUDA or CPU-only), Windows or macOS")
    wh.add_argument("dest", help="folder for the wheels (e.g. wheelhouse, which git ignores)")
    wh.add_argument("--platform", default="current", choices=["linux", "linux-cpu", "windows", "macos", "current"],
                    help="the students' platform (default: this machine's)")
    wh.add_argument("--python", default=None, help="the students' Python, e.g. 3.11 (default: this one's)")
    wh.add_argument("--constraints", default=None, help="pinned versions (default: constraints.txt)")
    wh.add_argument("--torch-index", default=None,
                    help="where torch and torchvision come from, e.g. https://download.pytorch.org/whl/cu126 "
                         "(default: the platform's)")
    wh.add_argument("--dry-run", action="store_true", help="print the pip commands, download nothing")
    wh.set_defaults(func=_wheelhouse)
    sl = sub.add_parser("slides", help="a talk track per lesson, rendered as reveal.js slides by "
                                       "`jupyter nbconvert --to slides`")
    sl.add_argument("notebooks", nargs="*", type=_paths.notebook_file, help="lessons (default: every lesson)")
    sl.add_argument("--out", default="slides", help="output folder (default: slides)")
    sl.add_argument("--lang", default="en", help="en (default) or zh (from the Chinese edition)")
    sl.add_argument("--reveal-prefix", default=None, help="a local reveal.js folder or URL for offline slides")
    sl.set_defaults(func=_slides)
    pt = sub.add_parser("posttest", help="the end-of-day post-test: print the questions, or grade --answers 1b,2a,...")
    pt.add_argument("--answers", default=None, help="a learner's answers, e.g. 1b,2b,3b,4a,5b,6c,7c,8a")
    pt.add_argument("--lang", default="en", help="en (default) or zh")
    pt.set_defaults(func=_posttest)
    return parser


def add_parser(sub: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Register ``workshop`` as a subcommand of ``python -m fp16lab``."""
    p = sub.add_parser("workshop", help=HELP, description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    configure(p)
