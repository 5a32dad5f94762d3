# Shortcuts for the commands .ci/run, pyproject.toml and the README state. The full CI run
# (both store passes, the Debian tools and the host CLIs installed first) is `bash .ci/run`.

PYTHON ?= .venv/bin/python
RUFF ?= .venv/bin/ruff
# every benchmark script; bench/_common.py is their shared set-up, not a benchmark
BENCHES := $(filter-out bench/_common.py,$(sort $(wildcard bench/*.py)))

.PHONY: test test-fast lint bench

# the SQLite pass of .ci/run: the whole suite, host and browser tests included
test:
	$(PYTHON) -m pytest -q -n 4

# the suite without the tests marked slow: the real agent hosts (tests/hosts) and the ones
# that drive Chromium
test-fast:
	$(PYTHON) -m pytest -q -n 4 -m "not slow"

# what .ci/run checks before the tests: ruff's lint and format, and mypy
lint:
	$(RUFF) check proctor tests bench
	$(RUFF) format --check proctor tests bench
	$(PYTHON) -m mypy

# each benchmark in turn (they take no arguments; several take minutes, and sandbox.py and
# broker.py need a kernel with Landlock); a failing one does not stop the rest, and the
# target fails at the end if any did
bench:
	@status=0; for script in $(BENCHES); do \
		echo "== $$script"; $(PYTHON) $$script || status=1; \
	done; exit $$status
