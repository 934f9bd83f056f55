"""The recorder: a push's answers committed to the snapshot by one writer thread."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd
import pyarrow as pa

from connector.documents import DocumentArray
from connector.plan import RESEND_REASONS
from connector.snapshot import (
    ACKNOWLEDGEMENT_SCHEMA,
    DriftEvent,
    PossiblyStored,
    Refusal,
    SnapshotStore,
)

if TYPE_CHECKING:
    from connector.push._push import PushOptions, _Change

_FROM_PLAN = {
    "account_id": "account_id",
    "entity": "entity",
    "record_id": "record_id",
    "content_hash": "content_hash",
    "payload": "payload",
    "status_after": "status",
}
"""The plan's columns an acknowledgement records, and their names in the snapshot."""


@dataclass(frozen=True)
class RecordedColumns:
    """Every plan row's columns an acknowledgement records, as Arrow, taken a batch at a time.

    The keys, hashes and days are converted once for the whole plan; the documents are read
    only for the rows taken (:meth:`take`): a first run's plan holds every document of the
    export, in an order of its own (connector.documents), and they are copied a batch at a
    time as they are recorded, not once more for the whole plan.
    """

    table: pa.Table  # ACKNOWLEDGEMENT_SCHEMA's plan columns, without the payload
    payloads: DocumentArray

    def take(self, rows: Sequence[int] | np.ndarray) -> pa.Table:
        """The recorded columns of the plan rows at ``rows``, documents included."""
        positions = np.asarray(rows, dtype=np.int64)
        taken = self.table.take(pa.array(positions, pa.int64()))
        at = taken.schema.get_field_index("content_hash") + 1
        return taken.add_column(
            at, ACKNOWLEDGEMENT_SCHEMA.field("payload"), self.payloads.arrow(positions)
        )


def recorded_columns(changes: pd.DataFrame) -> RecordedColumns:
    """The plan's columns an acknowledgement records (:class:`RecordedColumns`): the keys as
    Arrow text, the days converted once, the documents left where the plan holds them."""
    keys = [plan for plan in _FROM_PLAN if plan != "payload"]
    strings = pa.Table.from_pandas(changes.loc[:, keys], preserve_index=False)
    columns = {_FROM_PLAN[plan]: strings.column(plan) for plan in keys}
    columns |= {name: plan_days(changes[name]) for name in ("checkin", "checkout")}
    fields = [field for field in ACKNOWLEDGEMENT_SCHEMA if field.name in columns]
    table = pa.table([columns[field.name] for field in fields], schema=pa.schema(fields))
    return RecordedColumns(table, DocumentArray.of_text(changes["payload"]))


def plan_days(column: pd.Series) -> pa.Array:
    """Calendar days of a plan's date column (timestamps, ISO strings or missing), vectorised."""
    # "mixed": a plan read back from a file may hold strings of more than one ISO shape.
    stamps = pd.to_datetime(column, format="mixed")
    if isinstance(stamps.dtype, pd.DatetimeTZDtype):
        stamps = stamps.dt.tz_localize(None)  # the day written, not the day in UTC
    return pa.array(stamps).cast(pa.date32())


def acknowledged_rows(
    recorded: RecordedColumns,
    rows: Sequence[int],
    at: Sequence[datetime],
    request_ids: Sequence[str | None],
    connection: str | None,
) -> pa.Table:
    """The acknowledgements of the plan rows at ``rows`` (``recorded``: :func:`recorded_columns`).

    Taken from the plan's columns, not read from an object per record: this runs on the
    writer thread, and Python work there holds the GIL the event loop needs for every answer.
    """
    taken = recorded.take(rows)
    return (
        taken.append_column(
            ACKNOWLEDGEMENT_SCHEMA.field("acknowledged_at"), pa.array(at, pa.timestamp("us"))
        )
        .append_column(
            ACKNOWLEDGEMENT_SCHEMA.field("request_id"), pa.array(request_ids, pa.large_string())
        )
        .append_column(
            ACKNOWLEDGEMENT_SCHEMA.field("connection"),
            pa.nulls(len(rows), pa.large_string())
            if connection is None
            else pa.repeat(pa.scalar(connection, pa.large_string()), len(rows)),
        )
        .select(ACKNOWLEDGEMENT_SCHEMA.names)
    )


class _Recorder:
    """Buffers answers; one writer thread commits them to the snapshot in small batches.

    The event loop only appends to the buffers. The writer commits whatever is buffered every
    ``commit_interval`` seconds (the durability bound), or as soon as ``commit_every`` answers
    wait (a cap on a batch), so an answer is durable at most one interval plus one commit after
    it came. A slow commit makes the next batch larger, not later. The writer is the snapshot's only user until :meth:`close`.
    """

    def __init__(
        self,
        snapshot: SnapshotStore,
        options: PushOptions,
        recorded: RecordedColumns,
        connection: str | None = None,
    ) -> None:
        self.snapshot = snapshot
        self.options = options
        self.recorded = recorded  # the plan's columns an acknowledgement records
        self.connection = connection  # the owner recorded with every acknowledgement
        # Read before the writer thread starts: it is the snapshot's only user afterwards.
        self._possibly_stored = snapshot.possibly_stored()
        drifted = snapshot.open_drift()
        self._open_drift = set(
            zip(drifted["account_id"], drifted["entity"], drifted["record_id"], strict=True)
        )
        # An acknowledgement is buffered as (plan row, time, request id): the writer takes the
        # rest from the plan's columns.
        self._acknowledged: list[tuple[int, datetime, str | None]] = []
        self._answers: list[Refusal | PossiblyStored | DriftEvent] = []
        # Write-ahead marks waiting for the writer, each with the event its sender waits on.
        self._marks: list[tuple[list[PossiblyStored], threading.Event]] = []
        self.push_id = uuid.uuid4().hex  # names this push's write-ahead marks
        self._unanswered: set[tuple[str, str, str]] = set()  # sent, no answer recorded yet
        self._lock = threading.Lock()  # guards the buffers and _closing
        self._wake = threading.Event()
        self._closing = False
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._write_until_closed, name="pms-sync-snapshot-writer", daemon=True
        )
        self._thread.start()

    def acknowledge(self, change: _Change, at: datetime, request_id: str | None) -> None:
        self._add(self._acknowledged, (change.row, at, request_id))

    def refuse(self, refusal: Refusal) -> None:
        self._add(self._answers, refusal)

    def possibly_stored(self, change: PossiblyStored) -> None:
        self._add(self._answers, change)

    def drift(self, event: DriftEvent) -> None:
        self._add(self._answers, event)

    def possibly_stored_of(
        self,
        change: _Change,
        request_id: str | None,
        seen_at: datetime,
        *,
        in_flight: str | None = None,
    ) -> PossiblyStored:
        """``change`` as possibly stored, with what reconciliation needs if its record leaves
        the export before the service confirms it."""
        return PossiblyStored(
            account_id=change.account_id,
            entity=change.entity,
            record_id=change.record_id,
            content_hash=change.content_hash,
            request_id=request_id,
            seen_at=seen_at,
            payload=change.payload,
            checkin=change.checkin,
            checkout=change.checkout,
            status=str(change.status_after),
            connection=self.connection,
            in_flight=in_flight,
        )

    def mark_in_flight(self, changes: Sequence[_Change]) -> None:
        """Write-ahead: commit a slice's changes as possibly stored before any is sent, so a
        process killed with requests in flight leaves them possibly stored. Blocks until
        committed; re-sends of acknowledged content need no mark."""
        now = datetime.now(UTC).replace(tzinfo=None)
        marks = [
            self.possibly_stored_of(change, None, now, in_flight=self.push_id)
            for change in changes
            if change.reason != "forced" and change.reason not in RESEND_REASONS
        ]
        if not marks:
            return
        committed = threading.Event()
        with self._lock:
            self._marks.append((marks, committed))
        self._wake.set()
        while not committed.wait(0.05) and self._thread.is_alive():
            pass
        self._raise_if_failed()

    def sending(self, change: _Change) -> None:
        self._unanswered.add((change.account_id, str(change.entity), change.record_id))

    def answered(self, change: _Change) -> None:
        self._unanswered.discard((change.account_id, str(change.entity), change.record_id))

    def drift_open(self, change: _Change) -> bool:
        """Whether the record had open drift when the push started."""
        return (change.account_id, change.entity, change.record_id) in self._open_drift

    def may_hold_other(self, change: _Change) -> bool:
        """Whether an earlier run's lost answer may have stored another content of it."""
        key = (change.account_id, change.entity, change.record_id)
        earlier = self._possibly_stored.get(key)
        return earlier is not None and earlier != change.content_hash

    def may_hold(self, change: _Change) -> bool:
        """Whether the service may already hold this change's exact content: an earlier
        run's answer to it was lost, or it re-sends acknowledged content on request."""
        if change.reason == "forced" or change.reason in RESEND_REASONS:
            return True
        key = (change.account_id, change.entity, change.record_id)
        return self._possibly_stored.get(key) == change.content_hash

    def _add(self, buffer: list[Any], item: Any) -> None:
        self._raise_if_failed()
        with self._lock:
            buffer.append(item)
            due = len(self._acknowledged) + len(self._answers) >= self.options.commit_every
        if due:
            self._wake.set()

    def close(self) -> None:
        """Commit everything buffered and stop the writer; raises a failed commit's error."""
        with self._lock:
            self._closing = True
        self._wake.set()
        self._thread.join()
        self._raise_if_failed()
        # Marks of changes answered (or never sent) go; those still in flight (a cancelled
        # push) stay possibly stored.
        self.snapshot.clear_in_flight(self.push_id, self._unanswered)

    def _raise_if_failed(self) -> None:
        # A failed commit (a full disk) fails the push, as it did on the loop: the answers
        # not committed are re-sent by the next run. Raised once, then the run unwinds.
        error, self._error = self._error, None
        if error is not None:
            raise error

    def _write_until_closed(self) -> None:
        while True:
            self._wake.wait(self.options.commit_interval)
            self._wake.clear()
            with self._lock:  # emptied, not replaced: _add holds the lists it appends to
                acknowledged, answers = self._acknowledged.copy(), self._answers.copy()
                marks = self._marks.copy()
                self._acknowledged.clear()
                self._answers.clear()
                self._marks.clear()
                closing = self._closing  # read with the swap: nothing is appended after it
            refusals = [a for a in answers if isinstance(a, Refusal)]
            possible = [a for a in answers if isinstance(a, PossiblyStored)]
            drift = [a for a in answers if isinstance(a, DriftEvent)]
            try:
                self.snapshot.mark_in_flight([mark for batch, _ in marks for mark in batch])
                for _, committed in marks:
                    committed.set()
                # Possibly-stored first: an acknowledgement in the same batch clears it.
                self.snapshot.record_possibly_stored(possible)
                if acknowledged:
                    rows, at, request_ids = zip(*acknowledged, strict=True)
                    self.snapshot.record_acknowledgements(
                        acknowledged_rows(self.recorded, rows, at, request_ids, self.connection)
                    )
                self.snapshot.record_refusals(refusals)
                self.snapshot.record_drift(drift)
            except BaseException as error:
                self._error = error
                return
            if closing:
                return
