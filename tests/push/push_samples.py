"""Source data for push tests, and how to compare it with what the sandbox holds."""

from __future__ import annotations

import json
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pandas as pd

from connector.canonical import canonical_json, content_hash
from connector.client import AcknowledgementPolicy, ClientConfig, RetryPolicy
from connector.contract import Entity
from connector.mapping.batches import mapped_records_from_resources
from connector.push import PushOptions
from connector.records import MappedRecords
from connector.settings import SyncSettings, load_settings

Source = dict[Entity, list[tuple[str, dict[str, Any]]]]

FAST_RETRY = RetryPolicy(max_attempts=6, base_delay=0.005, max_delay=0.05, max_retry_after=0.05)


def unit(unit_id: str, **changes: Any) -> dict[str, Any]:
    resource: dict[str, Any] = {
        "id": unit_id,
        "status": "ACTIVE",
        "name": f"Room {unit_id}",
        "street": "Hauptstraße",
        "streetNumber": "7",
        "country": "DE",
        "city": "Berlin",
        "wifiName": "guest",
        "wifiCode": "wifi-secret-99",
        "doorCode": "door-4711",
    }
    resource.update(changes)
    return resource


def reservation(
    reservation_id: str, unit_id: str, days_from_today: int, **changes: Any
) -> dict[str, Any]:
    checkin = date.today() + timedelta(days=days_from_today)
    resource: dict[str, Any] = {
        "id": reservation_id,
        "status": "CONFIRMED",
        "createdAt": "2026-01-02T10:00:00Z",
        "primaryGuest": {"firstName": "Ada", "lastName": "Lovelace", "email": "ada@example.org"},
        "unitReservations": [
            {
                "id": "1",
                "adults": 2,
                "checkin": checkin.isoformat(),
                "checkout": (checkin + timedelta(days=2)).isoformat(),
                "unitId": unit_id,
                "unitName": f"Room {unit_id}",
                "doorCode": "door-4711",
            }
        ],
    }
    resource.update(changes)
    return resource


def hotel(account: str = "demo", units: int = 5, reservations: int = 20) -> Source:
    unit_ids = [f"U{n}" for n in range(units)]
    return {
        Entity.ACCOMMODATION: [(account, unit(u)) for u in unit_ids],
        Entity.RESERVATION: [
            (account, reservation(f"R{n}", unit_ids[n % units], n - reservations // 2))
            for n in range(reservations)
        ],
    }


def batches_of(source: Source) -> dict[Entity, MappedRecords]:
    return {
        entity: mapped_records_from_resources(entity, items) for entity, items in source.items()
    }


def with_unchecked_record(
    batch: MappedRecords, account: str, resource: dict[str, Any]
) -> MappedRecords:
    """The batch plus one record the contract would refuse: stands for a rule only the
    service knows (the sandbox validates with the contract and answers 400)."""
    row = {
        "account_id": account,
        "record_id": resource["id"],
        "payload": canonical_json(resource),
        "content_hash": content_hash(resource),
        "checkin": pd.NaT,
        "checkout": pd.NaT,
        "source_rows": "",
    }
    records = pd.concat([batch.records, pd.DataFrame([row])], ignore_index=True)
    return MappedRecords(entity=batch.entity, records=records)


def expected_state(source: Source) -> dict[tuple[str, str, str], dict[str, Any]]:
    batches = batches_of(source)
    return {
        (row.account_id, str(entity), row.record_id): json.loads(row.payload)
        for entity, batch in batches.items()
        for row in batch.records.itertuples(index=False)
    }


def sandbox_state(records: list[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {(r["accountId"], r["entity"], r["id"]): r["resource"] for r in records}


def settings_for(
    base_url: str,
    snapshot: Path,
    *,
    token: str | None = "demo-token",
    tokens: dict[str, str] | None = None,
    concurrency: int = 8,
    retry: RetryPolicy = FAST_RETRY,
    rate_limit: float | None = None,
    acknowledgement: AcknowledgementPolicy = AcknowledgementPolicy.COUNTS,
) -> SyncSettings:
    base = load_settings(base_url=base_url, snapshot=snapshot, token=token, env={})
    return SyncSettings(
        client=ClientConfig(
            base_url=base_url,
            concurrency=concurrency,
            retry=retry,
            rate_limit=rate_limit,
            acknowledgement=acknowledgement,
        ),
        tokens=type(base.tokens)(per_account=tokens or {}, default=token),
        snapshot_path=snapshot,
        push=PushOptions(concurrency=concurrency, commit_every=20, commit_interval=0.05),
    )
