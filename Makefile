# fleetgrade: the two commands of the README are `make demo` and `make test`.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
OUT ?= demo-output

.PHONY: install system-deps demo test lint bench bench-quick clean

$(STAMP): pyproject.toml setup.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	touch $(STAMP)

install: $(STAMP) system-deps

# System tools the sandboxes and browser tests use (bubblewrap, jq, chromium); root only.
system-deps:
	@$(PY) -m pipeline.system_deps

demo: install
	rm -rf $(OUT)
	$(VENV)/bin/fleetgrade run --input examples/fleet --output $(OUT) --trace-config examples/trace-grader.config.yaml --graders-dir examples/graders
	$(VENV)/bin/fleetgrade sql $(OUT) "SELECT workflow, grader_id, count(*) AS runs, round(avg(value), 3) AS mean, sum(CASE WHEN status = 'fail' THEN 1 ELSE 0 END) AS failed FROM grader_results WHERE source = 'builtin' GROUP BY ALL ORDER BY ALL LIMIT 40"
	$(VENV)/bin/fleetgrade report $(OUT)
	@echo "Parquet tables written under $(OUT)/"

lint: install
	$(VENV)/bin/ruff check schemas graders transforms pipeline tests bench
	$(VENV)/bin/mypy

test: install lint
	$(VENV)/bin/pytest -q -p no:cacheprovider

bench: install
	$(PY) -m bench

bench-quick: install
	$(PY) -m bench --quick

clean:
	rm -rf $(VENV) $(OUT) build *.egg-info
