"""Fixtures of the Dagster tests: a real sandbox, a real DuckDB snapshot, real mapping files."""

import sys
from pathlib import Path

import pytest

# The Dagster code location is loaded from the checkout, never installed: put its root first.
ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from connector.sandbox.testing import SandboxHandle  # noqa: E402
from pms_sync.resources import (  # noqa: E402
    IO_MANAGER_KEY,
    ServiceResource,
    SnapshotResource,
    SourcesResource,
    SyncChecksResource,
)
from pms_sync.storage import MappedRecordsIOManager  # noqa: E402


@pytest.fixture
def resources(clean_sandbox: SandboxHandle, tmp_path: Path) -> dict[str, object]:
    """Resources of one test: the session's sandbox emptied, a fresh snapshot and IO folder."""
    return {
        "service": ServiceResource(base_url=clean_sandbox.base_url, token="demo-token"),
        "snapshot": SnapshotResource(path=str(tmp_path / "snapshot.duckdb"), lock_timeout=10),
        "sources": SourcesResource(),
        "sync_checks": SyncChecksResource(),
        IO_MANAGER_KEY: MappedRecordsIOManager(base_dir=str(tmp_path / "io")),
    }
