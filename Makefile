# snap-spark developer entry points. Everything runs inside .venv in this checkout.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed-$(shell cksum < pyproject.toml | cut -d' ' -f1)
export PYSPARK_PYTHON := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))
export SPARK_LOCAL_IP ?= 127.0.0.1

# `make run` settings (override: make run MESSAGES=20000 LAKE=/tmp/lake)
MESSAGES ?= 100000
AGENTS ?= 20
SEED ?= 7
SAMPLE ?= data/sample/traffic-$(MESSAGES)-$(SEED).jsonl
LAKE ?= data/lake
MASTER ?= local[*]

.PHONY: setup test run check-sample lint bench check-java clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@$(MAKE) --no-print-directory check-java
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "snap-spark needs Python >= 3.11, found " + sys.version.split()[0])'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	@rm -f $(VENV)/.installed-*
	@touch $@
	@echo "setup: .venv ready ($$($(PY) --version), $$($(PY) -c 'import pyspark; print("pyspark", pyspark.__version__)'))"

check-java:
	@command -v java >/dev/null 2>&1 || { echo "setup: Spark needs Java 17, but 'java' is not on PATH (Debian/Ubuntu: apt-get install openjdk-17-jre-headless)"; exit 1; }
	@java -version 2>&1 | head -1 | grep -Eq '"(17|21)[."]' || { echo "setup: Spark 4.0 needs Java 17 or 21; found: $$(java -version 2>&1 | head -1)"; exit 1; }

test: setup
	$(PY) -m pytest -q -p no:cacheprovider

$(SAMPLE): | setup
	@mkdir -p $(dir $(SAMPLE))
	$(VENV)/bin/snap-spark sample --agents $(AGENTS) --messages $(MESSAGES) --seed $(SEED) --out $(SAMPLE)

# The main job on the embedded default: Spark local[*] with the delta-rs backend.
run: setup $(SAMPLE)
	$(VENV)/bin/spark-submit --master '$(MASTER)' \
		--driver-java-options '-Dlog4j2.configurationFile=conf/log4j2.properties' \
		--conf spark.ui.showConsoleProgress=false \
		jobs/verify_messages.py --input $(SAMPLE) --lake $(LAKE)

# The same sample through the pure-Python checker (no Spark).
check-sample: setup $(SAMPLE)
	$(VENV)/bin/snap-spark check $(SAMPLE) --summary-only

lint: setup
	$(VENV)/bin/ruff check snap_spark jobs tests bench
	$(VENV)/bin/mypy

bench: setup
	$(PY) bench/run_bench.py

clean:
	rm -rf data bench/out .pytest_cache .mypy_cache .ruff_cache
