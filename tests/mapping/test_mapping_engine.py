"""The engine: grouping, duplicates, quarantine, windows, and checks before any row is read."""

from __future__ import annotations

import json
import shutil
from datetime import date
from pathlib import Path

import pandas as pd
import pytest
from mapping_helpers import map_bookings, map_units, payloads, write_csv, write_mapping

from connector.contract import Entity
from connector.errors import MappingError
from connector.mapping import load_mapping, map_records
from connector.records import QUARANTINE_COLUMNS, RECORD_COLUMNS, DateWindow, in_export_order
from connector.sources.csv_source import CsvSource

HOTEL = Path(__file__).parents[2] / "mappings" / "hotel"


def test_booking_rows_sharing_a_reservation_id_become_one_reservation(tmp_path: Path) -> None:
    data = [
        {"booking": "B1", "line": "1", "arr": "2025-07-03", "dep": "2025-07-05"},
        {"booking": "B1", "line": "2", "arr": "2025-07-01", "dep": "2025-07-08"},
        {"booking": "B2", "line": "1", "arr": "2025-08-01", "dep": "2025-08-02"},
    ]
    unit = {"id": {"template": "{booking}-{line}"}, "checkin": "arr", "checkout": "dep"}
    batch = map_bookings(tmp_path, data, unit)
    assert list(batch.records.columns) == list(RECORD_COLUMNS)
    assert batch.records["record_id"].tolist() == ["B1", "B2"]
    first = payloads(batch)[0]
    # Units are ordered by check-in, so reordered export rows give the same payload.
    assert [unit["id"] for unit in first["unitReservations"]] == ["B1-2", "B1-1"]
    assert batch.records["checkin"].iloc[0] == pd_timestamp("2025-07-01")
    assert batch.records["checkout"].iloc[0] == pd_timestamp("2025-07-08")
    assert batch.records["source_rows"].tolist() == ["bookings.csv:1,2", "bookings.csv:3"]


def pd_timestamp(text: str):
    import pandas as pd

    return pd.Timestamp(text)


def test_reordered_export_rows_give_the_same_payload(tmp_path: Path) -> None:
    data = [
        {"booking": "B1", "line": "1", "arr": "2025-07-01"},
        {"booking": "B1", "line": "2", "arr": "2025-07-01"},
        {"booking": "B1", "line": "3", "arr": "2025-06-30"},
    ]
    unit = {
        "id": {"template": "{booking}-{line}"},
        "checkin": "arr",
        "checkout": {"column": "arr", "add_days": 2},
    }
    forward = map_bookings(tmp_path, data, unit).records
    backward = map_bookings(tmp_path, data[::-1], unit).records
    assert forward["payload"].tolist() == backward["payload"].tolist()
    assert forward["content_hash"].tolist() == backward["content_hash"].tolist()


def test_a_line_listed_twice_gives_one_unit_reservation(tmp_path: Path) -> None:
    row = {"booking": "B1", "line": "1"}
    batch = map_bookings(tmp_path, [row, row], {"id": {"template": "{booking}-{line}"}})
    assert len(payloads(batch)[0]["unitReservations"]) == 1
    assert batch.quarantine.empty


def test_rows_of_one_reservation_that_disagree_are_all_quarantined(tmp_path: Path) -> None:
    data = [
        {"booking": "B1", "line": "1", "guest": "Ann"},
        {"booking": "B1", "line": "2", "guest": "Bob"},
        {"booking": "B2", "line": "1", "guest": "Cem"},
    ]
    fields = {"primaryGuest": {"firstName": "guest"}}
    batch = map_bookings(tmp_path, data, {"id": {"template": "{booking}-{line}"}}, fields)
    assert batch.records["record_id"].tolist() == ["B2"]
    assert list(batch.quarantine.columns) == list(QUARANTINE_COLUMNS)
    problem = batch.quarantine.iloc[0]
    assert problem["record_id"] == "B1"
    assert problem["rows"] == "1,2"
    assert problem["reason"].startswith("duplicate key with conflicting content")


def test_duplicate_units_with_equal_content_are_one_record(tmp_path: Path) -> None:
    data = [{"unit_id": "u1", "label": "A"}, {"unit_id": "u1", "label": "A"}]
    batch = map_units(tmp_path, data, {"name": "label"})
    assert batch.records["record_id"].tolist() == ["u1"]
    assert batch.records["source_rows"].tolist() == ["units.csv:1,2"]


def test_duplicate_units_with_conflicting_content_are_quarantined(tmp_path: Path) -> None:
    data = [
        {"unit_id": "u1", "label": "A"},
        {"unit_id": "u1", "label": "B"},
        {"unit_id": "u2", "label": "C"},
    ]
    batch = map_units(tmp_path, data, {"name": "label"})
    assert batch.records["record_id"].tolist() == ["u2"]
    assert batch.quarantine["rows"].tolist() == ["1,2"]


def test_a_conversion_failure_quarantines_the_record_with_field_row_and_reason(
    tmp_path: Path,
) -> None:
    data = [
        {"unit_id": "u1", "land": "Atlantis", "size": "40"},
        {"unit_id": "u2", "land": "France", "size": "big"},
        {"unit_id": "u3", "land": "Spain", "size": "55"},
    ]
    batch = map_units(tmp_path, data, {"country": "land", "sizeSqM": "size"})
    assert batch.records["record_id"].tolist() == ["u3"]
    problems = batch.quarantine.set_index("record_id")
    assert problems.loc["u1", "field"] == "country"
    assert problems.loc["u1", "reason"] == "unknown country, got 'Atlantis'"
    assert problems.loc["u1", "rows"] == "1"
    assert problems.loc["u1", "input"] == "units.csv"
    assert problems.loc["u2", "field"] == "sizeSqM"
    assert problems.loc["u2", "reason"] == "expected a whole number, got 'big'"


def test_quarantine_never_shows_a_secret(tmp_path: Path) -> None:
    data = [{"unit_id": "u1", "door": "open-sesame"}, {"unit_id": "u2", "door": "42"}]
    batch = map_units(tmp_path, data, {"doorCode": {"column": "door", "as": "integer"}})
    problem = batch.quarantine.iloc[0]
    assert problem["field"] == "doorCode"
    assert problem["value"] == "***"
    assert "open-sesame" not in problem["reason"]
    assert "42" not in " ".join(batch.quarantine.astype(str).to_numpy().ravel())


def test_a_missing_required_value_is_quarantined_as_missing(tmp_path: Path) -> None:
    data = [{"unit_id": "u1", "city": ""}, {"unit_id": "u2", "city": "Rome"}]
    batch = map_units(tmp_path, data, {"city": "city"})
    assert batch.records["record_id"].tolist() == ["u2"]
    assert batch.quarantine[["record_id", "field", "reason"]].values.tolist() == [
        ["u1", "city", "missing required value"]
    ]


def test_a_record_without_key_is_quarantined_on_its_own_row(tmp_path: Path) -> None:
    data = [{"unit_id": ""}, {"unit_id": ""}, {"unit_id": "u3"}]
    batch = map_units(tmp_path, data, {})
    assert batch.records["record_id"].tolist() == ["u3"]
    assert batch.quarantine["rows"].tolist() == ["1", "2"]
    assert set(batch.quarantine["field"]) == {"id"}


def test_the_window_keeps_reservations_whose_first_checkin_is_inside(tmp_path: Path) -> None:
    data = [
        {"booking": "B1", "arr": "2025-06-30"},
        {"booking": "B2", "arr": "2025-07-01"},
        {"booking": "B3", "arr": "2025-07-31"},
        {"booking": "B4", "arr": "2025-08-01"},
    ]
    write_csv(tmp_path / "bookings.csv", data)
    from mapping_helpers import reservation_mapping

    document = reservation_mapping({"checkin": "arr", "checkout": {"column": "arr", "add_days": 1}})
    mapping = load_mapping(write_mapping(tmp_path, document))
    window = DateWindow(date(2025, 7, 1), date(2025, 8, 1))
    batch = map_records(mapping, window=window)[Entity.RESERVATION]
    assert batch.records["record_id"].tolist() == ["B2", "B3"]


def test_an_unknown_column_fails_before_any_row_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def never(*_args: object, **_kwargs: object) -> int:
        raise AssertionError("rows were read")

    monkeypatch.setattr(CsvSource, "load_into", never)
    with pytest.raises(MappingError) as raised:
        map_units(tmp_path, [{"unit_id": "u1", "label": "A"}], {"name": "lable"})
    assert "unknown column 'lable'" in str(raised.value)
    assert raised.value.member == "entities.accommodation.fields.name.column"
    assert raised.value.line is not None


def test_a_broken_sql_expression_fails_before_any_row_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(CsvSource, "load_into", lambda *a, **k: pytest.fail("rows were read"))
    with pytest.raises(MappingError, match="SQL"):
        map_units(tmp_path, [{"unit_id": "u1"}], {"name": {"sql": "no_such_column || 'x'"}})


def test_guests_and_charges_join_from_separate_inputs(tmp_path: Path) -> None:
    write_csv(tmp_path / "bookings.csv", [{"booking": "B1"}, {"booking": "B2"}])
    write_csv(
        tmp_path / "guests.csv",
        [
            {"ref": "B1", "first": "Ann", "land": "Italia"},
            {"ref": "B1", "first": "Bo", "land": ""},
            {"ref": "B9", "first": "Zed", "land": ""},
        ],
    )
    write_csv(tmp_path / "charges.csv", [{"ref": "B2", "what": "Cleaning", "eur": "45,50"}])
    from mapping_helpers import reservation_mapping

    document = reservation_mapping(
        {
            "guests": {
                "input": "guests",
                "on": {"ref": "booking"},
                "fields": {"firstName": "first", "country": "land"},
            },
            "additionalCharges": {
                "input": "charges",
                "on": {"ref": "booking"},
                "fields": {"title": "what", "amount": {"column": "eur", "decimal": ","}},
            },
        }
    )
    document["inputs"]["guests"] = {"type": "csv", "path": "guests.csv"}
    document["inputs"]["charges"] = {"type": "csv", "path": "charges.csv"}
    batch = map_records(load_mapping(write_mapping(tmp_path, document)))[Entity.RESERVATION]
    first, second = (payload["unitReservations"][0] for payload in payloads(batch))
    assert first["guests"] == [{"firstName": "Ann", "country": "IT"}, {"firstName": "Bo"}]
    assert "additionalCharges" not in first
    assert second["additionalCharges"] == [{"title": "Cleaning", "amount": 45.5}]


def test_a_bad_value_in_a_joined_input_quarantines_the_record_naming_that_input(
    tmp_path: Path,
) -> None:
    write_csv(tmp_path / "bookings.csv", [{"booking": "B1"}, {"booking": "B2"}])
    write_csv(tmp_path / "guests.csv", [{"ref": "B1", "first": "Ann", "land": "Narnia"}])
    from mapping_helpers import reservation_mapping

    document = reservation_mapping(
        {
            "guests": {
                "input": "guests",
                "on": {"ref": "booking"},
                "fields": {"firstName": "first", "country": "land"},
            }
        }
    )
    document["inputs"]["guests"] = {"type": "csv", "path": "guests.csv"}
    batch = map_records(load_mapping(write_mapping(tmp_path, document)))[Entity.RESERVATION]
    assert batch.records["record_id"].tolist() == ["B2"]
    problem = batch.quarantine.iloc[0]
    assert (problem["input"], problem["rows"], problem["field"]) == (
        "guests.csv",
        "1",
        "unitReservations.guests.country",
    )


def test_the_hotel_example_routes_each_hotel_to_its_account() -> None:
    batches = map_records(load_mapping(HOTEL / "mapping.yaml"))
    for batch in batches.values():
        assert batch.accounts == ["demo", "demo-2"]
        assert batch.quarantine.empty
        for account, record_id in batch.records[["account_id", "record_id"]].values:
            expected = "demo" if record_id.startswith("BER") else "demo-2"
            assert account == expected


def test_payload_is_the_canonical_json_of_the_validated_resource() -> None:
    from connector.canonical import canonical_json, content_hash
    from connector.contract import RESOURCES

    mapping = load_mapping(HOTEL / "mapping.yaml")
    for entity, batch in map_records(mapping).items():
        volatile = mapping.entities[entity].volatile_paths
        for payload, digest in batch.records[["payload", "content_hash"]].values[:20]:
            resource = RESOURCES[entity].model_validate_json(payload).to_json_dict()
            assert payload == canonical_json(resource)
            assert digest == content_hash(json.loads(payload), volatile)


def test_injected_bad_rows_are_quarantined_and_every_other_row_is_produced(
    tmp_path: Path,
) -> None:
    example = tmp_path / "hotel"
    shutil.copytree(HOTEL, example)
    bookings = example / "data" / "bookings.csv"
    lines = bookings.read_text(encoding="utf-8").splitlines()
    header = lines[0].split(",")
    template = dict(zip(header, lines[1].split(","), strict=True))

    def bad(number: str, **changes: str) -> str:
        row = {**template, "booking_no": f"BER-BAD-{number}", "hotel_code": "BER", **changes}
        return ",".join(row[column] for column in header)

    injected = [
        bad("1", arrival="2025-02-30"),
        bad("2", guest_country="Atlantis"),
        bad("3", guest_first_name=""),
        bad("4", eta="25pm"),
    ]
    bookings.write_text("\n".join([*lines, *injected]) + "\n", encoding="utf-8")
    batch = map_records(load_mapping(example / "mapping.yaml"))[Entity.RESERVATION]
    assert len(batch.records) == 60
    reasons = {
        row.record_id: (row.field, row.reason, row.rows)
        for row in batch.quarantine.itertuples(index=False)
    }
    first_bad_row = len(lines)
    assert reasons == {
        "BER-BAD-1": (
            "unitReservations.checkin",
            "expected a date such as 2025-07-01, got '2025-02-30'",
            str(first_bad_row),
        ),
        "BER-BAD-2": (
            "primaryGuest.country",
            "unknown country, got 'Atlantis'",
            str(first_bad_row + 1),
        ),
        "BER-BAD-3": ("primaryGuest.firstName", "missing required value", str(first_bad_row + 2)),
        "BER-BAD-4": (
            "unitReservations.estimatedCheckInTime",
            "expected a time of day such as 15:00 or 3pm, got '25pm'",
            str(first_bad_row + 3),
        ),
    }


def test_an_sql_expression_failing_on_a_value_names_the_member(tmp_path: Path) -> None:
    data = [{"unit_id": "u1", "guests": "4"}, {"unit_id": "u2", "guests": "four"}]
    with pytest.raises(MappingError) as raised:
        map_units(tmp_path, data, {"maxNumberOfGuests": {"sql": "CAST(guests AS INTEGER)"}})
    assert raised.value.member == "entities.accommodation.fields.maxNumberOfGuests.sql"
    assert "TRY_CAST" in str(raised.value)


def test_the_quarantine_lists_problems_in_export_order_whatever_order_records_come_in(
    tmp_path: Path,
) -> None:
    # One-row and grouped records come out of the query in no order; their problems do not.
    data = [
        {"unit_id": "u1", "city": ""},
        {"unit_id": "u2", "city": "Rome"},
        {"unit_id": "u2", "city": "Paris"},  # the same id mapping to another value
        {"unit_id": "u3", "city": "Rome"},
        {"unit_id": "u4", "city": ""},
        {"unit_id": "u5", "city": "Oslo"},
    ]
    batch = map_units(tmp_path, data, {"city": "city"})

    assert batch.quarantine["rows"].tolist() == ["1", "2,3", "5"]
    assert batch.quarantine["record_id"].tolist() == ["u1", "u2", "u4"]
    assert sorted(batch.records["record_id"]) == ["u3", "u5"]


def test_in_export_order_sorts_by_source_and_first_row_and_puts_carried_records_last() -> None:
    records = pd.DataFrame(
        {
            "record_id": ["b", "carried", "a", "c", "e"],
            "source_rows": ["f.csv:12,13", None, "f.csv:2", "g.csv:1", "f.csv:100"],
        }
    )

    assert in_export_order(records)["record_id"].tolist() == ["a", "b", "e", "c", "carried"]
    assert in_export_order(records.head(1)).equals(records.head(1))
