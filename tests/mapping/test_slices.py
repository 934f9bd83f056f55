"""A large export is mapped in slices of its records (``PMS_SYNC_SLICE_ROWS``): one slice at a
time, DuckDB holds one slice's grouped rows and documents. Whatever the slices, the records,
their documents and hashes, and the quarantine are those of one pass over the export."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

from connector.contract import Entity
from connector.mapping import load_mapping, map_records
from connector.mapping.engine import MAX_SLICES, slice_count
from connector.records import MappedRecords
from tests.samples import pinned_hotel


def _hotel_with_problems(folder: Path) -> Path:
    """The hotel example with a row of an unreadable date and a booking listed twice."""
    mapping = pinned_hotel(folder / "hotel")
    bookings = folder / "hotel" / "data" / "bookings.csv"
    frame = pd.read_csv(bookings, dtype=str, keep_default_na=False)
    frame.loc[3, "arrival"] = "not a date"
    frame = pd.concat([frame, frame.iloc[[5]]], ignore_index=True)
    frame.to_csv(bookings, index=False)
    return mapping


def _mapped(mapping: Path) -> dict[Entity, MappedRecords]:
    return map_records(load_mapping(mapping))


def _records(batch: MappedRecords) -> list[tuple[str, ...]]:
    columns = ["account_id", "record_id", "payload", "content_hash", "source_rows"]
    return sorted(tuple(str(value) for value in row) for row in batch.records[columns].values)


def test_tiny_slices_map_what_one_pass_maps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mapping = _hotel_with_problems(tmp_path)
    whole = _mapped(mapping)
    monkeypatch.setenv("PMS_SYNC_SLICE_ROWS", "4")

    sliced = _mapped(mapping)

    for entity in (Entity.ACCOMMODATION, Entity.RESERVATION):
        assert _records(sliced[entity]) == _records(whole[entity])
        pd.testing.assert_frame_equal(sliced[entity].quarantine, whole[entity].quarantine)
    assert len(whole[Entity.RESERVATION].quarantine)  # the problems are found in a slice too


def test_slices_are_counted_from_the_rows_to_map() -> None:
    assert slice_count(1_000, 2_000_000) == 1
    assert slice_count(2_000_001, 2_000_000) == 2
    assert slice_count(12_000_000, 2_000_000) == 6
    assert slice_count(10**9, 1) == MAX_SLICES


def test_a_runs_settings_choose_its_slices(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    mapping = _hotel_with_problems(tmp_path)
    whole = _mapped(mapping)
    monkeypatch.setenv("PMS_SYNC_SLICE_ROWS", "100000000")  # one slice, were it read
    counted: list[int] = []
    monkeypatch.setattr(
        "connector.mapping.engine.slice_count",
        lambda rows, slice_rows: counted.append(slice_rows) or slice_count(rows, slice_rows),
    )

    sliced = map_records(load_mapping(mapping), slice_rows=4)

    assert counted and set(counted) == {4}
    for entity in (Entity.ACCOMMODATION, Entity.RESERVATION):
        assert _records(sliced[entity]) == _records(whole[entity])
