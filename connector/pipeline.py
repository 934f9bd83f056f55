"""One sync of one mapping: map → plan → push → record the run → report.

Plain functions with typed arguments and results, no printing: the CLI formats the report for
a terminal, Dagster turns it into metadata.
"""

from __future__ import annotations

import uuid
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pandas as pd

from connector.budget import BacklogRow, backlog, backlog_json
from connector.client import ServiceClient, Window, effective_windows, ensure_reachable
from connector.contract import Entity
from connector.errors import ConfigError
from connector.plan import ACTIONS, Force, Plan, ReconcilePolicy, build_plan
from connector.plan_diff import FieldChange, field_changes
from connector.push import OUTCOMES, Outcome, ProgressCallback, PushResult, push_plan
from connector.records import DateWindow, MappedRecords
from connector.safety.guard import (
    GuardRules,
    GuardVerdict,
    MassChangeRule,
    evaluate,
    withhold,
)
from connector.settings import SyncSettings
from connector.snapshot import RunCounts, RunRecord, Snapshot, SnapshotStore, validated_payloads
from connector.urgency import URGENCY_CLASSES

_SAMPLE = 20  # problems listed in a report; the rest are counted


class RunStatus:
    SUCCEEDED = "succeeded"  # every change acknowledged (or nothing to send)
    INCOMPLETE = "incomplete"  # some changes dead-lettered, failed, pending or held back
    DISAGREED = "disagreed"  # every change acknowledged, but some answers contradicted it
    BLOCKED = "blocked"  # the mass-change guard stopped an account's push (docs/safety-rails.md)
    UNUSABLE = "unusable"  # an entity's export gave nothing: no rows, or every one quarantined
    DRY_RUN = "dry_run"


@dataclass
class SyncReport:
    """What one sync decided and what the service answered."""

    run_id: str
    mapping: str
    started_at: datetime
    finished_at: datetime
    plan: Plan
    push: PushResult
    snapshot: str
    quarantine: dict[str, int] = field(default_factory=dict)  # per entity
    quarantine_sample: list[dict[str, Any]] = field(default_factory=list)  # values masked
    dead_letters: dict[str, int] = field(default_factory=dict)  # held in the snapshot, per status
    guard: GuardVerdict = field(default_factory=GuardVerdict)
    diff_sample: list[FieldChange] = field(default_factory=list)  # masked, first changes

    @property
    def held(self) -> int:
        """Not sent: refused before with the same content, or its unit is not at the service."""
        return self.plan.held + len(self.push.held_back)

    rate_windows: tuple[Window, ...] = ()  # the limits the client enforced: the backlog's pace

    @property
    def backlog(self) -> list[BacklogRow]:
        """Changes this run left unsent (budget, pending), per urgency class, with their ETA."""
        return backlog(self.push.unsent, self.rate_windows)

    @property
    def counts(self) -> dict[str, int]:
        return self.plan.counts

    @property
    def outcomes(self) -> dict[str, int]:
        return self.push.outcomes

    @property
    def requests(self) -> int:
        return self.push.requests

    @property
    def status(self) -> str:
        """The one word for the run; the most serious condition wins."""
        if self.push.dry_run:
            return RunStatus.DRY_RUN
        if self.plan.unusable:
            return RunStatus.UNUSABLE
        if self.guard.blocked:
            return RunStatus.BLOCKED
        if not self.push.complete:
            return RunStatus.INCOMPLETE
        if self.push.disagreements:
            return RunStatus.DISAGREED
        return RunStatus.SUCCEEDED

    @property
    def duration_s(self) -> float:
        return (self.finished_at - self.started_at).total_seconds()

    def to_json_dict(self) -> dict[str, Any]:
        problems = self.push.problems
        return {
            "run_id": self.run_id,
            "mapping": self.mapping,
            "status": self.status,
            "dry_run": self.push.dry_run,
            "counts": self.counts,
            "held": self.held,
            "quarantined": self.plan.quarantined,
            "kept_quarantined": self.plan.kept_quarantined,
            "units_with_stays": self.plan.units_with_stays_json(),
            "unusable": self.plan.unusable,
            "held_back": [
                {
                    "entity": h.entity,
                    "account_id": h.account_id,
                    "record_id": h.record_id,
                    "action": h.action,
                    "unit_ids": list(h.unit_ids),
                    "reason": h.reason,
                }
                for h in self.push.held_back[:_SAMPLE]
            ],
            "held_back_total": len(self.push.held_back),
            "guard": self.guard.to_json_dict(),
            "outcomes": dict(self.outcomes),
            "requests": self.requests,
            "duration_s": round(self.duration_s, 3),
            "push_duration_s": round(self.push.duration_s, 3),
            "snapshot": self.snapshot,
            "accounts": self.plan.accounts,
            "stopped_accounts": {a: str(e) for a, e in sorted(self.push.stopped_accounts.items())},
            "problems": [
                {
                    "entity": p.entity,
                    "account_id": p.account_id,
                    "record_id": p.record_id,
                    "action": p.action,
                    "outcome": str(p.outcome),
                    "http_status": p.http_status,
                    "message": p.message,
                    "request_ids": list(p.request_ids),
                    "attempts": p.attempts,
                }
                for p in problems[:_SAMPLE]
            ],
            "problems_total": len(problems),
            "disagreements": [
                {
                    "entity": d.entity,
                    "account_id": d.account_id,
                    "record_id": d.record_id,
                    "action": d.action,
                    "detail": d.detail,
                    "request_id": d.request_id,
                }
                for d in self.push.disagreements[:_SAMPLE]
            ],
            "disagreements_total": len(self.push.disagreements),
            "dead_letters": self.dead_letters,
            "quarantine": self.quarantine,
            "quarantine_sample": self.quarantine_sample,
            "deferred": sum(self.push.deferred.values()),
            "throttled": self.push.throttled,
            "unsent_by_urgency": {u: int(self.push.unsent.get(u, 0)) for u in URGENCY_CLASSES},
            "backlog": backlog_json(self.backlog),
        }


def load_batches(
    mapping_path: str | Path,
    *,
    entities: Collection[Entity] | None = None,
    window: DateWindow | None = None,
    snapshot_path: str | Path | None = None,
    input_paths: Mapping[str, str | Path] | None = None,
) -> tuple[dict[Entity, MappedRecords], ReconcilePolicy]:
    """Run the mapping engine; return its records and the mapping's reconciliation policy.

    With ``snapshot_path``, payloads the service acknowledged and the current contract already
    validated are not validated again (``connector.snapshot.validated_payloads``).
    ``input_paths`` reads a file input from another file for this run (input name → path,
    e.g. the export that landed in a drop folder).
    """
    from connector.mapping import load_mapping, map_records  # the mapping engine's interface
    from connector.safety.stability import check_mapping_exports

    mapping = load_mapping(mapping_path)
    for name, path in (input_paths or {}).items():
        source = mapping.inputs.get(name)
        if source is None or not hasattr(source, "path"):
            raise ConfigError(
                f"input_paths names {name!r}, which is not a file input of {mapping_path} "
                f"(file inputs: {', '.join(n for n, s in mapping.inputs.items() if hasattr(s, 'path'))})"
            )
        mapping.inputs[name] = source.model_copy(update={"path": str(Path(path).resolve())})
    check_mapping_exports(mapping)  # an export still being written is never read
    validated = validated_payloads(snapshot_path) if snapshot_path is not None else None
    batches = map_records(mapping, entities=entities, window=window, validated=validated)
    return dict(batches), ReconcilePolicy.from_mapping(mapping)


@contextmanager
def planned(
    mapping_path: str | Path,
    settings: SyncSettings,
    *,
    entities: Collection[Entity] | None = None,
    window: DateWindow | None = None,
    force: Force | None = None,
    today: date | None = None,
    release_units_with_stays: bool = False,
) -> Iterator[tuple[Plan, SnapshotStore]]:
    """Map and diff without sending anything; the snapshot stays open (read-only) for what
    follows."""
    batches, policy = load_batches(
        mapping_path, entities=entities, window=window, snapshot_path=settings.snapshot_path
    )
    # Read-only: a plan writes nothing, and creates no snapshot file where there is none.
    with Snapshot.open(
        settings.snapshot_path, lock_timeout=settings.lock_timeout, read_only=True
    ) as snapshot:
        plan = build_plan(
            snapshot,
            batches,
            policy=policy,
            window=window,
            force=force,
            today=today,
            urgency=settings.urgency,
            release_units_with_stays=release_units_with_stays,
        )
        yield plan, snapshot


def plan_sync(
    mapping_path: str | Path,
    settings: SyncSettings,
    *,
    entities: Collection[Entity] | None = None,
    window: DateWindow | None = None,
    force: Force | None = None,
    today: date | None = None,
    release_units_with_stays: bool = False,
) -> Plan:
    """Map and diff without sending anything."""
    with planned(
        mapping_path,
        settings,
        entities=entities,
        window=window,
        force=force,
        today=today,
        release_units_with_stays=release_units_with_stays,
    ) as (plan, _snapshot):
        return plan


def run_sync(
    mapping_path: str | Path,
    settings: SyncSettings,
    *,
    dry_run: bool = False,
    entities: Collection[Entity] | None = None,
    window: DateWindow | None = None,
    force: Force | None = None,
    on_progress: ProgressCallback | None = None,
    today: date | None = None,
    allow_mass_change: bool = False,
    release_units_with_stays: bool = False,
) -> SyncReport:
    """Map, plan, push and record one run of a mapping file."""
    started = _now()
    batches, policy = load_batches(
        mapping_path, entities=entities, window=window, snapshot_path=settings.snapshot_path
    )
    from connector.mapping import load_mapping

    guard = GuardRules.from_mapping(load_mapping(mapping_path))
    return sync_batches(
        batches,
        settings,
        policy=policy,
        mapping=str(mapping_path),
        dry_run=dry_run,
        window=window,
        force=force,
        on_progress=on_progress,
        started_at=started,
        today=today,
        guard=guard,
        allow_mass_change=allow_mass_change,
        release_units_with_stays=release_units_with_stays,
    )


def sync_batches(
    batches: Mapping[Entity, MappedRecords],
    settings: SyncSettings,
    *,
    policy: ReconcilePolicy | None = None,
    mapping: str = "<records>",
    dry_run: bool = False,
    window: DateWindow | None = None,
    force: Force | None = None,
    on_progress: ProgressCallback | None = None,
    started_at: datetime | None = None,
    today: date | None = None,
    guard: GuardRules | None = None,
    allow_mass_change: bool = False,
    release_units_with_stays: bool = False,
    by_checkin: bool = False,
) -> SyncReport:
    """Plan and push records that are already mapped (the mapping engine's output, or built).

    The mass-change guard (``guard``, default thresholds when None) withholds every change of
    an account over a limit unless ``allow_mass_change``; the report's status is then
    ``blocked`` and ``report.guard.message()`` says why and how to approve. A unit that
    guests still stay in is not deactivated unless ``release_units_with_stays`` or
    ``allow_mass_change`` approves it. ``by_checkin`` keeps the reservations' counts per
    check-in day too, so the report can be split by window (``connector.windowed_report``).
    """
    started = started_at or _now()
    run_id = uuid.uuid4().hex
    if not dry_run:
        ensure_reachable(settings.client)  # a service down at the start: one clear error
    with Snapshot.open(settings.snapshot_path, lock_timeout=settings.lock_timeout) as snapshot:
        plan = build_plan(
            snapshot,
            batches,
            policy=policy,
            window=window,
            force=force,
            today=today,
            urgency=settings.urgency,
            release_units_with_stays=release_units_with_stays or allow_mass_change,
            by_checkin=by_checkin,
        )
        verdict = evaluate(plan, snapshot, guard, allow=allow_mass_change)
        diff_sample = field_changes(_updates_first(plan.changes), snapshot, limit=_SAMPLE)
        client = ServiceClient(settings.client, settings.tokens)
        result = push_plan(
            withhold(plan, verdict.blocked_accounts),
            client,
            snapshot,
            dry_run=dry_run,
            options=settings.push,
            on_progress=on_progress,
        )
        if not dry_run:
            _adopt_exported(snapshot, batches, plan.connection)
        report = SyncReport(
            run_id=run_id,
            mapping=mapping,
            started_at=started,
            finished_at=_now(),
            plan=plan,
            push=result,
            snapshot=snapshot.location,
            quarantine=_quarantine_counts(batches),
            quarantine_sample=_quarantine_sample(batches),
            dead_letters=_dead_letter_summary(snapshot),
            guard=verdict,
            diff_sample=diff_sample,
            rate_windows=effective_windows(settings.client),
        )
        _record_run(snapshot, report)
    return report


def _adopt_exported(
    snapshot: SnapshotStore, batches: Mapping[Entity, MappedRecords], connection: str | None
) -> None:
    # A record this connection exports is this connection's, changed or not: a unit that
    # moved from one mapping to another is then reconciled by the one that has it now.
    for entity, batch in batches.items():
        snapshot.adopt(entity, batch.records, connection)


def _updates_first(changes: pd.DataFrame) -> pd.DataFrame:
    """Changes for the diff sample: updates, deactivations and cancellations before creates,
    whose every field is new and would fill the sample with one record."""
    if not len(changes):
        return changes
    return changes.sort_values("action", key=lambda a: a == "create", kind="stable")


def _record_run(snapshot: SnapshotStore, report: SyncReport) -> None:
    plan, push = report.plan, report.push
    keys = {
        (str(e), str(a))
        for e, a in zip(plan.tally["entity"], plan.tally["account_id"], strict=True)
    }
    keys |= {
        (str(e), str(a))
        for e, a in zip(plan.extracted["entity"], plan.extracted["account_id"], strict=True)
    }
    # Accounts of the last successful run with no row now: recorded with zero rows, so that
    # once a run is approved, zero is the baseline and the guard does not trip every night.
    keys |= {
        (change.entity, change.account_id)
        for change in report.guard.changes
        if change.rule == MassChangeRule.ROW_DROP and change.count == 0
    }
    counts: list[RunCounts] = []
    for entity, account in sorted(keys):
        extracted = plan.extracted[
            (plan.extracted["entity"] == entity) & (plan.extracted["account_id"] == account)
        ]
        actions = plan.counts_by(Entity(entity), account)
        outcomes = push.by_account.get((entity, account), {})
        counts.append(
            RunCounts(
                account_id=account,
                entity=Entity(entity),
                extracted=int(extracted["extracted"].sum()),
                quarantined=int(extracted["quarantined"].sum()),
                **{str(a): actions[str(a)] for a in ACTIONS},
                held=actions["held"] + int(outcomes.get("held", 0)),
                **{str(o): int(outcomes.get(str(o), 0)) for o in OUTCOMES},
                requests=int(outcomes.get("requests", 0)),
            )
        )
    snapshot.record_run(
        RunRecord(
            run_id=report.run_id,
            mapping=report.mapping,
            accounts=tuple(plan.accounts),
            started_at=report.started_at,
            finished_at=report.finished_at,
            dry_run=push.dry_run,
            requests=push.requests,
            status=report.status,
            counts=tuple(counts),
            connection=plan.connection,
        )
    )


def _dead_letter_summary(snapshot: SnapshotStore) -> dict[str, int]:
    letters = snapshot.dead_letters()
    if letters.empty:
        return {}
    return {str(status): int(n) for status, n in letters["http_status"].value_counts().items()}


def _quarantine_counts(batches: Mapping[Entity, MappedRecords]) -> dict[str, int]:
    return {str(entity): len(batch.quarantine) for entity, batch in batches.items()}


def _quarantine_sample(batches: Mapping[Entity, MappedRecords]) -> list[dict[str, Any]]:
    # The mapping engine already masks sensitive values in the quarantine's ``value`` column.
    frames = [batch.quarantine.head(_SAMPLE) for batch in batches.values() if len(batch.quarantine)]
    if not frames:
        return []
    sample = pd.concat(frames, ignore_index=True).head(_SAMPLE)
    return [
        {key: (None if pd.isna(value) else str(value)) for key, value in row.items()}
        for row in sample.to_dict(orient="records")
    ]


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


__all__ = [
    "Outcome",
    "RunStatus",
    "SyncReport",
    "load_batches",
    "plan_sync",
    "planned",
    "run_sync",
    "sync_batches",
]
