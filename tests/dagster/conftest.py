"""Fixtures of the Dagster tests: a real sandbox, a real DuckDB snapshot, real mapping files."""

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# The Dagster code location is loaded from the checkout, never installed: put its root first.
ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from assets.resources import (  # noqa: E402
    ServiceResource,
    SnapshotResource,
    SourcesResource,
    SyncChecksResource,
)
from assets.storage import MappedRecordsIOManager  # noqa: E402
from connector.sandbox.testing import (  # noqa: E402
    SandboxHandle,
    multi_account_config,
    running_sandbox,
)


@pytest.fixture(scope="session")
def service_sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SandboxHandle]:
    """One sandbox for the module: accounts demo (demo-token) and hotel-a (hotel-a-token)."""
    with running_sandbox(tmp_path_factory.mktemp("sandbox"), multi_account_config()) as handle:
        yield handle


@pytest.fixture
def sandbox_state(service_sandbox: SandboxHandle) -> SandboxHandle:
    service_sandbox.reset()
    return service_sandbox


@pytest.fixture
def resources(sandbox_state: SandboxHandle, tmp_path: Path) -> dict[str, object]:
    """Resources of one test: the sandbox, a fresh snapshot and a fresh IO folder."""
    return {
        "service": ServiceResource(base_url=sandbox_state.base_url, token="demo-token"),
        "snapshot": SnapshotResource(path=str(tmp_path / "snapshot.duckdb"), lock_timeout=10),
        "sources": SourcesResource(),
        "sync_checks": SyncChecksResource(),
        "io_manager": MappedRecordsIOManager(base_dir=str(tmp_path / "io")),
    }
