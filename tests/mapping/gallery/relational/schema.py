"""The gallery's relational booking schema (the shape of an open-source hotel booking
system's): bookings, a booking-to-room link table, rooms, room types, hotels, customers,
countries and order states, with foreign keys, created in any database SQLAlchemy reaches."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from pathlib import Path

import sqlalchemy as sa

from tests.servers import mariadb_database, postgres_schema

TABLES = [
    "CREATE TABLE countries (id INT PRIMARY KEY, iso_code VARCHAR(2), name VARCHAR(60))",
    "CREATE TABLE order_states (id INT PRIMARY KEY, name VARCHAR(40), paid INT)",
    "CREATE TABLE customers (id INT PRIMARY KEY, first_name VARCHAR(60), "
    "last_name VARCHAR(60), email VARCHAR(80), phone VARCHAR(30), street VARCHAR(80), "
    "city VARCHAR(60), country_id INT, FOREIGN KEY (country_id) REFERENCES countries (id))",
    "CREATE TABLE hotels (id INT PRIMARY KEY, hotel_name VARCHAR(60), street VARCHAR(80), "
    "house_number VARCHAR(10), zip VARCHAR(10), city VARCHAR(60), wifi_ssid VARCHAR(40), "
    "wifi_password VARCHAR(40), country_id INT, "
    "FOREIGN KEY (country_id) REFERENCES countries (id))",
    "CREATE TABLE room_types (id INT PRIMARY KEY, hotel_id INT, name VARCHAR(60), "
    "max_guests INT, FOREIGN KEY (hotel_id) REFERENCES hotels (id))",
    "CREATE TABLE rooms (id INT PRIMARY KEY, room_type_id INT, room_number VARCHAR(10), "
    "floor VARCHAR(10), door_code VARCHAR(10), "
    "FOREIGN KEY (room_type_id) REFERENCES room_types (id))",
    "CREATE TABLE bookings (id INT PRIMARY KEY, reference VARCHAR(20), customer_id INT, "
    "state_id INT, created_at TIMESTAMP, channel VARCHAR(30), "
    "FOREIGN KEY (customer_id) REFERENCES customers (id), "
    "FOREIGN KEY (state_id) REFERENCES order_states (id))",
    "CREATE TABLE booking_rooms (id INT PRIMARY KEY, booking_id INT, room_id INT, "
    "arrival DATE, departure DATE, adults INT, children INT, price DECIMAL(10, 2), "
    "FOREIGN KEY (booking_id) REFERENCES bookings (id), "
    "FOREIGN KEY (room_id) REFERENCES rooms (id))",
]
ROWS = [
    "INSERT INTO countries VALUES (1, 'AT', 'Austria'), (2, 'DE', 'Germany'), "
    "(3, 'IT', 'Italy'), (4, 'SE', 'Sweden')",
    "INSERT INTO order_states VALUES (1, 'Pending', 0), (2, 'Confirmed', 1), "
    "(3, 'Checked in', 1), (4, 'Checked out', 1), (5, 'Cancelled', 0)",
    "INSERT INTO customers VALUES "
    "(1, 'Anna', 'Weber', 'anna.weber@example.com', '+49 151 2345678', 'Ring 1', 'Berlin', 2), "
    "(2, 'Marco', 'Rossi', 'marco.rossi@example.com', '+39 333 1234567', 'Via Roma 5', "
    "'Milano', 3), "
    "(3, 'Sara', 'Lindqvist', 'sara@example.com', NULL, 'Storgatan 9', 'Uppsala', 4), "
    "(4, 'Lukas', 'Gruber', 'lukas.gruber@example.com', '+43 664 1234567', 'Gasse 3', "
    "'Graz', 1)",
    "INSERT INTO hotels VALUES (1, 'Hotel Alpenrose', 'Dorfstrasse', '12', '6020', "
    "'Innsbruck', 'Alpenrose-Guest', 'edelweiss26', 1), "
    "(2, 'Seehof Garni', 'Uferweg', '3a', '6580', 'St. Anton', 'Seehof', 'bergsee!', 1)",
    "INSERT INTO room_types VALUES (1, 1, 'Double Room', 2), (2, 1, 'Junior Suite', 4), "
    "(3, 2, 'Lake Studio', 2)",
    "INSERT INTO rooms VALUES (1, 1, '101', '1', '4711'), (2, 1, '102', '1', '4712'), "
    "(3, 2, '201', '2', '5821'), (4, 3, 'S1', '0', '9034')",
    "INSERT INTO bookings VALUES "
    "(1, 'AR-2026-0001', 1, 2, '2026-09-14 18:22:05', 'Direct'), "
    "(2, 'AR-2026-0002', 2, 5, '2026-10-02 09:10:44', 'Booking.com'), "
    "(3, 'AR-2026-0003', 3, 3, '2026-10-20 12:00:31', 'Expedia'), "
    "(4, 'AR-2026-0004', 4, 4, '2026-10-01 08:45:02', 'Direct'), "
    "(5, 'AR-2026-0005', 1, 1, '2026-11-11 21:30:50', 'Direct')",
    "INSERT INTO booking_rooms VALUES "
    "(1, 1, 1, '2026-12-03', '2026-12-06', 2, 0, 389.70), "
    "(2, 1, 2, '2026-12-03', '2026-12-06', 1, 1, 310.00), "
    "(3, 2, 3, '2026-12-13', '2026-12-14', 2, 0, 149.00), "
    "(4, 3, 4, '2026-11-27', '2026-12-01', 2, 0, 612.00), "
    "(5, 4, 1, '2026-11-20', '2026-11-22', 1, 0, 180.50), "
    "(6, 5, 3, '2026-12-18', '2026-12-23', 2, 2, 1230.00), "
    "(7, 5, 4, '2026-12-18', '2026-12-23', 2, 0, 800.00)",
]


def create(url: str, statements: Sequence[str] = (*TABLES, *ROWS)) -> None:
    """The schema and its rows (or other ``statements``) in the empty database at ``url``."""
    engine = sa.create_engine(url)
    try:
        with engine.begin() as connection:
            for statement in statements:
                connection.execute(sa.text(statement))
    finally:
        engine.dispose()


@contextlib.contextmanager
def booking_database(
    kind: str, tmp_path: Path, statements: Sequence[str] = (*TABLES, *ROWS)
) -> Iterator[str]:
    """``statements`` (the gallery's schema and rows) run in a fresh database of ``kind``
    (sqlite, postgresql, mariadb): its URL."""
    if kind == "sqlite":
        url = f"sqlite:///{tmp_path / 'hotel.db'}"
        create(url, statements)
        yield url
    elif kind == "postgresql":
        with postgres_schema() as (server, schema):
            rendered = (
                sa.engine.make_url(server)
                .update_query_dict({"options": f"-csearch_path={schema}"})
                .render_as_string(hide_password=False)
            )
            create(rendered, statements)
            yield rendered
    else:
        with mariadb_database() as url:
            create(url, statements)
            yield url
