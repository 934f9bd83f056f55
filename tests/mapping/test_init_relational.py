"""`pms-sync init` on a booking system's relational schema (the shape of an open-source hotel
booking system's: bookings, a booking-to-room link table, rooms, room types, hotels,
customers, countries, currencies, order states), on SQLite, PostgreSQL and MariaDB: the
draft reads the foreign keys, takes the units from the rooms (not the customers, who have
addresses too), the stays from the link table, joins several hops, maps references through
the tables they name, and once its three secrets are filled in maps every row, without SQL."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import sqlalchemy as sa
from click.testing import CliRunner

from connector.cli import main
from connector.contract import Entity
from connector.mapping import load_mapping, map_records
from tests.mapping.gallery.relational.schema import booking_database

TABLES = [
    "CREATE TABLE countries (id INT PRIMARY KEY, iso_code VARCHAR(2), name VARCHAR(60))",
    "CREATE TABLE currencies (id INT PRIMARY KEY, iso_code VARCHAR(3), name VARCHAR(60))",
    "CREATE TABLE order_states (id INT PRIMARY KEY, name VARCHAR(60))",
    "CREATE TABLE customers (id INT PRIMARY KEY, firstname VARCHAR(60), lastname VARCHAR(60), "
    "email VARCHAR(80), phone VARCHAR(30), address1 VARCHAR(80), city VARCHAR(60), "
    "postcode VARCHAR(10), country_id INT, FOREIGN KEY (country_id) REFERENCES countries (id))",
    "CREATE TABLE hotels (id INT PRIMARY KEY, hotel_name VARCHAR(60), address VARCHAR(80), "
    "city VARCHAR(60), zip VARCHAR(10), country_id INT, "
    "FOREIGN KEY (country_id) REFERENCES countries (id))",
    "CREATE TABLE room_types (id INT PRIMARY KEY, hotel_id INT, name VARCHAR(60), "
    "max_adults INT, FOREIGN KEY (hotel_id) REFERENCES hotels (id))",
    "CREATE TABLE rooms (id INT PRIMARY KEY, room_type_id INT, room_num VARCHAR(10), "
    "floor VARCHAR(10), FOREIGN KEY (room_type_id) REFERENCES room_types (id))",
    "CREATE TABLE bookings (id INT PRIMARY KEY, reference VARCHAR(20), customer_id INT, "
    "current_state INT, currency_id INT, date_add VARCHAR(20), total_paid DECIMAL(10, 2), "
    "FOREIGN KEY (customer_id) REFERENCES customers (id), "
    "FOREIGN KEY (current_state) REFERENCES order_states (id), "
    "FOREIGN KEY (currency_id) REFERENCES currencies (id))",
    "CREATE TABLE booking_rooms (id INT PRIMARY KEY, booking_id INT, room_id INT, "
    "date_from VARCHAR(10), date_to VARCHAR(10), adults INT, children INT, "
    "total_price DECIMAL(10, 2), FOREIGN KEY (booking_id) REFERENCES bookings (id), "
    "FOREIGN KEY (room_id) REFERENCES rooms (id))",
]
ROWS = [
    "INSERT INTO countries VALUES (1, 'ID', 'Indonesia'), (2, 'AT', 'Austria')",
    "INSERT INTO currencies VALUES (1, 'EUR', 'Euro'), (2, 'IDR', 'Rupiah')",
    "INSERT INTO order_states VALUES (1, 'Awaiting payment'), (2, 'Payment accepted'), "
    "(3, 'Cancelled')",
    "INSERT INTO customers VALUES (1, 'Ann', 'Lee', 'ann@example.com', '+43 1 234', 'Ring 1', "
    "'Wien', '1010', 2), (2, 'Budi', 'Santoso', 'budi@example.com', '+62 361', 'Jl. Raya 5', "
    "'Ubud', '80571', 1)",
    "INSERT INTO hotels VALUES (1, 'Villa Kemuning', 'Jl. Kemuning 12', 'Ubud', '80571', 1)",
    "INSERT INTO room_types VALUES (1, 1, 'Garden Villa', 2), (2, 1, 'Pool Villa', 4)",
    "INSERT INTO rooms VALUES (1, 1, 'G1', '0'), (2, 1, 'G2', '0'), (3, 2, 'P1', '1')",
    "INSERT INTO bookings VALUES (1, 'XKBKNABJK', 1, 2, 1, '2026-01-02 10:00:00', 450), "
    "(2, 'OHSATSERP', 2, 3, 2, '2026-01-05 11:00:00', 0), "
    "(3, 'FFATNOMMJ', 2, 2, 2, '2026-02-01 09:30:00', 900)",
    "INSERT INTO booking_rooms VALUES (1, 1, 1, '2026-03-01', '2026-03-04', 2, 0, 300), "
    "(2, 1, 2, '2026-03-01', '2026-03-04', 2, 1, 150), "
    "(3, 2, 3, '2026-04-10', '2026-04-12', 3, 0, 0), "
    "(4, 3, 3, '2026-05-01', '2026-05-05', 4, 0, 900)",
]


@pytest.mark.parametrize(
    "kind",
    [
        "sqlite",
        pytest.param("postgresql", marks=pytest.mark.postgres),
        pytest.param("mariadb", marks=pytest.mark.mariadb),
    ],
)
def test_init_drafts_a_relational_schema_through_its_foreign_keys(
    tmp_path: Path, kind: str
) -> None:
    out = tmp_path / "mapping.yaml"
    with booking_database(kind, tmp_path, [*TABLES, *ROWS]) as url:
        result = CliRunner().invoke(
            main, ["init", url, "--out", str(out), "--account", "demo", "--json"]
        )
        assert result.exit_code == 0, result.output
        document = json.loads(result.stdout.splitlines()[0])
        mapping = load_mapping(out)

        accommodation = mapping.entities[Entity.ACCOMMODATION]
        reservation = mapping.entities[Entity.RESERVATION]
        assert accommodation.input == "rooms"
        assert [(j.input, j.on) for j in accommodation.joins] == [
            ("room_types", {"id": "room_type_id"}),
            ("hotels", {"id": "room_types.hotel_id"}),
            ("countries", {"id": "hotels.country_id"}),
        ]
        assert reservation.input == "booking_rooms"
        matched = document["matched"]["reservation"]
        assert matched["id"] == "booking_id"
        assert matched["unitReservations.unitId"] == "room_id"
        assert matched["unitReservations.checkin"] == "date_from"
        assert matched["primaryGuest.firstName"] == "customers.firstname"
        assert matched["primaryGuest.country"] == "countries.iso_code"
        assert matched["unitReservations.currency"] == "currencies.iso_code"
        assert "order_states.name" in matched["status"] and "CANCELLED" in matched["status"]
        assert document["matched"]["accommodation"]["city"] == "hotels.city"
        # References are followed, never mapped as values.
        everything = json.dumps(document["matched"])
        for reference in ("country_id", "currency_id", "customer_id", "current_state"):
            assert f'"{reference}"' not in everything
        assert document["unused_inputs"] == []
        assert sorted(document["to_fill_in"]) == [
            "accommodation.doorCode",
            "accommodation.wifiCode",
            "accommodation.wifiName",
        ]

        # What a newcomer writes in the three placeholders.
        text = out.read_text()
        for member in ("wifiName", "wifiCode", "doorCode"):
            start = text.index(f"{member}: {{fill_in:")
            text = text[:start] + f"{member}: {{constant: x1234}}" + text[text.index("\n", start) :]
        out.write_text(text)
        batches = map_records(load_mapping(out))

    # No hand-written SQL: no sql: member, no query: input.
    assert not re.search(r"(^|[{\s,])(sql|query):", text, re.MULTILINE)
    units, stays = batches[Entity.ACCOMMODATION], batches[Entity.RESERVATION]
    assert units.quarantine.empty and stays.quarantine.empty
    assert sorted(units.records["record_id"]) == ["1", "2", "3"]
    payloads = {
        record: json.loads(payload)
        for record, payload in zip(
            stays.records["record_id"], stays.records["payload"], strict=True
        )
    }
    assert sorted(payloads) == ["1", "2", "3"]
    assert len(payloads["1"]["unitReservations"]) == 2
    assert payloads["2"]["status"] == "CANCELLED"
    assert payloads["1"]["primaryGuest"]["country"] == "AT"
    unit = json.loads(units.records.set_index("record_id").loc["3", "payload"])
    assert (unit["city"], unit["country"]) == ("Ubud", "ID")


def test_without_declared_keys_references_are_read_from_the_column_names(
    tmp_path: Path,
) -> None:
    # A shop-system schema (a table prefix, id_<table> columns) that declares no foreign key.
    database = tmp_path / "shop.db"
    engine = sa.create_engine(f"sqlite:///{database}")
    with engine.begin() as connection:
        for statement in (
            "CREATE TABLE qlo_country (id_country INTEGER PRIMARY KEY, iso_code TEXT)",
            "CREATE TABLE qlo_customer (id_customer INTEGER PRIMARY KEY, firstname TEXT, "
            "lastname TEXT, id_country INTEGER)",
            "CREATE TABLE qlo_orders (id_order INTEGER PRIMARY KEY, id_customer INTEGER, "
            "date_add TEXT)",
            "CREATE TABLE qlo_htl_room_information (id INTEGER PRIMARY KEY, room_num TEXT)",
            "CREATE TABLE qlo_order_state (id_order_state INTEGER PRIMARY KEY, name TEXT)",
            "CREATE TABLE qlo_htl_booking_detail (id INTEGER PRIMARY KEY, id_order INTEGER, "
            "id_room INTEGER, date_from TEXT, date_to TEXT, adults INTEGER)",
            "INSERT INTO qlo_country VALUES (1, 'ID')",
            "INSERT INTO qlo_customer VALUES (1, 'Ann', 'Lee', 1)",
            "INSERT INTO qlo_orders VALUES (7, 1, '2026-01-02 10:00:00')",
            "INSERT INTO qlo_htl_room_information VALUES (3, 'G1')",
            "INSERT INTO qlo_order_state VALUES (1, 'Payment accepted')",
            "INSERT INTO qlo_htl_booking_detail VALUES (1, 7, 3, '2026-03-01', '2026-03-04', 2)",
        ):
            connection.execute(sa.text(statement))
    engine.dispose()
    out = tmp_path / "mapping.yaml"

    result = CliRunner().invoke(
        main, ["init", f"sqlite:///{database}", "--out", str(out), "--account", "demo", "--json"]
    )

    assert result.exit_code == 0, result.output
    matched = json.loads(result.stdout.splitlines()[0])["matched"]["reservation"]
    mapping = load_mapping(out)
    assert mapping.entities[Entity.RESERVATION].input == "qlo_htl_booking_detail"
    assert mapping.entities[Entity.ACCOMMODATION].input == "qlo_htl_room_information"
    # id_order names qlo_orders (its stem), id_room qlo_htl_room_information (a word of it);
    # id_order_state's table is no reference of anything here, and stays unjoined.
    assert (matched["id"], matched["unitReservations.unitId"]) == ("id_order", "id_room")
    assert matched["createdAt"] == "qlo_orders.date_add"
    assert matched["primaryGuest.country"] == "qlo_country.iso_code"
    assert matched["unitReservations.unitName"] == "qlo_htl_room_information.room_num"
