# sweep: every target bootstraps what it needs. `make knee PROFILE=interactive` and `make test` on a fresh clone.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PROFILE ?= interactive
DB ?= results.db
DRIVER ?= auto
ARGS ?=
STAMP := $(VENV)/.installed

.PHONY: install test test-unit test-slow test-faults chaos knee sweep lint bench clean pg-start pg-stop doctor serve dashboard profile-schema

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,postgres,gp,bench,dashboard,mlflow,export]'
	@touch $(STAMP)

install: $(STAMP)

# The tests run against real SQLite files and a real PostgreSQL server started here (127.0.0.1 only).
# `make test` leaves out the fault matrix (tests/faults: real sweep processes killed at every phase, ~8 min on
# 2 cores) and the end-to-end tests marked slow (whole studies through real sweep and server processes) so that it
# stays under 15 minutes; `make test-faults` and `make test-slow` run them, and .ci/run runs all three.
test: $(STAMP)
	@bash scripts/browser.sh
	@url=$$(bash scripts/pg.sh start) && trap 'bash scripts/pg.sh stop' EXIT && \
	  SWEEP_TEST_PG_URL=$$url $(PY) -m pytest -q --durations=15 --ignore=tests/faults -m "not slow" $(ARGS)

# The fast part of `make test`: the tests that run no whole study (not marked integration; README: Tests).
test-unit: $(STAMP)
	@url=$$(bash scripts/pg.sh start) && trap 'bash scripts/pg.sh stop' EXIT && \
	  SWEEP_TEST_PG_URL=$$url $(PY) -m pytest -q --durations=10 --ignore=tests/faults -m "not slow and not integration" $(ARGS)

test-slow: $(STAMP)
	@bash scripts/browser.sh
	@url=$$(bash scripts/pg.sh start) && trap 'bash scripts/pg.sh stop' EXIT && \
	  SWEEP_TEST_PG_URL=$$url $(PY) -m pytest -q --durations=15 --ignore=tests/faults -m slow $(ARGS)

test-faults: $(STAMP)
	@url=$$(bash scripts/pg.sh start) && trap 'bash scripts/pg.sh stop' EXIT && \
	  SWEEP_TEST_PG_URL=$$url $(PY) -m pytest -q --durations=10 tests/faults $(ARGS)

# The chaos night (not in CI; 20-30 min): two supervised workers on one study, a fault every 30-90 s (seeded),
# then the table of docs/chaos.md. Mounts a small tmpfs for the disk-full fault when run as root. SEED=n, ARGS=--help.
SEED ?= 23
chaos: $(STAMP)
	$(PY) tools/chaos.py --seed $(SEED) $(ARGS)

knee: $(STAMP)
	$(VENV)/bin/sweep knee --profile $(PROFILE) --db $(DB) --driver $(DRIVER) $(ARGS)

# Overnight: the same study, resumable (`make sweep PROFILE=... STUDY=name` again after an interruption).
sweep: $(STAMP)
	$(VENV)/bin/sweep sweep --profile $(PROFILE) --db $(DB) --driver $(DRIVER) \
	  $(if $(STUDY),--study $(STUDY) --resume,) $(ARGS)

# The live page of a study (default: the newest in DB) on 127.0.0.1:8765; STUDY=name picks one.
serve: $(STAMP)
	$(VENV)/bin/sweep serve --db $(DB) $(if $(STUDY),--study $(STUDY),) $(ARGS)

# Optuna's dashboard over the same database (a path is a SQLite file), on 127.0.0.1:8080.
DB_URL = $(if $(findstring ://,$(DB)),$(DB),sqlite:///$(DB))
dashboard: $(STAMP)
	$(VENV)/bin/optuna-dashboard --host 127.0.0.1 --port $(or $(PORT),8080) $(DB_URL)

# docs/profile.md from the profile models (a test checks it is current).
profile-schema: $(STAMP)
	$(VENV)/bin/sweep profile-schema --out docs/profile.md

doctor: $(STAMP)
	$(VENV)/bin/sweep doctor --profile $(PROFILE) --db $(DB)

# The same checks run as pre-commit hooks (.pre-commit-config.yaml). tests/ is a package (tests.<layer>.test_x),
# so its two conftest.py (tests/ and tests/faults/) are two modules of one mypy run.
LINT_DIRS := sweep sglang_sim tests bench tools
# lint-imports: the house's layers (pyproject.toml [tool.importlinter]); an upward import fails here.
lint: $(STAMP)
	$(VENV)/bin/ruff check $(LINT_DIRS)
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/mypy $(LINT_DIRS)

bench: $(STAMP)
	$(PY) -m bench $(ARGS)

pg-start:
	@bash scripts/pg.sh start
pg-stop:
	@bash scripts/pg.sh stop

clean:
	bash scripts/pg.sh stop
	rm -rf .pg $(VENV) build *.egg-info .pytest_cache .ruff_cache .mypy_cache reports results.db results.db-wal results.db-shm
