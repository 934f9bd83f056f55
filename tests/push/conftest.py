"""The session's sandbox (tests/conftest.py), reset before and cleared of faults after each test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from connector.sandbox.testing import SandboxHandle


@pytest.fixture
def service(clean_sandbox: SandboxHandle) -> Iterator[SandboxHandle]:
    # Accounts: demo (demo-token), hotel-a (hotel-a-token, group-token), hotel-b (group-token),
    # so tests can refuse a token (401) or an account (403).
    yield clean_sandbox
    clean_sandbox.set_faults()


@pytest.fixture
def snapshot_file(snapshot_location: str | Path) -> str | Path:
    """The run's snapshot on each backend: a DuckDB file, then a PostgreSQL schema (the
    acknowledgements, dead letters, drift and passes the push writes are the backend's)."""
    return snapshot_location
