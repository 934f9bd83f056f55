"""The values one step of a run hands to the next through the IO manager."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from connector.contract import Entity
from connector.pipeline import records_by_window
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
    # The records split by check-in window, kept for the steps of the run's process: the mapped
    # asset's metadata, its checks and the sync split the same batch by the same months.
    _by_window: dict[frozenset[DateWindow], dict[DateWindow, MappedRecords]] = field(
        default_factory=dict, init=False, compare=False, repr=False
    )

    def by_window(self, windows: Iterable[DateWindow]) -> dict[DateWindow, MappedRecords]:
        """``records_by_window`` of the records, split once per set of windows."""
        wanted = frozenset(windows)
        parts = self._by_window.get(wanted)
        if parts is None:
            parts = self._by_window[wanted] = records_by_window(self.records, wanted)
        return parts

    def __getstate__(self) -> dict[str, Any]:
        # The split is derived: a step of another process splits again rather than load it.
        return {name: value for name, value in self.__dict__.items() if name != "_by_window"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        object.__setattr__(self, "_by_window", {})


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
