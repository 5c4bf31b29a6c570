PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

demo: $(STAMP)
	DEBUG=1 $(PY) manage.py migrate --noinput
	DEBUG=1 $(PY) manage.py config init
	DEBUG=1 $(PY) manage.py demo

test: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	$(PY) -m pytest $(PYTEST_ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports

bench: $(STAMP)
	$(PY) benchmarks/import_pools.py
	$(PY) benchmarks/sync_cluster.py
	$(PY) benchmarks/pages.py
	$(PY) benchmarks/charts.py
	$(PY) benchmarks/quotas_page.py

clean:
	rm -rf $(VENV) .data .pytest_cache .ruff_cache
