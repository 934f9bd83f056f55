"""The values one step of a run hands to the next through the IO manager."""

from __future__ import annotations

from dataclasses import dataclass, field

from connector.contract import Entity
from connector.plan import ReconcilePolicy
from connector.records import DateWindow, MappedRecords
from connector.safety.approvals import HeldWork


@dataclass(frozen=True)
class MappedBatch:
    """One entity's mapped records, with the mapping's reconciliation policy and the window."""

    entity: Entity
    records: MappedRecords
    policy: ReconcilePolicy
    window: DateWindow | None = None


@dataclass(frozen=True)
class SyncOutcome:
    """What the accommodations' sync tells the reservations' sync of the same run."""

    dagster_run_id: str
    refused_accounts: dict[str, str] = field(default_factory=dict)  # account -> message
    # Accounts of the full accommodations export: proof that an account's export is present
    # even when a reservations window holds none of its stays.
    accounts: frozenset[str] = frozenset()
    # Work the accommodations' sync held awaiting an approval: the run fails for it at its end,
    # after the reservations (new bookings among them) were sent.
    awaiting_approval: tuple[HeldWork, ...] = ()
