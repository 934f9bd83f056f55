"""Sample resources and helpers for plan and snapshot tests on real DuckDB files."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from typing import Any

import pandas as pd

from connector.contract import Entity
from connector.mapping.batches import mapped_records_from_resources
from connector.plan import Plan
from connector.records import MappedRecords
from connector.snapshot import Acknowledgement, RecordStatus, SnapshotStore, acknowledgement_table

TODAY = date(2026, 6, 15)


def unit(unit_id: str, **changes: Any) -> dict[str, Any]:
    resource = {
        "id": unit_id,
        "status": "ACTIVE",
        "name": f"Room {unit_id}",
        "street": "Hauptstraße",
        "streetNumber": "7",
        "country": "DE",
        "city": "Berlin",
        "wifiName": "guest",
        "wifiCode": "wifi-secret",
        "doorCode": "4711",
    }
    resource.update(changes)
    return resource


def reservation(reservation_id: str, days_from_today: int, **changes: Any) -> dict[str, Any]:
    checkin = TODAY + timedelta(days=days_from_today)
    resource = {
        "id": reservation_id,
        "status": "CONFIRMED",
        "createdAt": "2026-01-02T10:00:00Z",
        "primaryGuest": {"firstName": "Ada", "lastName": "Lovelace"},
        "unitReservations": [
            {
                "id": "1",
                "adults": 2,
                "checkin": checkin.isoformat(),
                "checkout": (checkin + timedelta(days=3)).isoformat(),
                "unitId": "U1",
                "unitName": "Room U1",
            }
        ],
    }
    resource.update(changes)
    return resource


def batches(
    units: list[dict[str, Any]],
    reservations: list[dict[str, Any]] | None = None,
    account: str = "acc-1",
) -> dict[Entity, MappedRecords]:
    return {
        Entity.ACCOMMODATION: mapped_records_from_resources(
            Entity.ACCOMMODATION, [(account, u) for u in units]
        ),
        Entity.RESERVATION: mapped_records_from_resources(
            Entity.RESERVATION, [(account, r) for r in reservations or []]
        ),
    }


def acknowledge_all(snapshot: SnapshotStore, plan: Plan) -> None:
    """What a push that got 200 for every change records."""
    now = datetime.now(UTC).replace(tzinfo=None)
    snapshot.record_acknowledgements(
        acknowledgement_table(
            [
                Acknowledgement(
                    account_id=row.account_id,
                    entity=Entity(row.entity),
                    record_id=row.record_id,
                    content_hash=row.content_hash,
                    payload=row.payload,
                    checkin=None if pd.isna(row.checkin) else pd.Timestamp(row.checkin).date(),
                    checkout=None if pd.isna(row.checkout) else pd.Timestamp(row.checkout).date(),
                    status=RecordStatus(row.status_after),
                    acknowledged_at=now,
                    request_id="req-test",
                )
                for row in plan.changes.itertuples(index=False)
            ]
        )
    )
