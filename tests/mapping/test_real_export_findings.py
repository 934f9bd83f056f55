"""The findings of mapping real PMS and booking exports (issue 19), each rerun: the language
now carries what needed raw SQL, and every error points at the right place."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from mapping_helpers import (
    accommodation_mapping,
    map_bookings,
    map_units,
    payloads,
    reservation_mapping,
    unit_values,
    write_csv,
    write_mapping,
)

from connector.cli import main
from connector.contract import Entity
from connector.errors import MappingError
from connector.mapping import load_mapping, map_records

ROOT = Path(__file__).parents[2]


# 1. Exports without ids -----------------------------------------------------------------------


def test_identical_rows_without_an_id_stay_separate_reservations_by_row_number(
    tmp_path: Path,
) -> None:
    same = {"hotel": "Resort Hotel", "arr": "2025-07-01", "adults": "2"}
    rows = [same, dict(same), {**same, "adults": "1"}]
    write_csv(tmp_path / "bookings.csv", rows)
    document = reservation_mapping(
        {"id": {"row_number": True}, "adults": "adults", "checkin": "arr"},
        {"id": {"row_number": True}},
    )

    batch = map_records(load_mapping(write_mapping(tmp_path, document)))[Entity.RESERVATION]

    assert batch.quarantine.empty
    assert batch.records["record_id"].tolist() == ["1", "2", "3"]
    assert batch.records["source_rows"].tolist() == [
        "bookings.csv:1",
        "bookings.csv:2",
        "bookings.csv:3",
    ]


def test_row_number_counts_rows_as_error_messages_do_below_a_title_line(tmp_path: Path) -> None:
    (tmp_path / "bookings.csv").write_text(
        "Export 2025-07-01\n\nbooking,arr\nB1,2025-07-01\nB2,2025-07-99\n", encoding="utf-8"
    )
    document = reservation_mapping(
        {"id": {"template": "{booking}-{@row_number}"}, "checkin": "arr"}
    )
    document["inputs"]["bookings"]["header_row"] = 3

    batch = map_records(load_mapping(write_mapping(tmp_path, document)))[Entity.RESERVATION]

    assert unit_values(batch, "id") == ["B1-1"]
    problem = batch.quarantine.iloc[0]
    assert (problem["rows"], problem["field"]) == ("2", "unitReservations.checkin")


def test_occurrence_numbers_identical_rows_and_ignores_unrelated_deletions(tmp_path: Path) -> None:
    content_id = {"template": "{guest|slug}-{arr}-{@occurrence}"}
    rows = [
        {"guest": "Ann Lee", "arr": "2025-07-01"},
        {"guest": "Bo Chan", "arr": "2025-07-02"},
        {"guest": "Ann Lee", "arr": "2025-07-01"},
    ]
    unit = {"checkin": "arr", "id": content_id}
    first = map_bookings(tmp_path, rows, unit, {"id": content_id})
    without_bo = map_bookings(tmp_path, [rows[0], rows[2]], unit, {"id": content_id})

    assert first.records["record_id"].tolist() == [
        "ann-lee-2025-07-01-1",
        "bo-chan-2025-07-02-1",
        "ann-lee-2025-07-01-2",
    ]
    assert without_bo.records["record_id"].tolist() == [
        "ann-lee-2025-07-01-1",
        "ann-lee-2025-07-01-2",
    ]


# 2. Arithmetic without raw SQL ----------------------------------------------------------------


def test_nights_in_two_columns_a_rate_times_nights_and_a_lead_time_need_no_sql(
    tmp_path: Path,
) -> None:
    rows = [
        {
            "booking": "b1",
            "arr": "2025-07-04",
            "weekend": "2",
            "week": "3",
            "adr": "89.9",
            "lead": "30",
        },
        {
            "booking": "b2",
            "arr": "2025-07-01",
            "weekend": "0",
            "week": "1",
            "adr": "0.1",
            "lead": "0",
        },
    ]
    nights = {"sum": ["weekend", "week"]}
    unit = {
        "checkin": "arr",
        "checkout": {"column": "arr", "add_days": nights},
        "price": {"product": ["adr", nights]},
        "adults": {"difference": [{"sum": ["weekend", "week"]}, "week"]},
    }
    created = {"column": "arr", "subtract_days": "lead"}

    batch = map_bookings(tmp_path, rows, unit, {"createdAt": created})

    assert batch.quarantine.empty, batch.quarantine.to_string()
    assert unit_values(batch, "checkout") == ["2025-07-09", "2025-07-02"]
    assert unit_values(batch, "price") == [449.5, 0.1]
    assert unit_values(batch, "adults") == [2, 0]
    assert [p["createdAt"] for p in payloads(batch)] == [
        "2025-06-04T00:00:00Z",
        "2025-07-01T00:00:00Z",
    ]


def test_round_and_negative_add_days_apply_to_numbers_and_dates(tmp_path: Path) -> None:
    rows = [{"booking": "b1", "arr": "2025-03-01", "total": "1.234,567", "kids": "1.6"}]
    unit = {
        "checkin": {"column": "arr", "add_days": -1},
        "checkout": "arr",
        "price": {"column": "total", "decimal": ",", "round": 2},
        "children": {"column": "kids", "round": 0},
    }

    batch = map_bookings(tmp_path, rows, unit)

    assert unit_values(batch, "checkin") == ["2025-02-28"]
    assert unit_values(batch, "price") == [1234.57]
    assert unit_values(batch, "children") == [2]


def test_an_operand_that_is_no_number_quarantines_its_record_naming_the_value(
    tmp_path: Path,
) -> None:
    rows = [
        {"booking": "b1", "arr": "2025-07-01", "n1": "1", "n2": "2"},
        {"booking": "b2", "arr": "2025-07-01", "n1": "x", "n2": "2"},
    ]
    unit = {"checkin": "arr", "checkout": {"column": "arr", "add_days": {"sum": ["n1", "n2"]}}}

    batch = map_bookings(tmp_path, rows, unit)

    assert batch.records["record_id"].tolist() == ["b1"]
    problem = batch.quarantine.iloc[0]
    assert (problem["record_id"], problem["field"], problem["value"]) == (
        "b2",
        "unitReservations.checkout",
        "x",
    )
    assert problem["reason"] == "expected a number to add, got 'x'"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"checkin": {"sum": ["a", "b"]}}, "sum gives a number, but this member expects a date"),
        ({"adults": {"column": "a", "add_days": 1}}, "add_days applies to a date"),
        ({"price": {"product": ["a", {"constant": "two"}]}}, "must be a number, got 'two'"),
        ({"checkin": {"column": "a", "round": 1}}, "round gives a number"),
    ],
)
def test_arithmetic_of_the_wrong_type_is_one_load_time_error(
    tmp_path: Path, fields: dict[str, Any], message: str
) -> None:
    document = reservation_mapping({"checkout": {"constant": "2025-07-03"}, **fields})

    with pytest.raises(MappingError) as raised:
        load_mapping(write_mapping(tmp_path, document))

    assert message in str(raised.value)
    assert raised.value.line is not None
    assert raised.value.member.startswith("entities.reservation.fields.unitReservations.fields.")


# 3. Transforms inside template placeholders ---------------------------------------------------


def test_template_placeholders_slug_upper_lower_and_trim_their_values(tmp_path: Path) -> None:
    rows = [{"unit_id": "u1", "hotel": "  Résort Hotel ", "code": "ab-1"}]
    fields = {
        "name": {"template": "{hotel|trim} / {code|upper} / {hotel|slug} / {code|lower|slug}"},
        "apartmentNumber": {"template": "{hotel|upper|trim}"},
    }

    batch = map_units(tmp_path, rows, fields)

    (payload,) = payloads(batch)
    assert payload["name"] == "Résort Hotel / AB-1 / resort-hotel / ab-1"
    assert payload["apartmentNumber"] == "RÉSORT HOTEL"


def test_an_unknown_template_transform_is_a_load_time_error_listing_the_known_ones(
    tmp_path: Path,
) -> None:
    document = accommodation_mapping({"name": {"template": "{hotel|slugify}"}})

    with pytest.raises(MappingError) as raised:
        load_mapping(write_mapping(tmp_path, document))

    assert "unknown template transform 'slugify'" in str(raised.value)
    assert (
        "slug" in str(raised.value) and raised.value.member == "entities.accommodation.fields.name"
    )


# 4. Impossible dates quarantine their record --------------------------------------------------


@pytest.mark.parametrize(("month", "day"), [("June", "31"), ("2", "29"), ("July", "0")])
def test_an_impossible_composed_date_quarantines_its_record_and_the_run_goes_on(
    tmp_path: Path, month: str, day: str
) -> None:
    rows = [
        {"booking": "b1", "y": "2025", "m": "July", "d": "1"},
        {"booking": "b2", "y": "2025", "m": month, "d": day},
        {"booking": "b3", "y": "2025", "m": "August", "d": "31"},
    ]
    unit = {"checkin": {"date_parts": {"year": "y", "month": "m", "day": "d"}}}
    unit["checkout"] = {**unit["checkin"], "add_days": 2}

    batch = map_bookings(tmp_path, rows, unit)

    assert batch.records["record_id"].tolist() == ["b1", "b3"]
    checkin = batch.quarantine[batch.quarantine["field"] == "unitReservations.checkin"].iloc[0]
    assert (checkin["record_id"], checkin["input"], checkin["rows"]) == ("b2", "bookings.csv", "2")
    assert checkin["value"] == f"2025 {month} {day}"
    assert checkin["reason"].startswith("no such date")


def test_a_day_count_too_large_for_any_date_quarantines_its_record(tmp_path: Path) -> None:
    rows = [
        {"booking": "b1", "arr": "2025-07-01", "n": "3"},
        {"booking": "b2", "arr": "2025-07-01", "n": "99999999999"},
    ]
    unit = {"checkin": "arr", "checkout": {"column": "arr", "add_days": "n"}}

    batch = map_bookings(tmp_path, rows, unit)

    assert batch.records["record_id"].tolist() == ["b1"]
    assert batch.quarantine.iloc[0]["reason"].startswith("expected a whole number of days")


# 5. SQL errors name the right member ----------------------------------------------------------


SQL_FIELDS = {
    "maxNumberOfGuests": {"sql": "TRY_CAST(guests AS INTEGER)"},
    "bedroomsNumber": {"sql": "TRY_CAST(rooms AS INTEGER)"},
    "sizeSqM": {"sql": "CAST(sizee AS INTEGER)"},
}


def test_a_typo_in_the_third_sql_member_is_reported_at_its_own_line(tmp_path: Path) -> None:
    rows = [{"unit_id": "u1", "guests": "2", "rooms": "1", "size": "30"}]

    with pytest.raises(MappingError) as raised:
        map_units(tmp_path, rows, SQL_FIELDS)

    error = raised.value
    assert error.member == "entities.accommodation.fields.sizeSqM.sql"
    text = (tmp_path / "mapping.yaml").read_text().splitlines()
    assert "sizee" in text[error.line - 1]
    assert "sizee" in str(error)


def test_an_sql_member_failing_on_the_data_is_named_with_its_line(tmp_path: Path) -> None:
    rows = [{"unit_id": "u1", "guests": "2", "rooms": "1", "size": "big"}]
    fields = {**SQL_FIELDS, "sizeSqM": {"sql": "CAST(size AS INTEGER)"}}

    with pytest.raises(MappingError) as raised:
        map_units(tmp_path, rows, fields)

    assert raised.value.member == "entities.accommodation.fields.sizeSqM.sql"
    assert "'big'" in str(raised.value) and "TRY_CAST" in str(raised.value)


# 6. Honest loading --------------------------------------------------------------------------


MINIMAL = """\
account: {constant: demo}
inputs:
  units: {type: csv, path: units.csv}
entities:
  accommodation:
    input: units
    fields:
      id: unit_id
      name: name
      street: street
      streetNumber: no
      country: {constant: DE}
      city: city
      wifiName: wifi
      wifiCode: wifi_code
      doorCode: door
"""


def load_text(tmp_path: Path, text: str) -> MappingError:
    path = tmp_path / "units.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(MappingError) as raised:
        load_mapping(path)
    return raised.value


def test_null_values_add_to_the_default_null_texts_unless_told_otherwise(tmp_path: Path) -> None:
    rows = [
        {"unit_id": "u1", "floor": "NA"},
        {"unit_id": "u2", "floor": "n/a"},
        {"unit_id": "u3", "floor": "2"},
    ]
    write_csv(tmp_path / "units.csv", rows)
    document = accommodation_mapping({"floor": "floor"})
    document["inputs"]["units"]["null_values"] = ["NA"]
    added = map_records(load_mapping(write_mapping(tmp_path, document)))[Entity.ACCOMMODATION]
    document["inputs"]["units"]["default_null_values"] = False
    only = map_records(load_mapping(write_mapping(tmp_path, document)))[Entity.ACCOMMODATION]

    assert [p.get("floor") for p in payloads(added)] == [None, None, "2"]
    assert [p.get("floor") for p in payloads(only)] == [None, "n/a", "2"]


def test_trim_yes_is_text_not_true_and_the_error_says_so(tmp_path: Path) -> None:
    error = load_text(
        tmp_path, MINIMAL.replace("      city: city\n", "      city: {column: city, trim: yes}\n")
    )

    assert error.line == 13
    assert error.member == "entities.accommodation.fields.city.trim"
    assert "expected true or false, got 'yes'" in str(error)


def test_an_unknown_input_type_lists_the_valid_kinds(tmp_path: Path) -> None:
    error = load_text(tmp_path, MINIMAL.replace("type: csv", "type: csvv"))

    assert error.line == 3
    assert "unknown input type 'csvv'; expected one of csv, xlsx, sql" in str(error)


def test_a_constant_the_member_cannot_take_is_one_load_time_error(tmp_path: Path) -> None:
    text = MINIMAL + "      maxNumberOfGuests: {constant: lots}\n"

    error = load_text(tmp_path, text)

    assert error.line == 17
    assert error.member == "entities.accommodation.fields.maxNumberOfGuests.constant"
    assert "expected a whole number for this member, got 'lots'" in str(error)


def test_a_constant_refused_at_load_never_shows_a_secret(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = "tok-Sec4et-in-a-mapping-constant"
    monkeypatch.setenv("PMS_SYNC_TOKEN", token)
    text = MINIMAL.replace("{constant: DE}", '{constant: "${PMS_SYNC_TOKEN}"}')

    error = load_text(tmp_path, text)

    assert error.member == "entities.accommodation.fields.country.constant"
    assert "unknown country" in str(error) and token not in str(error)


def test_a_constant_outside_the_members_values_is_refused_at_load(tmp_path: Path) -> None:
    error = load_text(tmp_path, MINIMAL + "      status: {constant: ACTIV}\n")

    assert error.member == "entities.accommodation.fields.status.constant"
    assert "ACTIVE" in str(error) and '"ACTIV"' in str(error)


def test_every_problem_of_the_file_is_listed_with_its_line(tmp_path: Path) -> None:
    text = MINIMAL.replace("      city: city\n", "      citty: city\n").replace(
        "type: csv", "type: csvv"
    )

    error = load_text(tmp_path, text)

    assert [(problem.line, problem.member) for problem in error.problems] == [
        (3, "inputs.units"),
        (7, "entities.accommodation.fields.city"),
        (13, "entities.accommodation.fields.citty"),
    ]
    assert "more problem" not in str(error)
    assert "line 13: unknown member 'citty'" in str(error)
    assert "line 7: required member 'city' is missing" in str(error)


def test_every_unknown_column_is_listed_with_its_line(tmp_path: Path) -> None:
    rows = [{"unit_id": "u1", "label": "Loft", "town": "Rome"}]

    with pytest.raises(MappingError) as raised:
        map_units(tmp_path, rows, {"name": "lable", "city": {"template": "{twon}"}})

    assert [problem.member for problem in raised.value.problems] == [
        "entities.accommodation.fields.name.column",
        "entities.accommodation.fields.city.template",
    ]
    assert "unknown column 'lable'" in str(raised.value)
    assert "unknown column 'twon'" in str(raised.value)


def test_a_dedented_member_is_reported_on_its_own_line(tmp_path: Path) -> None:
    text = MINIMAL.replace("      city: city\n", "  city: city\n")

    error = load_text(tmp_path, text)

    assert error.line == 13
    assert "line 13 ('city: city') is indented less than the line before it" in str(error)


# 7. Reports, the sandbox's data folder, the docs, float-formatted ids -------------------------


def test_plan_reports_quarantine_counts_and_the_first_problems(tmp_path: Path) -> None:
    rows = [
        {"booking": "b1", "arr": "2025-07-01"},
        {"booking": "b2", "arr": "2025-07-99"},
    ]
    write_csv(tmp_path / "bookings.csv", rows)
    mapping = write_mapping(tmp_path, reservation_mapping({"checkin": "arr"}))
    env = {"PMS_SYNC_SNAPSHOT": str(tmp_path / "snapshot.duckdb"), "PMS_SYNC_TOKEN": ""}

    human = CliRunner().invoke(main, ["plan", str(mapping)], env=env)
    as_json = CliRunner().invoke(main, ["plan", str(mapping), "--json"], env=env)

    assert human.exit_code == 0, human.output
    assert "1 row problem(s) quarantined by the mapping (not sent): reservation 1" in human.stdout
    assert "bookings.csv:2 reservation b2 unitReservations.checkin: expected a date" in human.stdout
    document = json.loads(as_json.stdout)
    assert document["quarantine"] == {"reservation": 1}
    assert document["quarantine_sample"][0]["record_id"] == "b2"
    assert "bookings.csv:2 reservation b2 unitReservations.checkin" in as_json.stderr


def test_sandbox_data_named_like_a_database_file_is_refused_as_a_folder(tmp_path: Path) -> None:
    target = tmp_path / "x.duckdb"

    result = CliRunner().invoke(main, ["sandbox", "--data", str(target), "--port", "0"])

    assert result.exit_code == 2
    assert "--data is the folder the sandbox keeps its data file (sandbox.sqlite3) in" in (
        result.output
    )
    assert not target.exists()


def test_every_section_the_mapping_docs_refer_to_exists() -> None:
    text = (ROOT / "docs" / "mapping.md").read_text(encoding="utf-8")
    headings = {line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")}

    referred = set(re.findall(r"\(see ([A-Z][^)]*?)\)", text))

    assert referred, "the docs refer to no section: the pattern is stale"
    assert referred <= headings, referred - headings


@pytest.mark.parametrize(
    ("written", "sent"),
    [
        ("9.290212028640288e+17", "929021202864028800"),
        ("929021202864028805", "929021202864028805"),
        ("4711.0", "4711"),
        ("A-12", "A-12"),
    ],
)
def test_float_formatted_ids_become_the_digits_they_hold(
    tmp_path: Path, written: str, sent: str
) -> None:
    rows = [{"booking": written}]

    batch = map_bookings(tmp_path, rows, {}, {"id": {"column": "booking", "as": "number_text"}})

    assert batch.records["record_id"].tolist() == [sent]
