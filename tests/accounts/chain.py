"""A hotel chain's PMS export whose rows name each hotel by its external id on the service,
and `pms-sync` run on it with only the Open API client's id and secret."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from connector.cli import main
from connector.sandbox.testing import MANY_CLIENT_ID, MANY_CLIENT_SECRET, SandboxHandle

SHORT_CLIENT_ID = "short-client"
SHORT_CLIENT_SECRET = "short-secret"
SHORT_LIFETIME_S = 2

MAPPING = """\
name: chain
account: {column: hotel_code, external_id: true}
inputs:
  units: {path: units.csv}
  bookings: {path: bookings.csv}
entities:
  accommodation:
    input: units
    fields:
      id: unit_id
      name: name
      street: {constant: Ringstrasse}
      streetNumber: {constant: "1"}
      country: {constant: AT}
      city: {constant: Wien}
      wifiName: {constant: guest}
      wifiCode: {constant: wifi-code-2024}
      doorCode: {constant: "4711"}
  reservation:
    input: bookings
    fields:
      id: booking_id
      status: {constant: CONFIRMED}
      createdAt: {constant: "2025-01-02T10:00:00Z"}
      primaryGuest:
        firstName: guest
      unitReservations:
        fields:
          id: booking_id
          adults: {constant: 2}
          checkin: checkin
          checkout: checkout
          unitId: unit_id
          unitName: unit_id
"""


def hotel(number: int) -> str:
    """The external id of generated hotel ``number`` (account ``acc-<number>``)."""
    return f"HOTEL-{number:03d}"


def account(number: int) -> str:
    return f"acc-{number:03d}"


def unit(hotel_code: str, number: int) -> dict[str, str]:
    return {
        "hotel_code": hotel_code,
        "unit_id": f"{hotel_code}-U{number}",
        "name": f"Room {number}",
    }


def units_of(*hotels: int, count: int = 2) -> list[dict[str, str]]:
    """Units 1…``count`` of each of these hotels (by number)."""
    return [unit(hotel(n), k) for n in hotels for k in range(1, count + 1)]


def booking(hotel_code: str, number: int, days_from_today: int) -> dict[str, str]:
    checkin = date.today() + timedelta(days=days_from_today)
    return {
        "hotel_code": hotel_code,
        "booking_id": f"{hotel_code}-B{number}",
        "unit_id": f"{hotel_code}-U1",
        "checkin": checkin.isoformat(),
        "checkout": (checkin + timedelta(days=2)).isoformat(),
        "guest": "Ada",
    }


@dataclass
class ChainExport:
    """The chain's folder: mapping file, units.csv and bookings.csv."""

    folder: Path

    @property
    def mapping(self) -> Path:
        return self.folder / "mapping.yaml"

    def write(
        self, units: list[dict[str, str]], bookings: list[dict[str, str]] | None = None
    ) -> Path:
        """Write the mapping and its exports; ``bookings=None`` maps units only."""
        self.folder.mkdir(parents=True, exist_ok=True)
        text = MAPPING
        if bookings is None:
            text = text[: text.index("  reservation:\n")].replace(
                "  bookings: {path: bookings.csv}\n", ""
            )
        self.mapping.write_text(text)
        _write(self.folder / "units.csv", ["hotel_code", "unit_id", "name"], units)
        if bookings is not None:
            _write(
                self.folder / "bookings.csv",
                ["hotel_code", "booking_id", "unit_id", "checkin", "checkout", "guest"],
                bookings,
            )
        return self.mapping


def _write(path: Path, columns: list[str], rows: list[dict[str, str]]) -> None:
    with path.open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)


def pms_sync(
    service: SandboxHandle,
    state: Path,
    *args: str,
    client: tuple[str, str] = (MANY_CLIENT_ID, MANY_CLIENT_SECRET),
    **env: str,
) -> Result:
    """``pms-sync ARGS`` configured with the Open API client only: no token, no tokens file."""
    variables = {
        "PMS_SYNC_BASE_URL": service.base_url,
        "PMS_SYNC_SNAPSHOT": str(state / "snapshot.duckdb"),
        "PMS_SYNC_CLIENT_ID": client[0],
        "PMS_SYNC_CLIENT_SECRET": client[1],
        "PMS_SYNC_TOKEN": "",
        "PMS_SYNC_TOKENS_FILE": "",
        "PMS_SYNC_MAX_ATTEMPTS": "3",
        **env,
    }
    return CliRunner().invoke(main, list(args), env=variables, catch_exceptions=False)


def document(result: Result) -> dict[str, Any]:
    return json.loads(result.stdout)


def property_requests(service: SandboxHandle) -> dict[str, int]:
    """PUT /properties/{id} answers by status, as the sandbox counted them."""
    return service.stats()["requests"].get("PUT /properties/{id}", {})
