VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: install run test lint proto unit integration clean

# Installs Java (apt), the .venv and the pinned dependencies when missing or outdated.
$(STAMP): pyproject.toml requirements.lock deploy/bootstrap.sh
	@./deploy/bootstrap.sh

install: $(STAMP)
	@command -v java >/dev/null || ./deploy/bootstrap.sh

# The all-in-one stack on embedded defaults: local broker, Spark Connect, control plane, executor.
run: install
	$(VENV)/bin/sluiceway dev

# Lint, then the whole suite: unit, integration (real broker + Spark Connect) and fault tests.
test: install lint
	$(PY) -m pytest -q -p no:cacheprovider $(PYTEST_ARGS) tests

lint: install
	$(VENV)/bin/ruff check client server executor tests protos deploy bench
	$(VENV)/bin/ruff format --check client server executor tests protos deploy bench
	$(VENV)/bin/mypy client server executor tests protos bench

proto: install
	$(PY) protos/generate.py

unit: install
	$(PY) -m pytest -q -p no:cacheprovider tests/unit

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache
