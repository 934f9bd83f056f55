"""The safety rails in Dagster (docs/safety-rails.md): the mass-change guard's failure and the
``count_anomalies`` check of the synced assets. The rules themselves live in
``connector/safety/``; this module turns a sync's report into a check result or a failure."""

from __future__ import annotations

from collections import Counter

import dagster as dg
import pandas as pd

from connector.contract import Entity
from connector.pipeline import SyncReport
from connector.plan import ACTIONS
from connector.push import OUTCOMES, Outcome
from connector.safety.anomalies import CurrentCounts, Severity, count_anomalies, history
from connector.safety.approvals import HeldWork, approval_message
from pms_sync.metadata import SAMPLE_ROWS, markdown_table
from pms_sync.resources import SnapshotResource, SyncChecksResource

CHECK_COUNT_ANOMALIES = "count_anomalies"


def anomaly_check_spec(
    key: dg.AssetKey, partitions: dg.PartitionsDefinition | None = None
) -> dg.AssetCheckSpec:
    return dg.AssetCheckSpec(
        CHECK_COUNT_ANOMALIES,
        asset=key,
        partitions_def=partitions,
        description=(
            "Per account, this sync's extracted, changed and acknowledged counts stay within the "
            "band of the recent successful runs (sync_checks.anomaly_*); a partition is "
            "compared with its own earlier syncs. An error when records were sent and none was "
            "acknowledged."
        ),
    )


def current_counts(report: SyncReport, entity: str) -> list[CurrentCounts]:
    plan, push = report.plan, report.push
    counts: list[CurrentCounts] = []
    for account in plan.accounts:
        actions = plan.counts_by(Entity(entity), account)
        outcomes = push.by_account.get((entity, account), Counter())
        rows = plan.extracted[
            (plan.extracted["entity"] == entity) & (plan.extracted["account_id"] == account)
        ]
        counts.append(
            CurrentCounts(
                account_id=account,
                extracted=int(rows["extracted"].sum() + rows["quarantined"].sum()),
                changed=sum(actions[str(a)] for a in ACTIONS if str(a) != "skip"),
                acknowledged=int(outcomes.get(str(Outcome.ACKNOWLEDGED), 0)),
                sent=sum(int(outcomes.get(str(o), 0)) for o in OUTCOMES),
                incremental=entity in plan.incremental,
            )
        )
    return counts


def anomaly_result(
    key: dg.AssetKey,
    report: SyncReport,
    entity: str,
    snapshot: SnapshotResource,
    sync_checks: SyncChecksResource,
    past: pd.DataFrame | None = None,
) -> dg.AssetCheckResult:
    """The check's result; ``past`` is the history to compare with (a partition's own, from
    its earlier materializations), by default the connection's runs in the snapshot."""
    if past is None:
        with snapshot.read() as store:
            past = history(
                store.runs(),
                store.run_counts(),
                entity,
                exclude=report.run_id,
                connection=report.plan.connection,
            )
    found = count_anomalies(current_counts(report, entity), past, sync_checks.anomaly_bands())
    errors = [a for a in found if a.severity == Severity.ERROR]
    return dg.AssetCheckResult(
        asset_key=key,
        check_name=CHECK_COUNT_ANOMALIES,
        passed=not found,
        severity=dg.AssetCheckSeverity.ERROR if errors else dg.AssetCheckSeverity.WARN,
        description="; ".join(a.message for a in found[:5]) or None,
        metadata={
            "anomalies": dg.MetadataValue.int(len(found)),
            "deviations": dg.MetadataValue.md(
                markdown_table(
                    ("account", "metric", "this run", "median of history", "severity"),
                    (
                        (
                            a.account_id,
                            a.metric,
                            a.value,
                            "-" if a.baseline is None else f"{a.baseline:g}",
                            str(a.severity),
                        )
                        for a in found[:SAMPLE_ROWS]
                    ),
                )
            ),
        },
    )


def blocked_failure(held: tuple[HeldWork, ...]) -> dg.Failure:
    """The step's failure when the run held work awaiting an approval (the kinds of change the
    mass-change guard held, units or properties kept for their stays), of this step and of
    the run's earlier steps; everything else of the run was sent and recorded before."""
    return dg.Failure(
        approval_message(held, dagster=True),
        metadata={
            "blocked_accounts": dg.MetadataValue.text(
                ", ".join(sorted({item.account_id for item in held}))
            ),
            "approvals": dg.MetadataValue.text(
                ", ".join(sorted({item.approval.run_config for item in held}))
            ),
        },
        allow_retries=False,
    )


def unusable_failure(report: SyncReport) -> dg.Failure:
    """The step's failure when the export gave nothing usable (no rows, or every one
    quarantined): nothing of it was sent and nothing was reconciled, and a rerun would read
    the same."""
    return dg.Failure(
        "nothing usable in the export: "
        + "; ".join(report.plan.unusable.values())
        + " (nothing of it was sent, nothing was deactivated or cancelled because of it)",
        allow_retries=False,
    )
