"""A small PMS database of units and bookings with update times, on any SQLAlchemy URL, and
the mapping that reads both incrementally (booking B2 is one record of two rows)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from tests.mapping.mapping_helpers import ACCOMMODATION_REQUIRED

START = datetime(2026, 1, 1, 8)
STAMP = "TIMESTAMP"  # MariaDB: DATETIME (TIMESTAMP has update semantics there)

UNITS = [(unit, f"Flat {unit}", START + timedelta(minutes=unit)) for unit in range(1, 7)]
# Booking B2 has two rooms: a record built from two rows.
BOOKINGS = [
    (1, "B1", 1, "2030-07-01", "2030-07-03", 2, START),
    (2, "B2", 2, "2030-07-05", "2030-07-08", 1, START + timedelta(minutes=1)),
    (3, "B2", 3, "2030-07-05", "2030-07-08", 2, START + timedelta(minutes=1)),
    (4, "B3", 4, "2030-08-01", "2030-08-04", 3, START + timedelta(minutes=2)),
    (5, "B4", 5, "2030-09-01", "2030-09-02", 1, START + timedelta(minutes=3)),
]


def schema(dialect: str) -> list[str]:
    stamp = "DATETIME" if dialect in ("mysql", "mariadb") else STAMP
    return [
        f"CREATE TABLE units (id INTEGER PRIMARY KEY, name VARCHAR(40) NOT NULL, "
        f"updated_at {stamp} NOT NULL)",
        "CREATE TABLE bookings (row_id INTEGER PRIMARY KEY, booking_ref VARCHAR(10) NOT NULL, "
        "unit_id INTEGER NOT NULL, arrival DATE NOT NULL, departure DATE NOT NULL, "
        f"adults INTEGER NOT NULL, updated_at {stamp} NOT NULL)",
    ]


def load(url: str) -> sa.Engine:
    engine = sa.create_engine(url)
    with engine.begin() as connection:
        for statement in schema(engine.dialect.name):
            connection.execute(sa.text(statement))
        connection.execute(
            sa.text("INSERT INTO units VALUES (:id, :name, :at)"),
            [{"id": u, "name": n, "at": at} for u, n, at in UNITS],
        )
        connection.execute(
            sa.text("INSERT INTO bookings VALUES (:r, :b, :u, :a, :d, :n, :at)"),
            [
                {"r": r, "b": b, "u": u, "a": a, "d": d, "n": n, "at": at}
                for r, b, u, a, d, n, at in BOOKINGS
            ],
        )
    return engine


def write_mapping(folder: Path, url: str, name: str = "incremental", **extra: Any) -> Path:
    document = {
        "name": name,
        "account": {"constant": "demo"},
        "inputs": {
            "units": {"type": "sql", "url": url, "table": "units", "cursor": "updated_at"},
            "bookings": {
                "type": "sql",
                "url": url,
                "table": "bookings",
                "cursor": {"column": "updated_at", "key": "booking_ref"},
            },
        },
        "entities": {
            "accommodation": {
                "input": "units",
                "fields": {**ACCOMMODATION_REQUIRED, "id": "id", "name": "name"},
            },
            "reservation": {
                "input": "bookings",
                "on_missing": "cancel_future",
                "fields": {
                    "id": "booking_ref",
                    "status": {"constant": "CONFIRMED"},
                    "createdAt": {"constant": "2025-01-01T00:00:00Z"},
                    "primaryGuest": {"firstName": {"constant": "Ann"}},
                    "unitReservations": {
                        "fields": {
                            "id": "row_id",
                            "unitId": "unit_id",
                            "unitName": {"constant": "Flat"},
                            "adults": "adults",
                            "checkin": "arrival",
                            "checkout": "departure",
                        }
                    },
                },
            },
        },
    }
    document.update(extra)
    path = folder / "mapping.yaml"
    path.write_text(json.dumps(document, indent=2))  # JSON is YAML
    return path
