#!/usr/bin/env bash
# CI lane 2: the CPU-only build of PyTorch, the one `make setup CPU=1` gives a learner without a GPU.
# Unit tests and every lesson in quick mode, in their own venv (.venv-cpu), beside lane 1's `make test`.
#
# Where it comes from: CI reaches PyPI only, where the Linux x86_64 torch wheels are CUDA builds; the
# CPU-only build this lane needs is torch 2.13.0+cpu, which pip finds on this kind of machine's local
# wheel store (`pip install torch==2.13.0`). Its torchvision: PyPI's torchvision 0.28.0 (the release
# for torch 2.13) is built against the CUDA build, so its C++ operators (nms, roi_align, ...) cannot
# load beside a CPU-only torch, and torchvision's import then fails where it registers fake kernels for
# torchvision::nms/qnms unconditionally. The course uses torchvision's model definitions and
# transforms, never those operators: the lane guards the two registrations (a learner's CPU-only
# install from the PyTorch CPU index gets a matching torchvision and needs no such step).
#
# `bash .ci/cpu-lane.sh setup` only builds the venv (.ci/run does that in the background while lane 1 runs: it
# mostly waits on the disk); `bash .ci/cpu-lane.sh` builds it when missing, then runs the tests.
set -euo pipefail
cd "$(dirname "$0")/.."
V=.venv-cpu
if [ ! -f $V/.ready ]; then
echo "==> CPU-only lane: $V with torch 2.13.0+cpu"
[ -x $V/bin/python ] || python3 -m venv $V
$V/bin/python -m pip install -q --disable-pip-version-check torch==2.13.0
$V/bin/python - <<'PY'
import sys, torch
if torch.version.cuda is not None or torch.__version__ != "2.13.0+cpu":
    sys.exit(f"the CPU-only lane needs torch 2.13.0+cpu, got {torch.__version__} (CUDA {torch.version.cuda})")
print("torch", torch.__version__, "(CPU-only build)")
PY
$V/bin/python -m pip install -q --disable-pip-version-check --no-deps torchvision==0.28.0
$V/bin/python - <<'PY'
import pathlib, sysconfig
p = pathlib.Path(sysconfig.get_paths()["purelib"]) / "torchvision" / "_meta_registrations.py"
s = p.read_text()
for op in ("nms", "qnms"):
    s = s.replace(f'@torch.library.register_fake("torchvision::{op}")',
                  f'@(torch.library.register_fake("torchvision::{op}") if torchvision.extension._has_ops() else (lambda f: f))')
p.write_text(s)
PY
# The tested versions (constraints.txt), less its torch and torchvision pins (this lane's are 2.13.0+cpu and 0.28.0).
grep -Ev '^(torch|torchvision)==' constraints.txt > $V/constraints-cpu.txt
# fp16lab's dependencies (and the dev extra's) first, fp16lab itself below: the setup runs beside lane 1's
# `pip install -e .`, and two editable builds of one source tree at once could trip over each other.
$V/bin/python - > $V/requirements.txt <<'PY'
import tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
print("\n".join(project["dependencies"] + project["optional-dependencies"]["dev"]))
PY
$V/bin/python -m pip install -q --disable-pip-version-check -c $V/constraints-cpu.txt -r $V/requirements.txt
$V/bin/python -c "import torch, torchvision; assert torch.version.cuda is None; print('torchvision', torchvision.__version__, 'imports beside', torch.__version__)"
touch $V/.ready
fi
[ "${1:-}" = setup ] && exit 0
$V/bin/python -m pip install -q --disable-pip-version-check --no-deps -c $V/constraints-cpu.txt -e .
echo "==> CPU-only lane: an offline install (workshop wheelhouse for this platform at the lane's versions, then"
echo "    pip --no-index from it into a fresh venv, with pip's own configuration and find-links switched off),"
echo "    in the background while the tests run (it mostly waits on the disk: the whole lane ~4 minutes shorter)"
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
{ cat $V/constraints-cpu.txt; echo "torch==2.13.0"; echo "torchvision==0.28.0"; } > $W/constraints.txt
offline_install() {
  $V/bin/python -m fp16lab workshop wheelhouse $W/wheelhouse --constraints $W/constraints.txt > $W/download.log 2>&1 \
    || { tail -30 $W/download.log; return 1; }
  python3 -m venv $W/venv
  env -u PIP_FIND_LINKS -u PIP_CONSTRAINT -u PIP_INDEX_URL -u PIP_EXTRA_INDEX_URL PIP_CONFIG_FILE=/dev/null \
    $W/venv/bin/python -m pip install -q --disable-pip-version-check --no-index --find-links $W/wheelhouse -e '.[dev]'
  $W/venv/bin/python -c "import fp16lab, torch, jupyterlab, pandas, nbval; assert torch.version.cuda is None; \
print('offline install from', len(list(__import__('pathlib').Path('$W/wheelhouse').glob('*.whl'))), 'wheels: ok')"
}
offline_install > $W/offline.log 2>&1 &
offline=$!
echo "==> CPU-only lane: unit tests and every lesson in quick mode (as its student copy, exercises proved both ways)"
# Every lesson runs here as its student copy (tests/test_workshop.py, marker student_copies): the lesson top to
# bottom with its solutions, each exercise's check proved both ways; lane 1's `make test` runs the lessons
# themselves with nbval and leaves the student copies to this lane, so each lesson runs once per lane.
# Left to lane 1, as they do not depend on the torch build: the browser, make, website, workspace and
# classroom-server tests, and the signature sweep (argument checks, before any tensor work); so is lesson 10's
# exercise-5 checker fed a dozen learner scripts under torchrun (its student copy here runs the solution's
# torchrun job and the lesson's wrong answers on this build). Keeping to that keeps CI under 25 minutes.
tests=0
FP16LAB_QUICK=1 $V/bin/python -m pytest tests --ignore=tests/test_browser.py --ignore=tests/test_make.py \
  --ignore=tests/test_site.py --ignore=tests/test_signatures.py --ignore=tests/test_answers_l10.py \
  --ignore=tests/test_workspace.py --ignore=tests/test_classroom.py -q || tests=$?
echo "==> CPU-only lane: the offline install"
installed=0
wait $offline || installed=$?
cat $W/offline.log
[ $installed = 0 ] || echo "the offline install failed (exit $installed)"
[ $tests = 0 ] || echo "the CPU-only lane's tests failed (exit $tests)"
[ $tests = 0 ] && [ $installed = 0 ]
