# Two commands for learners (see README): `make lab` and `make test`. `make site`: the course as a website.
# Both create .venv and install fp16lab with its dev tools on first use; later runs reuse it.
# No GPU? `make lab CPU=1` installs the CPU-only PyTorch build (much smaller) on first use.
SHELL  := /bin/bash
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.fp16lab-installed
PORT   ?= 8888
CPU    ?=
FULL   ?=
LAB_LANG ?=
TORCH_CPU_INDEX = https://download.pytorch.org/whl/cpu
# The tested versions (constraints.txt: pip's -c). `make setup LOCK=` installs the newest instead.
LOCK   ?= constraints.txt
PIN     = $(if $(LOCK),-c $(LOCK))

# What set-up says, in the lab's language (`make lab LAB_LANG=zh`: Chinese; pip's own lines stay pip's).
ifeq ($(LAB_LANG),zh)
MSG_ENV       = ==> [1/3] 在 $(VENV) 中建立 Python 环境
MSG_CPU       = ==> [2/3] 从 $(TORCH_CPU_INDEX) 安装仅 CPU 的 PyTorch（CPU=1）
MSG_CPU_FAIL1 = ==> [2/3] 无法连接 $(TORCH_CPU_INDEX)（pip 的输出：$(VENV)/cpu-index.log）：
MSG_CPU_FAIL2 = $(EMPTY)          改由下一步安装 PyPI 默认的 PyTorch（它的 Linux wheel 自带 CUDA 库；
MSG_CPU_FAIL3 = $(EMPTY)          使用镜像请设置 PIP_INDEX_URL，或自己先装好 torch，再运行 make）
MSG_TORCH     = ==> [2/3] PyTorch 在下一步安装（没有 GPU？请在这里停下，改为运行：make setup CPU=1 LAB_LANG=zh）
MSG_PIP       = ==> [3/3] 安装 fp16lab、PyTorch、JupyterLab 和测试工具：pip install -e '.[dev]'$(if $(LOCK),，使用 $(LOCK) 中经过测试的版本)（第一次需要几分钟和几 GB 空间；pip 会逐个列出安装的包）
MSG_DONE      = ==> 安装完成：$(BIN)/python；下一步：make lab LAB_LANG=zh（或 make doctor LAB_LANG=zh）
else
MSG_ENV       = ==> [1/3] Python environment in $(VENV)
MSG_CPU       = ==> [2/3] CPU-only PyTorch from $(TORCH_CPU_INDEX) (CPU=1)
MSG_CPU_FAIL1 = ==> [2/3] $(TORCH_CPU_INDEX) cannot be reached (pip's messages: $(VENV)/cpu-index.log):
MSG_CPU_FAIL2 = $(EMPTY)          PyPI's default PyTorch comes with the next step instead (its Linux wheel brings the CUDA
MSG_CPU_FAIL3 = $(EMPTY)          libraries; on a mirror set PIP_INDEX_URL, or install torch yourself, then run make again)
MSG_TORCH     = ==> [2/3] PyTorch comes with the next step (no GPU? stop here and run: make setup CPU=1)
MSG_PIP       = ==> [3/3] fp16lab, PyTorch, JupyterLab and the test tools: pip install -e '.[dev]'$(if $(LOCK), at the tested versions of $(LOCK)) (a few minutes and a few GB the first time; pip names each package as it goes)
MSG_DONE      = ==> set-up done: $(BIN)/python; next: make lab (or make doctor)
endif
EMPTY =

.PHONY: setup browser lab workspace test check types doctor lint site clean

setup: $(STAMP)

$(STAMP): pyproject.toml $(LOCK)
	@echo "$(MSG_ENV)"
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	@if [ -n "$(CPU)" ]; then \
	  echo "$(MSG_CPU)"; \
	  $(BIN)/python -m pip install --disable-pip-version-check --progress-bar on --retries 1 --timeout 15 \
	    $(PIN) torch torchvision --index-url $(TORCH_CPU_INDEX) 2>$(VENV)/cpu-index.log \
	  || { echo "$(MSG_CPU_FAIL1)"; echo "$(MSG_CPU_FAIL2)"; echo "$(MSG_CPU_FAIL3)"; }; \
	else echo "$(MSG_TORCH)"; fi
	@echo "$(MSG_PIP)"
	$(BIN)/python -m pip install --disable-pip-version-check --progress-bar on $(PIN) -e '.[dev]'
	@touch $(STAMP)
	@echo "$(MSG_DONE)"

# Your own copies of the lessons in notebooks/work/ (never overwritten), then JupyterLab on
# notebooks/ at the start page, localhost only, with a token; the lessons outside work/ are
# read-only there. `python -m fp16lab lab --help` for its options. `make lab LAB_LANG=zh`: the
# Chinese edition (notebooks/zh/, copies in notebooks/work/zh/, JupyterLab's interface in Chinese).
lab: setup
	$(BIN)/python -m fp16lab lab --port=$(PORT)$(if $(LAB_LANG), --lang=$(LAB_LANG))

workspace: setup
	$(BIN)/python -m fp16lab workspace$(if $(LAB_LANG), --lang=$(LAB_LANG))

# tests/test_browser.py drives Debian's chromium with Playwright (never a downloaded browser).
# As root with apt-get (CI), install it when missing; elsewhere the test skips with the reason.
browser:
	@if command -v chromium >/dev/null 2>&1 || [ -n "$$FP16LAB_CHROMIUM" ]; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	  echo "==> installing chromium for the browser test (apt-get)"; \
	  ( apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium ) \
	  || { echo "chromium could not be installed: tests/test_browser.py will be skipped (an error when CI is set)"; [ -z "$$CI" ] || exit 1; }; \
	else echo "note: no chromium here, so tests/test_browser.py will be skipped (notebooks/INSTRUCTORS.md)"; fi

# The whole gate (CI runs this): lint, types, unit tests and every notebook. The type check runs
# beside the tests (it waits on one core while they run); either failing fails `make test`.
# The lessons run in quick mode on every machine, a GPU one too (a few minutes: it checks the
# install). `make test FULL=1` runs them in full mode on your GPU instead: the "measured on your
# hardware" check, one lesson at a time with a line each (20+ minutes on an H200).
test: setup browser lint
	@echo "==> type check (mypy) in the background; its report follows the tests"
	@if [ -n "$(FULL)" ]; then echo "==> FULL=1: every lesson in full mode on this machine's GPU (long), then the unit tests"; \
	else echo "==> running the tests: unit tests, every lesson in quick mode (nbval), JupyterLab in a browser (the student copies: python -m fp16lab workshop verify)"; fi
	@$(BIN)/python -m mypy > $(VENV)/mypy.log 2>&1 & types=$$!; \
	if [ -n "$(FULL)" ]; then \
	  FP16LAB_QUICK=0 $(BIN)/python -m pytest notebooks -v --nbval-cell-timeout=1800 -o console_output_style=classic \
	    | awk -F'::' '/^notebooks\// && $$1 != last { print "==> " $$1; last = $$1; fflush() } \
	                  /FAILED|ERROR|[0-9]+ (passed|failed)/ { print; fflush() }'; full=$${PIPESTATUS[0]}; \
	  $(BIN)/python -m pytest tests; tests=$$?; [ $$full -eq 0 ] || tests=1; \
	else FP16LAB_QUICK=$${FP16LAB_QUICK:-1} $(BIN)/python -m pytest -m "not student_copies"; tests=$$?; fi; \
	wait $$types; typed=$$?; echo "==> mypy:"; cat $(VENV)/mypy.log; \
	if [ $$tests -ne 0 ] || [ $$typed -ne 0 ]; then echo "==> make test failed (pytest exit $$tests, mypy exit $$typed)"; exit 1; fi

# The fast lane for day-to-day work: lint, types and the unit tests, no notebooks.
check: setup lint types
	$(BIN)/python -m pytest tests

doctor: setup
	$(if $(LAB_LANG),FP16LAB_LANG=$(LAB_LANG) )$(BIN)/python -m fp16lab doctor

lint: setup
	$(BIN)/ruff check fp16lab tests site

types: setup
	$(BIN)/python -m mypy

# The course as a static website, both editions (English, Chinese), from the committed notebooks and their
# stored outputs (never run): Sphinx + MyST-NB + sphinx-book-theme, configured in site/, at the versions of
# pyproject.toml's `site` extra, in their own small venv (no PyTorch). Every build starts from nothing, and a
# warning fails it. Open build/site/index.html; tests/test_site.py checks the links and drives it in a browser.
SITE_VENV ?= .venv-site
SITE_OUT  ?= build/site
SITE_STAMP = $(SITE_VENV)/.fp16lab-site-installed

$(SITE_STAMP): pyproject.toml
	@echo "==> site tools in $(SITE_VENV): pyproject.toml's site extra (Sphinx, MyST-NB, sphinx-book-theme, jieba)"
	@test -x $(SITE_VENV)/bin/python || $(PYTHON) -m venv $(SITE_VENV)
	@$(SITE_VENV)/bin/python -c 'import tomllib; \
	  print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["site"]))' \
	  > $(SITE_VENV)/requirements.txt \
	  || { echo "make site needs Python >= 3.11 (Sphinx 8.2 does): PYTHON=python3.11 make site"; rm -rf $(SITE_VENV); exit 1; }
	$(SITE_VENV)/bin/python -m pip install -qq --disable-pip-version-check -r $(SITE_VENV)/requirements.txt
	@touch $(SITE_STAMP)

site: $(SITE_STAMP)
	@rm -rf $(SITE_OUT) build/.site-doctrees
	@for edition in en zh; do \
	  echo "==> site: the $$edition edition"; \
	  $(SITE_VENV)/bin/python -m sphinx -b html -E -a -q -W --keep-going -t $$edition -c site \
	    -d build/.site-doctrees/$$edition . $(SITE_OUT)/$$edition || exit 1; \
	done
	@cp site/index.html $(SITE_OUT)/index.html
	@echo "==> site: $(SITE_OUT)/index.html (English) and $(SITE_OUT)/zh/notebooks/zh/README.html (中文)"

clean:
	rm -rf $(VENV) .venv-cpu $(SITE_VENV) build/site build/.site-doctrees  # .venv-cpu: CI's CPU-only lane (.ci/cpu-lane.sh)
