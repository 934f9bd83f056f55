"""The gallery of real-world shapes (tests/mapping/gallery/): synthetic exports shaped like an
Opera arrivals report, Mews, Apaleo and Cloudbeds reservation exports, Airbnb's and
Booking.com's reservation CSVs, a channel manager's yearly files and a relational booking
schema (SQLite, PostgreSQL, MariaDB). Each has a hand-finished mapping without SQL that maps
every row; `pms-sync init`'s draft of it is scored against that mapping (members right, wrong,
to fill in: tests/mapping/gallery/score.py), and the finished mappings sync to the sandbox."""

from __future__ import annotations

import json
import os
import shutil
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
from connector.sandbox.testing import SandboxHandle
from tests.mapping.gallery.mews.workbook import write_workbook
from tests.mapping.gallery.relational.schema import booking_database
from tests.mapping.gallery.score import Score, score, table

GALLERY = Path(__file__).parent / "gallery"
SCHEMA = jsonschema_rs.validator_for(
    json.loads((Path(__file__).parents[2] / "mappings" / "schema.json").read_text("utf-8"))
)

FILE_SHAPES: dict[str, list[str]] = {
    "opera": ["arrivals.csv"],
    "mews": ["reservations.xlsx"],
    "apaleo": ["reservations.csv"],
    "cloudbeds": ["reservations.csv"],
    "airbnb": ["reservations.csv"],
    "booking_com": ["reservations.csv"],
    "channel_yearly": ["all_2022.csv", "all_2023.csv", "all_2024.csv"],
}
"""Each file shape's exports, as a newcomer hands them to `pms-sync init`."""

RESERVATIONS = {
    "opera": 8,
    "mews": 7,
    "apaleo": 6,  # 7 rows: booking XJNTQL has two units
    "cloudbeds": 6,
    "airbnb": 6,
    "booking_com": 6,
    "channel_yearly": 12,
}

RIGHT_AT_LEAST = {
    "opera": 11,
    "mews": 11,
    "apaleo": 14,
    "cloudbeds": 14,
    "airbnb": 12,
    "booking_com": 14,
    "channel_yearly": 13,
    "relational": 28,
}
"""The members init's draft gets right per shape today: a floor, so a regression shows."""

RELATIONAL = [
    "sqlite",
    pytest.param("postgresql", marks=pytest.mark.postgres),
    pytest.param("mariadb", marks=pytest.mark.mariadb),
]


def shape_copy(tmp_path: Path, shape: str) -> Path:
    folder = tmp_path / shape
    shutil.copytree(GALLERY / shape, folder, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
    if shape == "mews":
        write_workbook(folder)  # a workbook is written, not kept: a binary file diffs badly
    return folder


def read(path: Path) -> dict[str, Any]:
    # The loader's YAML: only true/false are booleans (`on:` stays a key).
    data, _lines = _read_yaml(path)
    assert isinstance(data, dict)
    return data


def payloads(batch: MappedRecords) -> dict[str, dict[str, Any]]:
    return {
        record_id: json.loads(payload)
        for record_id, payload in zip(
            batch.records["record_id"], batch.records["payload"], strict=True
        )
    }


def keys(data: Any) -> set[str]:
    """Every member name of a mapping's data, at any depth."""
    if isinstance(data, dict):
        return set(data) | {key for value in data.values() for key in keys(value)}
    if isinstance(data, list):
        return {key for item in data for key in keys(item)}
    return set()


def init(exports: list[str], out: Path) -> Result:
    return CliRunner().invoke(
        main, ["init", *exports, "--out", str(out), "--account", "demo", "--json"]
    )


def draft_and_score(shape: str, folder: Path) -> Score:
    """`pms-sync init` on the shape's exports (copied to ``folder``), its draft scored."""
    folder = shape_copy(folder.parent, shape) if not folder.exists() else folder
    out = folder.parent / f"{shape}-draft" / "mapping.yaml"
    result = init([str(folder / name) for name in FILE_SHAPES[shape]], out)
    assert result.exit_code == 0, result.output
    load_mapping(out)  # the draft is a valid mapping file, placeholders aside
    return score(shape, read(out), read(folder / "mapping.yaml"))


def report(found: Score) -> None:
    print(f"\n{table([found])}")  # the score table, shown with -s
    for path, (draft, done) in found.misses.items():
        print(f"  {path}: {found.verdicts[path]}: draft {draft!r}, finished {done!r}")


# ------------------------------------------------------------------------ finished mappings


@pytest.mark.parametrize("shape", sorted(FILE_SHAPES))
def test_each_finished_mapping_maps_every_row_without_sql(tmp_path: Path, shape: str) -> None:
    folder = shape_copy(tmp_path, shape)
    data = read(folder / "mapping.yaml")

    batches = map_records(load_mapping(folder / "mapping.yaml"))

    assert not {"sql", "query"} & keys(data)
    assert SCHEMA.is_valid(data)
    assert list(batches) == [Entity.RESERVATION]
    batch = batches[Entity.RESERVATION]
    assert batch.quarantine.empty, batch.quarantine.to_string()
    assert len(batch.records) == RESERVATIONS[shape]


def test_an_opera_report_reads_last_first_names_and_month_abbreviations(tmp_path: Path) -> None:
    by_id = payloads(
        map_records(load_mapping(shape_copy(tmp_path, "opera") / "mapping.yaml"))[
            Entity.RESERVATION
        ]
    )

    vries = by_id["80412415"]
    assert vries["primaryGuest"] == {"firstName": "Jan", "lastName": "De Vries", "country": "NL"}
    stay = vries["unitReservations"][0]
    assert (stay["checkin"], stay["checkout"], stay["unitId"]) == (
        "2026-12-03",
        "2026-12-07",
        "301",
    )
    assert by_id["80412391"]["unitReservations"][0]["unitId"] == "DBL"  # no room assigned yet
    assert by_id["80412402"]["status"] == "CANCELLED"
    assert by_id["80412420"]["status"] == "NO SHOW"  # a real booking, not a cancellation


def test_apaleo_reservations_of_one_booking_become_its_units(tmp_path: Path) -> None:
    by_id = payloads(
        map_records(load_mapping(shape_copy(tmp_path, "apaleo") / "mapping.yaml"))[
            Entity.RESERVATION
        ]
    )

    booking = by_id["XJNTQL"]
    assert [unit["id"] for unit in booking["unitReservations"]] == ["XJNTQL-1", "XJNTQL-2"]
    assert booking["unitReservations"][1]["unitId"] == "Standard Single"
    assert booking["createdAt"] == "2026-09-14T16:22:05Z"  # +02:00 in UTC
    assert by_id["VBNRTA"]["status"] == "CANCELLED"


def test_month_first_and_channel_exports_map_their_own_words(tmp_path: Path) -> None:
    def mapped(shape: str) -> dict[str, dict[str, Any]]:
        folder = shape_copy(tmp_path, shape)
        return payloads(map_records(load_mapping(folder / "mapping.yaml"))[Entity.RESERVATION])

    cloudbeds, airbnb, booking = mapped("cloudbeds"), mapped("airbnb"), mapped("booking_com")

    assert cloudbeds["4418265744"]["createdAt"] == "2026-10-02T09:10:00Z"
    assert cloudbeds["4418265791"]["unitReservations"][0]["checkin"] == "2026-12-18"
    assert cloudbeds["4418265744"]["status"] == "CANCELLED"
    assert airbnb["HMCD4EFG5H"]["unitReservations"][0]["checkout"] == "2026-12-01"
    assert airbnb["HMAB2CDE3F"]["unitReservations"][0]["unitId"] == "sea-view-loft"
    assert airbnb["HMBC3DEF4G"]["status"] == "CANCELLED"
    # Earnings written "€1,224.00": the symbol stripped, the thousands read.
    assert airbnb["HMCD4EFG5H"]["unitReservations"][0]["price"] == 1224.0
    assert booking["4103958299"]["primaryGuest"] == {
        "firstName": "Chloé",
        "lastName": "Martin",
        "country": "FR",
    }
    assert booking["4103958272"]["status"] == "CANCELLED"
    assert booking["4103958355"]["status"] == "no_show"
    unit = booking["4103958391"]["unitReservations"][0]
    assert (unit["price"], unit["currency"]) == (1230.0, "EUR")  # "1,230.00 EUR"


def test_a_mews_workbook_reads_excel_dates_and_unassigned_spaces(tmp_path: Path) -> None:
    folder = shape_copy(tmp_path, "mews")

    by_id = payloads(map_records(load_mapping(folder / "mapping.yaml"))[Entity.RESERVATION])

    stay = by_id["1834"]["unitReservations"][0]
    assert (stay["checkin"], stay["checkout"], stay["unitId"]) == (
        "2026-12-03",
        "2026-12-06",
        "204",
    )
    assert by_id["1834"]["createdAt"] == "2026-09-14T18:22:00Z"
    assert by_id["1839"]["unitReservations"][0]["unitId"] == "Standard Single"
    assert [i for i, p in sorted(by_id.items()) if p["status"] == "CANCELLED"] == ["1835", "1840"]


def test_a_channel_managers_yearly_files_are_one_glob_input(tmp_path: Path) -> None:
    folder = shape_copy(tmp_path, "channel_yearly")

    batch = map_records(load_mapping(folder / "mapping.yaml"))[Entity.RESERVATION]

    by_id = payloads(batch)
    assert {record_id[:6] for record_id in by_id} == {"CM-22-", "CM-23-", "CM-24-"}
    assert by_id["CM-22-0078"]["unitReservations"][0]["price"] == 11200000.0
    assert sum(1 for p in by_id.values() if p["status"] == "CANCELLED") == 3


# ------------------------------------------------------------------------- init, scored


def test_the_score_compares_what_members_read_not_how_they_are_written() -> None:
    finished: dict[str, Any] = {
        "entities": {
            "reservation": {
                "input": "stays",
                "joins": [{"input": "guests", "as": "g", "on": {"id": "guest_id"}}],
                "fields": {
                    "id": "booking",
                    "status": {"column": "state", "map": {"Canceled": "CANCELLED"}},
                    "createdAt": {"column": "booked", "format": "%d.%m.%Y"},
                    "primaryGuest": {"firstName": "g.first", "email": "g.mail"},
                    "unitReservations": {"fields": {"unitId": {"coalesce": ["room", "type"]}}},
                },
            }
        }
    }
    draft: dict[str, Any] = {
        "entities": {
            "reservation": {
                "input": "stays",
                "joins": [{"input": "guests", "as": "guests", "on": {"id": "guest_id"}}],
                "fields": {
                    "id": {"row_number": True},
                    "status": {"column": "state", "map": {"Canceled": "CANCELLED"}},
                    "createdAt": "booked",
                    "primaryGuest": {"firstName": {"column": "guests.first"}},
                    "unitReservations": {"fields": {"unitId": {"fill_in": "the room"}}},
                },
            }
        }
    }

    found = score("example", draft, finished)

    assert found.verdicts == {
        "reservation.id": "wrong",
        "reservation.status": "right",
        "reservation.createdAt": "right",  # the format is not compared
        "reservation.primaryGuest.firstName": "right",  # through another alias
        "reservation.primaryGuest.email": "to fill in",
        "reservation.unitReservations.unitId": "to fill in",
    }
    draft["entities"]["reservation"]["fields"]["status"] = "state"  # no cancellation mapped
    assert score("example", draft, finished).verdicts["reservation.status"] == "wrong"


@pytest.mark.parametrize("shape", sorted(FILE_SHAPES))
def test_init_drafts_each_file_shape_scored_against_its_finished_mapping(
    tmp_path: Path, shape: str
) -> None:
    found = draft_and_score(shape, shape_copy(tmp_path, shape))

    report(found)
    assert found.right >= RIGHT_AT_LEAST[shape]
    assert found.right + found.wrong + found.to_fill_in == len(found.verdicts)


# --------------------------------------------------------------------------- relational


@pytest.mark.parametrize("kind", RELATIONAL)
def test_a_relational_schema_maps_through_its_foreign_keys_and_init_is_scored(
    tmp_path: Path, kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = shape_copy(tmp_path, "relational")
    out = tmp_path / "draft" / "mapping.yaml"
    with booking_database(kind, tmp_path) as url:
        monkeypatch.setenv("GALLERY_DB_URL", url)
        batches = map_records(load_mapping(folder / "mapping.yaml"))
        result = init([url], out)
        assert result.exit_code == 0, result.output
        load_mapping(out)

    assert not {"sql", "query"} & keys(read(folder / "mapping.yaml"))
    assert SCHEMA.is_valid(read(folder / "mapping.yaml"))
    units, stays = batches[Entity.ACCOMMODATION], batches[Entity.RESERVATION]
    assert units.quarantine.empty and stays.quarantine.empty
    assert sorted(units.records["record_id"]) == ["1", "2", "3", "4"]
    by_id = payloads(stays)
    assert sorted(by_id) == ["1", "2", "3", "4", "5"]
    assert [unit["unitName"] for unit in by_id["1"]["unitReservations"]] == ["101", "102"]
    assert by_id["2"]["status"] == "CANCELLED"
    assert by_id["3"]["primaryGuest"]["country"] == "SE"
    room = payloads(units)["4"]
    assert (room["city"], room["country"], room["wifiName"]) == ("St. Anton", "AT", "Seehof")

    found = score(f"relational ({kind})", read(out), read(folder / "mapping.yaml"))
    report(found)
    assert found.right >= RIGHT_AT_LEAST["relational"]


def gallery_scores(folder: Path) -> list[Score]:
    """Every shape's draft scored (the relational schema in SQLite), for the docs' table."""
    found = [draft_and_score(shape, folder / shape) for shape in FILE_SHAPES]
    with booking_database("sqlite", folder) as url:
        out = folder / "relational-draft" / "mapping.yaml"
        assert init([url], out).exit_code == 0
        os.environ["GALLERY_DB_URL"] = url  # the finished mapping's inputs name it
        try:
            finished = read(GALLERY / "relational" / "mapping.yaml")
        finally:
            del os.environ["GALLERY_DB_URL"]
        found.append(score("relational", read(out), finished))
    return found


# --------------------------------------------------------------------------- to the sandbox


def sync(service: SandboxHandle, tmp_path: Path, mapping: Path) -> Result:
    env = {
        "PMS_SYNC_BASE_URL": service.base_url,
        "PMS_SYNC_SNAPSHOT": str(tmp_path / "state" / "snapshot.duckdb"),
        "PMS_SYNC_TOKEN": "demo-token",
        "PMS_SYNC_TOKENS_FILE": "",
    }
    return CliRunner().invoke(main, ["sync", str(mapping), "--json"], env=env)


def stored_once(service: SandboxHandle, entity: Entity, batch: MappedRecords) -> None:
    stored = [record["id"] for record in service.records("demo", entity.value)]
    assert sorted(stored) == sorted(batch.records["record_id"])


@pytest.mark.slow
@pytest.mark.parametrize("shape", sorted(FILE_SHAPES))
def test_each_finished_file_mapping_syncs_every_record_once(
    clean_sandbox: SandboxHandle, tmp_path: Path, shape: str
) -> None:
    mapping = shape_copy(tmp_path, shape) / "mapping.yaml"

    result = sync(clean_sandbox, tmp_path, mapping)

    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["outcomes"]["acknowledged"] == RESERVATIONS[shape]
    batch = map_records(load_mapping(mapping))[Entity.RESERVATION]
    stored_once(clean_sandbox, Entity.RESERVATION, batch)


@pytest.mark.slow
def test_the_relational_mapping_syncs_rooms_then_stays(
    clean_sandbox: SandboxHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mapping = shape_copy(tmp_path, "relational") / "mapping.yaml"
    with booking_database("sqlite", tmp_path) as url:
        monkeypatch.setenv("GALLERY_DB_URL", url)

        result = sync(clean_sandbox, tmp_path, mapping)

        batches = map_records(load_mapping(mapping))
    assert result.exit_code == 0, result.output
    for entity, batch in batches.items():
        stored_once(clean_sandbox, entity, batch)
