"""Values the snapshot store reads and writes, shared by every backend."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from datetime import date, datetime
from enum import StrEnum

import pandas as pd
import pyarrow as pa

from connector.contract import Entity
from connector.records import DateWindow, empty_keys


class RecordStatus(StrEnum):
    """What the connector last told the service about a record."""

    ACTIVE = "active"  # sent as the source had it
    DEACTIVATED = "deactivated"  # accommodation gone from a full export, sent INACTIVE
    CANCELLED = "cancelled"  # future reservation gone from the export, sent CANCELLED


class OnMissing(StrEnum):
    """What to do with an acknowledged record that the export no longer contains."""

    IGNORE = "ignore"
    DEACTIVATE = "deactivate"  # accommodations
    CANCEL_FUTURE = "cancel_future"  # reservations whose check-in is today or later


@dataclass(frozen=True)
class DiffRequest:
    """One entity's incoming records and the rules to compare them with the snapshot."""

    entity: Entity
    records: pd.DataFrame  # columns of connector.records.RECORD_COLUMNS
    scope_accounts: frozenset[str]  # accounts whose missing records may be reconciled
    on_missing: OnMissing = OnMissing.IGNORE
    window: DateWindow | None = None  # limits reconciliation of reservations to check-ins in it
    today: date = field(default_factory=date.today)
    full_resync: bool = False
    only_ids: frozenset[str] | None = None  # when set: only these ids, each re-sent
    # The connection (mapping name) being synced: only the acknowledged records it owns are
    # reconciled when missing. None is a connection too (library calls without a name), and
    # owns the records acknowledged without one, including those written before owners existed.
    connection: str | None = None
    # Keys (account_id, record_id) in the export that are not among ``records``: invalid
    # records (quarantined: the service keeps their last acknowledged version) and records
    # outside the window. Neither is gone from the export.
    quarantined: pd.DataFrame = field(default_factory=empty_keys)
    present_elsewhere: pd.DataFrame = field(default_factory=empty_keys)
    # Accounts with rows whose id could not be derived: any missing record of theirs might be
    # one of those rows, so none is reconciled. ``all_unidentified``: some row has no account.
    unidentified_accounts: frozenset[str] = frozenset()
    all_unidentified: bool = False
    # Also count every action per check-in day (``DiffResult.counts_by_checkin``), so a run
    # over several months can report each month's own counts (Dagster's monthly partitions).
    by_checkin: bool = False


@dataclass(frozen=True)
class UnitStaysRequest:
    """Units a plan would deactivate, and what decides whether guests still stay in them."""

    units: pd.DataFrame  # account_id, record_id of the units
    today: date
    # This run's reservations (RECORD_COLUMNS), which replace their acknowledged versions, and
    # the keys of reservations the same plan cancels.
    incoming: pd.DataFrame | None = None
    cancelled: pd.DataFrame = field(default_factory=empty_keys)


@dataclass(frozen=True)
class DiffResult:
    """The actions that cost a request, and the per-account counts of every action."""

    changes: (
        pd.DataFrame
    )  # account_id, record_id, action, reason, payload, content_hash, checkin, checkout
    counts: pd.DataFrame  # account_id, action, reason, n
    # With ``DiffRequest.by_checkin``: account_id, action, reason, checkin, n (checkin NaT for
    # records without one); the same records as ``counts``, one row per check-in day.
    counts_by_checkin: pd.DataFrame | None = None


@dataclass(frozen=True)
class Acknowledgement:
    """The service accepted a record (2xx)."""

    account_id: str
    entity: Entity
    record_id: str
    content_hash: str
    payload: str
    checkin: date | None
    checkout: date | None
    status: RecordStatus
    acknowledged_at: datetime
    request_id: str | None
    connection: str | None = None  # the mapping name whose run sent it: the record's owner


ACKNOWLEDGEMENT_SCHEMA = pa.schema(
    [
        ("account_id", pa.large_string()),
        ("entity", pa.large_string()),
        ("record_id", pa.large_string()),
        ("content_hash", pa.large_string()),
        ("payload", pa.large_string()),
        ("checkin", pa.date32()),
        ("checkout", pa.date32()),
        ("status", pa.large_string()),
        ("acknowledged_at", pa.timestamp("us")),
        ("request_id", pa.large_string()),
        ("connection", pa.large_string()),
    ]
)
"""What :meth:`SnapshotStore.record_acknowledgements` takes: one column per field of
:class:`Acknowledgement`, enums as their text. Columns, not objects: a push builds them from the
plan's own Arrow columns on its writer thread, which shares the GIL with the event loop, so no
Python object per record is made or read (large strings: pandas' own, no copy of a document)."""


def acknowledgement_table(acknowledgements: Sequence[Acknowledgement]) -> pa.Table:
    """Acknowledgement objects as :data:`ACKNOWLEDGEMENT_SCHEMA`'s columns."""
    return pa.table(
        {
            member.name: [getattr(ack, member.name) for ack in acknowledgements]
            for member in fields(Acknowledgement)
        },
        schema=ACKNOWLEDGEMENT_SCHEMA,
    )


@dataclass(frozen=True)
class Refusal:
    """The service refused a record for its content or permissions (400/403)."""

    account_id: str
    entity: Entity
    record_id: str
    content_hash: str
    http_status: int
    message: str  # already masked
    seen_at: datetime
    request_id: str | None


@dataclass(frozen=True)
class PossiblyStored:
    """A change left pending although the service may have stored it (its answer was lost)."""

    account_id: str
    entity: Entity
    record_id: str
    content_hash: str
    request_id: str | None
    seen_at: datetime
    # What reconciliation needs if the record leaves the export before it is acknowledged.
    payload: str | None = None
    checkin: date | None = None
    checkout: date | None = None
    status: str | None = None  # the RecordStatus the change would record
    connection: str | None = None
    in_flight: str | None = None  # the push whose write-ahead mark this is, until answered


@dataclass(frozen=True)
class DriftEvent:
    """Drift the service's answers revealed (``kind`` set), or an open drift healed (``kind``
    None): what the snapshot's ``drift`` table records (docs/drift.md)."""

    account_id: str
    entity: Entity
    record_id: str
    kind: str | None  # connector.plan._drift.DriftKind; None: a heal of the record's open drift
    detail: str
    request_id: str | None
    at: datetime
    healed: bool  # with a kind: the revealing answer healed it at once


@dataclass(frozen=True)
class ResendRequest:
    """Which acknowledged records of one entity a run re-sends although nothing changed:
    open drift, then a full reconciliation's remaining records or the rolling refresh's share.

    Only records the service holds in the version this run would send are eligible: records
    of this run's export whose content equals the acknowledged one, and records the connector
    retired (deactivated, cancelled) that no form of the export holds any more. A record
    present but invalid, or gone and left alone, is never re-sent: its acknowledged version
    may be older than what the service holds.
    """

    entity: Entity
    records: pd.DataFrame  # this run's valid records (RECORD_COLUMNS)
    present_elsewhere: pd.DataFrame  # keys in the export outside ``records`` (quarantined too)
    sending: pd.DataFrame  # keys the plan sends anyway (account_id, record_id)
    scope_accounts: frozenset[str]
    connection: str | None
    today: date
    window: DateWindow | None = None  # reservations: retired records with check-in in it only
    horizon_days: int = 14  # arrivals this close are refreshed first (connector.plan._urgency)
    include_past_stays: bool = False  # reservations whose check-out is before today
    refresh_share: float = 0.0  # of the eligible records, rounded up
    refresh_max: int | None = None  # refresh rows at most (None: no cap)
    reconcile_since: datetime | None = None  # a pass started then: re-send what is older


@dataclass(frozen=True)
class ResendResult:
    """Rows to re-send: account_id, record_id, reason (drifted | reconcile | refresh),
    payload, content_hash, status, checkin, checkout; and the eligible records counted."""

    rows: pd.DataFrame
    eligible: int  # the base of the refresh share


@dataclass(frozen=True)
class ReconciliationPass:
    connection: str | None
    entity: Entity
    started_at: datetime
    finished_at: datetime | None = None


@dataclass(frozen=True)
class RunCounts:
    account_id: str
    entity: Entity
    extracted: int = 0
    quarantined: int = 0
    create: int = 0
    update: int = 0
    skip: int = 0
    held: int = 0
    deactivate: int = 0
    cancel: int = 0
    acknowledged: int = 0
    dead_lettered: int = 0
    failed: int = 0
    pending: int = 0
    requests: int = 0
    incremental: int = 0  # 1: the entity was read incrementally (its changed rows only)


@dataclass(frozen=True)
class RunRecord:
    run_id: str
    mapping: str
    accounts: tuple[str, ...]
    started_at: datetime
    finished_at: datetime
    dry_run: bool
    requests: int
    status: str  # succeeded | incomplete | failed
    counts: tuple[RunCounts, ...] = ()
    connection: str | None = None  # the mapping name (``mapping.name``) the run synced

    @property
    def duration_s(self) -> float:
        return (self.finished_at - self.started_at).total_seconds()
