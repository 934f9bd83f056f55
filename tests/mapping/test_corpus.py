"""The corpus of messy exports (tests/mapping/corpus/): each mapped end to end, two synced to
the sandbox over real sockets, and `pms-sync init` on each giving a first mapping that passes
the schema and, once its placeholders are filled in, maps every row without quarantine."""

from __future__ import annotations

import json
import shutil
import sqlite3
import sys
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest
from click.testing import CliRunner, Result

from connector.cli import main
from connector.contract import Entity
from connector.mapping import load_mapping, map_records
from connector.mapping.loader import _read_yaml
from connector.records import MappedRecords
from connector.sandbox.testing import SHARED_SYNC_TOKEN, SandboxHandle

CORPUS = Path(__file__).parent / "corpus"
ROOT = Path(__file__).parents[2]
sys.path.insert(0, str(CORPUS / "spreadsheet"))
from workbook import write_workbook  # noqa: E402

COUNTS = {
    "booking_demand": {Entity.RESERVATION: 13},
    "hotel_nights": {Entity.ACCOMMODATION: 4, Entity.RESERVATION: 7},
    "guest_rows": {Entity.RESERVATION: 4},
    "spreadsheet": {Entity.RESERVATION: 5},
}
EXPORTS = {
    "booking_demand": ["hotel_bookings.csv"],
    "hotel_nights": ["arrivals.csv", "rooms.csv"],
    "guest_rows": ["stays.csv"],
    "spreadsheet": ["reservations.xlsx"],
}
ACCOUNT = {"constant": "demo"}
STATUS = {"constant": "CONFIRMED"}
FILL_IN = {
    "booking_demand": {
        "account": ACCOUNT,
        "entities.reservation.fields.primaryGuest.firstName": {"constant": "Guest"},
    },
    "hotel_nights": {
        "account": ACCOUNT,
        "entities.accommodation.fields.country": {"constant": "DE"},
        "entities.reservation.fields.status": STATUS,
    },
    "guest_rows": {"account": ACCOUNT, "entities.reservation.fields.status": STATUS},
    "spreadsheet": {"account": ACCOUNT, "entities.reservation.fields.status": STATUS},
}
"""What a newcomer writes in each placeholder `pms-sync init` leaves."""


def corpus_copy(tmp_path: Path, name: str) -> Path:
    folder = tmp_path / name
    shutil.copytree(CORPUS / name, folder, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    if name == "spreadsheet":
        write_workbook(folder)
    return folder


def mapped(folder: Path) -> dict[Entity, MappedRecords]:
    return map_records(load_mapping(folder / "mapping.yaml"))


def payloads(batch: MappedRecords) -> dict[str, dict[str, Any]]:
    return {
        record_id: json.loads(payload)
        for record_id, payload in zip(
            batch.records["record_id"], batch.records["payload"], strict=True
        )
    }


# ------------------------------------------------------------------------- mapped end to end


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_each_corpus_export_maps_every_row_without_quarantine(tmp_path: Path, name: str) -> None:
    batches = mapped(corpus_copy(tmp_path, name))

    assert {entity: len(batch.records) for entity, batch in batches.items()} == COUNTS[name]
    for batch in batches.values():
        assert batch.quarantine.empty, batch.quarantine.to_string()


def test_booking_demand_data_maps_to_what_its_columns_mean(tmp_path: Path) -> None:
    batch = mapped(corpus_copy(tmp_path, "booking_demand"))[Entity.RESERVATION]
    by_id = payloads(batch)
    accounts = dict(zip(batch.records["record_id"], batch.records["account_id"], strict=True))

    # Rows 3 and 4 repeat exactly: two bookings, two reservations.
    assert by_id["resort-hotel-3"]["unitReservations"] == [
        {**by_id["resort-hotel-4"]["unitReservations"][0], "id": "3"}
    ]
    first = by_id["resort-hotel-1"]
    assert first["createdAt"] == "2014-07-24T00:00:00Z"  # 2015-07-01 minus 342 days
    assert first["primaryGuest"]["country"] == "GB"  # GBR
    assert by_id["city-hotel-10"]["primaryGuest"]["country"] == "CN"
    stay = by_id["city-hotel-9"]["unitReservations"][0]
    assert (stay["checkin"], stay["checkout"]) == ("2015-08-03", "2015-08-07")  # 1 + 3 nights
    assert (stay["price"], stay["children"]) == (306.0, 2)  # 76.5 * 4, from "2.0"
    assert "children" not in by_id["resort-hotel-6"]["unitReservations"][0]  # NA
    assert by_id["city-hotel-9"]["agent"] == "9"  # 9.0
    assert by_id["resort-hotel-5"]["status"] == "CANCELLED"
    assert accounts["resort-hotel-1"] == "hotel-a" and accounts["city-hotel-13"] == "hotel-b"


def test_a_hotels_windows_export_maps_below_its_title_line(tmp_path: Path) -> None:
    batches = mapped(corpus_copy(tmp_path, "hotel_nights"))
    reservations = payloads(batches[Entity.RESERVATION])
    rooms = payloads(batches[Entity.ACCOMMODATION])

    weber = reservations["4711"]
    unit = weber["unitReservations"][0]
    assert weber["primaryGuest"] == {"firstName": "Anna", "lastName": "Weber", "country": "AT"}
    assert (unit["checkin"], unit["checkout"], unit["price"]) == (
        "2025-07-03",
        "2025-07-06",
        1200.0,
    )
    assert unit["estimatedCheckInTime"] == "16:00"
    assert reservations["4716"]["primaryGuest"]["firstName"] == "Émilie"
    assert reservations["4717"]["primaryGuest"]["country"] == "GB"  # Großbritannien
    assert (rooms["21"]["street"], rooms["21"]["streetNumber"]) == ("Uferweg", "3a")
    assert rooms["12"]["street"] == "Seestraße"


def test_one_row_per_guest_gives_one_reservation_with_its_other_guests(tmp_path: Path) -> None:
    batch = mapped(corpus_copy(tmp_path, "guest_rows"))[Entity.RESERVATION]
    novak = payloads(batch)["B-102"]

    assert novak["primaryGuest"]["firstName"] == "Eva"
    assert [guest["firstName"] for guest in novak["unitReservations"][0]["guests"]] == [
        "Petr",
        "Anna",
    ]
    assert "guests" not in payloads(batch)["B-101"]["unitReservations"][0]


def test_a_spreadsheets_float_ids_become_the_digits_they_hold(tmp_path: Path) -> None:
    batch = mapped(corpus_copy(tmp_path, "spreadsheet"))[Entity.RESERVATION]
    by_id = payloads(batch)

    assert sorted(by_id) == ["4711", "4712", "5001", "5002", "929021202864028800"]
    assert by_id["929021202864028800"]["unitReservations"][0]["id"] == "929021202864028800-101"
    assert by_id["4711"]["unitReservations"][0]["adults"] == 2
    assert set(batch.records["account_id"]) == {"demo", "hotel-a"}


# --------------------------------------------------------------------------- to the sandbox


def sync(service: SandboxHandle, tmp_path: Path, mapping: Path, token: str) -> Result:
    env = {
        "PMS_SYNC_BASE_URL": service.base_url,
        "PMS_SYNC_SNAPSHOT": str(tmp_path / "state" / "snapshot.duckdb"),
        "PMS_SYNC_TOKEN": token,
        "PMS_SYNC_TOKENS_FILE": "",
    }
    return CliRunner().invoke(main, ["sync", str(mapping), "--json"], env=env)


@pytest.mark.slow
def test_booking_demand_data_syncs_each_hotel_to_its_account(
    clean_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    mapping = corpus_copy(tmp_path, "booking_demand") / "mapping.yaml"

    first = sync(clean_sandbox, tmp_path, mapping, SHARED_SYNC_TOKEN)
    again = sync(clean_sandbox, tmp_path, mapping, SHARED_SYNC_TOKEN)

    assert first.exit_code == 0, first.output
    assert json.loads(first.stdout)["outcomes"]["acknowledged"] == 13
    stored = clean_sandbox.records(entity="reservation")
    by_account = {record["accountId"] for record in stored}
    assert by_account == {"hotel-a", "hotel-b"}
    assert clean_sandbox.count("hotel-a", "reservation") == 7
    assert json.loads(again.stdout)["requests"] == 0


@pytest.mark.slow
def test_a_hotels_windows_export_syncs_rooms_then_reservations(
    clean_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    mapping = corpus_copy(tmp_path, "hotel_nights") / "mapping.yaml"

    result = sync(clean_sandbox, tmp_path, mapping, "demo-token")

    assert result.exit_code == 0, result.output
    assert clean_sandbox.count("demo", "accommodation") == 4
    assert clean_sandbox.count("demo", "reservation") == 7
    stored = {r["id"]: r for r in clean_sandbox.records(entity="reservation")}
    assert stored["4713"]["resource"]["unitReservations"][0]["price"] == 2345.9


# ------------------------------------------------------------------------------- pms-sync init


def placeholders(data: Any, path: tuple[str, ...] = ()) -> dict[str, Any]:
    """Every ``{fill_in: …}`` of a mapping's data, by dotted member path."""
    found: dict[str, Any] = {}
    if isinstance(data, dict):
        if set(data) == {"fill_in"}:
            return {".".join(path): data["fill_in"]}
        for key, value in data.items():
            found |= placeholders(value, (*path, str(key)))
    return found


def filled(data: Any, values: dict[str, Any], path: tuple[str, ...] = ()) -> Any:
    if isinstance(data, dict):
        if set(data) == {"fill_in"}:
            return values[".".join(path)]
        return {key: filled(value, values, (*path, str(key))) for key, value in data.items()}
    return data


def init(folder: Path, out: Path, *extra: str) -> Result:
    exports = [str(folder / name) for name in EXPORTS[folder.name]]
    return CliRunner().invoke(main, ["init", *exports, "--out", str(out), *extra])


@pytest.mark.parametrize("name", sorted(EXPORTS))
def test_init_drafts_a_schema_valid_mapping_that_maps_every_row_once_filled_in(
    tmp_path: Path, name: str
) -> None:
    folder = corpus_copy(tmp_path, name)
    out = tmp_path / "drafts" / "mapping.yaml"

    result = init(folder, out)

    assert result.exit_code == 0, result.output
    data, _lines = _read_yaml(out)
    schema = json.loads((ROOT / "mappings" / "schema.json").read_text(encoding="utf-8"))
    assert jsonschema_rs.validator_for(schema).is_valid(data)
    assert set(placeholders(data)) == set(FILL_IN[name])
    out.write_text(json.dumps(filled(data, FILL_IN[name]), ensure_ascii=False), encoding="utf-8")
    batches = map_records(load_mapping(out))
    assert {entity: len(batch.records) for entity, batch in batches.items()} == COUNTS[name]
    for batch in batches.values():
        assert batch.quarantine.empty, batch.quarantine.to_string()


def test_init_detects_the_layout_of_a_windows_export_with_a_title_line(tmp_path: Path) -> None:
    folder = corpus_copy(tmp_path, "hotel_nights")
    out = tmp_path / "mapping.yaml"

    init(folder, out, "--account", "demo")

    data, _lines = _read_yaml(out)
    assert data["inputs"]["arrivals"] == {
        "type": "csv",
        "path": "hotel_nights/arrivals.csv",
        "delimiter": ";",
        "encoding": "cp1252",
        "header_row": 3,
    }
    units = data["entities"]["reservation"]["fields"]["unitReservations"]["fields"]
    assert units["checkout"] == {"column": "Anreise", "format": "%d.%m.%Y", "add_days": "Nächte"}
    assert units["price"] == {"column": "Betrag", "decimal": ","}
    assert data["account"] == {"constant": "demo"}


def test_validate_lists_every_placeholder_to_fill_in_with_its_line(tmp_path: Path) -> None:
    out = tmp_path / "mapping.yaml"
    init(corpus_copy(tmp_path, "guest_rows"), out)
    lines = out.read_text(encoding="utf-8").splitlines()

    result = CliRunner().invoke(main, ["validate", str(out)])

    assert result.exit_code == 1
    assert "2 members to fill in" in result.output
    for member in ("account", "entities.reservation.fields.status"):
        line = next(
            n
            for n, text in enumerate(lines, 1)
            if "fill_in" in text
            and (text.startswith("account") if member == "account" else "status:" in text)
        )
        assert f"line {line}: to fill in: " in result.output
        assert f"(at {member})" in result.output


def test_init_json_prints_one_document_and_keeps_an_existing_file(tmp_path: Path) -> None:
    folder = corpus_copy(tmp_path, "booking_demand")
    out = tmp_path / "mapping.yaml"
    out.write_text("# mine\n", encoding="utf-8")

    refused = init(folder, out, "--json")
    written = init(folder, out, "--json", "--force")

    assert refused.exit_code == 1
    assert json.loads(refused.stdout)["status"] == "error"
    assert "--force" in json.loads(refused.stdout)["error"]
    document = json.loads(written.stdout)
    assert (document["status"], document["exit_code"]) == ("ok", 0)
    assert document["to_fill_in"] == ["account", "reservation.primaryGuest.firstName"]
    assert document["matched"]["reservation"]["id"] == "{row_number: true}"


def test_init_drafts_inputs_from_the_tables_of_a_database(tmp_path: Path) -> None:
    database = tmp_path / "pms.db"
    with sqlite3.connect(database) as connection:
        connection.execute(
            "CREATE TABLE bookings (booking_no TEXT, room TEXT, guest TEXT, email TEXT, "
            "arrival TEXT, departure TEXT, adults INTEGER, status TEXT, created_at TEXT)"
        )
        connection.execute(
            "INSERT INTO bookings VALUES ('R1', '12', 'Ann Lee', 'ann@example.com', "
            "'2025-07-01', '2025-07-03', 2, 'CONFIRMED', '2025-05-01 10:00:00')"
        )
        connection.execute("CREATE TABLE notes (booking_no TEXT, note TEXT)")
    out = tmp_path / "drafts" / "mapping.yaml"

    result = CliRunner().invoke(
        main, ["init", f"sqlite:///{database}", "--out", str(out), "--account", "demo"]
    )

    assert result.exit_code == 0, result.output
    data, _lines = _read_yaml(out)
    assert data["inputs"]["bookings"] == {
        "type": "sql",
        "url": "sqlite:///../pms.db",
        "table": "bookings",
    }
    assert data["entities"]["reservation"]["input"] == "bookings"
    assert "input notes is not used yet" in result.output
    batch = map_records(load_mapping(out))[Entity.RESERVATION]
    assert batch.quarantine.empty and batch.records["record_id"].tolist() == ["R1"]
