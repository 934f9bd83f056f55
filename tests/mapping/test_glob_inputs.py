"""A glob input over yearly exports: every row keeps its own file and its row in that file.

Records, quarantine entries and ``pms-sync preview`` name where each row came from; a booking
listed in two yearly files names both (``all_2022.csv:3; all_2023.csv:3``), not the first
file with the second file's row number.
"""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from mapping_helpers import reservation_mapping, write_csv, write_mapping

from connector.cli import main
from connector.contract import Entity
from connector.mapping import load_mapping, map_records
from connector.records import MappedRecords, in_export_order

HEADER = ("booking", "room", "arrival", "departure", "adults")
YEARS = {
    "2022": [
        ("A1", "101", "2022-05-01", "2022-05-03", "2"),
        ("A2", "102", "2022-06-01", "2022-06-03", "2"),
        ("NY", "103", "2022-12-30", "2023-01-02", "2"),  # over New Year: in both files
    ],
    "2023": [
        ("B1", "101", "2023-05-01", "2023-05-03", "2"),
        ("B2", "102", "2023-06-01", "2023-06-03", "two"),  # a bad row, second file, row 2
        ("NY", "104", "2022-12-30", "2023-01-02", "2"),
        ("B3", "105", "2023-07-01", "2023-07-03", "2"),
    ],
    "2024": [
        ("C1", "101", "2024-05-01", "2024-05-03", "2"),
        ("DUP", "101", "2024-06-01", "2024-06-03", "2"),
    ],
}
UNIT = {
    "id": {"template": "{booking}-{room}"},
    "unitId": "room",
    "unitName": "room",
    "adults": "adults",
    "checkin": "arrival",
    "checkout": "departure",
}


def _yearly_exports(folder: Path, years: dict[str, list[tuple[str, ...]]] = YEARS) -> Path:
    data = folder / "data"
    data.mkdir()
    for year, rows in years.items():
        write_csv(data / f"all_{year}.csv", [dict(zip(HEADER, row, strict=True)) for row in rows])
    document = reservation_mapping(UNIT)
    document["inputs"]["bookings"]["path"] = "data/all_*.csv"
    return write_mapping(folder, document)


def _reservations(mapping: Path) -> MappedRecords:
    return map_records(load_mapping(mapping))[Entity.RESERVATION]


def test_each_record_names_its_own_file_and_row(tmp_path: Path) -> None:
    records = in_export_order(_reservations(_yearly_exports(tmp_path)).records)
    assert dict(zip(records["record_id"], records["source_rows"], strict=True)) == {
        "A1": "all_2022.csv:1",
        "A2": "all_2022.csv:2",
        "NY": "all_2022.csv:3; all_2023.csv:3",
        "B1": "all_2023.csv:1",
        "B3": "all_2023.csv:4",
        "C1": "all_2024.csv:1",
        "DUP": "all_2024.csv:2",
    }


def test_a_bad_row_of_the_second_file_is_quarantined_naming_that_file_and_row(
    tmp_path: Path,
) -> None:
    quarantine = _reservations(_yearly_exports(tmp_path)).quarantine
    assert quarantine[["record_id", "input", "rows", "field", "value"]].values.tolist() == [
        ["B2", "all_2023.csv", "2", "unitReservations.adults", "two"]
    ]


def test_a_record_whose_rows_are_in_two_files_is_quarantined_naming_both(tmp_path: Path) -> None:
    years = {year: list(rows) for year, rows in YEARS.items()}
    # The New Year booking lists its room in both files, with another guest count the second
    # time: two unit reservations of one id.
    years["2023"][2] = ("NY", "103", "2022-12-30", "2023-01-02", "3")
    years["2022"].append(("NY2", "106", "2022-12-31", "2023-01-01", "1"))
    years["2024"].append(("NY2", "107", "2022-12-31", "2023-01-01", "x"))
    quarantine = _reservations(_yearly_exports(tmp_path, years)).quarantine
    where = {
        row.record_id: (f"{row.input}:{row.rows}", row.reason)
        for row in quarantine.itertuples(index=False)
    }
    assert where["NY"] == (
        "all_2022.csv:3; all_2023.csv:3",
        "unitReservations ids must be unique, repeated: ['NY-103']",
    )
    # A conversion error names the row it was found in, whichever file the record began in.
    assert where["NY2"] == ("all_2024.csv:3", "expected a whole number, got 'x'")
    assert where["B2"] == ("all_2023.csv:2", "expected a whole number, got 'two'")


def test_preview_shows_the_file_and_row_of_each_record(tmp_path: Path) -> None:
    mapping = _yearly_exports(tmp_path)
    result = CliRunner().invoke(
        main, ["preview", str(mapping), "--entity", "reservation", "-n", "9"]
    )
    assert result.exit_code == 0, result.output
    shown = json.loads(result.output)["reservation"]
    assert [(item["resource"]["id"], item["source"]) for item in shown] == [
        ("A1", "all_2022.csv:1"),
        ("A2", "all_2022.csv:2"),
        ("NY", "all_2022.csv:3; all_2023.csv:3"),
        ("B1", "all_2023.csv:1"),
        ("B3", "all_2023.csv:4"),
        ("C1", "all_2024.csv:1"),
        ("DUP", "all_2024.csv:2"),
    ]
