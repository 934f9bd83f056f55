"""What one run is asked to do, beside the settings: one value every stage of the run reads.

Built in one place, ``SyncRequest.of``: the CLI and the Dagster assets build it and pass it
whole; the library's ``run_sync``, ``plan_sync`` and ``sync_batches`` build it from their
keyword arguments the same way.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from connector.contract import Entity
from connector.plan import Approval, Force
from connector.records import DateWindow
from connector.safety.guard import GuardRules
from connector.settings import SyncSettings


@dataclass(frozen=True)
class SyncRequest:
    """One run's options (``settings``: the connection's, read only).

    Drift the service's answers reveal is recorded and healed (docs/drift.md): records with
    open drift are re-sent, ``settings.refresh`` adds the rolling refresh, and ``reconcile``
    continues (or starts) the connection's full reconciliation pass instead, within the
    budget; the pass resumes in the next reconciling run.

    The mass-change guard (``guard``, default thresholds when None) withholds the kinds of
    change over a limit (an account's deactivations or cancellations) unless
    ``allow_mass_change``; a unit or property that guests still stay in is not deactivated
    unless ``release_units_with_stays``. Either way the report's status is ``blocked`` and
    ``report.approval_message()`` says what was held and how to approve. ``by_checkin`` keeps
    the reservations' counts per check-in day too, so the report can be split by window
    (``connector.pipeline._windowed_report``).

    ``accounts``: the run covers these accounts of the connection only (``load_batches`` kept
    their records): it locks, reconciles and compares with the guard's baseline within them,
    so runs of different accounts of one connection proceed together and neither reads the
    other's accounts as dropped rows.
    """

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

    @classmethod
    def of(
        cls,
        settings: SyncSettings,
        mapping: str | Path = "<records>",
        *,
        force: Force | None = None,
        today: date | None = None,
        accounts: Collection[str] | None = None,
        **options: Any,
    ) -> SyncRequest:
        """A run's request as the entry points take its options: None for the default force
        and day, accounts as given (external ids too); ``options``: the other fields."""
        return cls(
            settings,
            mapping=str(mapping),
            force=force or Force(),
            today=today or date.today(),
            accounts=frozenset(str(a) for a in accounts) if accounts is not None else None,
            **options,
        )

    @property
    def approved(self) -> frozenset[Approval]:
        """The approvals given for this run's held work (stays: see ``release_units...``)."""
        return frozenset({Approval.MASS_CHANGE} if self.allow_mass_change else ())

    @property
    def maps_everything(self) -> bool:
        """Map every record: asked for, or a forced re-send needs every payload."""
        return self.remap or self.force.active
