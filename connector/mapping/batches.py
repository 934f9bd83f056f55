"""Mapped records built from resources already in contract shape (no mapping file).

The mapping engine is the usual producer of :class:`MappedRecords`; this builds the same value
from Python dicts, for callers that already hold resources (an API-to-API sync, tests, demos).
Each resource is validated by the contract model, so what reaches the diff is what the mapping
engine would have produced.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

from connector.canonical import canonical_json, content_hash
from connector.contract import RESOURCES, Entity
from connector.records import RECORD_COLUMNS, MappedRecords, empty_records


def mapped_records_from_resources(
    entity: Entity,
    resources: Iterable[tuple[str, dict[str, object]]],
    *,
    volatile: Iterable[str] = (),
) -> MappedRecords:
    """``resources`` is (account id, resource dict) pairs; invalid resources raise."""
    model = RESOURCES[entity]
    volatile = tuple(volatile)
    rows: list[dict[str, object]] = []
    for account_id, resource in resources:
        validated = model.model_validate_json(canonical_json(resource)).to_json_dict()
        units = validated.get("unitReservations") or []
        checkins = [unit["checkin"] for unit in units]
        checkouts = [unit["checkout"] for unit in units]
        rows.append(
            {
                "account_id": account_id,
                "record_id": validated["id"],
                "payload": canonical_json(validated),
                "content_hash": content_hash(validated, volatile),
                "checkin": min(checkins) if checkins else None,
                "checkout": max(checkouts) if checkouts else None,
                "source_rows": "",
            }
        )
    if not rows:
        return MappedRecords(entity=entity, records=empty_records())
    frame = pd.DataFrame(rows, columns=list(RECORD_COLUMNS))
    frame["checkin"] = pd.to_datetime(frame["checkin"])
    frame["checkout"] = pd.to_datetime(frame["checkout"])
    return MappedRecords(entity=entity, records=frame)
