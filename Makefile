VENV   ?= .venv
PY     := $(VENV)/bin/python
# Each part of deploy/bootstrap.sh runs when its stamp is missing or older than one of its inputs.
STAMP       := $(VENV)/.installed
TESTS_STAMP := $(VENV)/.installed-tests
PYTEST_ARGS ?=
# pytest-xdist workers of `make test`, each with a test bed of its own (0: one process, no xdist).
# On 2 cores two workers fill the time one leaves idle while its tests wait on processes.
PYTEST_WORKERS ?= 2
# What `make test` runs (e.g. `make test TESTS=tests/unit`), and where its coverage data goes.
TESTS ?= tests
COVERAGE_DIR := var/coverage
# Python keeps the bytecode of our modules in __pycache__ even where the environment asks it not to
# (PYTHONDONTWRITEBYTECODE): the suite starts hundreds of Python processes (replicas, executors, the
# CLI, Spark's Python workers), and without the cache each compiles our ~170 modules again, which
# doubles the import time of a control plane (measured: 1.3-1.6 s without, 0.6-0.7 s with).
unexport PYTHONDONTWRITEBYTECODE

.PHONY: install test-install bench-install run run-cluster test lint proto api-protos unit integration clean fuzz dev-certs

# What running needs: Java (apt, only when `java` is missing: the one step that needs root), the
# .venv with the pinned dependencies and this project. Neither Node nor npm.
$(STAMP): pyproject.toml requirements.lock deploy/bootstrap.sh
	@VENV=$(VENV) ./deploy/bootstrap.sh
	@touch $@

install: $(STAMP)
	@command -v java >/dev/null || VENV=$(VENV) ./deploy/bootstrap.sh

# What the tests and lint need on top: Node and npm (apt, only when missing) and the pinned Node
# packages (protos/: buf; tests/node: the Node client test).
$(TESTS_STAMP): protos/package-lock.json tests/node/package-lock.json deploy/bootstrap.sh | $(STAMP)
	@VENV=$(VENV) ./deploy/bootstrap.sh --tests
	@touch $@

test-install: install $(TESTS_STAMP)
	@command -v node >/dev/null && command -v npm >/dev/null || VENV=$(VENV) ./deploy/bootstrap.sh --tests

# What the benchmarks' plots need on top (bench/README.md), pinned like the rest.
bench-install: install
	$(PY) -m pip install -q -c requirements.lock -e '.[dev,embedded,bench]'

# The all-in-one stack on embedded defaults: local broker, Spark Connect, control plane, executor.
run: install
	$(VENV)/bin/sluiceway dev

# The same stack with three control-plane replicas (gRPC on 8083-8085, REST on 8086-8088, metrics on
# 8089-8091) forming one cluster.
run-cluster: install
	$(VENV)/bin/sluiceway dev --replicas 3

# Lint, then the whole suite: unit, integration (real broker + Spark Connect) and fault tests, under
# coverage (settings in pyproject.toml; the control planes and executors the tests start are measured
# too). Prints the total and per-package line coverage and exits with pytest's status; afterwards
# `$(PY) -m coverage report` (or `html`) shows every file. The 30 slowest tests are listed, to keep the
# suite within its time.
test: test-install lint
	@rm -rf $(COVERAGE_DIR) && mkdir -p $(COVERAGE_DIR)
	@export COVERAGE_FILE=$(CURDIR)/$(COVERAGE_DIR)/.coverage; \
	$(PY) -m coverage run -m pytest -q -p no:cacheprovider --durations=30 \
		-n $(PYTEST_WORKERS) --no-loadscope-reorder $(PYTEST_ARGS) $(TESTS); status=$$?; \
	$(PY) -m coverage combine -q && total=$$($(PY) -m coverage report --format=total) && { \
		echo "line coverage: total $$total%"; \
		for pkg in sluiceway sluiceway_server sluiceway_executor; do \
			pct="$$($(PY) -m coverage report --include="*/$$pkg/*" --format=total)%" || pct="no data"; \
			echo "  $$pkg $$pct"; \
		done; } || echo "line coverage: no data"; \
	exit $$status

# Ruff without its cache: the cache keeps a file's import sorting from when a module it imports did
# not exist yet, and a fresh clone (CI) would then disagree.
lint: test-install
	$(VENV)/bin/ruff check --no-cache client server executor tests protos deploy bench
	$(VENV)/bin/ruff format --no-cache --check client server executor tests protos deploy bench
	$(VENV)/bin/mypy client server executor tests protos bench deploy
	$(PY) client/generate_sync.py --check
	$(PY) client/generate_settings_doc.py --check
	@$(PY) protos/bundle.py
	cd var/api-protos && $(CURDIR)/protos/node_modules/.bin/buf lint --config $(CURDIR)/protos/buf.yaml --path sluiceway

proto: install
	$(PY) protos/generate.py

# The API contract for clients in other languages: protos/ plus the google/api and google/rpc
# protos it needs, from the pinned googleapis-common-protos, in var/api-protos/ (git-ignored).
api-protos: install
	$(PY) protos/bundle.py

# Development certificates in var/dev-certs/ (git-ignored): a CA, a replica certificate for
# localhost and this host, and client certificates CN=admin, operator, viewer, executor and replica.
# Made afresh on every run; for trying TLS and mutual TLS, not for production.
dev-certs: install
	$(PY) -m sluiceway_server.dev_certificates var/dev-certs

unit: install
	$(PY) -m pytest -q -p no:cacheprovider tests/unit

# The API fuzzer (tests/integration/test_api_fuzz.py) at length: 10,000 examples on a random seed,
# collecting every distinct failure. SLUICEWAY_FUZZ_EXAMPLES and SLUICEWAY_FUZZ_SEED override both;
# the seed is printed first, the number of examples run at the end.
fuzz: install
	@seed=$${SLUICEWAY_FUZZ_SEED:-$$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}; \
	examples=$${SLUICEWAY_FUZZ_EXAMPLES:-10000}; \
	echo "api fuzz: $$examples examples, seed $$seed (SLUICEWAY_FUZZ_SEED=$$seed repeats the run)"; \
	SLUICEWAY_FUZZ_EXAMPLES=$$examples SLUICEWAY_FUZZ_SEED=$$seed SLUICEWAY_FUZZ_KEEP_GOING=1 \
	$(PY) -m pytest -q -s --tb=short -p no:cacheprovider $(PYTEST_ARGS) tests/integration/test_api_fuzz.py

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache
