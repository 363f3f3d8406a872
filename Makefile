# fleetgrade: the two commands of the README are `make demo` and `make test`.
# PYTHON: the interpreter for .venv; empty means found by tools/venv.sh (python3, python3.11–3.13,
# pyenv's versions: the first that pyproject.toml's requires-python accepts). .venv is rebuilt when
# its interpreter is not the chosen one, and reinstalled when pyproject.toml or setup.py change.
PYTHON ?=
VENV ?= .venv
PY := $(VENV)/bin/python
OUT ?= demo-output

.PHONY: install venv system-deps demo screenshot test lint bench bench-quick clean

venv:
	@PYTHON='$(PYTHON)' VENV='$(VENV)' sh tools/venv.sh

install: venv system-deps

# System tools the sandboxes and browser tests use (bubblewrap, jq, chromium); root only.
system-deps: venv
	@$(PY) -m tools.system_deps

demo: install
	rm -rf $(OUT)
	$(VENV)/bin/fleetgrade run --input examples/fleet --output $(OUT) --trace-config examples/trace-grader.config.yaml --graders-dir examples/graders
	$(VENV)/bin/fleetgrade sql $(OUT) "SELECT workflow, grader_id, count(value) AS graded, round(avg(value), 3) AS mean, count(*) FILTER (WHERE status = 'fail') AS failed FROM grader_results WHERE source = 'builtin' GROUP BY ALL HAVING count(value) > 0 ORDER BY ALL LIMIT 40"
	$(VENV)/bin/fleetgrade report $(OUT)
	@echo "Parquet tables written under $(OUT)/; open $(OUT)/report.html. For the README's tour: . $(VENV)/bin/activate"

# The README's picture of the demo report, and the digest of the HTML it shows (tests/test_screenshot.py).
screenshot: demo
	$(PY) -m tools.screenshot $(OUT)/report.html docs/img/report.png

lint: install
	$(VENV)/bin/ruff check schemas graders transforms pipeline tests bench tools
	$(VENV)/bin/mypy

test: install lint
	$(VENV)/bin/pytest -q -p no:cacheprovider

bench: install
	$(PY) -m bench

bench-quick: install
	$(PY) -m bench --quick

clean:
	rm -rf $(VENV) $(OUT) build *.egg-info
