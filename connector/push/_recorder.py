"""The recorder: a push's answers committed to the snapshot by one writer thread."""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from connector.plan import RESEND_REASONS
from connector.snapshot import (
    Acknowledgement,
    DriftEvent,
    PossiblyStored,
    Refusal,
    SnapshotStore,
)

if TYPE_CHECKING:
    from connector.push._push import PushOptions, _Change


class _Recorder:
    """Buffers answers; one writer thread commits them to the snapshot in small batches.

    The event loop only appends to the buffers. The writer commits whatever is buffered every
    ``commit_interval`` seconds (the durability bound), or as soon as ``commit_every`` answers
    wait (a cap on a batch), so an answer is durable at most one interval plus one commit after
    it came. A slow commit makes the next batch larger, not later. The writer is the snapshot's only user until :meth:`close`.
    """

    def __init__(
        self, snapshot: SnapshotStore, options: PushOptions, connection: str | None = None
    ) -> None:
        self.snapshot = snapshot
        self.options = options
        self.connection = connection  # the owner recorded with every acknowledgement
        # Read before the writer thread starts: it is the snapshot's only user afterwards.
        self._possibly_stored = snapshot.possibly_stored()
        drifted = snapshot.open_drift()
        self._open_drift = set(
            zip(drifted["account_id"], drifted["entity"], drifted["record_id"], strict=True)
        )
        self._answers: list[Acknowledgement | Refusal | PossiblyStored | DriftEvent] = []
        self._lock = threading.Lock()  # guards _answers and _closing
        self._wake = threading.Event()
        self._closing = False
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._write_until_closed, name="pms-sync-snapshot-writer", daemon=True
        )
        self._thread.start()

    def acknowledge(self, ack: Acknowledgement) -> None:
        self._add(ack)

    def refuse(self, refusal: Refusal) -> None:
        self._add(refusal)

    def possibly_stored(self, change: PossiblyStored) -> None:
        self._add(change)

    def drift(self, event: DriftEvent) -> None:
        self._add(event)

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

    def _add(self, answer: Acknowledgement | Refusal | PossiblyStored | DriftEvent) -> None:
        self._raise_if_failed()
        with self._lock:
            self._answers.append(answer)
            due = len(self._answers) >= self.options.commit_every
        if due:
            self._wake.set()

    def close(self) -> None:
        """Commit everything buffered and stop the writer; raises a failed commit's error."""
        with self._lock:
            self._closing = True
        self._wake.set()
        self._thread.join()
        self._raise_if_failed()

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
            with self._lock:
                answers, self._answers = self._answers, []
                closing = self._closing  # read with the swap: nothing is appended after it
            acks = [a for a in answers if isinstance(a, Acknowledgement)]
            refusals = [a for a in answers if isinstance(a, Refusal)]
            possible = [a for a in answers if isinstance(a, PossiblyStored)]
            drift = [a for a in answers if isinstance(a, DriftEvent)]
            try:
                # Possibly-stored first: an acknowledgement in the same batch clears it.
                self.snapshot.record_possibly_stored(possible)
                self.snapshot.record_acknowledgements(acks)
                self.snapshot.record_refusals(refusals)
                self.snapshot.record_drift(drift)
            except BaseException as error:
                self._error = error
                return
            if closing:
                return
