"""Checking every mapped document against the contract and splitting records from quarantine.

pydantic parses each document straight from the JSON DuckDB built (no intermediate dicts);
the canonical payload and hash are computed from the validated model, exactly as the diff and
the push expect them (``connector.canonical``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pandas as pd
from pydantic import ValidationError

from connector.canonical import canonical_json, content_hash
from connector.contract import RESOURCES, Entity
from connector.mapping.fast_validation import sure_validator
from connector.records import (
    QUARANTINE_COLUMNS,
    RECORD_COLUMNS,
    MappedRecords,
    empty_quarantine,
    empty_records,
)
from connector.secrets import is_sensitive, mask_value

DUPLICATE_REASON = "duplicate key with conflicting content"
MISSING_REASON = "missing required value"


SUPPORTED_DATES = ("1677-09-22", "2262-04-11")
"""The dates pandas' datetime64[ns] can hold (the plan's check-in/check-out columns)."""


@dataclass
class MappedRows:
    """One row per candidate record, as the entity query returns them."""

    account_id: Sequence[str | None]
    record_id: Sequence[str | None]
    doc: Sequence[str | None]
    conflicting: Sequence[bool]
    errors: Sequence[list[dict[str, Any]] | None]
    sources: Sequence[str]
    row_numbers: Sequence[str]
    checkin: Any
    checkout: Any


@dataclass
class _Quarantine:
    entity: Entity
    rows: list[tuple[Any, ...]] = field(default_factory=list)

    def add(
        self,
        account_id: str | None,
        record_id: str | None,
        source: str,
        rows: str,
        path: str,
        reason: str,
        value: Any = None,
    ) -> None:
        shown = "" if value is None or isinstance(value, dict | list) else str(value)
        if shown and is_sensitive(path.rsplit(".", 1)[-1]):
            shown = mask_value(shown)
        self.rows.append(
            (
                self.entity.value,
                account_id or "",
                record_id or "",
                source,
                rows,
                path,
                reason,
                shown,
            )
        )


def _describe(problem: dict[str, Any]) -> tuple[str, str, Any]:
    """The field path, the reason and the offending value of one pydantic error."""
    path = ".".join(str(part) for part in problem["loc"])
    value = problem.get("input")
    if value is None or problem["type"] == "missing":
        return path, MISSING_REASON, None
    message = str(problem["msg"]).removeprefix("Value error, ")
    if isinstance(value, str | int | float | bool) and is_sensitive(path.rsplit(".", 1)[-1]):
        message = message.replace(repr(value), mask_value(value))
    return path, message, value


class RecordValidator:
    """Validates the mapped rows of one entity batch by batch and collects the outcome.

    Batches keep memory bounded: only the validated payloads stay, the documents of a batch
    are dropped once it is done.
    """

    def __init__(self, entity: Entity, volatile: Sequence[str]) -> None:
        self.entity = entity
        self.validate = RESOURCES[entity].model_validate_json
        # Native checks first; the contract model decides whatever they do not surely accept.
        self.validate_sure = sure_validator(RESOURCES[entity]).validate_json
        self.volatile = tuple(volatile)
        self.quarantine = _Quarantine(entity)
        self.accounts: list[str] = []
        self.ids: list[str] = []
        self.payloads: list[str] = []
        self.hashes: list[str] = []
        self.source_rows: list[str] = []
        self.checkins: list[Any] = []
        self.checkouts: list[Any] = []

    def add(self, rows: MappedRows) -> None:
        quarantine = self.quarantine
        for index, document in enumerate(rows.doc):
            account_id = rows.account_id[index]
            record_id = rows.record_id[index]
            source = rows.sources[index]
            numbers = rows.row_numbers[index]
            if account_id is None or account_id == "":
                quarantine.add(
                    None,
                    record_id,
                    source,
                    numbers,
                    "accountId",
                    "no account for this record (the account expression gave no value)",
                )
                continue
            if record_id is None or record_id.strip() == "":
                quarantine.add(account_id, None, source, numbers, "id", MISSING_REASON)
                continue
            if rows.conflicting[index]:
                quarantine.add(
                    account_id,
                    record_id,
                    source,
                    numbers,
                    "id",
                    f"{DUPLICATE_REASON}: rows {numbers} share id {record_id!r} but map to "
                    "different values",
                    record_id,
                )
                continue
            conversion_errors = rows.errors[index]
            if conversion_errors:
                for item in conversion_errors:
                    quarantine.add(
                        account_id,
                        record_id,
                        item["src"],
                        str(item["rownum"]),
                        item["path"],
                        item["reason"],
                        item["value"],
                    )
                continue
            try:
                resource = self.validate_sure(document)  # type: ignore[arg-type]
            except ValidationError:
                resource = None
            try:
                resource = resource or self.validate(document)  # type: ignore[arg-type]
            except ValidationError as error:
                for problem in error.errors(include_url=False):
                    path, reason, value = _describe(problem)
                    quarantine.add(account_id, record_id, source, numbers, path, reason, value)
                continue
            beyond = _beyond_supported_dates(rows.checkin[index], rows.checkout[index])
            if beyond:
                field, value = beyond
                quarantine.add(
                    account_id, record_id, source, numbers, field, DATE_RANGE_REASON, value
                )
                continue
            data = resource.to_json_dict()
            payload = canonical_json(data)
            if self.volatile:
                digest = content_hash(data, self.volatile)
            else:
                # Without volatile members the hashed form is the payload itself.
                digest = hashlib.blake2b(payload.encode(), digest_size=16).hexdigest()
            self.accounts.append(account_id)
            self.ids.append(resource.id)
            self.payloads.append(payload)
            self.hashes.append(digest)
            self.source_rows.append(f"{source}:{numbers}")
            self.checkins.append(rows.checkin[index])
            self.checkouts.append(rows.checkout[index])

    def result(self) -> MappedRecords:
        records = empty_records()
        if self.payloads:
            records = pd.DataFrame(
                {
                    "account_id": pd.Series(self.accounts, dtype=object),
                    "record_id": pd.Series(self.ids, dtype=object),
                    "payload": pd.Series(self.payloads, dtype=object),
                    "content_hash": pd.Series(self.hashes, dtype=object),
                    "checkin": pd.to_datetime(pd.Series(self.checkins)).astype("datetime64[ns]"),
                    "checkout": pd.to_datetime(pd.Series(self.checkouts)).astype("datetime64[ns]"),
                    "source_rows": pd.Series(self.source_rows, dtype=object),
                },
                columns=list(RECORD_COLUMNS),
            )
        rows = self.quarantine.rows
        quarantined = (
            pd.DataFrame(rows, columns=list(QUARANTINE_COLUMNS), dtype=object)
            if rows
            else empty_quarantine()
        )
        return MappedRecords(entity=self.entity, records=records, quarantine=quarantined)


DATE_RANGE_REASON = (
    f"a stay date outside {SUPPORTED_DATES[0]}..{SUPPORTED_DATES[1]} (most likely a typo in "
    f"the year); the snapshot's date columns cannot hold it"
)


def _beyond_supported_dates(checkin: object, checkout: object) -> tuple[str, str] | None:
    """(field, value) of a stay date pandas' nanosecond timestamps cannot represent.

    Without this check one such date (a typo like 2925-01-01) crashed the whole mapping run.
    """
    for member, value in (
        ("unitReservations.checkin", checkin),
        ("unitReservations.checkout", checkout),
    ):
        if value is None or (isinstance(value, float) and value != value):
            continue
        text = str(value)[:10]
        if not SUPPORTED_DATES[0] <= text <= SUPPORTED_DATES[1]:
            return member, str(value)
    return None
