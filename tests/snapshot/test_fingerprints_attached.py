"""A DuckDB snapshot's stored fingerprints are read by the mapping engine's own connection:
attached read-only, read, detached before any mapping SQL runs."""

from __future__ import annotations

from pathlib import Path

import duckdb
import pytest

from connector.contract import Entity
from connector.snapshot import Snapshot, acknowledgement_table, fingerprint_reader_of
from tests.snapshot.test_source_fingerprints import CONNECTION, MAPPING, _ack, _mapped


@pytest.fixture
def snapshot_file(tmp_path: Path) -> Path:
    file = tmp_path / "snapshot.duckdb"
    with Snapshot.open(file) as snapshot:
        snapshot.record_acknowledgements(
            acknowledgement_table([_ack("R1", "h1"), _ack("R2", "h2")])
        )
        snapshot.record_fingerprints(
            CONNECTION, Entity.RESERVATION, MAPPING, _mapped(("R1", 11, "h1"), ("R2", 22, "h2"))
        )
    return file


def test_the_engine_reads_the_same_rows_a_read_only_connection_reads(snapshot_file: Path) -> None:
    with (
        fingerprint_reader_of(snapshot_file, CONNECTION) as reader,
        duckdb.connect(":memory:") as engine,
    ):
        read = reader(Entity.RESERVATION, MAPPING).to_pandas()
        attached = reader.read_attached(engine, Entity.RESERVATION, MAPPING)
        assert attached is not None
        copied = attached.to_pandas()

    assert read.equals(copied)
    assert sorted(read["record_id"]) == sorted(copied["record_id"]) == ["R1", "R2"]
    assert dict(zip(copied["record_id"], copied["fingerprint"], strict=True)) == {
        "R1": 11,
        "R2": 22,
    }


def test_the_snapshot_is_detached_once_read(snapshot_file: Path) -> None:
    with (
        fingerprint_reader_of(snapshot_file, CONNECTION) as reader,
        duckdb.connect(":memory:") as engine,
    ):
        assert reader.read_attached(engine, Entity.RESERVATION, MAPPING) is not None
        attached = {
            name
            for (name,) in engine.execute("SELECT database_name FROM duckdb_databases()").fetchall()
        }
        assert "pms_sync_snapshot" not in attached
        with pytest.raises(duckdb.Error):
            engine.execute("SELECT count(*) FROM pms_sync_snapshot.acknowledged").fetchall()


def test_a_file_open_for_writing_is_not_attached(snapshot_file: Path) -> None:
    # The run's own writer (or another process) holds the file: nothing is read, and the
    # reader's own read-only connection finds nothing either, so every record is mapped.
    with (
        Snapshot.open(snapshot_file),
        fingerprint_reader_of(snapshot_file, CONNECTION) as reader,
        duckdb.connect(":memory:") as engine,
    ):
        assert reader.read_attached(engine, Entity.RESERVATION, MAPPING) is None
        assert reader(Entity.RESERVATION, MAPPING) is None
        databases = engine.execute("SELECT database_name FROM duckdb_databases()").fetchall()
        assert ("pms_sync_snapshot",) not in databases
