"""Connections written for a test: a mapping file and the CSV exports it reads."""

import csv
from dataclasses import dataclass
from datetime import date
from pathlib import Path

UNIT_COLUMNS = (
    "account",
    "unit_id",
    "name",
    "street",
    "number",
    "country",
    "city",
    "wifi",
    "wifi_code",
    "door",
)
BOOKING_COLUMNS = (
    "account",
    "booking_id",
    "status",
    "created",
    "first_name",
    "email",
    "unit_id",
    "checkin",
    "checkout",
    "adults",
)

MAPPING = """\
name: {name}
account: account
inputs:
  units: {{path: units.csv}}
  bookings: {{path: bookings.csv}}
entities:
  accommodation:
    input: units
    fields:
      id: unit_id
      name: name
      street: street
      streetNumber: number
      country: country
      city: city
      wifiName: wifi
      wifiCode: wifi_code
      doorCode: door
  reservation:
    input: bookings
    on_missing: {reservations_on_missing}
    fields:
      id: booking_id
      status: status
      createdAt: created
      primaryGuest:
        firstName: first_name
        email: email
      unitReservations:
        fields:
          id: booking_id
          adults: adults
          checkin: checkin
          checkout: checkout
          unitId: unit_id
          unitName: unit_id
dagster:
  partitions_start: "2025-01"
  timezone: Europe/Vienna
  schedule: "30 3 * * *"
{extra}"""


@dataclass
class Export:
    """A connection's folder: mapping file and the CSV exports it reads."""

    folder: Path
    name: str

    @property
    def mapping(self) -> Path:
        return self.folder / "mapping.yaml"

    def write(
        self,
        units: list[dict],
        bookings: list[dict] | None,
        extra: str = "",
        reservations_on_missing: str = "ignore",
    ) -> None:
        """Write the mapping and its exports; ``bookings=None`` maps units only."""
        self.folder.mkdir(parents=True, exist_ok=True)
        text = MAPPING.format(
            name=self.name, extra=extra, reservations_on_missing=reservations_on_missing
        )
        if bookings is None:
            start, end = text.index("  reservation:\n"), text.index("dagster:\n")
            text = text[:start] + text[end:]
            text = text.replace("  bookings: {path: bookings.csv}\n", "")
        self.mapping.write_text(text)
        _write_csv(self.folder / "units.csv", UNIT_COLUMNS, units)
        if bookings is not None:
            _write_csv(self.folder / "bookings.csv", BOOKING_COLUMNS, bookings)


def _write_csv(path: Path, columns: tuple[str, ...], rows: list[dict]) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)


def unit(number: int, account: str = "demo", **changes: str) -> dict:
    row = {
        "account": account,
        "unit_id": f"U{number}",
        "name": f"Apartment {number}",
        "street": "Hauptstrasse",
        "number": str(number),
        "country": "AT",
        "city": "Wien",
        "wifi": "guest",
        "wifi_code": f"wifi-secret-{number}",
        "door": f"{1000 + number}",
    }
    return {**row, **changes}


def booking(
    number: int, checkin: date, account: str = "demo", unit_number: int = 1, **changes: str
) -> dict:
    row = {
        "account": account,
        "booking_id": f"B{number}",
        "status": "CONFIRMED",
        "created": "2025-01-02T10:00:00Z",
        "first_name": "Anna",
        "email": f"guest{number}@example.com",
        "unit_id": f"U{unit_number}",
        "checkin": checkin.isoformat(),
        "checkout": date.fromordinal(checkin.toordinal() + 2).isoformat(),
        "adults": "2",
    }
    return {**row, **changes}
