"""Fixtures of the snapshot and plan tests: a fresh DuckDB file per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from connector.snapshot import Snapshot, SnapshotStore


@pytest.fixture
def snapshot_path(tmp_path: Path) -> Path:
    return tmp_path / "state" / "snapshot.duckdb"


@pytest.fixture
def snapshot(snapshot_path: Path) -> Iterator[SnapshotStore]:
    with Snapshot.open(snapshot_path) as store:
        yield store
