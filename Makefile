# snap-spark developer entry points. Everything runs inside .venv in this checkout.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
export PYSPARK_PYTHON := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))
export SPARK_LOCAL_IP ?= 127.0.0.1
export PYTHONHASHSEED := 0

# Sample traffic and lake used by `make run` (override: make run MESSAGES=20000)
MESSAGES ?= 100000
AGENTS ?= 20
SAMPLE := data/sample/traffic.jsonl
LAKE := data/lake

.PHONY: setup test run lint bench check-java clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@$(MAKE) --no-print-directory check-java
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "snap-spark needs Python >= 3.11, found " + sys.version.split()[0])'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	@rm -f $(VENV)/.installed-*
	@touch $@
	@echo "setup: .venv ready ($$($(PY) --version))"

check-java:
	@command -v java >/dev/null 2>&1 || { echo "setup: Java 17 is required by Spark but 'java' is not on PATH (install OpenJDK 17, e.g. apt-get install openjdk-17-jre-headless)"; exit 1; }
	@java -version 2>&1 | head -1 | grep -Eq '"(17|21)[."]' || { echo "setup: Spark 4.0 needs Java 17 or 21; found: $$(java -version 2>&1 | head -1)"; exit 1; }

test: setup
	$(PY) -m pytest -q -p no:cacheprovider

lint: setup
	$(VENV)/bin/ruff check snap_spark udfs schemas jobs tests bench
	$(VENV)/bin/mypy

$(SAMPLE): | setup
	@mkdir -p $(dir $(SAMPLE))
	$(VENV)/bin/snap-spark sample --agents $(AGENTS) --messages $(MESSAGES) --seed 7 --out $(SAMPLE)

run: setup $(SAMPLE)
	$(VENV)/bin/snap-spark check $(SAMPLE) --summary-only

bench: setup
	$(PY) bench/run_bench.py

clean:
	rm -rf data build .pytest_cache .mypy_cache .ruff_cache
