"""An export whose reservation statuses mean "cancelled" in the PMS's words (issue 36): the
CSV, a mapping over it with a chosen status member, and the advice lines of an output."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from click.testing import CliRunner, Result

from connector.cli import main
from connector.contract import Entity
from connector.mapping import load_mapping, map_records

COLUMNS = ("booking", "line", "Status", "guest", "room", "adults", "arrival", "departure", "booked")
STATUSES = {
    "B1": "Confirmed",
    "B2": "Cancelled",
    "B3": "Canceled by guest",
    "B4": "storniert",
    "B5": "annulé",
    "B6": "Cancelled",  # a booking of two rooms: two rows, one record
    "B7": "CANCELLED",
    "B8": "Checked in",
}
CANCELLATION_LIKE = {"Cancelled": 2, "Canceled by guest": 1, "storniert": 1, "annulé": 1}

MAPPING = """\
account: {{constant: demo}}
inputs:
  bookings: {{path: bookings.csv}}
entities:
  reservation:
    input: bookings
    fields:
      id: booking
      status: {status}
      createdAt: booked
      primaryGuest: {{firstName: guest}}
      unitReservations:
        fields:
          id: {{template: "{{booking}}-{{line}}"}}
          unitId: room
          unitName: room
          adults: adults
          checkin: arrival
          checkout: departure
"""


def write_export(folder: Path, statuses: dict[str, str]) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    with (folder / "bookings.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(COLUMNS)
        for number, (booking, status) in enumerate(statuses.items(), start=1):
            rooms = 2 if booking == "B6" else 1
            for line in range(1, rooms + 1):
                writer.writerow(
                    (booking, line, status, f"Guest{number}", f"{100 + number}{line}", 2,
                     "2030-07-01", "2030-07-04", "2025-01-02")
                )  # fmt: skip
    return folder / "bookings.csv"


def write_mapping(folder: Path, status: str, statuses: dict[str, str] = STATUSES) -> Path:
    write_export(folder, statuses)
    path = folder / "mapping.yaml"
    path.write_text(MAPPING.format(status=status), encoding="utf-8")
    return path


def validate(path: Path) -> Result:
    return CliRunner().invoke(main, ["validate", str(path)])


def status_lines(output: str) -> list[str]:
    """The `status: {...}` lines of the advice, as YAML members."""
    return [line.strip() for line in output.splitlines() if line.strip().startswith("status: {")]


def sent_statuses(path: Path) -> dict[str, str]:
    batch = map_records(load_mapping(path))[Entity.RESERVATION]
    return {
        record_id: json.loads(payload)["status"]
        for record_id, payload in zip(
            batch.records["record_id"], batch.records["payload"], strict=True
        )
    }
