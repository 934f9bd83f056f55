"""The Mews-style export of the gallery, written as a real .xlsx at test time
(``python -m tests.mapping.gallery.mews.workbook FOLDER``): Excel date-times, whole numbers as
numbers, a space (room) cell left empty until one is assigned."""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path

import openpyxl

HEADER = [
    "Number",
    "State",
    "Origin",
    "Created",
    "Arrival",
    "Departure",
    "Space",
    "Space category",
    "Customer",
    "Email",
    "Adults",
    "Children",
    "Total amount",
    "Currency",
    "Rate",
]
_ANNA = ("Anna Weber", "anna.weber@example.com")
ROWS: list[list[object]] = [
    [
        1834,
        "Confirmed",
        "Booking.com",
        datetime(2026, 9, 14, 18, 22),
        datetime(2026, 12, 3, 15),
        datetime(2026, 12, 6, 11),
        "204",
        "Deluxe Double",
        *_ANNA,
        2,
        0,
        389.7,
        "EUR",
        "Flexible",
    ],
    [
        1835,
        "Canceled",
        "Direct",
        datetime(2026, 10, 2, 9, 10),
        datetime(2026, 12, 3, 15),
        datetime(2026, 12, 4, 11),
        None,
        "Standard Single",
        "Tom Berg",
        "tom.berg@example.com",
        1,
        0,
        99.0,
        "EUR",
        "Non-refundable",
    ],
    [
        1836,
        "Started",
        "Expedia",
        datetime(2026, 10, 20, 12),
        datetime(2026, 11, 27, 15),
        datetime(2026, 12, 1, 11),
        "101",
        "Deluxe Double",
        "Chloé Martin",
        "chloe.martin@example.com",
        2,
        1,
        612.0,
        "EUR",
        "Flexible",
    ],
    [
        1837,
        "Processed",
        "Direct",
        datetime(2026, 10, 1, 8, 45),
        datetime(2026, 11, 20, 15),
        datetime(2026, 11, 22, 11),
        "102",
        "Standard Single",
        "Marco Rossi",
        "marco.rossi@example.com",
        1,
        0,
        180.5,
        "EUR",
        "Flexible",
    ],
    [
        1838,
        "Confirmed",
        "Airbnb",
        datetime(2026, 11, 11, 21, 30),
        datetime(2026, 12, 10, 15),
        datetime(2026, 12, 15, 11),
        "305",
        "Family Suite",
        "Hannah Lee",
        "hannah.lee@example.com",
        2,
        2,
        1230.0,
        "EUR",
        "Flexible",
    ],
    [
        1839,
        "Confirmed",
        "Direct",
        datetime(2026, 11, 12, 7, 5),
        datetime(2026, 12, 12, 15),
        datetime(2026, 12, 13, 11),
        None,
        "Standard Single",
        "Piotr Nowak",
        "piotr.nowak@example.com",
        1,
        0,
        95.0,
        "EUR",
        "Flexible",
    ],
    [
        1840,
        "Canceled",
        "Booking.com",
        datetime(2026, 11, 13, 16, 40),
        datetime(2026, 12, 18, 15),
        datetime(2026, 12, 21, 11),
        "204",
        "Deluxe Double",
        "Sara Lindqvist",
        "sara.lindqvist@example.com",
        2,
        0,
        420.0,
        "EUR",
        "Flexible",
    ],
]


def write_workbook(folder: Path) -> Path:
    workbook = openpyxl.Workbook()
    sheet = workbook.active
    assert sheet is not None
    sheet.title = "Reservations"
    sheet.append(HEADER)
    for row in ROWS:
        sheet.append(row)
    path = folder / "reservations.xlsx"
    workbook.save(path)
    return path


if __name__ == "__main__":
    write_workbook(Path(sys.argv[1]))
