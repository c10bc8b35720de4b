# The README's two commands: `make run` (the main job on local Spark) and `make test` (the suite).
# Both create .venv and install on first use (the install puts the rocketsim command in .venv/bin).
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
ROCKETSIM := $(VENV)/bin/rocketsim
STAMP  := $(VENV)/.installed-stamp
SCENARIO ?= conf/scenarios/steady.toml
ARGS ?=
# numba's cache of the compiled send loop: the same directory as spark-submit.sh's and the tests'.
export NUMBA_CACHE_DIR ?= $(CURDIR)/build/numba-cache

.PHONY: run test lint bench bench-core bench-send check-java conformance clean compare report

$(STAMP): pyproject.toml constraints.txt
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@echo "installing rocketsim and its pinned dependencies into $(VENV) (first run only; log: $(VENV)/install.log)"
	@$(PY) -m pip install --upgrade pip > $(VENV)/install.log 2>&1 || { cat $(VENV)/install.log; exit 1; }
	@$(PY) -m pip install -c constraints.txt -e '.[dev,notebooks]' >> $(VENV)/install.log 2>&1 || { cat $(VENV)/install.log; exit 1; }
	@touch $(STAMP)

# numba's on-disk cache of the compiled engine, filled once (a minute or two) rather than by every Spark
# worker or test process that would otherwise compile it at the same time; filled again when a core
# source changed (rocketsim/engine/numba_cache.py: entries are stamped with the hash of every core source;
# engine_* are the directories of the path-keyed cache before it).
WARM := $(NUMBA_CACHE_DIR)/.warm-stamp
CORE_SOURCES := $(shell find rocketsim -name '*.py' -not -path 'rocketsim/warehouse/*' -not -path 'rocketsim/present/*' \
	-not -path 'rocketsim/spark/*' -not -path 'rocketsim/command/*' -not -path 'rocketsim/bench/*')
$(WARM): $(STAMP) $(CORE_SOURCES)
	@rm -rf $(NUMBA_CACHE_DIR)/engine_*
	@$(PY) -m rocketsim.engine.warm
	@mkdir -p $(NUMBA_CACHE_DIR) && touch $(WARM)

check-java:
	@command -v java >/dev/null 2>&1 || { echo "error: Java 17 is required by Spark and 'java' is not on PATH (Debian: apt-get install -y openjdk-17-jre-headless)" >&2; exit 1; }
	@v=$$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1); \
	 if [ -z "$$v" ] || [ "$$v" -lt 17 ]; then echo "error: Spark 4 needs Java 17 or newer, found: $$(java -version 2>&1 | head -1)" >&2; exit 1; fi

# The whole suite (the compiled engine where it applies), then the engine suites again on the readable
# reference engine alone; each on TEST_PROCESSES processes (pytest-xdist): a file's tests stay in one
# process (its fixtures made once), handed out in collection order (tests/conftest.py puts the slow and
# Spark files first). Each process starts its own SparkSession.
ENGINE_TESTS := tests/test_engines.py tests/test_engine_plan.py tests/test_simulate.py tests/test_send.py \
	tests/test_fault.py tests/test_conformance.py tests/test_rejected_inputs.py
TEST_PROCESSES ?= 2
PARALLEL := -n $(TEST_PROCESSES) --dist loadfile --no-loadscope-reorder
test: $(WARM) check-java
	$(PY) -m pytest -q $(PARALLEL)
	ROCKETSIM_ENGINE=reference $(PY) -m pytest -q $(PARALLEL) $(ENGINE_TESTS)

run: $(WARM) check-java
	$(ROCKETSIM) run --scenario $(SCENARIO) $(ARGS)

# One scenario under two variants (fault strategy off / on) in one Spark job -> comparisons tables.
COMPARE_SCENARIO ?= conf/scenarios/brownout.toml
compare: $(WARM) check-java
	$(ROCKETSIM) compare --scenario $(COMPARE_SCENARIO) \
	    --variant fault_off:producers.send_latency_fault_enable=false \
	    --variant fault_on:producers.send_latency_fault_enable=true $(ARGS)

# A self-contained HTML page of the most recent run (or ARGS="--run-id ID") -> reports/<run id>.html
report: $(STAMP)
	$(ROCKETSIM) report $(ARGS)

lint: $(STAMP)
	$(VENV)/bin/ruff check rocketsim jobs tests

conformance: $(STAMP)
	$(PY) -m rocketsim.conformance tests/data/conformance

bench: $(WARM) check-java
	$(PY) -m rocketsim.bench pipeline

bench-core: $(STAMP)
	$(PY) -m rocketsim.bench core

bench-send: $(WARM)
	$(PY) -m rocketsim.bench send

clean:
	rm -rf $(VENV) warehouse spark-warehouse build *.egg-info
