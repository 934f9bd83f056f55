"""The value that travels from the mapping engine to the diff: validated records and quarantine.

Both are pandas frames with fixed columns, so the diff can hand them to DuckDB in one piece
instead of iterating over Python objects.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date

import pandas as pd

from connector.contract import Entity

RECORD_COLUMNS: tuple[str, ...] = (
    "account_id",  # the service account (envelope accountId) the record belongs to
    "record_id",  # resource.id
    "payload",  # canonical JSON of the validated resource (connector.canonical.canonical_json)
    "content_hash",  # connector.canonical.content_hash, volatile members left out
    "checkin",  # reservations: earliest unit check-in (datetime64[ns] date); accommodations: NaT
    "checkout",  # reservations: latest unit check-out; accommodations: NaT
    "source_rows",  # where the record came from, e.g. "bookings.csv:12,13"
)
"""Columns of :attr:`MappedRecords.records`, one row per validated record."""

QUARANTINE_COLUMNS: tuple[str, ...] = (
    "entity",
    "account_id",  # may be empty when the account itself could not be derived
    "record_id",  # may be empty when the key itself is missing
    "input",  # the input (file, table or query name) the rows came from
    "rows",  # 1-based data row numbers in that input, comma-separated
    "field",  # the contract field path, e.g. "unitReservations.0.checkin"
    "reason",  # what was expected and what was found
    "value",  # the offending value, masked when sensitive (connector.secrets)
)
"""Columns of :attr:`MappedRecords.quarantine`, one row per problem found."""


def empty_records() -> pd.DataFrame:
    return pd.DataFrame({column: pd.Series(dtype="object") for column in RECORD_COLUMNS}).astype(
        {"checkin": "datetime64[ns]", "checkout": "datetime64[ns]"}
    )


def empty_quarantine() -> pd.DataFrame:
    return pd.DataFrame({column: pd.Series(dtype="object") for column in QUARANTINE_COLUMNS})


@dataclass
class MappedRecords:
    """Validated records of one entity, and the rows quarantined on the way there."""

    entity: Entity
    records: pd.DataFrame = field(default_factory=empty_records)
    quarantine: pd.DataFrame = field(default_factory=empty_quarantine)
    # Records whose payload the snapshot already knew valid under this contract: not
    # validated again (connector.snapshot.validated_payloads).
    known_valid: int = 0

    @property
    def accounts(self) -> list[str]:
        return sorted(self.records["account_id"].unique().tolist())


@dataclass(frozen=True)
class DateWindow:
    """A half-open range of check-in dates [start, end): one partition of reservations."""

    start: date
    end: date

    def __post_init__(self) -> None:
        if self.end <= self.start:
            raise ValueError(f"window end {self.end} must be after its start {self.start}")

    def contains(self, day: date) -> bool:
        return self.start <= day < self.end
