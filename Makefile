# PYTHON: the interpreter that creates .venv (3.11 or newer), e.g. `make demo PYTHON=python3.12`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: install demo serve test test-real mutate lint docs bench clean

$(PY):
	@command -v $(PYTHON) >/dev/null 2>&1 || { \
	  echo "make: PYTHON=$(PYTHON) is not found. Name a Python 3.11 or newer, e.g. make demo PYTHON=python3.12" >&2; \
	  exit 1; }
	@$(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { \
	  echo "make: this project needs Python 3.11 or newer; PYTHON=$(PYTHON) is $$($(PYTHON) --version 2>&1)." >&2; \
	  echo "make: name a newer one, e.g. make demo PYTHON=python3.12" >&2; \
	  exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet uv || echo "make: uv could not be installed; pip installs the project instead" >&2

# uv installs what pip would (same pyproject.toml, same index) in 9 s where pip took 32 s with its caches warm and
# 53 s cold, on CI's 2 cores; bytecode is written when first imported (`make test` lets it be), not for all 300
# packages up front.
$(STAMP): pyproject.toml | $(PY)
	@# pip, the slow way, where uv could not be installed or could not finish (a network only pip is set up for)
	if [ -x $(VENV)/bin/uv ] && $(VENV)/bin/uv pip install --quiet --python $(PY) -e ".[dev]"; then :; \
	else $(PY) -m pip install --quiet -e ".[dev]"; fi
	touch $(STAMP)

# .venv with everything installed, and the data directory's settings file (DEBUG=1 and a generated
# SECRET_KEY, written once) so that ./manage.py works as the README prints it.
install: $(STAMP)
	$(PY) -m osmo_site.env

# PORT: the demo site's port (default 8000). make passes a SIGTERM on to the demo, which stops everything it started.
demo: install
	$(PY) manage.py migrate --noinput
	$(PY) manage.py config init
	$(PY) manage.py demo --port $(or $(PORT),8000)

# Production-style: migrations, static files, then gunicorn, a Celery worker and beat (manage.py serve) against
# DATABASE_URL and CELERY_BROKER_URL from the environment (docs/operations/index.md).
serve: install
	$(PY) manage.py migrate --noinput
	$(PY) manage.py collectstatic --noinput
	$(PY) manage.py serve --bind $(or $(BIND),127.0.0.1:8000)

# TEST_WORKERS: pytest-xdist workers for `make test` (each with its own test database and Redis database),
# which steal queued tests from each other so that a few long tests do not leave one idle at the end;
# 0 runs the suite in one process.
TEST_WORKERS ?= 2
XDIST := $(if $(filter-out 0,$(TEST_WORKERS)),-n $(TEST_WORKERS) --dist worksteal)
# Bytecode is written even where the environment says not to (CI's does): each worker, each `manage.py` and pytest
# the suite starts would otherwise compile the project again, and pytest would rewrite the asserts of its plugins'
# packages again (about 330 modules of schemathesis, hypothesis, faker, anyio: 2 s of CPU per pytest process).

test: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	$(MKDOCS)
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest $(XDIST) --durations=20 $(PYTEST_ARGS)

# The journey against a real control plane (tests/real/; docs/development/real-cluster.md): outside CI. REAL_KUBECONFIG
# is the kubeconfig of deploy/base's ServiceAccount on it; REALKUBE_DIR and REALKUBE_KIT locate the realkube kit's.
test-real: $(STAMP)
	@test -n "$(REAL_KUBECONFIG)" || { echo "make test-real needs REAL_KUBECONFIG (see docs/development/real-cluster.md)"; exit 2; }
	REAL_KUBECONFIG=$(REAL_KUBECONFIG) $(PY) -m pytest tests/real -s -p no:cacheprovider $(PYTEST_ARGS)

# Mutation testing (docs/development/mutation.md): outside CI, hours on 2 cores. MUTATE names some of the modules of
# tests/mutation/run.py (default: all); a stopped run goes on where it stopped. It edits the source in place one
# mutant at a time: change nothing in the checkout while it runs.
mutate: $(STAMP)
	nice -n 10 $(PY) tests/mutation/run.py $(MUTATE)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports

# The documentation site from docs/ (mkdocs.yml) into .site/ (git-ignored). --strict: a broken link, a missing page
# or an unknown anchor fails the build, and `make test` (so CI) builds it before the suite. Not --quiet: it drops
# the warnings that --strict counts, and the build would pass anyway.
MKDOCS = NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir .site
docs: $(STAMP)
	$(MKDOCS)

bench: $(STAMP)
	$(PY) benchmarks/import_pools.py
	$(PY) benchmarks/sync_cluster.py
	$(PY) benchmarks/sync_memory.py
	$(PY) benchmarks/pages.py
	$(PY) benchmarks/charts.py
	$(PY) benchmarks/fair_share.py
	$(PY) benchmarks/quotas_page.py
	$(PY) benchmarks/admission.py
	$(PY) benchmarks/submit.py
	$(PY) benchmarks/dispatch.py
	$(PY) benchmarks/engines.py
	$(PY) benchmarks/load.py
	$(PY) benchmarks/audit.py

clean:
	rm -rf $(VENV) .data .site .pytest_cache .ruff_cache .hypothesis
