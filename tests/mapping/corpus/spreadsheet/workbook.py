"""The spreadsheet export of the corpus, written as a real .xlsx (python workbook.py FOLDER).

A PMS report saved from Excel: a title row and a blank row above the header, booking ids and
room numbers stored as numbers (so they read as 4711.0, and a long id as
9.290212028640288e+17), guest counts as 2.0, dates as Excel dates, ISO-3 countries, and two
properties in one sheet.
"""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path

import openpyxl

HEADER = [
    "Property",
    "Booking ID",
    "Guest",
    "Country",
    "Arrival",
    "Departure",
    "Adults",
    "Children",
    "Room",
    "Total",
    "Created",
]
ROWS = [
    [
        "Berlin Mitte",
        4711.0,
        "Anna Weber",
        "DEU",
        datetime(2025, 9, 1),
        datetime(2025, 9, 4),
        2.0,
        0.0,
        101.0,
        389.7,
        datetime(2025, 3, 1, 9, 30),
    ],
    [
        "Berlin Mitte",
        4712.0,
        "Tom Berg",
        "SWE",
        datetime(2025, 9, 2),
        datetime(2025, 9, 3),
        1.0,
        None,
        102.0,
        99.0,
        datetime(2025, 4, 2, 14, 0),
    ],
    [
        "Berlin Mitte",
        929021202864028800.0,
        "Chloé Martin",
        "FRA",
        datetime(2025, 9, 5),
        datetime(2025, 9, 9),
        2.0,
        1.0,
        101.0,
        612.0,
        datetime(2025, 6, 30, 18, 45),
    ],
    [
        "Munich Center",
        5001.0,
        "Marco Rossi",
        "ITA",
        datetime(2025, 9, 1),
        datetime(2025, 9, 2),
        2.0,
        2.0,
        7.0,
        180.5,
        datetime(2025, 8, 15, 7, 5),
    ],
    [
        "Munich Center",
        5002.0,
        "Hannah Lee",
        "KOR",
        datetime(2025, 9, 3),
        datetime(2025, 9, 6),
        1.0,
        0.0,
        8.0,
        330.0,
        datetime(2025, 8, 20, 12, 0),
    ],
]


def write_workbook(folder: Path) -> Path:
    workbook = openpyxl.Workbook()
    sheet = workbook.active
    sheet.title = "Reservations"
    sheet.append(["Reservations report, all properties"])
    sheet.append([])
    sheet.append(HEADER)
    for row in ROWS:
        sheet.append(row)
    path = folder / "reservations.xlsx"
    workbook.save(path)
    return path


if __name__ == "__main__":
    write_workbook(Path(sys.argv[1]))
