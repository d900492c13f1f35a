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

.PHONY: install test knee sweep lint bench clean pg-start pg-stop doctor

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[dev,postgres,gp,bench]'
	@touch $(STAMP)

install: $(STAMP)

# The tests run against real SQLite files and a real PostgreSQL server started here (127.0.0.1 only).
test: $(STAMP)
	@url=$$(bash scripts/pg.sh start) && trap 'bash scripts/pg.sh stop' EXIT && \
	  SWEEP_TEST_PG_URL=$$url $(PY) -m pytest -q $(ARGS)

knee: $(STAMP)
	$(VENV)/bin/sweep knee --profile $(PROFILE) --db $(DB) --driver $(DRIVER) $(ARGS)

# Overnight: the same study, resumable (`make sweep PROFILE=... STUDY=name` again after an interruption).
sweep: $(STAMP)
	$(VENV)/bin/sweep sweep --profile $(PROFILE) --db $(DB) --driver $(DRIVER) \
	  $(if $(STUDY),--study $(STUDY) --resume,) $(ARGS)

doctor: $(STAMP)
	$(VENV)/bin/sweep doctor --profile $(PROFILE) --db $(DB)

lint: $(STAMP)
	$(VENV)/bin/ruff check sweep launchers tests bench tools
	$(VENV)/bin/mypy sweep launchers bench

bench: $(STAMP)
	$(PY) -m bench $(ARGS)

pg-start:
	@bash scripts/pg.sh start
pg-stop:
	@bash scripts/pg.sh stop

clean:
	bash scripts/pg.sh stop
	rm -rf .pg $(VENV) build *.egg-info .pytest_cache .ruff_cache .mypy_cache reports results.db results.db-wal results.db-shm
