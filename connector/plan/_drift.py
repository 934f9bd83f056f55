"""Drift: the service no longer holds what the snapshot says it acknowledged.

Staff edit or delete a unit in the service's own interface, a restore on the service's side
loses a day of changes, a proxy's 200 acknowledged a record that never arrived. The interface
has no way to read records back; the service's answers to what pms-sync sends are the only
signal, and :func:`drift_of` reads them (docs/drift.md, docs/decisions.md "Drift and rolling
refresh"). A drift is either healed by the very answer that reveals it (the service stored what
was sent: an update answered as a new reservation, a re-send answered as saved or updated), or
left open: the snapshot marks the record and the next run re-sends it (reason ``drifted``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Protocol

from connector.client import SyncAnswer, present_counts
from connector.contract import Entity
from connector.snapshot import DriftEvent

REASON_DRIFTED = "drifted"
"""A re-send of a record with open drift (the plan's ``reason``)."""
REASON_REFRESH = "refresh"
"""A re-send of the rolling refresh: acknowledged, unchanged, oldest acknowledgement first."""
REASON_RECONCILE = "reconcile"
"""A re-send of a full reconciliation pass."""
RESEND_REASONS: frozenset[str] = frozenset({REASON_DRIFTED, REASON_REFRESH, REASON_RECONCILE})
"""Changes that re-send acknowledged content: the service should already hold them."""
OPTIONAL_REASONS: frozenset[str] = frozenset({REASON_REFRESH, REASON_RECONCILE})
"""Re-sends sent after every other change, that a budget drops instead of deferring: the next
run selects them again (their acknowledgement is still the oldest)."""


class DriftKind(StrEnum):
    # Healed by the answer that reveals them:
    LOST = "lost"  # an update (or re-send) answered as a new reservation: the service lost it
    CHANGED = "changed"  # a re-send answered as saved/updated: it held other content
    UNRECORDED = "unrecorded"  # a create answered as updated: it held a version we never sent
    # Left open, re-sent by the next run:
    UNACCOUNTED = "unaccounted"  # counts of other records, reservationIds that differ
    KEPT_OTHER = "kept_other"  # skipped, while it may hold another content of ours
    MISSING = "missing"  # a read of the Open API (guest links) answered 404: it holds none


@dataclass(frozen=True, slots=True)
class DriftFinding:
    kind: DriftKind
    detail: str
    healed: bool  # the answer that revealed it also shows the service now holds what was sent


class AnswerContradiction(Protocol):
    """What :func:`connector.push.answer_contradictions` finds in an answer (its flags)."""

    @property
    def detail(self) -> str: ...

    @property
    def unaccounted(self) -> bool: ...


def drift_of(
    entity: str,
    action: str,
    reason: str,
    answer: SyncAnswer | None,
    contradictions: Sequence[AnswerContradiction],
    *,
    explained: bool,
    other_content_may_be_stored: bool,
) -> DriftFinding | None:
    """The drift an acknowledged answer reveals, or None.

    ``explained``: a lost answer (in this run or an earlier one) or a re-send on request
    explains "skipped" and "already known". ``other_content_may_be_stored``: the snapshot
    remembers a lost answer to *another* content of this record. A re-send of a record with
    open drift reveals nothing new: its acknowledgement heals the drift, whatever the counts
    (a service whose answers always disagree costs one re-send per record, not one a night).
    """
    if answer is None or reason == REASON_DRIFTED:
        return None
    unaccounted = [c.detail for c in contradictions if c.unaccounted]
    if unaccounted:
        return DriftFinding(DriftKind.UNACCOUNTED, "; ".join(unaccounted), healed=False)
    counts = present_counts(Entity(entity), answer)
    if action != "create" and counts.get("newReservations"):
        return DriftFinding(
            DriftKind.LOST,
            f"sent as {action}, the service did not hold it (newReservations=1)",
            healed=True,
        )
    if action == "create" and counts.get("updatedReservations") and not explained:
        return DriftFinding(
            DriftKind.UNRECORDED,
            "sent as create, the service held another version (updatedReservations=1)",
            healed=True,
        )
    skipped = counts.get("skippedReservations") or (
        counts.get("skippedProperties") and not counts.get("savedProperties")
    )
    if skipped and other_content_may_be_stored and reason not in RESEND_REASONS:
        return DriftFinding(
            DriftKind.KEPT_OTHER,
            "skipped while the service may hold another content of it (an earlier answer was lost)",
            healed=False,
        )
    if reason in OPTIONAL_REASONS:
        stored = counts.get("updatedReservations") or counts.get("savedProperties")
        if stored:
            member = "savedProperties" if entity == Entity.ACCOMMODATION else "updatedReservations"
            return DriftFinding(
                DriftKind.CHANGED,
                f"re-sent unchanged, the service stored it again ({member}=1): it held "
                "other content",
                healed=True,
            )
    return None


def missing_reservation(
    account_id: str, reservation_id: str, *, request_id: str | None, at: datetime
) -> DriftEvent:
    """An acknowledged reservation whose guest links the service answered 404 (deleted at the
    service): open drift, so the next sync re-sends it and the links run after can fetch them."""
    return DriftEvent(
        account_id=account_id,
        entity=Entity.RESERVATION,
        record_id=reservation_id,
        kind=DriftKind.MISSING,
        detail="its guest links were answered 404: the service no longer holds it",
        request_id=request_id,
        at=at,
        healed=False,
    )
