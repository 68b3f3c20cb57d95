"""Course tooling: what authors and instructors run on the lessons, not what learners import.

Learners import the library (``fp16lab.train``, ``fp16lab.align``, ...). This subpackage holds
the tools around the lessons, each reachable from ``python -m fp16lab <command>``:

- ``env``: the environment report (``doctor``)
- ``command``: one place that turns a refused command-line input into exit status 2
- ``paths``: the repository root and the course folders, found in one place
- ``outputs``: run a lesson in place and stamp where its outputs came from (``outputs``)
- ``student``: student copies of the lessons (solutions replaced by prompts)
- ``verify``: prove each exercise both ways in a real kernel
- ``agenda``: measured lesson times and the instructor guide's agenda table; ``plans``: the one-
  and two-day workshop plans built on them
- ``handout``: the student hand-out without solutions; ``classroom``: one lab per student on a
  server, and the room's bench results merged; ``wheelhouse``: offline wheels at the pinned versions;
  ``posttest``: the end-of-day questions, graded; ``slides``: a talk track per lesson (nbconvert slides)
- ``gpushare``: whether a GPU is shared, said before a lesson measures speed (and in the doctor)
- ``workshop``: the command line over ``student``, ``verify`` and ``agenda`` (``workshop``)
- ``workspace``: the learner's own copies of the lessons under ``notebooks/work/`` (``workspace``)
- ``lab``: start JupyterLab for a learner on that workspace (``lab``); ``labserver`` is the
  server-side part that keeps the reference lessons read-only
- ``prose``: checks on lesson markdown (measured-looking numbers, "next lesson" links)
- ``card``: the "On your card" box of lesson 00 (what of the series' chip-dependent advice
  applies to this machine, from ``fp16lab.hardware`` facts)
- ``readme``: README tables generated from committed results (targets of the newer lessons)
- ``portability``: every lesson under each hardware profile on a GPU, recorded in
  ``results/portability.json`` (``portability``)
- ``translations``: the Chinese edition, ``notebooks/zh/``, made from the English lessons and one
  translation file per lesson, and kept in step by test (``translations``)

Nothing here imports torch at import time.
"""

__all__ = [
    "agenda",
    "plans",
    "handout",
    "classroom",
    "wheelhouse",
    "posttest",
    "slides",
    "gpushare",
    "card",
    "command",
    "env",
    "lab",
    "labserver",
    "outputs",
    "paths",
    "portability",
    "prose",
    "readme",
    "student",
    "translations",
    "verify",
    "workshop",
    "workspace",
]
