"""Shared fixtures: one real sandbox server for the whole test session."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from hypothesis import settings

from connector.sandbox.testing import SandboxHandle, multi_account_config, running_sandbox
from tests.servers import postgres_schema_url

# Exports written by a test are complete the moment they are closed: a short settle interval
# keeps runs fast. The stability rail's own tests pass their interval explicitly.
os.environ.setdefault("PMS_SYNC_EXPORT_SETTLE_SECONDS", "0.05")
# Every record the mapping engine accepts without the contract model is checked against the
# model and the Python canonical form as well: any mapping a test runs proves the fast path.
os.environ.setdefault("PMS_SYNC_VERIFY_FAST_PATH", "1")

# Hypothesis budgets of the pure properties (no server, no files): `suite` keeps `make test`
# within its minutes and still explores; `HYPOTHESIS_PROFILE=deep` (`make soak`, nightly) searches
# twenty times longer. Both build on the profile Hypothesis loaded (its `ci` one under
# CI=true). Properties that run syncs set their own budgets (PMS_SYNC_*_EXAMPLES).
settings.register_profile("suite", settings(max_examples=100))
settings.register_profile("deep", settings(max_examples=2000))
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "suite"))


@pytest.fixture(scope="session")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SandboxHandle]:
    """A sandbox served over loopback for the session: the demo account (``demo`` /
    ``demo-token`` / ``demo-client``) plus two hotels (see ``multi_account_config``)."""
    with running_sandbox(tmp_path_factory.mktemp("sandbox"), multi_account_config()) as handle:
        yield handle


@pytest.fixture
def clean_sandbox(sandbox: SandboxHandle) -> SandboxHandle:
    """The shared sandbox with no records, no webhook configurations, no stats and no faults."""
    sandbox.reset()
    return sandbox


# -- snapshot backends ----------------------------------------------------------------------


@pytest.fixture
def postgres_snapshot_url() -> Iterator[str]:
    """A ``postgresql://`` snapshot URL of a fresh schema (dropped afterwards) on the server
    at 127.0.0.1:5432. Skips when no server answers, except under CI=true where it fails."""
    with postgres_schema_url("pms_sync_snapshot") as url:
        yield (
            sa.engine.make_url(url)
            .set(drivername="postgresql")
            .render_as_string(hide_password=False)
        )


@pytest.fixture(params=["duckdb", "postgresql"])
def snapshot_location(request: pytest.FixtureRequest, tmp_path: Path) -> str | Path:
    """Where a test's snapshot lives: a fresh DuckDB file, then a fresh PostgreSQL schema."""
    if request.param == "duckdb":
        return tmp_path / "state" / "snapshot.duckdb"
    return str(request.getfixturevalue("postgres_snapshot_url"))


# Modules of half a minute and more, longest first: pytest-xdist (`--dist loadfile
# --no-loadscope-reorder`) hands modules out in collection order, so these start first and the
# many short modules fill both workers to the end. A module missing here only runs later.
LONG_MODULES: tuple[str, ...] = (
    "tests/dagster/test_sync_runs.py",
    "tests/push/test_graceful_stop_deadline.py",
    "tests/push/test_graceful_stop.py",
    "tests/dagster/test_account_partitions.py",
    "tests/reliability/test_trust_campaign.py",
    "tests/dagster/test_component.py",
    "tests/dagster/test_ui_termination.py",
    "tests/safety/test_trust_rules.py",
    "tests/rate/test_rate_limited_sync.py",
    "tests/reliability/test_secret_leaks.py",
    "tests/push/test_ghost_records.py",
    "tests/mapping/test_fingerprint_properties.py",
    "tests/sources/test_incremental_sync.py",
    "tests/reliability/test_kill_campaign.py",
    "tests/mapping/test_read_in_place.py",
    "tests/mapping/test_fast_path.py",
    "tests/rate/test_shared_rate_ledger.py",
    "tests/loop/test_events_write.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {module: i for i, module in enumerate(LONG_MODULES)}
    per_module: dict[str, int] = {}
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        per_module[module] = per_module.get(module, 0) + 1

    def order(item: pytest.Item) -> tuple[int, int]:
        module = item.nodeid.split("::", 1)[0]
        # The rest as xdist would order them: modules of more tests first.
        return rank.get(module, len(rank)), -per_module[module]

    items.sort(key=order)
