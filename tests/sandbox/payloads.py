"""Valid request bodies for the sync webhooks, to be varied one member at a time by tests."""

from __future__ import annotations

from typing import Any


def accommodation(unit_id: str = "unit-1", **changes: Any) -> dict[str, Any]:
    resource = {
        "id": unit_id,
        "status": "ACTIVE",
        "name": "Seaside Apartment",
        "street": "Strandweg",
        "streetNumber": "12",
        "country": "DE",
        "city": "Kiel",
        "wifiName": "seaside",
        "wifiCode": "wifi-secret",
        "doorCode": "4711",
        "minimumCheckInTime": "15:00",
        "maximumCheckOutTime": "10:30",
        "roomType": {"id": "rt-double", "name": "Double"},
    }
    resource.update(changes)
    return resource


def unit_reservation(unit_reservation_id: str = "u1", **changes: Any) -> dict[str, Any]:
    unit = {
        "id": unit_reservation_id,
        "adults": 2,
        "checkin": "2025-07-01",
        "checkout": "2025-07-04",
        "unitId": "unit-1",
        "unitName": "Seaside Apartment",
        "estimatedCheckInTime": "16:30",
        "currency": "EUR",
        "price": 320.5,
    }
    unit.update(changes)
    return unit


def reservation(reservation_id: str = "res-1", **changes: Any) -> dict[str, Any]:
    resource = {
        "id": reservation_id,
        "status": "CONFIRMED",
        "createdAt": "2025-06-01T12:00:00Z",
        "primaryGuest": {"firstName": "Ada", "lastName": "Lovelace", "country": "GB"},
        "unitReservations": [unit_reservation("u1"), unit_reservation("u2", unitId="unit-2")],
    }
    resource.update(changes)
    return resource


def envelope(
    entity: str, resource: dict[str, Any], account_id: str = "demo", event: str = "create"
) -> dict[str, Any]:
    return {"accountId": account_id, "event": event, "entity": entity, "resource": resource}
