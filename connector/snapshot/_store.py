"""The interface every snapshot backend offers (a DuckDB file, a PostgreSQL database)."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import date, datetime
from typing import Protocol

import pandas as pd
import pyarrow as pa

from connector.contract import Entity
from connector.snapshot._accounts import DiscoveredAccount, PropertyStatusRecord
from connector.snapshot._cursors import StoredCursor
from connector.snapshot._events import IncomingEvent
from connector.snapshot._links import GuestLinkRecord
from connector.snapshot._model import (
    DiffRequest,
    DiffResult,
    DriftEvent,
    PossiblyStored,
    ReconciliationPass,
    Refusal,
    ResendRequest,
    ResendResult,
    RunRecord,
    UnitStaysRequest,
)


class SnapshotStore(Protocol):
    """What the service has acknowledged, what it refused, and the history of runs."""

    location: str
    read_only: bool  # opened for a plan: every write raises SnapshotError

    def diff(self, request: DiffRequest) -> DiffResult:
        """Compare incoming records with the snapshot in one set-based query; writes nothing."""
        ...

    def mark_validated(self, entity: Entity, records: pd.DataFrame) -> None:
        """Mark the acknowledged payloads identical to those of ``records`` (RECORD_COLUMNS,
        which passed the current contract in this run) as valid under it, so the next run's
        mapping need not validate them again (after an upgrade, say)."""
        ...

    def unit_stays(self, request: UnitStaysRequest) -> pd.DataFrame:
        """Per unit of ``request.units`` that guests stay in from ``request.today`` on:
        ``account_id, unit_id, stays, last_checkout`` (units without stays are left out)."""
        ...

    def record_acknowledgements(self, acknowledgements: pa.Table) -> None:
        """Commit acknowledged records (and clear their dead letters) in one transaction.

        ``acknowledgements``: :data:`ACKNOWLEDGEMENT_SCHEMA`'s columns (objects:
        :func:`acknowledgement_table`)."""
        ...

    def adopt(self, entity: Entity, records: pd.DataFrame, connection: str | None) -> int:
        """Make ``connection`` the owner of the acknowledged records among ``records``.

        A record a connection exports is that connection's, even when unchanged (a skip sends
        nothing, so no acknowledgement would move it). Returns how many changed owner.
        """
        ...

    def limiter_history(self, key: str) -> list[float]:
        """Times (epoch seconds) of the recent requests of one service and token."""
        ...

    def save_limiter_history(self, key: str, sent_at: Sequence[float]) -> None:
        """Replace the recent requests of one service and token."""
        ...

    def record_refusals(self, refusals: Sequence[Refusal]) -> None:
        """Commit dead letters in one transaction; a repeated refusal counts one more attempt."""
        ...

    def record_possibly_stored(self, changes: Sequence[PossiblyStored]) -> None:
        """Remember pending changes the service may hold (replacing an older one per record);
        an acknowledgement of the record clears it."""
        ...

    def mark_in_flight(self, changes: Sequence[PossiblyStored]) -> None:
        """Write-ahead: remember changes about to be sent as possibly stored (``in_flight``
        names the push), keeping a record's earlier mark."""
        ...

    def clear_in_flight(self, in_flight: str, keep: Collection[tuple[str, str, str]]) -> None:
        """Forget the push's write-ahead marks no lost answer replaced, but those of ``keep``
        ((account_id, entity, record_id) sent and never answered)."""
        ...

    def possibly_stored(self) -> dict[tuple[str, str, str], str]:
        """(account_id, entity, record_id) → content hash of each change that may be stored."""
        ...

    def stored_fingerprints(
        self, connection: str | None, entity: Entity, mapping_fingerprint: str
    ) -> pa.Table:
        """FINGERPRINT_COLUMNS (connector.records) of ``connection``'s records whose
        acknowledged, active content is the one their fingerprinted rows mapped to."""
        ...

    def record_fingerprints(
        self,
        connection: str | None,
        entity: Entity,
        mapping_fingerprint: str,
        mapped: pd.DataFrame,
    ) -> int:
        """Keep the source fingerprints of the records a run mapped (MAPPED_COLUMNS of
        connector.mapping.fingerprints) whose content the service now holds; forget the others
        and those of an older mapping fingerprint. Returns how many are kept."""
        ...

    # Re-sends of acknowledged records, drift, reconciliation passes (docs/drift.md).

    def resend(self, request: ResendRequest) -> ResendResult:
        """The acknowledged records one entity's run re-sends: open drift, then a
        reconciliation pass's remainder or the refresh's share (see ``ResendRequest``)."""
        ...

    def record_drift(self, events: Sequence[DriftEvent]) -> None:
        """Heal open drift and record drift found, in one transaction."""
        ...

    def open_drift(self, entity: Entity | None = None) -> pd.DataFrame:
        """Open drift: account_id, entity, record_id, kind, detail, found_at, request_id."""
        ...

    def reconciliation_pass(
        self, connection: str | None, entity: Entity
    ) -> ReconciliationPass | None:
        """The connection's latest reconciliation pass of ``entity`` (finished or not)."""
        ...

    def start_reconciliation(
        self, connection: str | None, entity: Entity, at: datetime
    ) -> ReconciliationPass: ...

    def finish_reconciliation(self, found: ReconciliationPass, at: datetime) -> None: ...

    def record_run(self, run: RunRecord) -> None: ...

    def acknowledged(self, entity: Entity | None = None) -> pd.DataFrame: ...

    def dead_letters(self) -> pd.DataFrame: ...

    def runs(self) -> pd.DataFrame: ...

    def run_counts(self, run_id: str | None = None) -> pd.DataFrame: ...

    # Reads of the safety rails (docs/safety-rails.md).

    def active_counts(self, entity: Entity) -> dict[str, int]: ...

    def payloads_of(
        self, entity: Entity, keys: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], str]: ...

    def unacknowledged_dead_letters(self, entity: Entity) -> pd.DataFrame: ...

    def fingerprint(self, accounts: Sequence[str]) -> str: ...

    # The Open API (connector/accounts): discovered accounts and property status.

    def discovered_accounts(self, client_key: str) -> list[DiscoveredAccount]:
        """The accounts an Open API client's lookups returned, with their tokens."""
        ...

    def save_discovered_accounts(
        self, client_key: str, accounts: Sequence[DiscoveredAccount]
    ) -> None: ...

    def forget_discovered_accounts(
        self, client_key: str, external_ids: Collection[str]
    ) -> None: ...

    def property_statuses(self) -> dict[str, PropertyStatusRecord]: ...

    def record_property_statuses(self, records: Sequence[PropertyStatusRecord]) -> None: ...

    def accounts_of_connection(self, connection: str | None) -> pd.DataFrame: ...

    def account_stays(self, accounts: Collection[str], today: date) -> pd.DataFrame: ...

    def deactivated_units(self, accounts: Collection[str]) -> pd.DataFrame: ...

    # Guest links and received events (docs/loop.md).

    def link_candidates(self, connection: str | None, first: date, last: date) -> pd.DataFrame:
        """The connection's reservations checking in from ``first`` to ``last``, soonest
        first, with when their links were fetched."""
        ...

    def save_guest_links(self, links: Sequence[GuestLinkRecord]) -> None: ...

    def guest_links(
        self, connection: str | None, first: date | None = None, last: date | None = None
    ) -> pd.DataFrame: ...

    def record_events(self, deliveries: Sequence[IncomingEvent]) -> list[bool]:
        """Store each event once; per delivery, whether it was new."""
        ...

    def received_events(
        self, connection: str | None = None, *, after_seq: int = 0, upto_seq: int | None = None
    ) -> pd.DataFrame: ...

    def last_event_seq(self, connection: str | None = None) -> int: ...

    def event_write_cursors(self, connection: str) -> dict[str, int]:
        """Per write-back destination, the last event of ``connection`` written there."""
        ...

    def advance_event_write_cursors(
        self, connection: str, written: Mapping[str, int], at: datetime
    ) -> None:
        """Move the destinations' cursors forward (never back), in one transaction."""
        ...

    # Incremental cursors of SQL inputs (connector.pipeline._incremental).

    def source_cursors(self, connection: str | None) -> dict[tuple[str, str], StoredCursor]:
        """The connection's cursors by (input, scope)."""
        ...

    def save_source_cursors(self, connection: str | None, cursors: Sequence[StoredCursor]) -> None:
        """Keep the cursors of an acknowledged run, in one transaction."""
        ...
