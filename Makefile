# The two commands a newcomer needs are `make demo` and `make test`; both set up what they use.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup demo test soak lint format dev openapi schema clean bench bench-1m bench-sql bench-sql-incremental bench-10m bench-scale-out ui-test

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m assets.demo

test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/pytest -q

# The fuzzing of the sandbox (tests/fuzz) with a large budget (about 10 minutes), then the
# reliability campaigns (tests/reliability) longer: 40 SIGKILLs, 10 storm rounds, 30 rounds of
# the trust campaign, 50 examples per property, and the pure hypothesis properties
# under HYPOTHESIS_PROFILE=deep (2,000 examples instead of 100; tests/conftest.py); the trust
# campaign and the fingerprint properties again with the mapping in slices of 10 rows, so every
# run crosses slice boundaries (PMS_SYNC_SLICE_ROWS).
# The campaigns' figures land in .pms-sync/reliability/*.json (docs/reliability.md).
SOAK_EXAMPLES ?= 1000
SOAK_KILL_POINTS ?= 40
SOAK_STORM_ROUNDS ?= 10
SOAK_PROPERTY_EXAMPLES ?= 50
SOAK_TRUST_ROUNDS ?= 30
soak: $(STAMP)
	PMS_SYNC_FUZZ_EXAMPLES=$(SOAK_EXAMPLES) $(BIN)/pytest -q -p no:cacheprovider tests/fuzz
	PMS_SYNC_KILL_POINTS=$(SOAK_KILL_POINTS) PMS_SYNC_STORM_ROUNDS=$(SOAK_STORM_ROUNDS) \
	PMS_SYNC_PROPERTY_EXAMPLES=$(SOAK_PROPERTY_EXAMPLES) PMS_SYNC_TRUST_ROUNDS=$(SOAK_TRUST_ROUNDS) \
		$(BIN)/pytest -q -s -p no:cacheprovider tests/reliability
	PMS_SYNC_PROPERTY_EXAMPLES=$(SOAK_PROPERTY_EXAMPLES) $(BIN)/pytest -q -p no:cacheprovider \
		tests/mapping/test_fingerprint_properties.py tests/mapping/test_fast_path.py
	PMS_SYNC_SLICE_ROWS=10 $(BIN)/pytest -q -p no:cacheprovider --timeout 1500 \
		tests/reliability/test_trust_campaign.py tests/mapping/test_fingerprint_properties.py
	HYPOTHESIS_PROFILE=deep $(BIN)/pytest -q -p no:cacheprovider tests/test_canonical.py \
		tests/mapping/test_fast_validation.py tests/mapping/test_contract_sql.py

lint: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# The UI (`dg dev`) on the Dagster instance `make demo` writes to (.pms-sync/dagster_home), so
# the demo's runs, plots and check results are there. Ctrl-C stops it within seconds. When
# nothing answers on the configured service's loopback address, the local sandbox runs with it.
DEV_PORT ?= 3000
dev: $(STAMP)
	$(BIN)/python -m assets.dev --port $(DEV_PORT)

# A browser smoke test, not part of `make test`: after `make demo`, headless Chromium (Debian's
# package, installed here if missing) opens a synced asset's page in the UI and checks that its
# metadata and check results are shown.
UI_TEST_PORT ?= 3119
UI_STAMP := $(VENV)/.ui-installed
$(UI_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -e '.[dev,ui]'
	touch $(UI_STAMP)

ui-test: $(UI_STAMP)
	command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
		(apt-get update -qq && apt-get install -y -qq chromium chromium-driver)
	$(BIN)/python -m assets.demo
	UI_TEST_PORT=$(UI_TEST_PORT) $(BIN)/pytest -q -p no:cacheprovider tests/ui

openapi: $(STAMP)
	$(BIN)/python -m connector.contract.openapi docs/openapi.json

schema: $(STAMP)
	$(BIN)/python -m connector.mapping.schema mappings/schema.json
	$(BIN)/python -m connector.webhooks.schema mappings/webhooks.schema.json

# Benchmarks (bench/, BENCHMARKS.md): 10k and 100k reservations, about 15 minutes on 2 cores.
BENCH_STAMP := $(VENV)/.bench-installed
$(BENCH_STAMP): $(STAMP)
	$(BIN)/pip install --quiet -e '.[dev,bench]'
	touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(BIN)/python -m bench all

# The 1M size: mapping, diff against the full snapshot (seeded, not pushed), no-change and
# 1 %-changed runs, and the DuckDB-only floor interleaved with pms-sync (bench/floor.py).
# BENCH_RUNS=3 for medians.
bench-1m: $(BENCH_STAMP)
	$(BIN)/python -m bench map,diff,noop,change,floor --size 1000000 --runs $${BENCH_RUNS:-1} --out bench/results-1m.json

# SQL inputs (issue 40): the 1M export in the local PostgreSQL and MariaDB (bench/sql_data.py)
# against the same from CSV: first run without HTTP, nightly plan, 1 % changed, as ratios.
bench-sql: $(BENCH_STAMP)
	$(BIN)/python -m bench sql --size 1000000 --runs $${BENCH_RUNS:-3} --out bench/results-sql-1m.json

# The incremental read alone (issue 40): 1 % changed read since the cursor against --full-read.
bench-sql-incremental: $(BENCH_STAMP)
	$(BIN)/python -m bench sql_incremental --size 1000000 --runs $${BENCH_RUNS:-3} --out bench/results-sql-incremental-1m.json

# Bounded memory (issue 39): 1M, 3M and 10M in one run: the first run without HTTP (seeded),
# the nightly plan with nothing changed, 1 % changed, and the DuckDB-only floor interleaved.
# The exports (about 2.4 GB of CSV at 10M) go to bench/data/ or $$BENCH_DATA.
BENCH_10M_SIZES ?= 1000000 3000000 10000000
bench-10m: $(BENCH_STAMP)
	$(BIN)/python -m bench first,diff,change,floor $(foreach size,$(BENCH_10M_SIZES),--size $(size)) --runs $${BENCH_RUNS:-1} --out bench/results-10m.json

# Scale-out (issue 17): 8 accounts x 10k reservations on a PostgreSQL snapshot (127.0.0.1:5432,
# database test; BENCH_POSTGRES_URL), as Dagster runs (queued coordinator, daemon), one after
# another and 4 at once, each followed by a no-change pass: about 20 minutes on 2 cores
# (10 with `python -m bench.scale_out --first-sync-only`; `--runner cli` for pms-sync processes).
bench-scale-out: $(BENCH_STAMP)
	$(BIN)/python -m bench.scale_out

clean:
	rm -rf $(VENV) .pms-sync .pytest_cache .ruff_cache
