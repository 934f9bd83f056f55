"""A run of some accounts maps only their rows (``connector.mapping.engine``): its records,
payloads, fingerprints and quarantine are exactly those of a run of every account kept to
them afterwards, whether the account is a lookup (hotel), a column of a SQL input, or an
entity whose records depend on other rows (mapped whole, then kept)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from connector.contract import Entity
from connector.mapping import load_mapping, map_records
from connector.records import MappedRecords
from tests.mapping.test_read_in_place import _first_run, _Snapshot
from tests.samples import pinned_hotel

ROOT = Path(__file__).resolve().parents[2]


def _frame(frame: pd.DataFrame | None) -> pd.DataFrame:
    assert frame is not None
    if not len(frame):
        return frame.reset_index(drop=True)
    keys = [c for c in ("account_id", "source_account", "record_id", "row_numbers") if c in frame]
    ordered = frame.astype(str).sort_values(keys).reset_index(drop=True)
    return ordered[sorted(ordered.columns)]


def _same(ours: MappedRecords, whole: MappedRecords) -> None:
    for name in ("records", "quarantine", "present_elsewhere", "unresolved"):
        pd.testing.assert_frame_equal(_frame(getattr(ours, name)), _frame(getattr(whole, name)))
    if whole.fingerprints is None:
        assert ours.fingerprints is None
    else:
        pd.testing.assert_frame_equal(_frame(ours.fingerprints), _frame(whole.fingerprints))
    assert (ours.carried, ours.mapped) == (whole.carried, whole.mapped)


def _compare(mapping: Path, accounts: set[str], **options: object) -> dict[Entity, MappedRecords]:
    whole = map_records(load_mapping(mapping), **options)  # type: ignore[arg-type]
    ours = map_records(load_mapping(mapping), accounts=accounts, **options)  # type: ignore[arg-type]
    assert set(ours) == set(whole)
    for entity, batch in whole.items():
        kept = batch.of_accounts(accounts)
        assert len(kept.records) + len(kept.quarantine) > 0, entity
        assert len(kept.records) < len(batch.records), entity  # another account was left out
        _same(ours[entity].of_accounts(accounts), kept)
        if ours[entity].account_filter == "pushed":  # only their records were mapped at all
            assert set(ours[entity].records["account_id"]) <= accounts
        else:
            assert set(ours[entity].records["account_id"]) > accounts
    return ours


def test_a_run_of_one_hotel_maps_only_its_rows_and_finds_what_a_whole_run_keeps(
    tmp_path: Path,
) -> None:
    mapping = pinned_hotel(tmp_path / "hotel")

    ours = _compare(mapping, {"demo"})

    assert {batch.account_filter for batch in ours.values()} == {"pushed"}
    assert {batch.account_filter for batch in map_records(load_mapping(mapping)).values()} == {None}


def test_a_fingerprinted_run_of_one_hotel_carries_and_maps_what_a_whole_run_keeps(
    tmp_path: Path,
) -> None:
    mapping = pinned_hotel(tmp_path / "hotel")
    snapshot = _Snapshot(_first_run(mapping))
    bookings = mapping.parent / "data" / "bookings.csv"
    lines = bookings.read_text(encoding="utf-8").splitlines(keepends=True)
    # One changed row of each hotel: each account has records to map and records carried.
    changed = {"BER": False, "MUC": False}
    for index, line in enumerate(lines[1:], start=1):
        for hotel in changed:
            if not changed[hotel] and line.startswith(f"{hotel},"):
                lines[index] = line.replace(",15:30:00,", ",16:45:00,", 1)
                changed[hotel] = lines[index] != line
    assert all(changed.values())
    bookings.write_text("".join(lines), encoding="utf-8")

    ours = _compare(mapping, {"demo-2"}, fingerprints=snapshot)

    reservations = ours[Entity.RESERVATION]
    assert reservations.account_filter == "pushed"
    assert 0 < reservations.mapped < len(reservations.records)


def test_an_entity_whose_records_read_other_rows_is_mapped_whole_then_kept(
    tmp_path: Path,
) -> None:
    mapping = pinned_hotel(tmp_path / "hotel")
    text = mapping.read_text(encoding="utf-8")
    # A number that counts every row before it: leaving rows out would change it.
    room = '      name: {template: "Room {room_no}"}\n'
    assert room in text
    counted = "      name: {sql: \"'Room ' || count(*) OVER ()\"}\n"
    mapping.write_text(text.replace(room, counted, 1), encoding="utf-8")

    ours = _compare(mapping, {"demo"}, entities=[Entity.ACCOMMODATION])

    assert ours[Entity.ACCOMMODATION].account_filter == "after_mapping"


def test_a_sql_input_whose_account_is_a_column_maps_only_that_accounts_rows(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "sql_pms"
    shutil.copytree(ROOT / "mappings" / "sql_pms", folder)
    mapping = folder / "mapping.yaml"
    text = mapping.read_text(encoding="utf-8")
    text = text.replace(
        "    input: units\n", "    input: units\n    account: {column: property_id}\n", 1
    ).replace("    input: stays\n", "    input: stays\n    account: {column: unit_id}\n", 1)
    mapping.write_text(text, encoding="utf-8")
    loaded = load_mapping(mapping)
    units = {str(a) for a in map_records(loaded)[Entity.ACCOMMODATION].records["account_id"]}
    stays = {str(a) for a in map_records(loaded)[Entity.RESERVATION].records["account_id"]}
    assert len(units) > 1 and len(stays) > 1
    one = {sorted(units)[0], sorted(stays)[0]}

    ours = _compare(mapping, one)

    assert {batch.account_filter for batch in ours.values()} == {"pushed"}


@pytest.mark.parametrize("accounts", [set(), {"no-such-account"}])
def test_a_run_of_no_account_of_the_export_maps_nothing(tmp_path: Path, accounts: set[str]) -> None:
    mapping = pinned_hotel(tmp_path / "hotel")

    ours = map_records(load_mapping(mapping), accounts=accounts)

    assert all(len(b.records) == len(b.quarantine) == 0 for b in ours.values())
