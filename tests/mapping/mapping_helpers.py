"""Small mapping files written on the fly: one export, one field under test."""

from __future__ import annotations

import csv
import dataclasses
import json
import textwrap
from pathlib import Path
from typing import Any

from connector.contract import Entity
from connector.mapping import load_mapping, map_records
from connector.records import MappedRecords, in_export_order

ACCOMMODATION_REQUIRED = {
    "id": "unit_id",
    "name": {"constant": "Flat"},
    "street": {"constant": "Main Street"},
    "streetNumber": {"constant": "1"},
    "country": {"constant": "DE"},
    "city": {"constant": "Berlin"},
    "wifiName": {"constant": "net"},
    "wifiCode": {"constant": "secret"},
    "doorCode": {"constant": "1234"},
}


def write_csv(path: Path, rows: list[dict[str, Any]], **options: Any) -> Path:
    encoding = options.pop("encoding", "utf-8")
    with path.open("w", newline="", encoding=encoding) as handle:
        writer = csv.DictWriter(handle, list(rows[0]), lineterminator="\n", **options)
        writer.writeheader()
        writer.writerows(rows)
    return path


def write_mapping(folder: Path, document: dict[str, Any], name: str = "mapping.yaml") -> Path:
    path = folder / name
    # JSON is YAML: no quoting surprises in generated test files.
    path.write_text(json.dumps(document, indent=2), encoding="utf-8")
    return path


def accommodation_mapping(fields: dict[str, Any], **entity: Any) -> dict[str, Any]:
    return {
        "account": {"constant": "demo"},
        "inputs": {"units": {"type": "csv", "path": "units.csv"}},
        "entities": {
            "accommodation": {
                "input": "units",
                **entity,
                "fields": {**ACCOMMODATION_REQUIRED, **fields},
            }
        },
    }


def map_units(
    folder: Path, rows: list[dict[str, Any]], fields: dict[str, Any], **entity: Any
) -> MappedRecords:
    write_csv(folder / "units.csv", rows)
    mapping = load_mapping(write_mapping(folder, accommodation_mapping(fields, **entity)))
    return in_order(map_records(mapping)[Entity.ACCOMMODATION])


def in_order(batch: MappedRecords) -> MappedRecords:
    """``batch`` with its records in export order: the engine returns them in no order, and
    the tests read them as the export lists them."""
    return dataclasses.replace(batch, records=in_export_order(batch.records))


def payloads(batch: MappedRecords) -> list[dict[str, Any]]:
    """The records' documents in export order."""
    return [json.loads(payload) for payload in in_export_order(batch.records)["payload"]]


def field_values(batch: MappedRecords, name: str) -> list[Any]:
    return [payload.get(name) for payload in payloads(batch)]


def reservation_mapping(unit_fields: dict[str, Any], fields: dict[str, Any] | None = None):
    return {
        "account": {"constant": "demo"},
        "inputs": {"bookings": {"type": "csv", "path": "bookings.csv"}},
        "entities": {
            "reservation": {
                "input": "bookings",
                "fields": {
                    "id": "booking",
                    "status": {"constant": "CONFIRMED"},
                    "createdAt": {"constant": "2025-01-01T00:00:00Z"},
                    "primaryGuest": {"firstName": {"constant": "Ann"}},
                    **(fields or {}),
                    "unitReservations": {
                        "fields": {
                            "id": {"template": "{booking}-1"},
                            "unitId": {"constant": "u1"},
                            "unitName": {"constant": "Flat"},
                            "adults": {"constant": 2},
                            "checkin": {"constant": "2025-07-01"},
                            "checkout": {"constant": "2025-07-03"},
                            **unit_fields,
                        }
                    },
                },
            }
        },
    }


def map_bookings(
    folder: Path,
    rows: list[dict[str, Any]],
    unit_fields: dict[str, Any],
    fields: dict[str, Any] | None = None,
) -> MappedRecords:
    write_csv(folder / "bookings.csv", rows)
    document = reservation_mapping(unit_fields, fields)
    mapping = load_mapping(write_mapping(folder, document))
    return in_order(map_records(mapping)[Entity.RESERVATION])


def unit_values(batch: MappedRecords, name: str) -> list[Any]:
    return [payload["unitReservations"][0].get(name) for payload in payloads(batch)]


def dedent(text: str) -> str:
    return textwrap.dedent(text).lstrip()
