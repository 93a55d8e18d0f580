# Thin wrappers around the `course` command (course_utils/cli.py). Without make: `.venv/bin/course <target>`.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.course-installed
# Extras installed with the course: `test` always; CI adds `triton` (COURSE_EXTRAS=test,triton).
COURSE_EXTRAS ?= test

.PHONY: setup lab test test-grading release grade grade-load bench html e2e clean

# Create .venv if missing and install the course into it; re-runs only when pyproject.toml changes.
# COURSE_TORCH pins a particular torch build first (CI: the CPU wheel), e.g. COURSE_TORCH="torch==2.13.0".
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	@if [ -n "$$COURSE_TORCH" ]; then echo "installing $$COURSE_TORCH"; $(BIN)/python -m pip install --quiet "$$COURSE_TORCH"; fi
	$(BIN)/python -m pip install --quiet -e ".[$(COURSE_EXTRAS)]"
	@touch $(STAMP)

setup: $(STAMP)

lab: setup
	$(BIN)/course lab

test: setup
	$(BIN)/course test

release: setup
	$(BIN)/course release

grade: setup
	$(BIN)/course grade

# The grading tests alone (all seven assignments; part of `make test` too). Limit them to some
# assignments while writing one: COURSE_GRADING_ASSIGNMENTS=ex1_manual_attention make test-grading
test-grading: setup
	$(BIN)/course test tests/test_grading_pipeline.py tests/test_grading_attacks.py tests/test_grading_units.py

grade-load: setup
	$(BIN)/python -m course_utils.grading.load_test

bench: setup
	$(BIN)/course bench

html: setup
	$(BIN)/course html

e2e: setup
	$(BIN)/python -m pip install --quiet -e ".[$(COURSE_EXTRAS),e2e]"
	@# Debian's Chromium: Playwright cannot download a browser here, it drives /usr/bin/chromium.
	@test -x /usr/bin/chromium || (apt-get update && apt-get install -y chromium) \
		|| (sudo apt-get update && sudo apt-get install -y chromium)
	$(BIN)/course e2e

clean:
	@if [ -x $(BIN)/course ]; then $(BIN)/course clean; fi
