"""One sync of one mapping: map → plan → push → record the run → report.

Plain functions with typed arguments and results, no printing: the CLI formats the report for
a terminal, Dagster turns it into metadata.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Collection, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd

from connector.accounts import AccountDiscovery, AccountsReport
from connector.client import RunStop, Window, effective_windows, ensure_reachable
from connector.contract import Entity
from connector.duckdb_memory import memory_named
from connector.errors import ConfigError
from connector.pipeline._execute import execute_plan
from connector.pipeline._incremental import (
    ReadChoice,
    ReadOptions,
    choose_reads,
    commit_reads,
    settled,
)
from connector.pipeline._request import SyncRequest
from connector.pipeline._shape import shape_plan
from connector.pipeline._verdict import RunConditions, Verdict, verdict_of
from connector.plan import (
    ACTIONS,
    RESEND_REASONS,
    URGENCY_CLASSES,
    BacklogRow,
    FieldChange,
    Force,
    Plan,
    ReconcilePolicy,
    backlog,
    backlog_json,
    field_changes,
    fields_json,
)
from connector.push import (
    OUTCOMES,
    Outcome,
    ProgressCallback,
    PushResult,
    finish_passes,
    open_passes,
)
from connector.records import DateWindow, MappedRecords
from connector.safety.approvals import HeldWork, approval_message
from connector.safety.guard import GuardRules, GuardVerdict, MassChangeRule
from connector.settings import SyncSettings
from connector.snapshot import (
    LockScope,
    RunCounts,
    RunRecord,
    Snapshot,
    SnapshotStore,
    fingerprint_reader_of,
    validated_payloads,
)

_SAMPLE = 20  # problems listed in a report; the rest are counted


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
    # Accounts discovered through the Open API, token renewals, property changes.
    accounts: AccountsReport = field(default_factory=AccountsReport)
    unresolved: int = 0  # records whose external id matches no account (quarantined)
    # Open drift after the run per (entity, account): re-sent by the next run (docs/drift.md).
    drift_open: dict[tuple[str, str], int] = field(default_factory=dict)
    # The same records one by one (entity, account_id, record_id, checkin), so a report split
    # by check-in month counts each month's own (connector.pipeline._windowed_report).
    drift_open_rows: pd.DataFrame | None = None
    # What was held back until an approval (connector.safety.approvals), each with its approval.
    awaiting_approval: tuple[HeldWork, ...] = ()
    # Whether the cursors of this run's reads (``plan.reads``) were kept: only when every
    # planned change was settled (connector.pipeline._incremental.settled).
    cursors_committed: bool = False

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
    def verdict(self) -> Verdict:
        """What the run comes to: status, exit code, Dagster's consequence (``VERDICTS``)."""
        return verdict_of(RunConditions.of(self))

    @property
    def status(self) -> str:
        """The one word for the run; the most serious condition wins."""
        return self.verdict.status

    @property
    def history_status(self) -> str:
        """The status the run history keeps: ``blocked`` only when the guard held something
        back. A run that held only deactivations for stays had its export accepted, so it
        remains a baseline of the guard (an approved removal is not asked for again)."""
        return verdict_of(RunConditions.of(self, held=self.guard.blocked)).status

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
            "quarantined": self.plan.quarantined + self.unresolved,
            "kept_quarantined": self.plan.kept_quarantined,
            "units_with_stays": self.plan.units_with_stays_json(),
            # The plan's effects beyond the counts, as `plan --json` shows them.
            "planned": self.plan.effects_json(),
            "unusable": self.plan.unusable,
            "held_back": [fields_json(h) for h in self.push.held_back[:_SAMPLE]],
            "held_back_total": len(self.push.held_back),
            "guard": self.guard.to_json_dict(),
            "awaiting_approval": [item.to_json_dict() for item in self.awaiting_approval],
            "approval_message": self.approval_message() or None,
            "outcomes": dict(self.outcomes),
            "requests": self.requests,
            "duration_s": round(self.duration_s, 3),
            "push_duration_s": round(self.push.duration_s, 3),
            "snapshot": self.snapshot,
            "accounts": self.plan.accounts,
            "stopped_accounts": {a: str(e) for a, e in sorted(self.push.stopped_accounts.items())},
            "stopped": self.push.stopped,
            "postponed_accounts": dict(sorted(self.push.postponed_accounts.items())),
            "problems": [fields_json(p) for p in problems[:_SAMPLE]],
            "problems_total": len(problems),
            "disagreements": [fields_json(d) for d in self.push.disagreements[:_SAMPLE]],
            "disagreements_total": len(self.push.disagreements),
            # "skipped" or "already known" answers a lost answer explains: re-sends, not
            # disagreements.
            "resent_after_lost_answer": self.push.resent_after_lost_answer,
            "dead_letters": self.dead_letters,
            "quarantine": self.quarantine,
            "quarantine_sample": self.quarantine_sample,
            "cancellation_like_statuses": [
                item.to_json_dict() for item in self.plan.status_findings
            ],
            "status_error": self.plan.status_error,
            "deferred": sum(self.push.deferred.values()),
            "throttled": self.push.throttled,
            "unsent_by_urgency": {u: int(self.push.unsent.get(u, 0)) for u in URGENCY_CLASSES},
            "backlog": backlog_json(self.backlog),
            "accounts_discovery": self.accounts.to_json_dict(),
            "properties": self.accounts.properties.to_json_dict(),
            "token_renewals": self.push.token_renewals,
            "retried_after_renewal": self.push.retried_after_renewal,
            "resend": {
                "planned": self.plan.resends,
                "acknowledged": dict(self.push.resent_by_reason),
                "dropped_by_budget": dict(self.push.resend_dropped),
            },
            "drift": self.drift_json(),
            "reads": [read.to_json_dict() for read in self.plan.reads],
            "cursors_committed": self.cursors_committed,
        }

    def approval_message(self, dagster: bool = False) -> str:
        """What the run held and how to approve it ('' when it held nothing)."""
        return approval_message(self.awaiting_approval, dagster)

    def drift_json(self) -> dict[str, Any]:
        """Drift found and healed by this run, and left open, per account (docs/drift.md)."""
        keys = {key for key, counts in self.push.by_account.items() if _drift_counted(counts)}
        keys |= set(self.drift_open)
        return {
            "found": len(self.push.drift),
            "healed": self.push.drift_healed,
            "open": sum(self.drift_open.values()),
            "by_account": [
                {
                    "entity": entity,
                    "account_id": account,
                    "found": int(
                        self.push.by_account.get((entity, account), Counter()).get("drift_found", 0)
                    ),
                    "healed": int(
                        self.push.by_account.get((entity, account), Counter()).get(
                            "drift_healed", 0
                        )
                    ),
                    "open": int(self.drift_open.get((entity, account), 0)),
                }
                for entity, account in sorted(keys)
            ],
            "sample": [fields_json(d) for d in self.push.drift[:_SAMPLE]],
        }


def _drift_counted(counts: Mapping[str, int]) -> bool:
    return bool(counts.get("drift_found") or counts.get("drift_healed"))


def load_batches(
    mapping_path: str | Path,
    *,
    entities: Collection[Entity] | None = None,
    window: DateWindow | None = None,
    snapshot_path: str | Path | None = None,
    input_paths: Mapping[str, str | Path] | None = None,
    remap: bool = False,
    accounts: Collection[str] | None = None,
    mapping: Any = None,
    reads: ReadOptions | None = None,
    slice_rows: int | None = None,
) -> tuple[dict[Entity, MappedRecords], ReconcilePolicy]:
    """Run the mapping engine; return its records and the mapping's reconciliation policy.

    With ``snapshot_path``, payloads the service acknowledged and the current contract already
    validated are not validated again (``connector.snapshot.validated_payloads``).
    ``input_paths`` reads a file input from another file for this run (input name → path,
    e.g. the export that landed in a drop folder). With ``snapshot_path`` too, records whose
    source rows are unchanged since the service acknowledged them are carried over without
    mapping (``connector.mapping.fingerprints``); ``remap`` maps every record regardless.
    ``accounts``: keep the records of these accounts only (as the export names them, external
    ids too), and reconcile only them: a run of some accounts of the connection.
    ``mapping``: the file at ``mapping_path`` already loaded (``connector.mapping.Mapping``),
    so a caller that needs it too checks the file once. ``reads``: with ``snapshot_path``, SQL
    inputs with a cursor are read since the cursor the snapshot keeps where these options
    allow (``connector.pipeline._incremental``); the entities read so are no full export.
    ``slice_rows``: the run's setting (``SyncSettings.slice_rows``), rows of an entity mapped
    at once.
    """
    from connector.mapping import load_mapping, map_records  # the mapping engine's interface
    from connector.safety.stability import check_mapping_exports

    if mapping is None:
        mapping = load_mapping(mapping_path)
    _read_inputs_from(mapping, mapping_path, input_paths or {})
    check_mapping_exports(mapping)  # an export still being written is never read
    # Read only when some record is mapped: a nightly run with nothing changed maps none.
    validated = partial(validated_payloads, snapshot_path) if snapshot_path is not None else None
    policy = ReconcilePolicy.from_mapping(mapping)
    choice = (
        choose_reads(
            mapping,
            entities=entities,
            window=window,
            accounts=accounts,
            snapshot_path=snapshot_path,
            options=reads,
            now=_now(),
        )
        if reads is not None and snapshot_path is not None
        else ReadChoice()
    )
    # Without a snapshot nothing is fingerprinted; with --remap every record is mapped and
    # its fingerprint renewed.
    with fingerprint_reader_of(None if remap else snapshot_path, policy.connection) as stored:
        batches = map_records(
            mapping,
            entities=entities,
            window=window,
            since=choice.since,
            validated=validated,
            fingerprints=stored if snapshot_path is not None else None,
            accounts=accounts,
            slice_rows=slice_rows,
        )
    batches = {entity: choice.annotated(batch) for entity, batch in batches.items()}
    policy = replace(
        policy, incremental=frozenset(e for e, batch in batches.items() if batch.incremental)
    )
    for entity, batch in batches.items():
        # External ids stay in account_id until the run resolves them (connector.accounts).
        batch.account_is_external_id = mapping.account_is_external_id(entity)
    if accounts is None:
        return dict(batches), policy
    scope = frozenset(str(account) for account in accounts)
    return (
        {entity: batch.of_accounts(scope) for entity, batch in batches.items()},
        replace(policy, accounts=scope),
    )


def _read_inputs_from(
    mapping: Any, mapping_path: str | Path, input_paths: Mapping[str, str | Path]
) -> None:
    """Point the mapping's file inputs named in ``input_paths`` at those files."""
    for name, path in input_paths.items():
        source = mapping.inputs.get(name)
        if source is None or not hasattr(source, "path"):
            raise ConfigError(
                f"input_paths names {name!r}, which is not a file input of {mapping_path} "
                f"(file inputs: {', '.join(n for n, s in mapping.inputs.items() if hasattr(s, 'path'))})"
            )
        mapping.inputs[name] = source.model_copy(update={"path": str(Path(path).resolve())})


def _load(
    mapping_path: str | Path, request: SyncRequest, mapping: Any
) -> tuple[dict[Entity, MappedRecords], ReconcilePolicy]:
    """``load_batches`` as ``request`` asks."""
    return load_batches(
        mapping_path,
        mapping=mapping,
        entities=request.entities,
        window=request.window,
        snapshot_path=request.settings.snapshot_path,
        remap=request.maps_everything,
        accounts=request.accounts,
        # A forced re-send (--full-resync, --only) finds its records in a full read.
        reads=ReadOptions(
            full_read=request.settings.full_read or request.force.active,
            interval_s=request.settings.full_read_interval_s,
        ),
        slice_rows=request.settings.slice_rows,
    )


def _with_mapping(mapping_path: str | Path, request: SyncRequest) -> tuple[Any, SyncRequest]:
    """The mapping file, loaded once for the mapping engine and the guard's thresholds
    (checking a mapping file is a fixed cost of every run), and the request with them."""
    from connector.mapping import load_mapping

    mapping = load_mapping(mapping_path)
    return mapping, replace(request, guard=request.guard or GuardRules.from_mapping(mapping))


@contextmanager
def planned(
    mapping_path: str | Path, request: SyncRequest
) -> Iterator[tuple[Plan, GuardVerdict, SnapshotStore]]:
    """Map and shape the complete plan without sending anything; the snapshot stays open
    (read-only) for what follows."""
    mapping, request = _with_mapping(mapping_path, request)
    batches, policy = _load(mapping_path, request, mapping)
    settings = request.settings
    # Read-only: a plan writes nothing, and creates no snapshot file where there is none.
    with Snapshot.open(
        settings.snapshot_path, lock_timeout=settings.lock_timeout, read_only=True
    ) as snapshot:
        # External ids are looked up (GET requests of the Open API; nothing is saved).
        discovery = AccountDiscovery(settings.open_api, settings.client, snapshot)
        batches, resolved = discovery.resolve(batches, policy)
        passes = (
            open_passes(snapshot, policy.connection, batches, _now(), write=False)
            if request.reconcile
            else None
        )
        plan, verdict = shape_plan(
            snapshot, batches, resolved, request, directory=discovery.directory, passes=passes
        )
        yield plan, verdict, snapshot


def plan_sync(mapping_path: str | Path, settings: SyncSettings, **options: Any) -> Plan:
    """``plan_request`` of a ``SyncRequest.of(settings, mapping_path, **options)``."""
    return plan_request(SyncRequest.of(settings, mapping_path, **options))


def plan_request(request: SyncRequest) -> Plan:
    """Map and shape the complete plan of ``request.mapping`` without sending anything
    (``reconcile``: show the reconciliation pass a sync would continue or start)."""
    with planned(request.mapping, request) as (plan, _verdict, _snapshot):
        return plan


def run_sync(
    mapping_path: str | Path,
    settings: SyncSettings,
    *,
    on_progress: ProgressCallback | None = None,
    **options: Any,
) -> SyncReport:
    """``run_request`` of a ``SyncRequest.of(settings, mapping_path, **options)``."""
    return run_request(SyncRequest.of(settings, mapping_path, **options), on_progress)


def run_request(request: SyncRequest, on_progress: ProgressCallback | None = None) -> SyncReport:
    """Map, plan, push and record one run of the mapping file ``request.mapping``."""
    started = _now()
    # The deadline counts from here, and a signal while mapping ends the run (nothing sent).
    stop = RunStop(request.settings.push.budget.max_duration_s)
    with stop.signals_handled():
        mapping, request = _with_mapping(request.mapping, request)
        batches, policy = _load(request.mapping, request, mapping)
        return sync_request(batches, policy, request, stop, on_progress, started)


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
    reconcile: bool = False,
    by_checkin: bool = False,
    accounts: Collection[str] | None = None,
    stop: RunStop | None = None,
) -> SyncReport:
    """Plan and push records that are already mapped (the mapping engine's output, or built);
    the options are ``SyncRequest``'s.

    ``stop``: the run's deadline and stop requests (default: from ``settings.push.budget``,
    counted from now). SIGTERM and SIGINT stop the push gracefully (connector/client/_stop.py):
    the report's status is then ``stopped``.
    """
    request = SyncRequest.of(
        settings,
        mapping,
        window=window,
        force=force,
        today=today,
        guard=guard,
        dry_run=dry_run,
        allow_mass_change=allow_mass_change,
        release_units_with_stays=release_units_with_stays,
        reconcile=reconcile,
        by_checkin=by_checkin,
        accounts=accounts,
    )
    stop = stop or RunStop(settings.push.budget.max_duration_s)
    with stop.signals_handled():
        return sync_request(batches, policy, request, stop, on_progress, started_at)


def sync_request(
    batches: Mapping[Entity, MappedRecords],
    policy: ReconcilePolicy | None,
    request: SyncRequest,
    stop: RunStop,
    on_progress: ProgressCallback | None = None,
    started_at: datetime | None = None,
) -> SyncReport:
    """One run: shape the plan, carry it out, record the run, report (``sync_batches``)."""
    started = started_at or _now()
    settings = request.settings
    if request.accounts is not None:
        policy = replace(policy or ReconcilePolicy(), accounts=request.accounts)
    if not request.dry_run:
        ensure_reachable(settings.client)  # a service down at the start: one clear error
    with Snapshot.open(
        settings.snapshot_path,
        lock_timeout=settings.lock_timeout,
        scope=lock_scope(batches, policy, whole_connection=request.reconcile),
    ) as snapshot:
        # External ids become account ids before anything is compared (connector.accounts).
        discovery = AccountDiscovery(settings.open_api, settings.client, snapshot)
        batches, policy = discovery.resolve(batches, policy)
        connection = (policy or ReconcilePolicy()).connection
        passes = (
            open_passes(snapshot, connection, batches, started, write=not request.dry_run)
            if request.reconcile
            else None
        )
        plan, verdict = shape_plan(
            snapshot, batches, policy, request, directory=discovery.directory, passes=passes
        )
        diff_sample = field_changes(
            _updates_first(_real_changes(plan.changes)), snapshot, limit=_SAMPLE
        )
        executed = execute_plan(
            plan, snapshot, discovery, request, stop=stop, on_progress=on_progress
        )
        committed = not request.dry_run and settled(plan, executed.push)
        if not request.dry_run:
            _after_push(snapshot, batches, plan, executed.push, passes)
        if committed:
            commit_reads(snapshot, batches, plan.connection, started)
        report = replace(
            _report(request, started, plan, executed.push, snapshot, discovery),
            guard=verdict,
            diff_sample=diff_sample,
            unresolved=_unresolved_records(batches),
            cursors_committed=committed and bool(plan.reads),
        )
        _record_run(snapshot, report)
    return report


KEEPING_STEP = "keeping the export's owners and source fingerprints in the snapshot"


def _after_push(
    snapshot: SnapshotStore,
    batches: Mapping[Entity, MappedRecords],
    plan: Plan,
    result: PushResult,
    passes: Mapping[Entity, Any] | None,
) -> None:
    """What the snapshot keeps of the export once the push is over."""
    with memory_named(KEEPING_STEP):
        _adopt_exported(snapshot, batches, plan.connection)
        keep_fingerprints(snapshot, batches, plan.connection)
    if passes:
        finish_passes(snapshot, passes, plan, result, _now())


def _report(
    request: SyncRequest,
    started: datetime,
    plan: Plan,
    result: PushResult,
    snapshot: SnapshotStore,
    discovery: AccountDiscovery,
) -> SyncReport:
    """The report of a plan carried out (``sync`` and ``apply``)."""
    open_drift = snapshot.open_drift()
    return SyncReport(
        run_id=uuid.uuid4().hex,
        mapping=request.mapping,
        started_at=started,
        finished_at=_now(),
        plan=plan,
        push=result,
        snapshot=snapshot.location,
        quarantine=plan.quarantine,
        quarantine_sample=plan.quarantine_sample,
        dead_letters=_dead_letter_summary(snapshot),
        rate_windows=effective_windows(request.settings.client),
        accounts=discovery.report,
        drift_open=_drift_open(open_drift),
        drift_open_rows=open_drift,
        awaiting_approval=plan.awaiting_approval,
    )


def _real_changes(changes: pd.DataFrame) -> pd.DataFrame:
    """Changes of content (re-sends of unchanged records have no field differences)."""
    if not len(changes):
        return changes
    return changes[~changes["reason"].isin(list(RESEND_REASONS))]


def _drift_open(found: pd.DataFrame) -> dict[tuple[str, str], int]:
    """Open drift per (entity, account) of the rows of ``SnapshotStore.open_drift``."""
    if not len(found):
        return {}
    counts = found.groupby(["entity", "account_id"]).size()
    return {(str(e), str(a)): int(n) for (e, a), n in counts.items()}


def drift_open_within(rows: pd.DataFrame | None, window: DateWindow) -> dict[tuple[str, str], int]:
    """Open drift per (entity, account) of the records whose check-in lies in ``window``."""
    if rows is None or not len(rows):
        return {}
    checkin = pd.to_datetime(rows["checkin"])
    inside = (checkin >= pd.Timestamp(window.start)) & (checkin < pd.Timestamp(window.end))
    return _drift_open(rows.loc[inside])


def keep_fingerprints(
    snapshot: SnapshotStore, batches: Mapping[Entity, MappedRecords], connection: str | None
) -> None:
    """After the push: keep the source fingerprints of the records the service now holds as
    mapped, so the next run carries them over unmapped (connector.mapping.fingerprints)."""
    for entity, batch in batches.items():
        if batch.fingerprints is not None and batch.mapping_fingerprint is not None:
            snapshot.record_fingerprints(
                connection, entity, batch.mapping_fingerprint, batch.fingerprints
            )


def _adopt_exported(
    snapshot: SnapshotStore, batches: Mapping[Entity, MappedRecords], connection: str | None
) -> None:
    # A record this connection exports is this connection's, changed or not: a unit that
    # moved from one mapping to another is then reconciled by the one that has it now.
    # Records carried over by fingerprint (no payload) are already this connection's: they
    # are only carried while acknowledged under it (connector.snapshot._fingerprints).
    for entity, batch in batches.items():
        records = batch.records
        if batch.carried:
            records = records.loc[records["payload"].notna().to_numpy()]
        snapshot.adopt(entity, records, connection)


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
        outcomes = push.by_account.get((entity, account), Counter())
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
                incremental=int(entity in plan.incremental),
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
            status=report.history_status,
            counts=tuple(counts),
            connection=plan.connection,
        )
    )


def _dead_letter_summary(snapshot: SnapshotStore) -> dict[str, int]:
    letters = snapshot.dead_letters()
    if letters.empty:
        return {}
    return {str(status): int(n) for status, n in letters["http_status"].value_counts().items()}


def _unresolved_records(batches: Mapping[Entity, MappedRecords]) -> int:
    """Records set apart because their external id matches no account, once each."""
    return sum(
        len(batch.unresolved.drop_duplicates(["account_id", "record_id", "input", "rows"]))
        for batch in batches.values()
    )


def lock_scope(
    batches: Mapping[Entity, MappedRecords],
    policy: ReconcilePolicy | None,
    *,
    whole_connection: bool = False,
) -> LockScope:
    """What a run writes: its connection and the accounts of its export (as the export names
    them: external ids too, the same in every run of the connection). A run with rows of no
    account, or a reconciliation pass (kept per connection), writes the whole connection."""
    policy = policy or ReconcilePolicy()
    accounts: set[str] = set(policy.accounts or ())
    for batch in batches.values():
        for keys in (batch.records, batch.quarantine, batch.present_elsewhere, batch.unresolved):
            if "account_id" not in keys:
                continue
            # Distinct values first: a nightly run's records are nearly all carried over.
            column = keys["account_id"]
            named = {str(value).strip() for value in column.dropna().unique()}
            whole_connection |= "" in named or bool(column.isna().any())
            accounts |= named - {""}
    return LockScope(
        connection=policy.connection,
        accounts=frozenset(accounts),
        whole_connection=whole_connection or not accounts,
    )


def _now() -> datetime:
    return datetime.now(UTC).replace(tzinfo=None)


__all__ = [
    "Outcome",
    "SyncReport",
    "load_batches",
    "plan_request",
    "plan_sync",
    "planned",
    "run_request",
    "run_sync",
    "sync_batches",
    "sync_request",
]
