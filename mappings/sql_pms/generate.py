"""Generate the SQL PMS sample: a small relational schema with data, as a portable SQL script
(``pms.sql``) and as the SQLite database the mapping reads by default (``pms.sqlite``).

Tables: properties, units, guests, reservations, stays (one stay per booked unit). The same
script loads into PostgreSQL and MariaDB (the tests do that; MariaDB reads TIMESTAMP as
DATETIME, see ``for_dialect``). Deterministic (seeded) for a given anchor day (default: the
current month's first; ``sample.json`` records it): stays run from about four months before
it to seven after, so the nightly window always holds some.

    python mappings/sql_pms/generate.py [--reservations N] [--out DIR] [--anchor YYYY-MM-DD]
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
from datetime import date, datetime, time, timedelta
from pathlib import Path

HERE = Path(__file__).parent

DDL = """
CREATE TABLE properties (
    id INTEGER PRIMARY KEY,
    name VARCHAR(100) NOT NULL,
    street VARCHAR(100),
    street_no VARCHAR(10),
    zip VARCHAR(10),
    city VARCHAR(60),
    country_code VARCHAR(3),
    wifi_ssid VARCHAR(60),
    wifi_key VARCHAR(60),
    entry_code VARCHAR(60),
    latitude DECIMAL(9, 6),
    longitude DECIMAL(9, 6)
);
CREATE TABLE units (
    id INTEGER PRIMARY KEY,
    property_id INTEGER NOT NULL REFERENCES properties (id),
    unit_number VARCHAR(10) NOT NULL,
    name VARCHAR(100) NOT NULL,
    floor INTEGER,
    bedrooms INTEGER,
    max_occupancy INTEGER,
    size_sqm DECIMAL(6, 1),
    active INTEGER NOT NULL,
    updated_at TIMESTAMP NOT NULL
);
CREATE TABLE guests (
    id INTEGER PRIMARY KEY,
    first_name VARCHAR(60) NOT NULL,
    last_name VARCHAR(60),
    email VARCHAR(120),
    phone VARCHAR(40),
    country VARCHAR(3),
    language VARCHAR(10)
);
CREATE TABLE reservations (
    id INTEGER PRIMARY KEY,
    confirmation_code VARCHAR(20) NOT NULL,
    status VARCHAR(20) NOT NULL,
    guest_id INTEGER REFERENCES guests (id),
    channel VARCHAR(40),
    created_at TIMESTAMP NOT NULL,
    updated_at TIMESTAMP NOT NULL
);
CREATE TABLE stays (
    id INTEGER PRIMARY KEY,
    reservation_id INTEGER NOT NULL REFERENCES reservations (id),
    unit_id INTEGER NOT NULL REFERENCES units (id),
    arrival DATE NOT NULL,
    departure DATE NOT NULL,
    adults INTEGER NOT NULL,
    children INTEGER,
    eta TIME,
    amount DECIMAL(10, 2),
    currency VARCHAR(3)
);
"""

TABLES = ("properties", "units", "guests", "reservations", "stays")


def anchor_date(text: str | None) -> date:
    """The day the sample is generated around: the given one, else the current month's first."""
    return date.fromisoformat(text) if text else date.today().replace(day=1)


def write_manifest(folder: Path, anchor: date, arguments: dict[str, object]) -> None:
    """``sample.json``: the anchor and arguments, so the sample can be reproduced and a demo
    can tell it is stale (its anchor month is not the current one)."""
    manifest = {"anchor": anchor.isoformat(), "arguments": arguments}
    (folder / "sample.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


def literal(value: object) -> str:
    if value is None:
        return "NULL"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, datetime):
        value = value.strftime("%Y-%m-%d %H:%M:%S")
    elif isinstance(value, date | time):
        value = value.isoformat()
    return "'" + str(value).replace("'", "''") + "'"


def rows(
    rng: random.Random, reservations: int, anchor: date = date(2025, 5, 1)
) -> dict[str, list[tuple[object, ...]]]:
    booked_from = datetime.combine(anchor - timedelta(days=120), time())
    properties = [
        (
            1,
            "Harbour Lofts",
            "Kaistraße",
            "12",
            "20457",
            "Hamburg",
            "DEU",
            "Lofts-Guest",
            "harbour-2024",
            "Key safe 4711",
            53.5412,
            9.9856,
        ),
        (
            2,
            "Old Town Suites",
            "Rynek Główny",
            "3",
            "31-042",
            "Kraków",
            "POL",
            "Suites",
            "krakow!guest",
            "Code 2580 at the side door",
            50.0617,
            19.9373,
        ),
        (
            3,
            "Canal House",
            "Prinsengracht",
            "263",
            "1016 GV",
            "Amsterdam",
            "NL",
            "CanalHouse",
            "tulips4you",
            "Smart lock, code by SMS",
            52.3752,
            4.8840,
        ),
    ]
    units = []
    for unit_id in range(1, 13):
        property_id = (unit_id - 1) % 3 + 1
        number = f"{(unit_id - 1) // 3 + 1}{property_id:02d}"
        units.append(
            (
                unit_id,
                property_id,
                number,
                f"Apartment {number}",
                (unit_id - 1) // 3,
                rng.randint(1, 3),
                rng.randint(2, 6),
                round(rng.uniform(28, 90), 1),
                0 if unit_id == 12 else 1,
                datetime(2025, 1, 1) + timedelta(hours=unit_id),
            )
        )
    firsts = ["Maja", "Olek", "Sanne", "Tom", "Ewa", "Pieter", "Lena", "Ahmed", "Ines"]
    lasts = ["Kowalski", "Jansen", "Schulz", "Nowak", "de Boer", "Khan", "Silva"]
    countries = ["POL", "NLD", "DEU", "GBR", "USA", "FRA", None]
    languages = ["pl", "nl", "de", "en", "en-US", "fr", None]
    guests, reservation_rows, stays = [], [], []
    statuses = ["confirmed"] * 7 + ["checked_in", "cancelled"]
    stay_id = 0
    for reservation_id in range(1, reservations + 1):
        first, last = rng.choice(firsts), rng.choice(lasts)
        country = rng.randrange(len(countries))
        guests.append(
            (
                reservation_id,
                first,
                last,
                f"{first.lower()}.{reservation_id}@example.net",
                f"+48 600 {reservation_id:06d}",
                countries[country],
                languages[country],
            )
        )
        created = booked_from + timedelta(minutes=rng.randrange(0, 60 * 24 * 150))
        reservation_rows.append(
            (
                reservation_id,
                f"SQL{reservation_id:05d}",
                rng.choice(statuses),
                reservation_id,
                rng.choice(["Airbnb", "Booking.com", "Website"]),
                created,
                created + timedelta(hours=rng.randrange(1, 72)),
            )
        )
        arrival = created.date() + timedelta(days=rng.randrange(1, 200))
        for unit in rng.sample(units[:11], 1 if rng.random() < 0.8 else 2):
            stay_id += 1
            nights = rng.choice([1, 2, 3, 5, 7])
            stays.append(
                (
                    stay_id,
                    reservation_id,
                    unit[0],
                    arrival,
                    arrival + timedelta(days=nights),
                    rng.randint(1, 3),
                    rng.choice([0, 0, 1]),
                    rng.choice([None, time(14, 0), time(15, 30), time(16, 10), time(21, 45)]),
                    round(nights * rng.choice([80, 95.5, 120]), 2),
                    "EUR",
                )
            )
    return {
        "properties": properties,
        "units": units,
        "guests": guests,
        "reservations": reservation_rows,
        "stays": stays,
    }


def script(data: dict[str, list[tuple[object, ...]]]) -> str:
    lines = ["-- Generated by mappings/sql_pms/generate.py; do not edit.", DDL.strip(), ""]
    for table in TABLES:
        for row in data[table]:
            values = ", ".join(literal(value) for value in row)
            lines.append(f"INSERT INTO {table} VALUES ({values});")
    return "\n".join(lines) + "\n"


def statements(sql: str) -> list[str]:
    """The script's statements, one by one (no statement contains a semicolon in a value)."""
    body = "\n".join(line for line in sql.splitlines() if not line.startswith("--"))
    return [part.strip() for part in body.split(";\n") if part.strip().rstrip(";")]


def for_dialect(sql: str, dialect: str) -> str:
    """MariaDB's TIMESTAMP has update semantics and a 2038 limit: DATETIME is the plain type."""
    if dialect in ("mysql", "mariadb"):
        return sql.replace(" TIMESTAMP NOT NULL", " DATETIME NOT NULL")
    return sql


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reservations", type=int, default=40)
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--out", type=Path, default=HERE)
    parser.add_argument("--anchor", help="YYYY-MM-DD the dates are around (default: 1st of month)")
    arguments = parser.parse_args()
    anchor = anchor_date(arguments.anchor)
    sql = script(rows(random.Random(arguments.seed), arguments.reservations, anchor))
    arguments.out.mkdir(parents=True, exist_ok=True)
    write_manifest(
        arguments.out, anchor, {"reservations": arguments.reservations, "seed": arguments.seed}
    )
    (arguments.out / "pms.sql").write_text(sql, encoding="utf-8")
    database = arguments.out / "pms.sqlite"
    database.unlink(missing_ok=True)
    with sqlite3.connect(database) as connection:
        for statement in statements(sql):
            connection.execute(statement)
    connection.close()


if __name__ == "__main__":
    main()
