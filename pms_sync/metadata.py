"""What the UI shows about a run: numeric counts it can plot, and short masked previews.

Numbers are emitted on every run, zeros included, so the UI's plots have no gaps. Previews are
capped at SAMPLE_ROWS rows: large metadata makes the UI slow. Every payload shown passes through
``connector.secrets.mask_payload``; messages from the service are masked by the client; and every
text value leaves through :func:`masked_metadata`, which masks each registered secret (tokens,
passwords, secrets read from the environment) in any encoding, as does :func:`masked_text` for
the messages of a failed step.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import dagster as dg
import pandas as pd

from connector.cursors import SourceRead
from connector.pipeline import SyncReport
from connector.plan import ACTIONS, Plan, format_duration, render_value
from connector.push import OUTCOMES, Outcome
from connector.records import MappedRecords
from connector.secrets import is_sensitive, mask_payload, mask_text, mask_value, redact_url

SAMPLE_ROWS = 20
TOP_REASONS = 5
_PAYLOAD_CHARS = 160


def masked_text(text: object) -> str:
    """Text for the UI, the event log or a ``dg.Failure``: every known secret masked."""
    return mask_text(str(text))


def masked_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    """The same metadata with text, markdown and URL values masked; numbers as they are."""
    masked: dict[str, Any] = {}
    for key, value in metadata.items():
        if isinstance(value, dg.MarkdownMetadataValue):
            value = dg.MetadataValue.md(masked_text(value.md_str or ""))
        elif isinstance(value, dg.TextMetadataValue):
            value = dg.MetadataValue.text(masked_text(value.text or ""))
        elif isinstance(value, dg.UrlMetadataValue):
            value = dg.MetadataValue.url(redact_url(value.url or ""))
        elif isinstance(value, str):
            value = masked_text(value)
        masked[key] = value
    return masked


def markdown_table(header: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    def cell(value: Any) -> str:
        text = "" if value is None or (isinstance(value, float) and pd.isna(value)) else str(value)
        return text.replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell(value) for value in row) + " |" for row in rows]
    return "\n".join(lines)


def quarantined_rows(batch: MappedRecords) -> int:
    """Input rows that produced no record: a row with several problems counts once."""
    quarantine = batch.quarantine
    if not len(quarantine):
        return 0
    return int(quarantine.drop_duplicates(["input", "rows"]).shape[0])


def quarantine_share(batch: MappedRecords) -> float:
    bad = quarantined_rows(batch)
    total = len(batch.records) + bad
    return bad / total if total else 0.0


def top_reasons(reasons: Iterable[str]) -> str:
    counts = Counter(reason for reason in reasons if reason)
    return markdown_table(("reason", "count"), counts.most_common(TOP_REASONS))


def mapped_metadata(batch: MappedRecords) -> dict[str, Any]:
    """Counts and a quarantine preview of one entity's mapped records."""
    records, quarantine = batch.records, batch.quarantine
    per_account = records["account_id"].astype(str).value_counts().sort_index()
    metadata: dict[str, Any] = {
        "records": dg.MetadataValue.int(len(records)),
        "quarantined_rows": dg.MetadataValue.int(quarantined_rows(batch)),
        "quarantine_problems": dg.MetadataValue.int(len(quarantine)),
        "quarantine_share": dg.MetadataValue.float(round(quarantine_share(batch), 6)),
        # Payloads identical to ones the service acknowledged under this contract: not
        # validated again (connector.snapshot.validated_payloads).
        "validated_before": dg.MetadataValue.int(batch.known_valid),
        # Records whose source rows are unchanged since the service acknowledged them: carried
        # over without mapping (connector.mapping.fingerprints); ``mapped`` are the others.
        "carried": dg.MetadataValue.int(batch.carried),
        "mapped": dg.MetadataValue.int(batch.mapped),
        "accounts": dg.MetadataValue.int(len(per_account)),
        "records_per_account": dg.MetadataValue.md(
            markdown_table(("account", "records"), per_account.head(SAMPLE_ROWS).items())
        ),
    }
    if batch.reads:
        metadata.update(reads_metadata(batch.reads))
    if len(quarantine):
        sample = quarantine.head(SAMPLE_ROWS)
        metadata["quarantine_top_reasons"] = dg.MetadataValue.md(top_reasons(quarantine["reason"]))
        metadata["quarantine_sample"] = dg.MetadataValue.md(
            markdown_table(
                ("input", "rows", "account", "record", "field", "reason", "value"),
                (
                    (
                        row.input,
                        row.rows,
                        row.account_id,
                        row.record_id,
                        row.field,
                        row.reason,
                        # The engine masks sensitive values already; mask again by field name
                        # so a preview can never be the first place a door code leaks.
                        mask_value(row.value)
                        if is_sensitive(str(row.field).rsplit(".", 1)[-1])
                        else row.value,
                    )
                    for row in sample.itertuples(index=False)
                ),
            )
        )
    return masked_metadata(metadata)


def _masked_payload(payload: str) -> str:
    try:
        text = json.dumps(mask_payload(json.loads(payload)), sort_keys=True, ensure_ascii=False)
    except (TypeError, ValueError):
        return ""
    return text if len(text) <= _PAYLOAD_CHARS else text[: _PAYLOAD_CHARS - 1] + "…"


def account_rows(
    report: SyncReport, entity: str, stopped: Mapping[str, str]
) -> list[tuple[Any, ...]]:
    """One row per account: extracted, actions, outcomes, requests, and whether it was refused."""
    plan = report.plan
    rows = []
    for account in plan.accounts:
        actions = plan.counts_by(entity, account)  # type: ignore[arg-type]
        outcomes = report.push.by_account.get((entity, account), Counter())
        extracted = plan.extracted[
            (plan.extracted["entity"] == entity) & (plan.extracted["account_id"] == account)
        ]
        rows.append(
            (
                account,
                int(extracted["extracted"].sum()),
                *(actions[str(action)] for action in ACTIONS),
                *(int(outcomes.get(str(outcome), 0)) for outcome in OUTCOMES),
                int(outcomes.get("requests", 0)),
                "401: credentials refused" if account in stopped else "ok",
            )
        )
    return rows


def sync_metadata(report: SyncReport, entity: str) -> dict[str, Any]:
    """Everything a data engineer reads after a sync, numbers first."""
    counts, outcomes, push = report.counts, report.outcomes, report.push
    extracted = int(report.plan.extracted["extracted"].sum()) if len(report.plan.extracted) else 0
    duration = max(report.duration_s, 1e-9)
    metadata: dict[str, Any] = {
        **{action: dg.MetadataValue.int(counts[action]) for action in map(str, ACTIONS)},
        "held": dg.MetadataValue.int(report.held),
        "held_back": dg.MetadataValue.int(len(push.held_back)),
        # Records in the export but invalid, and of those the ones the service keeps in their
        # last acknowledged version (never deactivated or cancelled for being invalid).
        "quarantined_records": dg.MetadataValue.int(report.plan.quarantined),
        "kept_quarantined": dg.MetadataValue.int(report.plan.kept_quarantined),
        "units_held_with_stays": dg.MetadataValue.int(
            int((~report.plan.units_with_stays["released"].astype(bool)).sum())
        ),
        "disagreements": dg.MetadataValue.int(len(push.disagreements)),
        "unconfirmed": dg.MetadataValue.int(push.unconfirmed),
        "resent_after_lost_answer": dg.MetadataValue.int(push.resent_after_lost_answer),
        **{outcome: dg.MetadataValue.int(outcomes[outcome]) for outcome in map(str, OUTCOMES)},
        "requests": dg.MetadataValue.int(report.requests),
        "records": dg.MetadataValue.int(extracted),
        "quarantined": dg.MetadataValue.int(sum(report.quarantine.values())),
        "duration_s": dg.MetadataValue.float(round(report.duration_s, 3)),
        "records_per_second": dg.MetadataValue.float(round(extracted / duration, 1)),
        "requests_per_second": dg.MetadataValue.float(
            round(report.requests / push.duration_s, 1) if push.duration_s > 0 else 0.0
        ),
        "accounts_refused": dg.MetadataValue.int(len(push.stopped_accounts)),
        "deferred": dg.MetadataValue.int(sum(push.deferred.values())),
        "throttled_429": dg.MetadataValue.int(push.throttled),
        "unsent_upcoming": dg.MetadataValue.int(int(push.unsent.get("upcoming", 0))),
        "status": dg.MetadataValue.text(report.status),
        "sync_run_id": dg.MetadataValue.text(report.run_id),
        # Re-sends of unchanged records and drift at the service (docs/drift.md).
        **{
            f"resent_{reason}": dg.MetadataValue.int(int(push.resent_by_reason.get(reason, 0)))
            for reason in report.plan.resends
        },
        "drift_found": dg.MetadataValue.int(len(push.drift)),
        "drift_healed": dg.MetadataValue.int(push.drift_healed),
        "drift_open": dg.MetadataValue.int(
            sum(n for (kind, _), n in report.drift_open.items() if kind == entity)
        ),
    }
    stopped = {account: str(error) for account, error in push.stopped_accounts.items()}
    metadata["accounts"] = dg.MetadataValue.md(
        markdown_table(
            ("account", "records", *map(str, ACTIONS), *map(str, OUTCOMES), "requests", "auth"),
            account_rows(report, entity, stopped)[:SAMPLE_ROWS],
        )
    )
    changes = report.plan.changes.head(SAMPLE_ROWS)
    metadata["changes_sample"] = dg.MetadataValue.md(
        markdown_table(
            ("account", "record", "action", "reason", "payload (masked)"),
            (
                (
                    row.account_id,
                    row.record_id,
                    row.action,
                    row.reason,
                    _masked_payload(row.payload),
                )
                for row in changes.itertuples(index=False)
            ),
        )
    )
    metadata.update(safety_metadata(report))
    metadata.update(accounts_metadata(report))
    metadata.update(plan_effects_metadata(report.plan))
    dead = [p for p in push.problems if p.outcome == Outcome.DEAD_LETTERED]
    if dead:
        metadata["dead_letter_top_reasons"] = dg.MetadataValue.md(
            top_reasons(f"HTTP {p.http_status}: {p.message}" for p in dead)
        )
    if report.quarantine_sample:
        metadata["quarantine_top_reasons"] = dg.MetadataValue.md(
            top_reasons(str(row.get("reason") or "") for row in report.quarantine_sample)
        )
    failures = push.problems  # dead-lettered, failed and pending: each with its x-request-ids
    request_ids = [rid for p in failures for rid in p.request_ids if rid]
    if failures:
        metadata["failures"] = dg.MetadataValue.md(
            markdown_table(
                ("account", "record", "outcome", "HTTP", "message", "x-request-ids"),
                (
                    (
                        p.account_id,
                        p.record_id,
                        str(p.outcome),
                        p.http_status,
                        p.message,
                        ", ".join(r for r in p.request_ids if r),
                    )
                    for p in failures[:SAMPLE_ROWS]
                ),
            )
        )
        metadata["failed_request_ids"] = dg.MetadataValue.text(", ".join(request_ids[:50]))
    metadata["backlog"] = dg.MetadataValue.md(
        markdown_table(
            ("urgency", "unsent", "cleared after"),
            ((row.urgency, row.requests, format_duration(row.eta_s)) for row in report.backlog),
        )
    )
    if report.plan.window is not None:
        metadata["window"] = dg.MetadataValue.text(
            f"{report.plan.window.start.isoformat()} .. {report.plan.window.end.isoformat()}"
        )
    if report.plan.reads:
        metadata.update(reads_metadata(report.plan.reads))
        metadata["cursors_committed"] = dg.MetadataValue.bool(report.cursors_committed)
    return masked_metadata(metadata)


def reads_metadata(reads: Sequence[SourceRead]) -> dict[str, Any]:
    """How each SQL input with a cursor was read: in full (why) or since which value; nothing
    for a mapping without one."""
    if not reads:
        return {}
    return {
        "source_reads": dg.MetadataValue.md(
            markdown_table(
                ("input", "read", "rows", "since", "largest cursor", "why in full"),
                (
                    (
                        read.input,
                        str(read.mode),
                        read.rows,
                        read.since.text if read.since else "",
                        read.upto.text if read.upto else "",
                        read.reason,
                    )
                    for read in reads
                ),
            )
        ),
        "rows_read": dg.MetadataValue.int(sum(read.rows for read in reads)),
        "read_incrementally": dg.MetadataValue.bool(any(read.incremental for read in reads)),
    }


def accounts_metadata(report: SyncReport) -> dict[str, Any]:
    """Account discovery, token renewals and property changes of the sync (connector.accounts)."""
    accounts = report.accounts
    properties = accounts.properties.changes
    metadata: dict[str, Any] = {
        "token_renewals": dg.MetadataValue.int(report.push.token_renewals),
        "retried_after_renewal": dg.MetadataValue.int(report.push.retried_after_renewal),
        "unknown_external_ids": dg.MetadataValue.int(len(accounts.unknown)),
        # Token, listing, lookup and property requests of the Open API client.
        "open_api_requests": dg.MetadataValue.int(accounts.stats.requests),
        "properties_changed": dg.MetadataValue.int(
            sum(1 for change in properties if str(change.outcome) == "applied")
        ),
    }
    left_active = accounts.properties.left_active
    if left_active:
        # Offboarding is off: a hotel gone from the export stays active at the service.
        metadata["properties_left_active"] = dg.MetadataValue.text(", ".join(left_active))
    if properties:
        metadata["properties"] = dg.MetadataValue.md(
            markdown_table(
                ("account", "action", "outcome", "stays", "message"),
                (
                    (c.account_id, str(c.action), str(c.outcome), c.stays, c.message)
                    for c in properties[:SAMPLE_ROWS]
                ),
            )
        )
    return metadata


def plan_effects_metadata(plan: Plan) -> dict[str, Any]:
    """The plan's effects beyond the counts, the members `pms-sync plan --json` shows:
    ``requests_to_send``, ``properties`` (as planned; ``properties`` above says what came of
    them), ``possibly_stored_retirements``; ``awaiting_approval`` is the safety part's."""
    effects = plan.effects_json()
    metadata: dict[str, Any] = {
        "requests_to_send_records": dg.MetadataValue.int(effects["requests_to_send"]["records"]),
        "requests_to_send_properties": dg.MetadataValue.int(
            effects["requests_to_send"]["properties"]
        ),
        "possibly_stored_retired": dg.MetadataValue.int(
            len(effects["possibly_stored_retirements"])
        ),
    }
    if plan.properties:
        metadata["planned_properties"] = dg.MetadataValue.md(
            markdown_table(
                ("account", "action", "units", "stays", "held for stays"),
                (
                    (p.account_id, p.action, p.units, p.stays, "yes" if p.held_for_stays else "no")
                    for p in plan.properties[:SAMPLE_ROWS]
                ),
            )
        )
    if effects["possibly_stored_retirements"]:
        metadata["possibly_stored_retirements"] = dg.MetadataValue.md(
            markdown_table(
                ("entity", "account", "record", "action"),
                (
                    (r["entity"], r["account_id"], r["record_id"], r["action"])
                    for r in effects["possibly_stored_retirements"][:SAMPLE_ROWS]
                ),
            )
        )
    return metadata


RUN_LEVEL_SYNC_KEYS: tuple[str, ...] = (
    "duration_s",
    "records_per_second",
    "requests_per_second",
    "throttled_429",
)
"""Figures of a whole run: on a month's materialization they appear as ``run_<name>``."""


def run_sync_metadata(report: SyncReport) -> dict[str, Any]:
    """What a run over several months reports once, for every month it covers."""
    whole = sync_metadata(report, "reservation")
    metadata = {f"run_{name}": whole[name] for name in RUN_LEVEL_SYNC_KEYS}
    metadata["run_requests"] = whole["requests"]
    metadata["run_status"] = whole["status"]
    metadata["run_backlog"] = whole["backlog"]
    if "window" in whole:
        metadata["run_window"] = whole["window"]
    for name in ("source_reads", "rows_read", "read_incrementally", "cursors_committed"):
        if name in whole:
            metadata[f"run_{name}"] = whole[name]
    return metadata


def safety_metadata(report: SyncReport) -> dict[str, Any]:
    """The safety rails' part: field-level differences, held-back records, the guard."""
    metadata: dict[str, Any] = {
        # The same masked old → new rows `pms-sync plan --out` writes, for the first changes.
        "changes_diff": dg.MetadataValue.md(
            markdown_table(
                ("account", "record", "action", "field", "old", "new"),
                (
                    (
                        c.account_id,
                        c.record_id,
                        c.action,
                        c.field,
                        render_value(c.old),
                        render_value(c.new),
                    )
                    for c in report.diff_sample[:SAMPLE_ROWS]
                ),
            )
        )
    }
    if report.push.held_back:
        metadata["held_back_sample"] = dg.MetadataValue.md(
            markdown_table(
                ("account", "record", "units", "reason"),
                (
                    (h.account_id, h.record_id, ", ".join(h.unit_ids), h.reason)
                    for h in report.push.held_back[:SAMPLE_ROWS]
                ),
            )
        )
    if report.guard.changes:
        metadata["mass_change_guard"] = dg.MetadataValue.text(report.guard.message())
    if report.awaiting_approval:
        metadata["awaiting_approval"] = dg.MetadataValue.md(
            markdown_table(
                ("account", "entity", "held", "records", "reason", "approve with"),
                (
                    (h.account_id, h.entity, h.action, h.records, h.reason, h.approval.run_config)
                    for h in report.awaiting_approval[:SAMPLE_ROWS]
                ),
            )
        )
    units = report.plan.units_with_stays
    if len(units):
        metadata["units_with_stays"] = dg.MetadataValue.md(
            markdown_table(
                ("account", "unit", "stays", "last checkout", "deactivated"),
                (
                    (
                        u.account_id,
                        u.unit_id,
                        u.stays,
                        u.last_checkout,
                        "yes (approved)" if u.released else "no (held)",
                    )
                    for u in units.head(SAMPLE_ROWS).itertuples(index=False)
                ),
            )
        )
    if report.push.disagreements:
        metadata["disagreements_sample"] = dg.MetadataValue.md(
            markdown_table(
                ("account", "record", "action", "detail", "x-request-id"),
                (
                    (d.account_id, d.record_id, d.action, d.detail, d.request_id)
                    for d in report.push.disagreements[:SAMPLE_ROWS]
                ),
            )
        )
    if report.plan.unusable:
        metadata["unusable"] = dg.MetadataValue.text("; ".join(report.plan.unusable.values()))
    return masked_metadata(metadata)
