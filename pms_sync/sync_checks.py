"""The checks of the synced assets, computed from the sync's own report: no new dead letters,
accounts authenticated, answers agree, drift healed, upcoming arrivals sent. Their severities
come from the one verdict table (``connector.pipeline.VERDICTS``)."""

import dagster as dg

from connector.contract import Entity
from connector.pipeline import RunOutcome, SyncReport, verdict_for
from connector.plan import format_duration
from connector.push import Outcome
from pms_sync.check_text import dead_letter_description, dead_letter_metadata
from pms_sync.metadata import markdown_table, masked_text
from pms_sync.safety import anomaly_check_spec

CHECK_NO_NEW_DEAD_LETTERS = "no_new_dead_letters"
CHECK_UPCOMING_SENT = "upcoming_arrivals_sent"
CHECK_ACCOUNTS_AUTHENTICATED = "accounts_authenticated"
CHECK_ANSWERS_AGREE = "service_answers_agree"
CHECK_DRIFT_HEALED = "drift_healed"


def sync_check_specs(
    key: dg.AssetKey, entity: Entity, partitions: dg.PartitionsDefinition | None = None
) -> list[dg.AssetCheckSpec]:
    # Checks of the partitioned reservations are partitioned too: one result per month.
    specs = [
        dg.AssetCheckSpec(
            CHECK_NO_NEW_DEAD_LETTERS,
            asset=key,
            partitions_def=partitions,
            description="The service refused no record in this sync (400/403 → dead letters).",
        ),
        dg.AssetCheckSpec(
            CHECK_ACCOUNTS_AUTHENTICATED,
            asset=key,
            partitions_def=partitions,
            description="The service accepted the credentials of every account of the export.",
        ),
        dg.AssetCheckSpec(
            CHECK_ANSWERS_AGREE,
            asset=key,
            partitions_def=partitions,
            description=(
                "Every answer of the service confirmed what was sent: no 2xx without the "
                "documented body, no counts that contradict the request (docs/decisions.md)."
            ),
        ),
        dg.AssetCheckSpec(
            CHECK_DRIFT_HEALED,
            asset=key,
            description=(
                "No drift left open at the service: records the service lost or holds in "
                "another version, as its answers revealed them, were re-sent (docs/drift.md). "
                "Counts drift found and healed per account."
            ),
        ),
        anomaly_check_spec(key, partitions),
    ]
    if entity == Entity.RESERVATION:
        specs.append(
            dg.AssetCheckSpec(
                CHECK_UPCOMING_SENT,
                asset=key,
                partitions_def=partitions,
                description=(
                    "Every change of an upcoming arrival (or a stay in progress) reached the "
                    "service; those a budget or the rate limits left behind are counted."
                ),
            )
        )
    return specs


def sync_check_results(
    key: dg.AssetKey, report: SyncReport, refused: dict[str, str], entity: Entity
) -> list[dg.AssetCheckResult]:
    dead = report.outcomes[str(Outcome.DEAD_LETTERED)]
    results = [
        dg.AssetCheckResult(
            asset_key=key,
            check_name=CHECK_NO_NEW_DEAD_LETTERS,
            passed=dead == 0,
            severity=check_severity(RunOutcome.DEAD_LETTERED),
            description=dead_letter_description(dead, report.push.problems),
            metadata={
                "dead_lettered": dg.MetadataValue.int(dead),
                **dead_letter_metadata(report.push.problems),
            },
        ),
        dg.AssetCheckResult(
            asset_key=key,
            check_name=CHECK_ACCOUNTS_AUTHENTICATED,
            passed=not refused,
            severity=check_severity(RunOutcome.AUTHENTICATION),
            metadata={
                "accounts_refused": dg.MetadataValue.int(len(refused)),
                "refused": dg.MetadataValue.text(", ".join(sorted(refused)) or "none"),
            },
        ),
    ]
    results.append(_answers_agree_result(key, report))
    results.append(_drift_healed_result(key, report, entity))
    if entity == Entity.RESERVATION:
        results.append(_upcoming_sent_result(key, report))
    return results


def _answers_agree_result(key: dg.AssetKey, report: SyncReport) -> dg.AssetCheckResult:
    disagreements = report.push.disagreements
    unconfirmed = report.push.unconfirmed
    first = disagreements[0] if disagreements else None
    return dg.AssetCheckResult(
        asset_key=key,
        check_name=CHECK_ANSWERS_AGREE,
        passed=not disagreements and not unconfirmed,
        # The service may hold something else than the snapshot says: an operator looks.
        severity=check_severity(RunOutcome.DISAGREED),
        description=(
            f"{len(disagreements)} answer(s) contradict the request, {unconfirmed} 2xx "
            "answer(s) were not the documented body"
            + (
                f"; first: {first.account_id}/{first.record_id}: {first.detail} "
                f"(x-request-id {first.request_id or '-'})"
                if first
                else ""
            )
            if disagreements or unconfirmed
            else None
        ),
        metadata={
            "disagreements": dg.MetadataValue.int(len(disagreements)),
            "unconfirmed": dg.MetadataValue.int(unconfirmed),
        },
    )


def _drift_healed_result(
    key: dg.AssetKey, report: SyncReport, entity: Entity
) -> dg.AssetCheckResult:
    drift = report.drift_json()
    rows = [row for row in drift["by_account"] if row["entity"] == str(entity)]
    still_open = sum(row["open"] for row in rows)
    return dg.AssetCheckResult(
        asset_key=key,
        check_name=CHECK_DRIFT_HEALED,
        passed=still_open == 0,
        # The next run re-sends what is open: a warning, an operator may want to know who
        # changes records at the service.
        severity=dg.AssetCheckSeverity.WARN,
        description=(
            f"{still_open} record(s) with drift left open, re-sent by the next run"
            if still_open
            else None
        ),
        metadata={
            "drift_found": dg.MetadataValue.int(sum(row["found"] for row in rows)),
            "drift_healed": dg.MetadataValue.int(sum(row["healed"] for row in rows)),
            "drift_open": dg.MetadataValue.int(still_open),
            "by_account": dg.MetadataValue.md(
                masked_text(
                    markdown_table(
                        ("account", "found", "healed", "open"),
                        (
                            (row["account_id"], row["found"], row["healed"], row["open"])
                            for row in rows
                        ),
                    )
                )
            ),
        },
    )


def _upcoming_sent_result(key: dg.AssetKey, report: SyncReport) -> dg.AssetCheckResult:
    # A warning an operator can alert on: the next run sends them first, but a guest
    # arriving before that run gets no check-in link.
    unsent = int(report.push.unsent.get("upcoming", 0))
    upcoming = next(row for row in report.backlog if row.urgency == "upcoming")
    return dg.AssetCheckResult(
        asset_key=key,
        check_name=CHECK_UPCOMING_SENT,
        passed=unsent == 0,
        severity=dg.AssetCheckSeverity.WARN,
        description=f"{unsent} upcoming arrivals still unsent" if unsent else None,
        metadata={
            "upcoming_unsent": dg.MetadataValue.int(unsent),
            "eta": dg.MetadataValue.text(format_duration(upcoming.eta_s)),
        },
    )


def check_severity(outcome: RunOutcome) -> dg.AssetCheckSeverity:
    """The severity of the check that reports ``outcome`` (``connector.pipeline.VERDICTS``)."""
    severity = verdict_for(outcome).severity
    assert severity is not None, f"no check reports {outcome}"
    return dg.AssetCheckSeverity(str(severity))
