# Thin wrappers around the `course` command (course_tools/cli.py). Without make: `.venv/bin/course <target>`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.course-installed
# Extras installed with the course: `test` always (Triton is a dependency on Linux x86-64; the `triton` extra CI names adds nothing there).
COURSE_EXTRAS ?= test

.PHONY: setup lab test test-fast test-grading release grade grade-load bench gpu-check html robustness chromium e2e e2e-hub hub-env hub-load clean

# Create .venv if missing and install the course into it; re-runs only when pyproject.toml changes.
# COURSE_TORCH installs a particular torch build first (CI: the CPU wheel), e.g. COURSE_TORCH="torch==2.13.0",
# or PyTorch's CPU build on a laptop without a GPU:
#   COURSE_TORCH="torch --index-url https://download.pytorch.org/whl/cpu" make lab
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	@if [ -n "$$COURSE_TORCH" ]; then echo "installing $$COURSE_TORCH"; $(BIN)/python -m pip install --quiet $$COURSE_TORCH; fi
	$(BIN)/python -m pip install --quiet -e ".[$(COURSE_EXTRAS)]"
	@touch $(STAMP)

# The course installed, then the learner's side (`course setup`): the exercises generated from solutions/
# and your own copy of each in exercises/ (an existing copy is never written over), nbgrader's settings.
setup: $(STAMP)
	$(BIN)/course setup

# LAB_ARGS go to `course lab`, e.g. LAB_ARGS="--no-browser --port 8890".
lab: setup
	$(BIN)/course lab $(LAB_ARGS)

# The grader confines learners' kernels with bubblewrap (Debian's package bubblewrap); without it
# the tests and `make grade` use the grader's hand-written fallback and the report says so. A system
# package is installed only when asked: COURSE_INSTALL_BWRAP=1 (.ci/run sets it), or a yes at the
# prompt (only when make runs in a terminal); apt-get as root, else through sudo.
BWRAP_APT = (apt-get install -y bubblewrap || (apt-get update && apt-get install -y bubblewrap) || \
	sudo apt-get install -y bubblewrap) >/dev/null 2>&1
BWRAP_INSTALL = command -v bwrap >/dev/null 2>&1 || { \
	if [ "$$COURSE_INSTALL_BWRAP" = 1 ]; then $(BWRAP_APT); \
	elif [ -t 0 ] && [ -t 1 ]; then \
		printf "bubblewrap (Debian's package) confines learners' code when grading; install it with apt-get? [y/N] "; \
		read answer; case "$$answer" in [yY]*) $(BWRAP_APT);; esac; \
	fi; \
	command -v bwrap >/dev/null 2>&1 || echo "bubblewrap is not installed: grading uses the hand-written fallback" \
		"(COURSE_INSTALL_BWRAP=1 installs it with apt-get)"; }

test: setup
	@$(BWRAP_INSTALL)
	$(BIN)/course test

# The library tests alone (no notebooks, no grading pipeline, no browser): under a minute.
test-fast: setup
	$(BIN)/course test --fast

release: setup
	$(BIN)/course release

grade: setup
	@$(BWRAP_INSTALL)
	$(BIN)/course grade

# The grading tests alone (all seven assignments; part of `make test` too). Limit them to some
# assignments while writing one: COURSE_GRADING_ASSIGNMENTS=ex1_manual_attention make test-grading
test-grading: setup
	@$(BWRAP_INSTALL)
	$(BIN)/course test tests/test_grading_pipeline.py tests/test_grading_attacks.py tests/test_grading_units.py

# The load test is test code (tests/grading_support/grade_load.py), not part of the installed package.
grade-load: setup
	PYTHONPATH=tests $(BIN)/python -m grading_support.grade_load

bench: setup
	$(BIN)/course bench

# On a CUDA GPU machine, before a class: every chapter and source exercise on the GPU, the kernels' GPU
# tests, chapter 12's three grids, in under ten minutes; one summary in build/gpu-check/<gpu>/summary.md
# (benchmarks/gpu_check.py). Refuses, doing nothing, without CUDA. No `setup` first: a GPU server may
# have no internet; it uses .venv when there is one, else $(PYTHON). GPU_CHECK_ARGS="--jobs 6 --out DIR".
GPU_PYTHON ?= $(if $(wildcard $(BIN)/python),$(BIN)/python,$(PYTHON))
gpu-check:
	$(GPU_PYTHON) benchmarks/gpu_check.py $(GPU_CHECK_ARGS)

# The book: every chapter executed, written to html/ (index.html: the contents). HTML_CHAPTERS picks some.
html: setup
	$(BIN)/course html $(HTML_CHAPTERS)

# Every chapter for COURSE_SEED=0, 1, 2, one at a time; the spread of each checked quantity in
# build/robustness/spread.md. ROBUSTNESS_ARGS="--busy" keeps another process busy on one core meanwhile.
robustness: setup
	$(BIN)/course robustness $(ROBUSTNESS_ARGS)

# Debian's Chromium: Playwright cannot download a browser here, it drives /usr/bin/chromium.
chromium:
	@test -x /usr/bin/chromium || (apt-get update && apt-get install -y chromium) \
		|| (sudo apt-get update && sudo apt-get install -y chromium)

e2e: setup chromium
	$(BIN)/python -m pip install --quiet -e ".[$(COURSE_EXTRAS),e2e]"
	$(BIN)/course e2e

# The class on a real JupyterHub (deploy/): accounts, PAM log-in, two learners and an instructor in
# Chromium, run as root. The shared environment is built by deploy/install.sh in HUB_PREFIX (outside
# any home folder, so that every account can run it), with the CPU wheel of torch unless COURSE_TORCH
# says otherwise; screenshots in .e2e/hub-screenshots/. hub-load: 30 learners through the REST API.
HUB_PREFIX ?= /opt/transformers-course-hubtest
HUB_TORCH  ?= torch==2.13.0

hub-env:
	COURSE_TORCH="$${COURSE_TORCH:-$(HUB_TORCH)}" bash deploy/install.sh $(HUB_PREFIX)

e2e-hub: setup hub-env chromium
	$(BIN)/python -m pip install --quiet -e ".[$(COURSE_EXTRAS),e2e]"
	COURSE_PREFIX=$(HUB_PREFIX) timeout --kill-after=60 2400 \
		$(BIN)/python -m pytest -p no:cacheprovider tests/e2e_hub -s

hub-load: setup hub-env
	COURSE_PREFIX=$(HUB_PREFIX) timeout --kill-after=60 2400 $(BIN)/python tests/e2e_hub/load_check.py

clean:
	@if [ -x $(BIN)/course ]; then $(BIN)/course clean; fi
