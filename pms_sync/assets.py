"""The assets of one connection, generated from its mapping file.

Per connection (asset group ``<name>``)::

    <name>/mapped_accommodations ──► <name>/synced_accommodations ──┐
    <name>/mapped_reservations ─────────────────────────────────────┴► <name>/synced_reservations

Mapping and syncing are separate steps so the blocking checks on the mapped records run
before anything is sent. Reservations are partitioned by month of check-in; a run of a
partition range maps, diffs, pushes and reconciles only that window. Each function calls
``connector/`` and turns its report into metadata; it decides nothing itself.
"""

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import timedelta

import dagster as dg
from pydantic import Field

from connector.client import RunStop, ServiceUnreachableError
from connector.contract import Entity
from connector.errors import PmsSyncError
from connector.pipeline import (
    ReadOptions,
    RunConditions,
    RunOutcome,
    SyncReport,
    SyncRequest,
    load_batches,
    report_within,
    sync_request,
    verdict_of,
)
from connector.push import Outcome
from connector.records import DateWindow, MappedRecords
from connector.safety.approvals import HeldWork
from connector.safety.guard import GuardRules
from connector.snapshot import is_database_url
from pms_sync.account_partitions import run_accounts
from pms_sync.connection_resources import (
    SERVICE,
    SNAPSHOT,
    SOURCES,
    SYNC_CHECKS,
    sources_of,
    sync_checks_of,
)
from pms_sync.connections import Connection
from pms_sync.exports import entity_inputs, export_key
from pms_sync.handoff import MappedBatch, SyncOutcome
from pms_sync.metadata import (
    RUN_LEVEL_SYNC_KEYS,
    mapped_metadata,
    masked_text,
    reads_metadata,
    run_sync_metadata,
    sync_metadata,
)
from pms_sync.partition_reports import (
    ANOMALY_COUNTS_KEY,
    add_partition_metadata,
    anomaly_counts_metadata,
    partition_check_events,
    partition_history,
    partition_windows,
    scoped_records,
)
from pms_sync.partitions import window_of
from pms_sync.resources import (
    IO_MANAGER_KEY,
    ServiceResource,
    SnapshotResource,
    SyncChecksResource,
)
from pms_sync.safety import (
    anomaly_result,
    blocked_failure,
    current_counts,
    unusable_failure,
)
from pms_sync.schedules import RECONCILE_TAG
from pms_sync.storage import OPTIONAL_INPUT
from pms_sync.sync_checks import sync_check_results, sync_check_specs

SNAPSHOT_POOL = "pms_sync_snapshot"
"""Every step that opens the DuckDB snapshot runs in this pool; its limit is 1 (dagster.yaml)."""


def snapshot_pool(connection: Connection, snapshot: str | None) -> str | None:
    """The pool of a connection's snapshot steps, by where the snapshot lives.

    A DuckDB file has one writer: every connection's steps share ``SNAPSHOT_POOL``. On a
    PostgreSQL snapshot writers of different scopes proceed together (``connector.snapshot``'s
    scope locks), so the pool is the scope's where Dagster can name it: a connection of its own,
    ``pms_sync_snapshot/<name>``, whose runs queue on one another instead of waiting
    ``snapshot.lock_timeout`` on its lock and failing, while other connections' runs go on; a
    connection partitioned by account gets none, since a pool is fixed per step and cannot be
    per account: the (connection, account) locks keep two runs of one account apart. Every
    pool takes the instance's ``concurrency.pools.default_limit`` (1 in assets/dagster.yaml).
    """
    if snapshot is None or not is_database_url(snapshot):
        return SNAPSHOT_POOL
    if connection.partitioned_by_account:
        return None
    return f"{SNAPSHOT_POOL}/{connection.name}"


SYNC_RETRY = dg.RetryPolicy(
    max_retries=3, delay=30, backoff=dg.Backoff.EXPONENTIAL, jitter=dg.Jitter.PLUS_MINUS
)
"""Retries of a sync step whose changes stayed pending after the client's own retries (the
service was down or rate-limited for minutes). A retry re-plans from the snapshot, so what
was acknowledged before is a skip and is not sent again. Bounded in time as well:
``service.retry_window_s`` after its first attempt a step is not retried any more."""


class ExportFilesConfig(dg.Config):
    """Run config of a mapped asset: files to read instead of the mapping's own inputs."""

    files: dict[str, str] = Field(
        default_factory=dict,
        description=(
            "Input name -> file to read for it in this run (a drop-folder sensor sets it to "
            "the export that landed). Inputs of the mapping not named here read their own path."
        ),
    )
    full_read: bool = Field(
        default=False,
        description="Read every SQL input with a cursor in full in this run (as "
        "`pms-sync sync --full-read`): records gone from the export are reconciled.",
    )


@dataclass(frozen=True)
class ConnectionKeys:
    mapped_accommodations: dg.AssetKey
    mapped_reservations: dg.AssetKey
    synced_accommodations: dg.AssetKey
    synced_reservations: dg.AssetKey


def connection_keys(root: dg.AssetKey) -> ConnectionKeys:
    """The keys of the mapped and synced assets under a connection's ``root``
    (``Connection.asset_key()``)."""
    return ConnectionKeys(
        mapped_accommodations=dg.AssetKey([*root.path, "mapped_accommodations"]),
        mapped_reservations=dg.AssetKey([*root.path, "mapped_reservations"]),
        synced_accommodations=dg.AssetKey([*root.path, "synced_accommodations"]),
        synced_reservations=dg.AssetKey([*root.path, "synced_reservations"]),
    )


def entities_of(connection: Connection) -> set[Entity]:
    return set(connection.mapping.entities.keys())


SyncStepEvent = dg.MaterializeResult | dg.AssetCheckEvaluation | dg.Output
"""What a sync step yields: its materialization, its check results, its checks' outputs."""

SyncExecute = Callable[
    [dg.AssetExecutionContext, Entity, Iterator[SyncStepEvent]], Iterator[SyncStepEvent]
]
"""``PmsSyncComponent.execute``: runs a sync step by iterating its events (see there)."""


def run_sync_step(
    context: dg.AssetExecutionContext, entity: Entity, events: Iterator[SyncStepEvent]
) -> Iterator[SyncStepEvent]:
    """The sync step as it is: every event, unchanged."""
    return events


def build_assets(
    connection: Connection,
    partitions: dg.PartitionsDefinition,
    pool: str | None = SNAPSHOT_POOL,
    execute: SyncExecute = run_sync_step,
) -> list[dg.AssetsDefinition]:
    """The mapped and synced assets of the entities the connection's mapping defines; the
    synced ones run in ``pool`` (``snapshot_pool``), each through ``execute``."""
    entities = entities_of(connection)
    built: list[dg.AssetsDefinition] = []
    if Entity.ACCOMMODATION in entities:
        built += [
            _mapped_accommodations(connection),
            _synced_accommodations(connection, pool, execute),
        ]
    if Entity.RESERVATION in entities:
        built += [
            _mapped_reservations(connection, partitions),
            _synced_reservations(
                connection, partitions, Entity.ACCOMMODATION in entities, pool, execute
            ),
        ]
    return built


def accounts_of_run(
    context: dg.AssetExecutionContext, connection: Connection
) -> frozenset[str] | None:
    """The accounts the run covers (account partitions), None: every account."""
    return run_accounts(connection, context.run.tags, context.instance)


# -- mapping ------------------------------------------------------------------------------


def _map(
    connection: Connection,
    entity: Entity,
    window: DateWindow | None,
    snapshot: SnapshotResource,
    files: dict[str, str],
    accounts: frozenset[str] | None = None,
    reads: ReadOptions | None = None,
) -> MappedBatch:
    # The snapshot is only read (the payloads it knows valid): mapping takes no write lock.
    batches, policy = load_batches(
        connection.path,
        entities=[entity],
        window=window,
        snapshot_path=snapshot.path,
        input_paths={
            name: path for name, path in files.items() if name in entity_inputs(connection, entity)
        },
        accounts=accounts,
        reads=reads,
    )
    records = (batches.get(entity) or MappedRecords(entity)).contiguous()
    return MappedBatch(entity=entity, records=records, policy=policy, window=window)


def _mapped_accommodations(connection: Connection) -> dg.AssetsDefinition:
    keys = connection_keys(connection.asset_key())

    @dg.asset(
        key=keys.mapped_accommodations,
        group_name=connection.name,
        io_manager_key=IO_MANAGER_KEY,
        kinds={"pandas"},
        deps=[
            export_key(connection, name) for name in entity_inputs(connection, Entity.ACCOMMODATION)
        ],
        # Unpartitioned, but in a backfill of a range of months it joins the months' single
        # run: `dagster asset materialize --select group:<name> --partition-range` is one run.
        backfill_policy=dg.BackfillPolicy.single_run(),
        required_resource_keys=connection.resources.keys(SOURCES, SNAPSHOT),
        description=(
            f"Accommodations (units) of {connection.mapping.name}, read from the PMS export by "
            f"`{connection.path.name}` and validated against the service's contract; invalid "
            "rows are quarantined with their reason."
        ),
    )
    def mapped_accommodations(
        context: dg.AssetExecutionContext, config: ExportFilesConfig
    ) -> dg.MaterializeResult:
        snapshot = connection.resources.snapshot_of(context)
        accounts = accounts_of_run(context, connection)
        sources = sources_of(context)
        with sources.environment():
            batch = _map(
                connection,
                Entity.ACCOMMODATION,
                None,
                snapshot,
                config.files,
                accounts,
                sources.read_options(config.full_read),
            )
        return dg.MaterializeResult(value=batch, metadata=mapped_metadata(batch.records))

    return mapped_accommodations


def _mapped_reservations(
    connection: Connection, partitions: dg.PartitionsDefinition
) -> dg.AssetsDefinition:
    keys = connection_keys(connection.asset_key())

    @dg.asset(
        key=keys.mapped_reservations,
        group_name=connection.name,
        io_manager_key=IO_MANAGER_KEY,
        kinds={"pandas"},
        partitions_def=partitions,
        deps=[
            export_key(connection, name) for name in entity_inputs(connection, Entity.RESERVATION)
        ],
        # One run per contiguous range: the export is read once for the whole window.
        backfill_policy=dg.BackfillPolicy.single_run(),
        required_resource_keys=connection.resources.keys(SOURCES, SNAPSHOT),
        description=(
            f"Reservations of {connection.mapping.name} with check-in in the partition's month, "
            f"read from the PMS export by `{connection.path.name}` and validated; invalid rows "
            "are quarantined with their reason."
        ),
    )
    def mapped_reservations(
        context: dg.AssetExecutionContext, config: ExportFilesConfig
    ) -> dg.MaterializeResult:
        snapshot = connection.resources.snapshot_of(context)
        window = window_of(context.partition_time_window)
        accounts = accounts_of_run(context, connection)
        context.log.info(
            f"mapping reservations with check-in in [{window.start}, {window.end})"
            + (f" of account(s) {', '.join(sorted(accounts))}" if accounts is not None else "")
        )
        sources = sources_of(context)
        with sources.environment():
            batch = _map(
                connection,
                Entity.RESERVATION,
                window,
                snapshot,
                config.files,
                accounts,
                sources.read_options(config.full_read),
            )
        # Each partition's materialization carries its month's (and account's) records and problems.
        by_partition = {}
        scopes = partition_windows(context)
        for key, part in scoped_records(batch, scopes).items():
            scope = scopes[key]
            metadata = mapped_metadata(part)
            del metadata["validated_before"]  # counted for the whole run only
            metadata["window"] = dg.MetadataValue.text(
                f"{scope.window.start} .. {scope.window.end}"
            )
            by_partition[key] = metadata
        add_partition_metadata(context, by_partition)
        return dg.MaterializeResult(
            value=batch,
            metadata={
                "run_window": dg.MetadataValue.text(f"{window.start} .. {window.end}"),
                "run_records": dg.MetadataValue.int(len(batch.records.records)),
                "run_validated_before": dg.MetadataValue.int(batch.records.known_valid),
                "run_carried": dg.MetadataValue.int(batch.records.carried),
                "run_mapped": dg.MetadataValue.int(batch.records.mapped),
                **{f"run_{k}": v for k, v in reads_metadata(batch.records.reads).items()},
            },
        )

    return mapped_reservations


# -- syncing ------------------------------------------------------------------------------


def _sync(
    context: dg.AssetExecutionContext,
    connection: Connection,
    batch: MappedBatch,
    service: ServiceResource,
    snapshot: SnapshotResource,
    sync_checks: SyncChecksResource,
    by_checkin: bool = False,
) -> SyncReport:
    accounts = accounts_of_run(context, connection)
    # A run of the <connection>_reconcile schedule continues the full reconciliation pass.
    reconcile = context.run.tags.get(RECONCILE_TAG) == "1"
    request = SyncRequest.of(
        service.settings(snapshot, reconcile=reconcile),
        connection.path,
        window=batch.window,
        guard=GuardRules.from_mapping(connection.mapping),
        allow_mass_change=sync_checks.allow_mass_change,
        release_units_with_stays=sync_checks.allow_deactivation_with_stays,
        reconcile=reconcile,
        by_checkin=by_checkin,
        accounts=accounts,
    )
    stop = RunStop(request.settings.push.budget.max_duration_s)
    with stop.signals_handled():
        return sync_request({batch.entity: batch.records}, batch.policy, request, stop)


def _guarded_sync(
    context: dg.AssetExecutionContext,
    connection: Connection,
    batch: MappedBatch,
    service: ServiceResource,
    snapshot: SnapshotResource,
    sync_checks: SyncChecksResource,
    by_checkin: bool = False,
) -> SyncReport:
    """The sync, with its errors turned into failures a data engineer reads: a service that
    cannot be reached is retried within ``service.retry_window_s`` (nothing was sent), any
    other error of pms-sync (configuration, snapshot) is not retried at all."""
    try:
        report = _sync(context, connection, batch, service, snapshot, sync_checks, by_checkin)
    except ServiceUnreachableError as error:
        may_retry, elapsed = _may_retry(context, service.retry_window_s)
        later = (
            "" if may_retry else f" (not retried any more, {elapsed:.0f} s after the first attempt)"
        )
        raise dg.Failure(masked_text(f"{error}{later}"), allow_retries=may_retry) from error
    except PmsSyncError as error:
        raise dg.Failure(masked_text(str(error)), allow_retries=False) from error
    if report.verdict.outcome == RunOutcome.STOPPED:
        # Before any result: the step's figures are those of a push cut short.
        raise dg.Failure(masked_text(stopped_message(report)), allow_retries=False)
    return report


def stopped_message(report: SyncReport) -> str:
    """Why a sync step's push stopped (termination, deadline, a postponed account) and what it
    left: the step fails, the next run sends the pending changes."""
    push = report.push
    why = push.stopped or "a Retry-After past the deadline"
    acknowledged = push.outcomes[str(Outcome.ACKNOWLEDGED)]
    pending = push.outcomes[str(Outcome.PENDING)] + sum(push.deferred.values())
    postponed = "".join(
        f"; account {account} postponed: {reason}"
        for account, reason in sorted(push.postponed_accounts.items())
    )
    return (
        f"push stopped ({why}): {acknowledged} acknowledged and committed, {pending} pending "
        f"for the next run{postponed}"
    )


def _specs_by_key(context: dg.AssetExecutionContext) -> dict[dg.AssetCheckKey, dg.AssetCheckSpec]:
    return {spec.key: spec for spec in context.assets_def.check_specs}


def _refused(report: SyncReport) -> dict[str, str]:
    return {account: str(error) for account, error in report.push.stopped_accounts.items()}


def _freshness(connection: Connection) -> dg.FreshnessPolicy:
    # A nightly run that did not happen (or failed) turns the synced assets stale in the UI.
    hours = float(connection.dagster.freshness_hours)
    return dg.FreshnessPolicy.time_window(
        fail_window=timedelta(hours=hours), warn_window=timedelta(hours=hours * 0.9)
    )


def _may_retry(context: dg.AssetExecutionContext, window_s: float) -> tuple[bool, float]:
    """Whether a retry of this step would still start within ``window_s`` of its first
    attempt, and the seconds since that attempt."""
    from dagster._core.events import DagsterEventType

    step = str(context.op_execution_context.node_handle)  # the step key of an asset's op
    starts = [
        entry.timestamp
        for entry in context.instance.all_logs(
            context.run.run_id, of_type=DagsterEventType.STEP_START
        )
        if entry.step_key == step
    ]
    elapsed = time.time() - min(starts) if starts else 0.0
    delay = float(SYNC_RETRY.calculate_delay(context.retry_number + 1))
    return elapsed + delay <= window_s, elapsed


def _raise_for_verdict(
    report: SyncReport,
    refused: dict[str, str],
    held: tuple[HeldWork, ...],
    last_sync: bool,
    retry: Callable[[], tuple[bool, float]] = lambda: (True, 0.0),
) -> None:
    """Fail the step after its results are recorded when the run's verdict says so
    (``connector.pipeline.VERDICTS``, the order the CLI's exit code follows too).

    ``refused`` and ``held``: of this step and the run's earlier sync steps. Both fail the run
    at its last sync step, so the other accounts' reservations are still sent. Pending
    changes of accounts that authenticated mean transient faults outlasted the client's
    retries: Dagster's RetryPolicy runs the step again.
    """
    conditions = RunConditions.of(report, held=bool(held), refused=refused)
    if not last_sync:
        conditions = replace(conditions, held=False, authentication=False)
    verdict = verdict_of(conditions)
    if not verdict.step_fails:
        return
    match verdict.outcome:
        case RunOutcome.UNUSABLE:
            raise unusable_failure(report)
        case RunOutcome.STOPPED:
            raise dg.Failure(masked_text(stopped_message(report)), allow_retries=False)
        case RunOutcome.HELD:
            raise blocked_failure(held)
        case RunOutcome.AUTHENTICATION:
            names = ", ".join(repr(account) for account in sorted(refused))
            raise dg.Failure(
                masked_text(
                    f"the service refused the credentials (401) of account(s) {names}; their "
                    "records stay pending, the other accounts were synced. Fix the token and "
                    "run again. " + " | ".join(refused[account] for account in sorted(refused))
                ),
                metadata={"refused_accounts": dg.MetadataValue.text(names)},
                allow_retries=False,
            )
        case RunOutcome.PENDING:
            raise _pending_failure(report, refused, retry)
        case RunOutcome.FAILED:
            failed = [
                problem
                for problem in report.push.problems
                if problem.outcome == Outcome.FAILED and problem.account_id not in refused
            ]
            first = failed[0]
            raise dg.Failure(
                masked_text(
                    f"{len(failed)} changes failed with an unexpected answer, first: account "
                    f"{first.account_id!r} record {first.record_id!r}: HTTP {first.http_status} "
                    f"{first.message} (x-request-id "
                    f"{', '.join(r for r in first.request_ids if r)})"
                ),
                allow_retries=False,
            )
        case _:
            raise dg.Failure(f"the run is {verdict.status} ({verdict.outcome})")


def _pending_failure(
    report: SyncReport, refused: dict[str, str], retry: Callable[[], tuple[bool, float]]
) -> dg.Failure:
    pending = sum(
        counts.get(str(Outcome.PENDING), 0)
        for (_, account), counts in report.push.by_account.items()
        if account not in refused
    )
    may_retry, elapsed = retry()
    if may_retry:
        return dg.Failure(
            f"{pending} changes are still pending after transient faults (timeouts, 429, 5xx); "
            "a retry sends only those, acknowledged records are not sent again",
            allow_retries=True,
        )
    return dg.Failure(
        f"{pending} changes are still pending after transient faults (timeouts, 429, 5xx) "
        f"{elapsed:.0f} s after the step's first attempt: not retried any more (the "
        "resource's service.retry_window_s). The next run sends them; acknowledged "
        "records are not sent again",
        allow_retries=False,
    )


def _runs_in_same_run(context: dg.AssetExecutionContext, key: dg.AssetKey) -> bool:
    # An empty selection means "the whole job".
    selection = context.run.asset_selection
    if selection:
        return key in selection
    return key in context.job_def.asset_layer.asset_graph.get_all_asset_keys()


def _synced_accommodations(
    connection: Connection, pool: str | None, execute: SyncExecute
) -> dg.AssetsDefinition:
    keys = connection_keys(connection.asset_key())

    @dg.asset(
        key=keys.synced_accommodations,
        group_name=connection.name,
        io_manager_key=IO_MANAGER_KEY,
        kinds={"duckdb"},
        ins={"mapped": dg.AssetIn(keys.mapped_accommodations)},
        backfill_policy=dg.BackfillPolicy.single_run(),
        pool=pool,
        retry_policy=SYNC_RETRY,
        freshness_policy=_freshness(connection),
        check_specs=sync_check_specs(keys.synced_accommodations, Entity.ACCOMMODATION),
        required_resource_keys=connection.resources.keys(SERVICE, SNAPSHOT, SYNC_CHECKS),
        description=(
            f"Accommodations of {connection.mapping.name} as acknowledged by the guest-experience "
            "service: new units created, changed ones updated, units gone from a full export "
            "deactivated. Metadata counts every action and outcome, per account."
        ),
    )
    def synced_accommodations(
        context: dg.AssetExecutionContext, mapped: MappedBatch
    ) -> Iterator[SyncStepEvent]:
        service = connection.resources.service_of(context)
        snapshot = connection.resources.snapshot_of(context)
        sync_checks = sync_checks_of(context)
        steps = _sync_accommodations(context, mapped, service, snapshot, sync_checks)
        yield from execute(context, Entity.ACCOMMODATION, steps)

    def _sync_accommodations(
        context: dg.AssetExecutionContext,
        mapped: MappedBatch,
        service: ServiceResource,
        snapshot: SnapshotResource,
        sync_checks: SyncChecksResource,
    ) -> Iterator[SyncStepEvent]:
        report = _guarded_sync(context, connection, mapped, service, snapshot, sync_checks)
        refused = _refused(report)
        for message in refused.values():
            context.log.error(message)
        yield dg.MaterializeResult(
            value=SyncOutcome(
                dagster_run_id=context.run.run_id,
                refused_accounts=refused,
                accounts=frozenset(mapped.records.accounts),
                awaiting_approval=report.awaiting_approval,
            ),
            metadata=sync_metadata(report, str(Entity.ACCOMMODATION)),
            check_results=[
                *sync_check_results(
                    keys.synced_accommodations, report, refused, Entity.ACCOMMODATION
                ),
                anomaly_result(
                    keys.synced_accommodations,
                    report,
                    str(Entity.ACCOMMODATION),
                    snapshot,
                    sync_checks,
                ),
            ],
        )
        # The reservations' sync of the same run reports the refused accounts and the held work
        # at the end, so its stays are sent meanwhile.
        last = not _runs_in_same_run(context, keys.synced_reservations)
        _raise_for_verdict(
            report,
            refused,
            report.awaiting_approval,
            last,
            lambda: _may_retry(context, service.retry_window_s),
        )

    return synced_accommodations


def _synced_reservations(
    connection: Connection,
    partitions: dg.PartitionsDefinition,
    has_accommodations: bool,
    pool: str | None,
    execute: SyncExecute,
) -> dg.AssetsDefinition:
    keys = connection_keys(connection.asset_key())
    ins = {"mapped": dg.AssetIn(keys.mapped_reservations)}
    if has_accommodations:
        # Units first: a reservation references its unit, so it is sent after the units' sync.
        # Optional: a run of the reservations alone on an instance that never synced the units
        # works too (reconciling only the accounts of its own window).
        ins["accommodations"] = dg.AssetIn(
            keys.synced_accommodations, metadata={OPTIONAL_INPUT: True}
        )

    @dg.asset(
        key=keys.synced_reservations,
        group_name=connection.name,
        io_manager_key=IO_MANAGER_KEY,
        kinds={"duckdb"},
        ins=ins,
        partitions_def=partitions,
        backfill_policy=dg.BackfillPolicy.single_run(),
        pool=pool,
        retry_policy=SYNC_RETRY,
        freshness_policy=_freshness(connection),
        check_specs=sync_check_specs(keys.synced_reservations, Entity.RESERVATION, partitions),
        required_resource_keys=connection.resources.keys(SERVICE, SNAPSHOT, SYNC_CHECKS),
        description=(
            f"Reservations of {connection.mapping.name} with check-in in the partition's month as "
            "acknowledged by the service: created, updated, and (if the mapping says so) future "
            "stays gone from the export cancelled, only within the month. Metadata counts every "
            "action and outcome, per account."
        ),
    )
    def synced_reservations(
        context: dg.AssetExecutionContext,
        mapped: MappedBatch,
        accommodations: SyncOutcome | None = None,
    ) -> Iterator[SyncStepEvent]:
        service = connection.resources.service_of(context)
        snapshot = connection.resources.snapshot_of(context)
        sync_checks = sync_checks_of(context)
        steps = _sync_reservations(context, mapped, service, snapshot, sync_checks, accommodations)
        yield from execute(context, Entity.RESERVATION, steps)

    def _sync_reservations(
        context: dg.AssetExecutionContext,
        mapped: MappedBatch,
        service: ServiceResource,
        snapshot: SnapshotResource,
        sync_checks: SyncChecksResource,
        accommodations: SyncOutcome | None,
    ) -> Iterator[SyncStepEvent]:
        window = window_of(context.partition_time_window)
        if mapped.window != window:
            raise dg.Failure(
                f"the mapped reservations cover {mapped.window}, this run covers {window}: "
                "materialize mapped_reservations in the same run",
                allow_retries=False,
            )
        if accommodations is None and has_accommodations:
            context.log.warning(
                "the units were never synced through Dagster (no synced_accommodations output): "
                "syncing the reservations alone; a stay whose unit the service does not know "
                "is held back. Select the whole job (or the units too) to sync both."
            )
        batch = mapped
        if accommodations is not None and mapped.policy.accounts is None:
            # The plan reconciles only accounts present in its batch; a month whose stays all
            # left the export holds none, so take the accounts of the full units export too.
            accounts = accommodations.accounts | frozenset(mapped.records.accounts)
            batch = replace(mapped, policy=replace(mapped.policy, accounts=accounts))
        report = _guarded_sync(
            context, connection, batch, service, snapshot, sync_checks, by_checkin=True
        )
        refused = _refused(report)
        for message in refused.values():
            context.log.error(message)
        # One materialization and one result per check per month, each with the month's own
        # figures; a month is compared with its own history by count_anomalies.
        key = keys.synced_reservations
        by_partition: dict[str, dict[str, object]] = {}
        results: list[tuple[str, dg.AssetCheckResult]] = []
        scopes = partition_windows(context)
        # A run of several accounts (a rectangle of one month) splits by account too; the
        # partitions name accounts as the export does, report_within resolves external ids.
        several = len({scope.account for scope in scopes.values()}) > 1
        # Each month's records, split once; report_within narrows a month's to its account.
        months = scoped_records(
            mapped, {key: replace(scope, account=None) for key, scope in scopes.items()}
        )
        for partition, scope in scopes.items():
            only = {scope.account} if several and scope.account is not None else None
            part = report_within(report, months[partition], scope.window, only)
            counts = current_counts(part, str(Entity.RESERVATION))
            metadata = sync_metadata(part, str(Entity.RESERVATION))
            for name in RUN_LEVEL_SYNC_KEYS:
                metadata.pop(name, None)
            metadata[ANOMALY_COUNTS_KEY] = anomaly_counts_metadata(counts)
            by_partition[partition] = metadata
            past = partition_history(context, key, partition, sync_checks.anomaly_history_runs)
            checked = [
                *sync_check_results(key, part, _refused(part), Entity.RESERVATION),
                anomaly_result(key, part, str(Entity.RESERVATION), snapshot, sync_checks, past),
            ]
            results += [(partition, result) for result in checked]
        add_partition_metadata(context, by_partition)
        yield dg.MaterializeResult(metadata=run_sync_metadata(report))
        yield from partition_check_events(context, results, _specs_by_key(context))
        earlier = (
            accommodations
            if accommodations is not None and accommodations.dagster_run_id == context.run.run_id
            else None
        )
        held = report.awaiting_approval
        if earlier is not None:
            refused = {**earlier.refused_accounts, **refused}
            held = (*earlier.awaiting_approval, *held)
        _raise_for_verdict(
            report, refused, held, True, lambda: _may_retry(context, service.retry_window_s)
        )

    return synced_reservations
