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
# Delta backend of `make run`: auto (delta-spark when `make setup` cached Delta's JARs, else
# delta-rs), delta-rs or delta-spark. Recursive (=): evaluated after setup ran.
LAKE_BACKEND ?= auto
DELTA_JARS = $(if $(filter delta-rs,$(LAKE_BACKEND)),,$(shell $(PY) -m snap_spark.runtime.maven_jars jars delta 2>/dev/null))
# Spark's Kafka connector cached by `make setup`, and what a Kafka job gives spark-submit:
# --jars '$(STREAM_JARS)' (Delta's JARs unless LAKE_BACKEND=delta-rs, and Kafka's). `make
# stream` reads a landing folder: it gets DELTA_JARS only, as snap-spark submit would.
KAFKA_JARS = $(shell $(PY) -m snap_spark.runtime.maven_jars jars kafka 2>/dev/null)
STREAM_JARS = $(shell $(PY) -m snap_spark.runtime.maven_jars jars $(if $(filter delta-rs,$(LAKE_BACKEND)),,delta) kafka 2>/dev/null)

.PHONY: setup native jvm-archive spark-path test-fast test-lanes delta-jars kafka-jars kafka-broker chromium test run run-nostr stream print-stream-jars print-driver-java-options tasks audit notebook connect-server check-sample lint bench bench-cold bench-cluster cluster-demo check-java clean

setup: $(STAMP) native delta-jars kafka-jars jvm-archive spark-path

# Earlier versions put a start-up file into .venv's site-packages that made every Python
# process of .venv import snap_spark; snap-spark's own processes now fix their paths
# themselves (snap_spark/runtime/spark_path.py), and setup takes the old file away.
spark-path: $(STAMP)
	@$(PY) -c 'import pathlib, sysconfig; pathlib.Path(sysconfig.get_paths()["purelib"], "snap_spark_paths.pth").unlink(missing_ok=True)'

# The native checking core (snap_spark._native, Rust): built by maturin from native/ into
# snap_spark/ when its sources change. Without cargo it says so in one line and setup goes
# on: snap-spark then checks with its Python core (the reference; see docs/speed.md,
# "Two checking cores").
NATIVE_SO := snap_spark/_native.abi3.so
NATIVE_SRC := $(wildcard native/src/*.rs native/csrc/*.c) native/build.rs native/Cargo.toml native/Cargo.lock native/pyproject.toml
native: $(NATIVE_SO)
$(NATIVE_SO): $(NATIVE_SRC) | $(STAMP)
	@$(PY) native/build.py

# Delta Lake's JARs for the delta-spark backend, resolved once by Spark into .venv/delta-jars
# (instant when cached). Without network it says so in one line and setup goes on: runs
# then use delta-rs, and the delta-spark tests fail until a later `make setup` fetches them.
delta-jars: $(STAMP)
	@$(PY) -m snap_spark.runtime.maven_jars fetch delta || true

# The driver JVM's class-data-sharing archive (snap_spark.runtime.jvm_archive): Spark's classes
# parsed and verified once, mapped by every later driver JVM (a cold spark-submit of 200 lines
# 16 s -> 9.5 s on 2 cores). Built by one training run (the batch job, then the stream job,
# 40-60 s) when Java, Spark or the training changed; silent when current. Without it jobs
# run as before.
jvm-archive: $(STAMP)
	@$(PY) -m snap_spark.runtime.jvm_archive build || true

# Spark's Kafka connector (spark-sql-kafka-0-10 of the installed PySpark and its
# dependencies) for Kafka sources, resolved once into .venv/kafka-jars; offline alike.
kafka-jars: $(STAMP)
	@$(PY) -m snap_spark.runtime.maven_jars fetch kafka || true

# The Kafka broker the tests run (Apache Kafka's own JARs), resolved once into
# .venv/kafka-broker; only the tests use it (tests/kafka.py), never `make run`.
kafka-broker: $(STAMP)
	@$(PY) -m tests.kafka fetch || true

# .venv holds exactly the versions of uv.lock (the `dev` extra, which takes in `nostr`,
# `audit` and `s3`) and the checkout, editable. uv comes first from PyPI, at the version the
# lock itself names; `--inexact` leaves what `make notebook` added. After a change to the
# ranges in pyproject.toml: `.venv/bin/uv lock`, then commit uv.lock.
UV_LOCKED = $(shell sed -n '/^name = "uv"$$/{n;s/^version = "\(.*\)"$$/\1/p;}' uv.lock)
# `--compile-bytecode`: Python's compiled files for every installed package, written once
# here. Where PYTHONDONTWRITEBYTECODE is set (many containers, this project's machines) no
# process writes them later, and each Spark Python process (the driver, the workers' daemon)
# compiled PySpark and the rest from source: `make run` took 11.3-11.9 s against 8.3-8.6 s.
UV_SYNC = $(VENV)/bin/uv sync --frozen --inexact --extra dev --compile-bytecode
$(STAMP): pyproject.toml uv.lock
	@$(MAKE) --no-print-directory check-java
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "snap-spark needs Python >= 3.11, found " + sys.version.split()[0])'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(VENV)/bin/uv --version 2>/dev/null | grep -qx 'uv $(UV_LOCKED)' || \
		$(PY) -m pip install --quiet --disable-pip-version-check 'uv==$(UV_LOCKED)'
	$(UV_SYNC) --quiet
	@PYTHONDONTWRITEBYTECODE= $(PY) -m compileall -q -j 0 snap_spark jobs >/dev/null
	@rm -f $(VENV)/.installed-*
	@touch $@
	@echo "setup: .venv ready ($$($(PY) --version), $$($(PY) -c 'import pyspark; print("pyspark", pyspark.__version__)'))"

check-java:
	@command -v java >/dev/null 2>&1 || { echo "setup: Spark needs Java 17, but 'java' is not on PATH (Debian/Ubuntu: apt-get install openjdk-17-jre-headless)"; exit 1; }
	@java -version 2>&1 | head -1 | grep -Eq '"(17|21)[."]' || { echo "setup: Spark 4 needs Java 17 or 21; found: $$(java -version 2>&1 | head -1)"; exit 1; }

# Headless Chromium for the audit report's screenshot test (tests/operate/test_audit.py):
# Debian's package, installed when absent (as root, or through sudo).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "test setup: installing Debian's chromium (the audit report's screenshot test)"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); export DEBIAN_FRONTEND=noninteractive; \
	  $$SUDO apt-get install -y -qq chromium >/dev/null 2>&1 || { $$SUDO apt-get update -qq >/dev/null && \
	  $$SUDO apt-get install -y -qq chromium >/dev/null; } || \
	  echo "test setup: could not install chromium: the screenshot test will fail"; }

# The suite on TEST_WORKERS pytest-xdist workers (each with its own SparkSession, temp
# folders and free ports), one test file per worker at a time (--dist loadfile: a file's
# module fixtures, e.g. its landed lake, are built once). Three workers on two cores: many
# tests wait on a job process, a relay, a broker or a trigger, and a third worker fills
# those waits (the machine was 99 % busy throughout; 12:03 on two workers, 11:31 and 11:49
# on three, one quiet 2-core machine, 2026-11-29). Every JVM of the suite (the sessions,
# spark-submit jobs, the Kafka broker, the cluster) runs with the C1 compiler only: short
# JVMs then spend far less CPU compiling, which the workers sharing two cores need.
TEST_WORKERS ?= 3
# KEEP_PYC: where PYTHONDONTWRITEBYTECODE is set, every pytest process (the three workers,
# the lane's own) rewrote and compiled the test modules from source, about 5 s of CPU each
# (a collection of the whole suite: 9.4-10.7 s against 4.8 s once pytest keeps its
# rewritten files, 2026-12-02), and every job or Spark worker that imports a test helper
# compiled it again. The test targets let Python keep its compiled files (__pycache__,
# ignored by git).
KEEP_PYC := PYTHONDONTWRITEBYTECODE=
test: setup kafka-broker chromium
	$(KEEP_PYC) JAVA_TOOL_OPTIONS='-XX:TieredStopAtLevel=1' $(PY) -m pytest -q -p no:cacheprovider \
		--durations=25 -n $(TEST_WORKERS) --dist loadfile $(LANES:%=--ignore=%)
	@$(MAKE) --no-print-directory test-lanes

# The fast lane while working: every test that starts no other process (no SparkSession,
# relay, Kafka broker, S3 server or browser: markers given from the fixtures a test uses,
# see conftest.py) and is not marked slow (the protocol core, the native core against it,
# the CLI, the lake's files, the audit's pieces: about 1,240 tests in about a minute on
# two workers). `make test` remains the gate.
FAST := not slow and not spark and not relay and not kafka and not s3 and not browser
FAST_WORKERS ?= 2
test-fast: setup
	$(KEEP_PYC) $(PY) -m pytest -q -p no:cacheprovider -n $(FAST_WORKERS) -m '$(FAST)'

# The lane: tests of the suite once more in a pytest of their own, on two workers
# (tests/lanes.py), down the paths the main run mostly does not take: the checking and
# job-exactness tests on the Python core (the reference and the fallback where the native
# core is not built) with every two-way step forced into Spark stages
# (SNAP_SPARK_NATIVE=0 and SNAP_SPARK_DRIVER_LIMITS=spark; tests/integration/test_python_core.py
# names the tests and why both switches are flipped together). `make test` runs it after
# its parallel part: inside it, the lane made the whole as long or longer (13:09 on three
# workers with it inside, against 11:31 + 0:56 after it on the same machine, 2026-11-29),
# and its output reads more plainly after.
LANES := tests/integration/test_python_core.py
test-lanes: setup
	$(KEEP_PYC) SNAP_SPARK_LANE_WORKERS=2 $(PY) -m pytest -q -p no:cacheprovider $(LANES)

$(SAMPLE): | setup
	@mkdir -p $(dir $(SAMPLE))
	$(VENV)/bin/snap-spark sample --agents $(AGENTS) --messages $(MESSAGES) --seed $(SEED) --out $(SAMPLE)

# The driver's Java options of the jobs below: quieter logging, the short-job JVM flags
# (C1 only, the parallel collector) that snap_spark.runtime.jvm_archive.DRIVER_JVM_FLAGS names and
# explains, and the class archive `make setup` built (snap_spark.runtime.jvm_archive; a unit test
# keeps these equal to what snap-spark submit gives). Recursive (=): read after setup ran.
# A cluster's driver keeps the JVM's own compiler and collector (docs/settings.md, "Driver
# JVM flags").
DRIVER_JAVA_OPTIONS = -Dlog4j2.configurationFile=conf/log4j2.properties $(shell $(PY) -m snap_spark.runtime.jvm_archive flags --master '$(MASTER)')

# The main job on Spark local[*]: delta-spark with the cached Delta JARs (spark-submit's
# --jars: its driver JVM starts before Python, so only that puts them on its classpath),
# delta-rs without them. Nothing is resolved over the network here.
run: setup $(SAMPLE)
	@if [ -n "$(DELTA_JARS)" ]; then echo "run: Delta backend delta-spark (Delta JARs cached by make setup)"; \
	else echo "run: Delta backend delta-rs ($(if $(filter delta-rs,$(LAKE_BACKEND)),LAKE_BACKEND=delta-rs,no Delta JARs cached: make setup fetches them))"; fi
	$(VENV)/bin/spark-submit --master '$(MASTER)' \
		--driver-java-options '$(DRIVER_JAVA_OPTIONS)' \
		--conf spark.ui.showConsoleProgress=false \
		--conf spark.snap.lake.backend=$(LAKE_BACKEND) \
		$(if $(DELTA_JARS),--jars '$(DELTA_JARS)') \
		jobs/verify_messages.py --input $(SAMPLE) --lake $(LAKE)

# The stream job over a landing folder, available-now (a catch-up run; drop more files into
# $(LANDING) and run it again: only they are read). The sample is linked into the folder.
LANDING ?= data/landing
STREAM_LAKE ?= data/stream-lake
CHECKPOINT ?= data/checkpoints/stream
TRIGGER ?= available-now
stream: setup $(SAMPLE)
	@mkdir -p $(LANDING)
	@test -e $(LANDING)/$(notdir $(SAMPLE)) || ln $(SAMPLE) $(LANDING)/$(notdir $(SAMPLE)) 2>/dev/null || cp $(SAMPLE) $(LANDING)/
	$(VENV)/bin/spark-submit --master '$(MASTER)' \
		--driver-java-options '$(DRIVER_JAVA_OPTIONS)' \
		--conf spark.ui.showConsoleProgress=false \
		--conf spark.snap.lake.backend=$(LAKE_BACKEND) \
		$(if $(DELTA_JARS),--jars '$(DELTA_JARS)') \
		jobs/stream_verify.py --landing $(LANDING) --lake $(STREAM_LAKE) \
		--checkpoint $(CHECKPOINT) --trigger $(TRIGGER) --max-files-per-trigger 1

# The JARs a Kafka stream needs on spark-submit's --jars (Delta's and Kafka's, cached).
print-stream-jars:
	@echo '$(STREAM_JARS)'

print-driver-java-options:
	@echo '$(DRIVER_JAVA_OPTIONS)'

# task_events and tasks rebuilt from the messages `make run` landed.
tasks: setup
	$(VENV)/bin/spark-submit --master '$(MASTER)' \
		--driver-java-options '$(DRIVER_JAVA_OPTIONS)' \
		--conf spark.ui.showConsoleProgress=false \
		--conf spark.snap.lake.backend=$(LAKE_BACKEND) \
		$(if $(DELTA_JARS),--jars '$(DELTA_JARS)') \
		jobs/rebuild_tasks.py --lake $(LAKE)

# A scheduled audit of the lake `make run` (and `make run-nostr`) wrote: report.html,
# summary.json and the charts under $(AUDIT_OUT). Exit status 3 (a threshold crossed, which
# the sample's planted attacks do) is reported, not treated as a failure of make.
AUDIT_OUT ?= data/audit
AUDIT_ARGS ?= --reverify-sample 0.05
audit: setup
	@$(VENV)/bin/spark-submit --master '$(MASTER)' \
		--driver-java-options '$(DRIVER_JAVA_OPTIONS)' \
		--conf spark.ui.showConsoleProgress=false \
		--conf spark.snap.lake.backend=$(LAKE_BACKEND) \
		$(if $(DELTA_JARS),--jars '$(DELTA_JARS)') \
		jobs/audit.py --lake $(LAKE) --out $(AUDIT_OUT) $(AUDIT_ARGS); status=$$?; \
	if [ $$status = 3 ]; then echo "audit: thresholds crossed (exit 3); open $(abspath $(AUDIT_OUT))/report.html"; \
	elif [ $$status = 0 ]; then echo "audit: clean; open $(abspath $(AUDIT_OUT))/report.html"; \
	else exit $$status; fi

# Nostr: generated agent cards and stored messages published to a local relay, ingested
# live (with a second relay that is down, to show the per-relay report), then the archive of
# the same events (which also holds what the relay refused: forged, expired, superseded).
NOSTR_STEM ?= data/nostr/sample
NOSTR_PORT ?= 7447
NOSTR_SUBMIT = $(VENV)/bin/spark-submit --master '$(MASTER)' \
	--driver-java-options '$(DRIVER_JAVA_OPTIONS)' \
	--conf spark.ui.showConsoleProgress=false --conf spark.snap.lake.backend=$(LAKE_BACKEND) \
	$(if $(DELTA_JARS),--jars '$(DELTA_JARS)') jobs/ingest_nostr.py --lake $(LAKE) \
	--keyring $(NOSTR_STEM).keyring --well-known $(NOSTR_STEM).well-known

run-nostr: setup
	@mkdir -p $(dir $(NOSTR_STEM))
	@test -e $(NOSTR_STEM).events.jsonl || $(VENV)/bin/snap-spark sample --nostr $(NOSTR_STEM)
	@set -e; $(VENV)/bin/snap-spark relay --port $(NOSTR_PORT) > $(dir $(NOSTR_STEM))relay.log 2>&1 & \
	relay=$$!; trap 'kill $$relay 2>/dev/null; wait $$relay 2>/dev/null || true' EXIT; \
	for i in $$(seq 100); do grep -q listening $(dir $(NOSTR_STEM))relay.log && break; sleep 0.1; done; \
	echo "run-nostr: relay ws://127.0.0.1:$(NOSTR_PORT) (pid $$relay); publishing"; \
	$(VENV)/bin/snap-spark publish --relay ws://127.0.0.1:$(NOSTR_PORT) $(NOSTR_STEM).events.jsonl | tail -n 3; \
	echo "run-nostr: live ingestion"; \
	$(NOSTR_SUBMIT) --relay ws://127.0.0.1:$(NOSTR_PORT) --relay ws://127.0.0.1:$$(( $(NOSTR_PORT) + 1 )) --timeout 5; \
	echo "run-nostr: the archive of the same events"; \
	$(NOSTR_SUBMIT) --input $(NOSTR_STEM).events.jsonl

# The notebooks in JupyterLab, reading the lake $(LAKE) (SNAP_SPARK_LAKE); run `make run`
# (and `make run-nostr`) first. JupyterLab is not part of `make setup`: the first `make
# notebook` installs the `notebook` extra of pyproject.toml into .venv. Stop it with Ctrl-C.
# NOTEBOOK_ARGS passes options to it (make notebook NOTEBOOK_ARGS='--no-browser --port 8899').
NOTEBOOKS ?= notebooks
NOTEBOOK_ARGS ?=
notebook: setup
	@test -x $(VENV)/bin/jupyter-lab || { echo "notebook: installing JupyterLab into $(VENV) (once)"; \
		$(UV_SYNC) --quiet --extra notebook; }
	SNAP_SPARK_LAKE='$(abspath $(LAKE))' $(VENV)/bin/jupyter-lab $(NOTEBOOK_ARGS) $(NOTEBOOKS)

# A Spark Connect server on this machine (snap_spark.runtime.connect_server): the installed
# PySpark's server with Delta and snap-spark's functions, on sc://127.0.0.1:$(CONNECT_PORT)
# until Ctrl-C. Notebooks reach it with SPARK_REMOTE=sc://127.0.0.1:$(CONNECT_PORT).
CONNECT_PORT ?= 15002
connect-server: setup
	$(PY) -m snap_spark.runtime.connect_server --port $(CONNECT_PORT) --master '$(MASTER)'

# The same sample through the pure-Python checker (no Spark).
check-sample: setup $(SAMPLE)
	$(VENV)/bin/snap-spark check $(SAMPLE) --summary-only

# ... and uv.lock must be current for pyproject.toml (make setup installs it as it is)
lint: setup
	$(VENV)/bin/ruff check snap_spark jobs tests bench native/build.py conftest.py
	$(VENV)/bin/mypy
	$(VENV)/bin/uv lock --check --quiet

bench: setup
	$(PY) bench/run_bench.py --delta-spark
	$(PY) bench/cold_archive.py

# The batch job as people run it: cold `snap-spark submit` runs over 400,000 and 1,600,000
# lines of a 5,000-agent archive on both backends, warm runs of the same, and the floor
# before and after (bench/results-cold.json; the second half of `make bench`).
bench-cold: setup
	$(PY) bench/cold_archive.py

# The job's rate on a standalone cluster of 1 and of 2 one-core workers, against local[*]
# and the libsecp256k1 floor of the same run (bench/results-cluster.json).
bench-cluster: setup
	$(PY) bench/run_cluster_bench.py

# The batch job on a real Spark standalone cluster: a master and two one-core workers on
# 127.0.0.1 from the installed PySpark, the project shipped to the executors
# (CLUSTER_SHIP=py-files: a zip of snap_spark, dependencies pre-installed; archives: a
# venv-pack'ed environment, built once with pip; both), the same sample on local[*], and
# raw_messages and messages compared row for row. The cluster stops when the demo ends,
# fails or is interrupted; the trap stops what a killed demo left (`... cluster stop`).
CLUSTER_DIR ?= data/cluster-demo
CLUSTER_SHIP ?= py-files
CLUSTER_MESSAGES ?= 3000
cluster-demo: setup
	@trap '$(PY) -m snap_spark.cluster stop --workdir $(CLUSTER_DIR)' EXIT INT TERM; \
	$(PY) -m snap_spark.cluster demo --workdir $(CLUSTER_DIR) --ship $(CLUSTER_SHIP) \
		--messages $(CLUSTER_MESSAGES) --backend $(if $(filter delta-spark,$(LAKE_BACKEND)),delta-spark,delta-rs)

clean:
	rm -rf data bench/out .pytest_cache .mypy_cache .ruff_cache native/target $(NATIVE_SO)
