"""A fingerprinted run reads its entity's own export where it is instead of loading it
(``connector.mapping.engine``): nothing the run finds changes, a file changed while it is
read is refused, and a file DuckDB cannot read in place is loaded and diagnosed as always."""

from __future__ import annotations

import os
from datetime import date
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pytest

from connector.contract import Entity
from connector.errors import ExportIncompleteError, SourceError
from connector.mapping import load_mapping, map_records
from connector.mapping.engine import prepare
from connector.mapping.fingerprints import FingerprintReader
from connector.records import FINGERPRINT_COLUMNS, DateWindow, MappedRecords
from connector.sources.csv_source import CsvSource
from tests.samples import pinned_hotel


def _stored(batch: MappedRecords) -> pa.Table:
    """What a snapshot would keep after the service acknowledged every record of ``batch``."""
    assert batch.fingerprints is not None
    records = batch.records.loc[:, ["account_id", "record_id", "checkin", "checkout"]]
    kept = batch.fingerprints.dropna(subset=["content_hash"]).merge(
        records.rename(columns={"account_id": "source_account"}),
        on=["source_account", "record_id"],
    )
    frame = kept.loc[:, list(FINGERPRINT_COLUMNS)].astype({"fingerprint": "int64"})
    for column in ("source_account", "record_id", "content_hash"):
        frame[column] = frame[column].astype(str)
    for column in ("checkin", "checkout"):
        frame[column] = pd.to_datetime(frame[column]).dt.date
    return pa.Table.from_pandas(frame, preserve_index=False)


class _Snapshot:
    """A FingerprintReader of what an earlier run left."""

    def __init__(self, first: dict[Entity, MappedRecords]) -> None:
        self.tables = {entity: _stored(batch) for entity, batch in first.items()}

    def __call__(self, entity: Entity, mapping_fingerprint: str) -> pa.Table | None:
        return self.tables.get(entity)


def _first_run(mapping: Path) -> dict[Entity, MappedRecords]:
    nothing: FingerprintReader = lambda entity, fingerprint: None  # noqa: E731
    return map_records(load_mapping(mapping), fingerprints=nothing)


def _loads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    loaded: list[str] = []
    load = CsvSource.load_into

    def counted(self: CsvSource, connection: object, table: str, since: object = None) -> int:
        loaded.append(self.name)
        return load(self, connection, table, since)  # type: ignore[arg-type]

    monkeypatch.setattr(CsvSource, "load_into", counted)
    return loaded


def _maps_as_a_full_run(ours: MappedRecords, full: MappedRecords) -> None:
    """The records a fingerprinted run mapped (carried ones have no source rows) are those a
    full run maps, from the same rows, and its quarantine is the full run's."""
    fresh = ours.records[ours.records["source_rows"] != ""]
    assert 0 < len(fresh) < len(ours.records)
    expected = full.records.merge(fresh[["account_id", "record_id"]])
    assert len(expected) == len(fresh)
    assert set(fresh["content_hash"]) == set(expected["content_hash"])
    assert set(fresh["source_rows"]) == set(expected["source_rows"])
    assert ours.quarantine.equals(full.quarantine)
    assert set(ours.records["record_id"]) == set(full.records["record_id"])


def _synced_hotel(folder: Path) -> tuple[Path, _Snapshot, Path]:
    """The hotel example after a first run the service acknowledged whole: its mapping, what
    the snapshot keeps, and its bookings export."""
    mapping = pinned_hotel(folder)
    return mapping, _Snapshot(_first_run(mapping)), mapping.parent / "data" / "bookings.csv"


def test_a_run_with_nothing_changed_reads_the_export_once_and_loads_none_of_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mapping, snapshot, _ = _synced_hotel(tmp_path / "hotel")

    loaded = _loads(monkeypatch)
    again = map_records(load_mapping(mapping), fingerprints=snapshot)

    # The joined rooms are loaded; the bookings are only read, to be fingerprinted.
    assert "bookings" not in loaded and loaded
    reservations = again[Entity.RESERVATION]
    assert reservations.carried == len(reservations.records) > 0
    assert reservations.fingerprints is not None and not len(reservations.fingerprints)


def test_the_records_a_changed_export_maps_are_those_of_a_run_that_loads_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mapping, snapshot, bookings = _synced_hotel(tmp_path / "hotel")
    frame = pd.read_csv(bookings, dtype=str, keep_default_na=False)
    frame.loc[3, "guest_last_name"] = "Changed"
    frame.loc[7, "arrival"] = "not a date"  # quarantined, naming its row of the file
    frame.to_csv(bookings, index=False)

    loaded = _loads(monkeypatch)
    in_place = map_records(load_mapping(mapping), fingerprints=snapshot)
    assert "bookings" not in loaded
    remapped = map_records(load_mapping(mapping))  # no fingerprints: everything loaded, mapped
    assert "bookings" in loaded

    mapped = in_place[Entity.RESERVATION]
    assert 0 < len(mapped.records) - mapped.carried < len(mapped.records)
    quarantined = mapped.quarantine
    assert len(quarantined) and set(quarantined["rows"]) == {"8"}  # the data row, 1-based
    _maps_as_a_full_run(mapped, remapped[Entity.RESERVATION])


def test_an_export_rewritten_while_the_run_reads_it_is_refused(tmp_path: Path) -> None:
    mapping, snapshot, bookings = _synced_hotel(tmp_path / "hotel")
    bookings.write_text(bookings.read_text().replace("Smith", "Smyth", 1))  # a record to map

    def rewrite_while_mapping(record_ids: object) -> None:
        # Asked for once the split has read the file, before the records to map are read:
        # the PMS writes a new export meanwhile.
        bookings.write_text(bookings.read_text().replace("Smyth", "Smithe", 1))

    with pytest.raises(
        ExportIncompleteError, match=r"bookings\.csv changed while this run was reading"
    ):
        map_records(load_mapping(mapping), fingerprints=snapshot, validated=rewrite_while_mapping)


def test_an_export_duckdb_cannot_read_in_place_is_loaded_and_read_as_always(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mapping, snapshot, bookings = _synced_hotel(tmp_path / "hotel")
    # Mixed line endings: DuckDB's reader refuses the file, the loading path reads it.
    lines = bookings.read_bytes().split(b"\n")
    bookings.write_bytes(b"\r\n".join(lines[:5]) + b"\r\n" + b"\n".join(lines[5:]))
    os.utime(bookings)

    loaded = _loads(monkeypatch)
    again = map_records(load_mapping(mapping), fingerprints=snapshot)
    assert loaded.count("bookings") == 1  # once, after the read in place failed
    # The same rows, only their line endings changed: every record is carried over.
    reservations = again[Entity.RESERVATION]
    assert reservations.carried == len(reservations.records) > 0
    assert not len(reservations.quarantine)


def test_a_row_the_reader_refuses_midway_is_named_as_a_run_that_loads_it_names_it(
    tmp_path: Path,
) -> None:
    mapping = pinned_hotel(tmp_path / "hotel")
    bookings = mapping.parent / "data" / "bookings.csv"
    # Longer than the rows DuckDB's reader samples when the view is made (20,480 lines).
    frame = pd.read_csv(bookings, dtype=str, keep_default_na=False)
    copies = [frame.assign(booking_no=frame["booking_no"] + f"-{n}") for n in range(400)]
    pd.concat(copies, ignore_index=True).to_csv(bookings, index=False)
    snapshot = _Snapshot(_first_run(mapping))
    lines = bookings.read_text().splitlines()
    assert len(lines) > 25_000
    lines[-2] += ",one column too many"  # far below what the reader samples on sight
    bookings.write_text("\n".join(lines) + "\n")

    with pytest.raises(SourceError) as loading:
        map_records(load_mapping(mapping))
    with pytest.raises(SourceError) as in_place:
        map_records(load_mapping(mapping), fingerprints=snapshot)
    assert str(in_place.value) == str(loading.value)
    assert "bookings.csv" in str(in_place.value)


def test_a_windowed_run_read_in_place_knows_every_record_outside_its_window(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mapping, snapshot, bookings = _synced_hotel(tmp_path / "hotel")
    frame = pd.read_csv(bookings, dtype=str, keep_default_na=False)
    frame.loc[:9, "guest_last_name"] = "Changed"  # some inside the window, some outside
    frame.to_csv(bookings, index=False)
    window = DateWindow(date(2025, 3, 1), date(2025, 9, 1))

    loaded = _loads(monkeypatch)
    in_place = map_records(load_mapping(mapping), window=window, fingerprints=snapshot)
    assert "bookings" not in loaded
    remapped = map_records(load_mapping(mapping), window=window)

    ours, full = in_place[Entity.RESERVATION], remapped[Entity.RESERVATION]
    assert len(full.present_elsewhere) > 0
    key = ["account_id", "record_id"]
    assert (
        ours.present_elsewhere.sort_values(key)
        .reset_index(drop=True)
        .equals(full.present_elsewhere.sort_values(key).reset_index(drop=True))
    )
    assert set(ours.records["record_id"]) == set(full.records["record_id"])
    assert 0 < len(ours.records) - ours.carried < len(ours.records)


def test_a_run_that_maps_one_changed_record_asks_for_that_records_validated_payloads_only(
    tmp_path: Path,
) -> None:
    mapping, snapshot, bookings = _synced_hotel(tmp_path / "hotel")
    bookings.write_text(bookings.read_text().replace("Smith", "Smyth", 1))
    asked: list[list[str] | None] = []

    def known_valid(record_ids: pa.Array | None) -> pa.Table:
        asked.append(None if record_ids is None else sorted(record_ids.to_pylist()))
        return pa.table({"payload_md5": pa.array([], pa.string())})

    mapped = map_records(load_mapping(mapping), fingerprints=snapshot, validated=known_valid)

    reservations = mapped[Entity.RESERVATION].records
    fresh = sorted(reservations.loc[reservations["source_rows"] != "", "record_id"])
    assert len(fresh) == 1
    # The units are all carried over (nothing asked for them); the one reservation mapped
    # asks for its own payload's MD5, not the snapshot's whole table.
    assert asked == [fresh]


def test_the_rows_to_map_keep_every_column_whatever_the_columns_are_called(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A changed run keeps the rows it maps in one more read of the export, each row whole
    (``narrow_rows_sql``): a column named as the query's alias for the input is a column."""
    mapping = pinned_hotel(tmp_path / "hotel")
    bookings = mapping.parent / "data" / "bookings.csv"
    alias = prepare(load_mapping(mapping)).queries[Entity.RESERVATION].row_alias
    frame = pd.read_csv(bookings, dtype=str, keep_default_na=False)
    frame[alias] = "a column, not the row"
    frame.to_csv(bookings, index=False)
    snapshot = _Snapshot(_first_run(mapping))
    frame.loc[3, "guest_last_name"] = "Changed"
    frame.loc[4, "booking_no"] = ""  # a row of no record: mapped, and quarantined
    frame.to_csv(bookings, index=False)

    loaded = _loads(monkeypatch)
    in_place = map_records(load_mapping(mapping), fingerprints=snapshot)[Entity.RESERVATION]
    assert "bookings" not in loaded  # read in place to the end, not loaded after a failure
    full = map_records(load_mapping(mapping))[Entity.RESERVATION]

    assert len(in_place.quarantine)
    _maps_as_a_full_run(in_place, full)


def test_the_keys_are_read_without_the_reference_tables_the_documents_need(
    tmp_path: Path,
) -> None:
    query = prepare(load_mapping(pinned_hotel(tmp_path / "hotel"))).queries[Entity.RESERVATION]
    assert "pms_languages" in query.sql  # the guest's language
    assert "pms_languages" not in query.key_rows_sql
    assert "pms_languages" not in query.narrow_rows_sql


def test_a_changed_export_of_several_files_maps_the_records_a_full_run_maps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Several files are loaded, not read in place: the rows to map are then found by their
    positions (``ROWS_TO_MAP_TABLE``), not narrowed."""
    mapping = pinned_hotel(tmp_path / "hotel")
    data = mapping.parent / "data"
    frame = pd.read_csv(data / "bookings.csv", dtype=str, keep_default_na=False)
    (data / "bookings.csv").unlink()
    halves = {data / "bookings-1.csv": frame.iloc[:20], data / "bookings-2.csv": frame.iloc[20:]}
    for path, half in halves.items():
        half.to_csv(path, index=False)
    mapping.write_text(
        mapping.read_text().replace("path: data/bookings.csv", "path: data/bookings-*.csv")
    )
    snapshot = _Snapshot(_first_run(mapping))
    second = frame.iloc[20:].copy()
    second.iloc[3, second.columns.get_loc("guest_last_name")] = "Changed"
    second.iloc[4, second.columns.get_loc("booking_no")] = ""  # no record: quarantined
    second.to_csv(data / "bookings-2.csv", index=False)

    loaded = _loads(monkeypatch)
    ours = map_records(load_mapping(mapping), fingerprints=snapshot)[Entity.RESERVATION]
    assert "bookings" in loaded
    full = map_records(load_mapping(mapping))[Entity.RESERVATION]

    assert len(ours.quarantine)
    _maps_as_a_full_run(ours, full)
