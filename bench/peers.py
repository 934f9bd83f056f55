"""What a user would run instead of pms-sync, doing the same job against the same sandbox.

- :func:`naive_sync`: the script a data engineer writes in an afternoon: pandas reads the
  export, a Python loop builds each payload, one blocking ``requests`` call per record, no
  snapshot (every run sends everything).
- :func:`dlt_sync`: dlt with a ``@dlt.destination`` sink posting each record, and dlt's
  incremental cursor on the bookings' update time (``modified_at``), its idiomatic answer to
  "send only what changed". Rooms have no update time, so they are sent on every run.
- :func:`raw_post`: the ceiling, a raw aiohttp load generator posting prepared envelopes.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

HOTEL_ACCOUNTS = {"BER": "demo", "MUC": "demo-2"}
STATUS = {"confirmed": "CONFIRMED", "modified": "MODIFIED", "cancelled": "CANCELLED"}
ISO3 = {"DEU": "DE", "AUT": "AT", "CHE": "CH", "FRA": "FR"}
TOKEN = "demo-token"


def _paths() -> dict[str, str]:
    from connector.contract import SYNC_PATHS

    return {str(entity): path for entity, path in SYNC_PATHS.items()}


def _eta(value: Any) -> str | None:
    if not isinstance(value, str) or not value:
        return None
    hours, minutes = int(value[:2]), int(value[3:5])
    total = round((hours * 60 + minutes) / 30) * 30
    return f"{total // 60:02d}:{total % 60:02d}"


def accommodation_payloads(data: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    import pandas as pd

    rooms = pd.read_csv(data / "rooms.csv", dtype=str, keep_default_na=False)
    types = pd.read_csv(data / "room_types.csv", dtype=str, keep_default_na=False)
    by_code = {row["code"]: row for row in types.to_dict(orient="records")}
    for room in rooms.to_dict(orient="records"):
        if room["active"] != "Y":
            continue
        rt = by_code[room["room_type"]]
        yield (
            HOTEL_ACCOUNTS[room["hotel_code"]],
            {
                "id": f"{room['hotel_code']}-{room['room_no']}",
                "status": "ACTIVE",
                "name": f"Room {room['room_no']}",
                "street": room["street"],
                "streetNumber": room["house_no"],
                "postalCode": room["zip"],
                "city": room["city"],
                "country": ISO3[room["country_iso3"]],
                "floor": room["floor"],
                "apartmentNumber": room["room_no"],
                "wifiName": room["wifi_ssid"],
                "wifiCode": room["wifi_password"],
                "doorCode": room["door_pin"],
                "maxNumberOfGuests": int(rt["max_guests"]),
                "sizeSqM": int(rt["size_sqm"]),
                "bedroomsNumber": int(rt["bedrooms"]),
                "minimumCheckInTime": "15:00",
                "maximumCheckOutTime": "11:00",
                "coordinates": {"lat": float(room["lat"]), "lon": float(room["lon"])},
                "bedTypes": [{"bedType": int(rt["bed_type"]), "amount": int(rt["beds"])}],
                "roomType": {
                    "id": rt["code"],
                    "code": rt["code"],
                    "name": rt["name"],
                    "description": rt["description"],
                    "features": rt["features"].split("|"),
                    "sizeSqM": int(rt["size_sqm"]),
                },
            },
        )


def reservation_payloads(
    bookings: Any,
) -> Iterator[tuple[str, dict[str, Any]]]:
    """One payload per booking from a frame of booking lines (already sorted by booking)."""
    current: dict[str, Any] | None = None
    account = ""
    for row in bookings.to_dict(orient="records"):
        if current is None or current["id"] != row["booking_no"]:
            if current is not None:
                yield account, current
            account = HOTEL_ACCOUNTS[row["hotel_code"]]
            current = {
                "id": row["booking_no"],
                "status": STATUS.get(row["status"], "CONFIRMED"),
                "createdAt": row["created_at"],
                "updatedAt": row["modified_at"],
                "channelName": row["channel"],
                "ratePlan": row["rate_plan"],
                "primaryGuest": {
                    "firstName": row["guest_first_name"],
                    "lastName": row["guest_last_name"],
                    "email": row["guest_email"],
                    "phone": row["guest_phone"],
                    "country": row["guest_country"],
                    "language": row["guest_language"],
                },
                "unitReservations": [],
            }
        unit: dict[str, Any] = {
            "id": f"{row['booking_no']}-{row['line_no']}",
            "unitId": f"{row['hotel_code']}-{row['room_no']}",
            "unitName": f"Room {row['room_no']}",
            "unitRoomTypeCode": row["room_type"],
            "checkin": row["arrival"],
            "checkout": row["departure"],
            "adults": int(row["adults"]),
            "children": int(row["children"]),
            "price": float(row["price"]),
            "paidAmount": float(row["paid"]),
            "currency": row["currency"],
            "status": STATUS.get(row["status"], "CONFIRMED"),
        }
        eta = _eta(row["eta"])
        if eta:
            unit["estimatedCheckInTime"] = eta
        current["unitReservations"].append(unit)
    if current is not None:
        yield account, current


def _read_bookings(data: Path, limit: int | None) -> Any:
    import pandas as pd

    frame = pd.read_csv(data / "bookings.csv", dtype=str, keep_default_na=False)
    if limit is not None:
        keep = frame["booking_no"].drop_duplicates().head(limit)
        frame = frame[frame["booking_no"].isin(set(keep))]
    return frame


def naive_sync(data: Path, base_url: str, limit: int | None = None) -> dict[str, Any]:
    """The naive script; ``limit`` sends only the first ``limit`` reservations (a prefix)."""
    import requests

    paths = _paths()
    session = requests.Session()
    headers = {"X-Wishbox-Auth-Token": TOKEN, "content-type": "application/json"}
    sent = failed = 0
    started = time.perf_counter()
    bookings = _read_bookings(data, limit)
    payloads: Iterator[tuple[str, str, dict[str, Any]]] = (
        (entity, account, payload)
        for entity, source in (
            ("accommodation", accommodation_payloads(data)),
            ("reservation", reservation_payloads(bookings)),
        )
        for account, payload in source
    )
    for entity, account, payload in payloads:
        body = {"accountId": account, "entity": entity, "event": "update", "resource": payload}
        response = session.post(base_url + paths[entity], data=json.dumps(body), headers=headers)
        sent += 1
        failed += response.status_code != 200
    return {"seconds": time.perf_counter() - started, "requests": sent, "failed": failed}


def dlt_sync(
    data: Path, base_url: str, pipelines_dir: Path, limit: int | None = None
) -> dict[str, Any]:
    """dlt: resources for rooms and bookings, incremental on modified_at, a destination sink."""
    import dlt
    import requests

    paths = _paths()
    session = requests.Session()
    headers = {"X-Wishbox-Auth-Token": TOKEN, "content-type": "application/json"}
    counts = {"requests": 0, "failed": 0}

    @dlt.resource(name="accommodation", write_disposition="append")
    def rooms() -> Iterator[dict[str, Any]]:
        for account, payload in accommodation_payloads(data):
            yield {"account_id": account, "payload": json.dumps(payload)}

    @dlt.resource(name="reservation", write_disposition="append")
    def reservations(
        updated=dlt.sources.incremental("updated_at", initial_value="1970-01-01T00:00:00Z"),  # noqa: B008
    ) -> Iterator[dict[str, Any]]:
        bookings = _read_bookings(data, limit)
        # The cursor is on the export's update time: filter lines before building payloads.
        bookings = bookings[bookings["modified_at"] > updated.last_value]
        for account, payload in reservation_payloads(bookings):
            yield {
                "account_id": account,
                "updated_at": payload["updatedAt"],
                "payload": json.dumps(payload),
            }

    @dlt.destination(
        batch_size=1, loader_file_format="typed-jsonl", skip_dlt_columns_and_tables=True
    )
    def sandbox(items: Any, table: Any) -> None:
        entity = table["name"]
        for item in items if isinstance(items, list) else [items]:
            body = (
                '{"accountId":' + json.dumps(item["account_id"]) + f',"entity":"{entity}",'
                '"event":"update","resource":' + item["payload"] + "}"
            )
            response = session.post(base_url + paths[entity], data=body, headers=headers)
            counts["requests"] += 1
            counts["failed"] += response.status_code != 200

    started = time.perf_counter()
    pipeline = dlt.pipeline(
        pipeline_name="bench_hotel",
        destination=sandbox,
        pipelines_dir=str(pipelines_dir),
        progress=None,
    )
    pipeline.run([rooms(), reservations()])
    return {"seconds": time.perf_counter() - started, **counts}


async def _post_all(base_url: str, bodies: list[tuple[str, bytes]], concurrency: int) -> int:
    import aiohttp

    headers = {"X-Wishbox-Auth-Token": TOKEN, "content-type": "application/json"}
    position = 0
    failed = 0
    connector = aiohttp.TCPConnector(limit=concurrency)
    async with aiohttp.ClientSession(base_url, connector=connector, headers=headers) as session:

        async def worker() -> None:
            nonlocal position, failed
            while position < len(bodies):
                path, body = bodies[position]
                position += 1
                async with session.post(path, data=body) as response:
                    await response.read()
                    failed += response.status != 200

        await asyncio.gather(*(worker() for _ in range(concurrency)))
    return failed


def raw_post(base_url: str, bodies: list[tuple[str, bytes]], concurrency: int) -> dict[str, Any]:
    """Post ``bodies`` with aiohttp alone, on the event loop pms-sync's push runs on by
    default: the comparison is then of what each side does per request, not of two loops."""
    from connector.client import default_event_loop, run_on

    started = time.perf_counter()
    failed = run_on(default_event_loop(), _post_all(base_url, bodies, concurrency))
    return {"seconds": time.perf_counter() - started, "requests": len(bodies), "failed": failed}
