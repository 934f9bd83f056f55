"""What one run is asked to do, beside the settings: one value every stage of the run reads.

``run_sync``, ``plan_sync``, ``sync_batches``, ``plan_to_file`` and ``apply_plan_file`` each
build it once from their arguments and the ``Settings``; the stages below them take it whole.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import date

from connector.contract import Entity
from connector.plan import Approval, Force
from connector.records import DateWindow
from connector.safety.guard import GuardRules
from connector.settings import SyncSettings


@dataclass(frozen=True)
class SyncRequest:
    """One run's options (``settings``: the connection's, read only)."""

    settings: SyncSettings
    mapping: str = "<records>"  # the mapping file, as the run history names the run
    entities: Collection[Entity] | None = None  # None: every entity of the mapping
    window: DateWindow | None = None  # reservations by check-in
    force: Force = field(default_factory=Force)
    today: date = field(default_factory=date.today)
    guard: GuardRules | None = None  # the mapping's thresholds; None: the defaults
    dry_run: bool = False
    allow_mass_change: bool = False
    release_units_with_stays: bool = False  # decided when planning: the plan holds them
    reconcile: bool = False  # continue (or start) the connection's reconciliation pass
    remap: bool = False  # map every record, whatever its source fingerprint
    by_checkin: bool = False  # keep the reservations' counts per check-in day
    accounts: frozenset[str] | None = None  # a run of these accounts of the connection only

    @property
    def approved(self) -> frozenset[Approval]:
        """The approvals given for this run's held work (stays: see ``release_units...``)."""
        return frozenset({Approval.MASS_CHANGE} if self.allow_mass_change else ())

    @property
    def maps_everything(self) -> bool:
        """Map every record: asked for, or a forced re-send needs every payload."""
        return self.remap or self.force.active


def account_scope(accounts: Collection[str] | None) -> frozenset[str] | None:
    return frozenset(str(account) for account in accounts) if accounts is not None else None
