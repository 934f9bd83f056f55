"""CLI commands of the sync stage: ``plan`` (decide, send nothing), ``sync`` (decide and send)
and ``apply`` (send a reviewed plan file).

Exit codes: the verdict table ``connector.pipeline.VERDICTS`` gives a run's status word and
exit code together, most serious condition first; docs/cli.md shows it. 2 is click's (wrong
usage).

With ``--json``, stdout carries exactly one JSON document whatever the outcome (errors
included: ``{"status": "error", "error": …, "exit_code": …}``); everything meant for a person
goes to stderr.
"""

from __future__ import annotations

import json
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import click

from connector.cli.account_commands import open_api_options
from connector.cli.setting_options import setting_option
from connector.client import STOP_SIGNALS, effective_windows
from connector.config import OpenApiSection, RunSection, ServiceSection
from connector.errors import PmsSyncError
from connector.plan import Force, Plan, backlog, backlog_json, backlog_table
from connector.push import OUTCOMES
from connector.secrets import mask_text
from connector.settings import SyncSettings, load_settings

# The codes of connector.pipeline.ExitCode, for the commands that do not import the pipeline.
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_INCOMPLETE = 3
EXIT_AUTHENTICATION = 4
EXIT_HELD = 5  # completed, work held awaiting an approval
EXIT_UNUSABLE = 6
EXIT_STOPPED = 7


def register(group: click.Group) -> None:
    """Add this module's commands to the top-level group."""
    group.add_command(plan_command)
    group.add_command(sync_command)
    group.add_command(apply_command)


def _accounts(given: tuple[str, ...]) -> list[str] | None:
    found = [part.strip() for value in given for part in value.split(",") if part.strip()]
    return found or None


def _force(full_resync: bool, only: tuple[str, ...]) -> Force:
    ids = frozenset(part.strip() for value in only for part in value.split(",") if part.strip())
    return Force(full_resync=full_resync, only_ids=ids or None)


_mapping_argument = click.argument(
    "mapping", type=click.Path(exists=True, dir_okay=False, path_type=Path)
)
_json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
_snapshot_option = setting_option(
    RunSection,
    "snapshot",
    metavar="FILE|URL",
    help="Snapshot: a DuckDB file or a postgresql:// URL.",
)
_wait_option = click.option(
    "--wait",
    "--lock-timeout",  # the name of the snapshot resource's member
    "wait",
    type=click.FloatRange(min=0),
    default=0.0,
    show_default=True,
    metavar="SECONDS",
    help="Wait up to SECONDS for another run writing the snapshot (on PostgreSQL: the same "
    "connection and accounts; on a DuckDB file: any run) to finish; 0 exits at once, naming it.",
)
_full_resync_option = click.option(
    "--full-resync", is_flag=True, help="Re-send every record of the export, changed or not."
)
_remap_option = click.option(
    "--remap",
    is_flag=True,
    help="Map every record of the export, even those whose source rows are unchanged since "
    "the last sync (source fingerprints are ignored, then renewed).",
)
_account_option = click.option(
    "--account",
    "accounts",
    multiple=True,
    help="Only these accounts of the connection (repeatable or comma-separated; the account "
    "ids the mapping gives, or the external ids of an `external_id: true` account member): "
    "their records are sent and reconciled, the other accounts are left alone.",
)
_allow_mass_change_option = click.option(
    "--allow-mass-change",
    is_flag=True,
    help="Approve the changes the mass-change guard holds back (an account's many "
    "deactivations or cancellations, or far fewer export rows than the last successful run). "
    "Volume only: units and properties guests still stay in need "
    "--allow-deactivation-with-stays.",
)
_only_option = click.option(
    "--only",
    multiple=True,
    metavar="ID",
    help="Only these record ids, each re-sent (repeat the option or separate ids by commas).",
)
_refresh_option = setting_option(
    RunSection,
    "refresh",
    metavar="SHARE",
    help="Rolling refresh: re-send this share of the acknowledged, unchanged records after the "
    "real changes, oldest acknowledgement first, e.g. 7d (every record within 7 runs), 15%, "
    "off.",
)
_refresh_max_option = setting_option(
    RunSection,
    "refresh_max",
    metavar="N",
    help="Refresh requests per run at most; none: no cap.",
)
_full_read_option = setting_option(
    RunSection,
    "full_read",
    is_flag=True,
    help="Read every SQL input with a cursor in full in this run: records gone from the "
    "export are reconciled, and the cursors start again from what this read saw.",
)
_full_read_interval_option = setting_option(
    RunSection,
    "full_read_interval",
    metavar="DURATION",
    help="Read an SQL input with a cursor in full when its last full read is this old "
    "(7d, 12h, 90m, seconds); 0 or off: always in full.",
)
_concurrency_option = setting_option(
    ServiceSection, "concurrency", metavar="N", help="Requests in flight."
)
_reconcile_option = click.option(
    "--reconcile",
    is_flag=True,
    help="Full reconciliation: re-send every record acknowledged before the current pass "
    "started, after the real changes and within the budget; the next --reconcile run resumes "
    "where this one stopped.",
)
_release_units_option = click.option(
    "--allow-deactivation-with-stays",
    "release_units",
    is_flag=True,
    help="Deactivate units and properties gone from the export even though guests still stay "
    "in them (held otherwise, exit 5; the only approval that releases them).",
)


@click.command("plan")
@_mapping_argument
@_json_option
@_full_resync_option
@_only_option
@_release_units_option
@_refresh_option
@_refresh_max_option
@_reconcile_option
@_remap_option
@_account_option
@_full_read_option
@_full_read_interval_option
@setting_option(
    ServiceSection,
    "base_url",
    metavar="URL",
    help="The service whose defaults apply (refresh, rate limits).",
)
@_snapshot_option
@_wait_option
@open_api_options
@click.option(
    "--out",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Write the plan file (field-level differences, secrets masked; exact payloads for "
    "`pms-sync apply`; readable by you only).",
)
def plan_command(
    mapping: Path,
    as_json: bool,
    full_resync: bool,
    only: tuple[str, ...],
    release_units: bool,
    refresh: str | None,
    refresh_max: int | None,
    reconcile: bool,
    remap: bool,
    accounts: tuple[str, ...],
    full_read: bool | None,
    full_read_interval: str | None,
    base_url: str | None,
    snapshot: str | None,
    wait: float,
    out: Path | None,
    client_id: str | None,
    client_secret: str | None,
    openapi_url: str | None,
) -> None:
    """Show what `sync` would send for MAPPING, without sending or writing anything."""
    from connector.pipeline import SyncRequest, plan_request, plan_to_file

    with _errors_to_exit(as_json):
        settings = load_settings(
            base_url=base_url,
            snapshot=snapshot,
            refresh=refresh,
            refresh_max=refresh_max,
            client_id=client_id,
            client_secret=client_secret,
            openapi_url=openapi_url,
            full_read=full_read,
            full_read_interval=full_read_interval,
        )
        settings = replace(settings, lock_timeout=wait)
        if out is not None and accounts:
            raise click.UsageError(
                "--account plans some accounts of a connection; a plan file (--out) covers the "
                "whole connection: leave out one of them"
            )
        request = SyncRequest.of(
            settings,
            mapping,
            force=_force(full_resync, only),
            release_units_with_stays=release_units,
            reconcile=reconcile,
            remap=remap,
            accounts=_accounts(accounts),
        )
        if out is None:
            plan = plan_request(request)
        else:
            plan, verdict, plan_document = plan_to_file(request, out)
    rows = backlog(plan.by_urgency, effective_windows(settings.client))
    code = EXIT_UNUSABLE if plan.unusable else EXIT_OK
    if out is not None:
        _print_plan_file(out, plan, verdict, plan_document, as_json, code)
    elif as_json:
        document = plan.to_json_dict() | {"backlog": backlog_json(rows), "exit_code": code}
        click.echo(json.dumps(document, sort_keys=True, default=str))
    else:
        click.echo(plan.summary_table())
        _echo_reads(plan)
        _echo_requests(plan, settings)
        _echo_resends(plan)
        click.echo("\n" + backlog_table(rows))
    _print_quarantine(plan.quarantine, plan.quarantine_sample, as_json)
    _warn_about_plan(plan)
    sys.exit(code)


@click.command("sync")
@_mapping_argument
@click.option("--dry-run", is_flag=True, help="Plan and report, send nothing.")
@_json_option
@setting_option(ServiceSection, "base_url", metavar="URL", help="The service.")
@_snapshot_option
@_wait_option
@_full_resync_option
@_only_option
@_allow_mass_change_option
@_release_units_option
@_concurrency_option
@setting_option(ServiceSection, "rate_limit", metavar="N", help="Requests per second.")
@setting_option(
    ServiceSection,
    "rate_limits",
    metavar="LIMITS",
    help="Windows per token, e.g. 15/s,120/min,5000/h, or off.",
)
@click.option(
    "--max-requests",
    type=click.IntRange(min=0),
    help="Send at most N changes, most urgent first; the rest stay planned for the next run.",
)
@setting_option(
    RunSection,
    "max_duration",
    metavar="SECONDS",
    help="The run's deadline: after this many seconds the push stops (requests in flight "
    "answered), the rest stays pending for the next run, exit 7; 0 or off: none.",
)
@open_api_options
@setting_option(
    OpenApiSection,
    "update_sub_units",
    "--update-sub-units/--no-update-sub-units",
    help="updateSubUnits of property deactivations and reactivations.",
)
@_refresh_option
@_refresh_max_option
@_reconcile_option
@_remap_option
@_account_option
@_full_read_option
@_full_read_interval_option
def sync_command(
    mapping: Path,
    dry_run: bool,
    as_json: bool,
    base_url: str | None,
    snapshot: str | None,
    wait: float,
    full_resync: bool,
    only: tuple[str, ...],
    allow_mass_change: bool,
    release_units: bool,
    concurrency: int | None,
    rate_limit: float | None,
    rate_limits: str | None,
    max_requests: int | None,
    max_duration: str | None,
    client_id: str | None,
    client_secret: str | None,
    openapi_url: str | None,
    update_sub_units: bool | None,
    refresh: str | None,
    refresh_max: int | None,
    reconcile: bool,
    remap: bool,
    accounts: tuple[str, ...],
    full_read: bool | None,
    full_read_interval: str | None,
) -> None:
    """Map MAPPING's export, send what changed since the last sync, and report."""
    from connector.pipeline import SyncRequest, run_request

    with _errors_to_exit(as_json):
        settings = load_settings(
            base_url=base_url,
            snapshot=snapshot,
            concurrency=concurrency,
            rate_limit=rate_limit,
            rate_limits=rate_limits,
            client_id=client_id,
            client_secret=client_secret,
            openapi_url=openapi_url,
            update_sub_units=update_sub_units,
            refresh=refresh,
            refresh_max=refresh_max,
            max_duration=max_duration,
            full_read=full_read,
            full_read_interval=full_read_interval,
        )
        budget = replace(settings.push.budget, max_requests=max_requests)
        settings = replace(settings, push=replace(settings.push, budget=budget), lock_timeout=wait)
        request = SyncRequest.of(
            settings,
            mapping,
            dry_run=dry_run,
            force=_force(full_resync, only),
            allow_mass_change=allow_mass_change,
            release_units_with_stays=release_units,
            reconcile=reconcile,
            remap=remap,
            accounts=_accounts(accounts),
        )
        with _progress(enabled=not as_json and sys.stdout.isatty()) as on_progress:
            report = run_request(request, on_progress)
    _finish(report, settings, as_json)


def _echo_requests(plan: Plan, settings: SyncSettings) -> None:
    """What the plan sends, then its effects beyond the counts, one line each."""
    records, properties = plan.record_requests, plan.property_requests
    held = (
        f"; {len(plan.awaiting_approval)} held awaiting approval" if plan.awaiting_approval else ""
    )
    click.echo(
        f"\n{records + properties} request(s) to send ({records} record change(s), "
        f"{properties} property status change(s)){held}; snapshot {settings.snapshot_path}"
    )
    for line in plan.effects_lines():
        click.echo(line)


def _echo_resends(plan: Plan) -> None:
    """The plan's re-sends of unchanged records, apart from its real changes."""
    resends = plan.resends
    if not plan.resend.active and not any(resends.values()):
        return
    eligible = sum(plan.resend.eligible.values())
    parts = [f"{reason} {n}" for reason, n in resends.items()]
    click.echo(
        f"re-sends of unchanged records (after the real changes): {', '.join(parts)}; "
        f"refresh {plan.resend.refresh.describe()}, {eligible} eligible record(s)"
    )


def exit_code(report: Any) -> int:
    """The exit code of a sync or apply: its verdict's (``connector.pipeline.VERDICTS``)."""
    return int(report.verdict.exit_code)


command_owns_process = False
"""True when this process runs one command from its command line (not a test's runner)."""


def _finish(report: Any, settings: SyncSettings, as_json: bool) -> None:
    if command_owns_process and threading.current_thread() is threading.main_thread():
        # The run is over and its report final: a stop signal from here on changes nothing,
        # and the process ends with the report's exit code, not killed while printing it.
        for number in STOP_SIGNALS:
            signal.signal(number, signal.SIG_IGN)
    code = exit_code(report)
    document = report.to_json_dict() | {"exit_code": code}
    if as_json:
        click.echo(json.dumps(document, sort_keys=True, default=str))
    else:
        _print_report(report.plan, document, settings)
    if report.guard.changes:
        click.secho(
            report.guard.message(), fg="yellow" if report.guard.allowed else "red", err=True
        )
    for held in report.push.held_back[:20]:
        click.echo(
            f"  held          {held.entity} {held.account_id}/{held.record_id}: {held.reason}",
            err=as_json,
        )
    _warn_about_plan(report.plan)
    if report.approval_message():
        click.secho(report.approval_message(), fg="red", err=True)
    sys.exit(code)


@click.command("apply")
@click.argument("plan_file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@_json_option
@setting_option(ServiceSection, "base_url", metavar="URL", help="The service.")
@click.option(
    "--snapshot",
    metavar="FILE|URL",
    help="Snapshot file or postgresql:// URL [default: the one the plan was made against].",
)
@_wait_option
@_allow_mass_change_option
@_concurrency_option
@open_api_options
def apply_command(
    plan_file: Path,
    as_json: bool,
    base_url: str | None,
    snapshot: str | None,
    wait: float,
    allow_mass_change: bool,
    concurrency: int | None,
    client_id: str | None,
    client_secret: str | None,
    openapi_url: str | None,
) -> None:
    """Send exactly the plan in PLAN_FILE (from `plan --out`); refused if the snapshot changed."""
    from connector.pipeline import SyncRequest, apply_plan_file

    with _errors_to_exit(as_json):
        settings = load_settings(
            base_url=base_url,
            concurrency=concurrency,
            client_id=client_id,
            client_secret=client_secret,
            openapi_url=openapi_url,
        )
        settings = replace(settings, lock_timeout=wait)
        request = SyncRequest.of(settings, allow_mass_change=allow_mass_change)
        report = apply_plan_file(plan_file, request, snapshot_path=snapshot)
    _finish(report, settings, as_json)


def _print_plan_file(
    out: Path, plan: Plan, verdict: Any, document: dict[str, Any], as_json: bool, code: int
) -> None:
    if as_json:
        summary = document["summary"] | {"plan_file": str(out), "exit_code": code}
        click.echo(json.dumps(summary, sort_keys=True, default=str))
    else:
        for change in document["changes"][:50]:
            click.echo(
                f"{change['action']:<10} {change['entity']} {change['account_id']}/"
                f"{change['record_id']}"
            )
            if change["action"] == "create":
                continue  # every field is new: the file lists them, the terminal would drown
            for item in change["fields"][:30]:
                click.echo(f"    {item['field']}: {_cell(item['old'])} → {_cell(item['new'])}")
        hidden = len(document["changes"]) - 50
        if hidden > 0:
            click.echo(f"… and {hidden} more change(s) in {out}")
        for line in plan.effects_lines():
            click.echo(line)
    if verdict.changes:
        click.secho(verdict.message(), fg="red", err=True)
    click.echo(
        f"plan written to {out} (differences masked; exact payloads for `pms-sync apply`: keep "
        "the file private)",
        err=as_json,
    )


def _cell(value: Any) -> str:
    from connector.plan import render_value

    return render_value(value)


def _echo_reads(plan: Plan, committed: bool | None = None) -> None:
    """How each SQL input with a cursor was read, and whether its cursor moved."""
    for read in plan.reads:
        click.echo(f"read {read.describe()}")
    if plan.reads and committed is not None:
        click.echo(
            "cursors kept for the next run"
            if committed
            else "cursors not moved: the next run reads the same rows again"
        )


def _warn_about_plan(plan: Plan) -> None:
    """What a person must know about a plan, on stderr (so ``--json`` stays one document)."""
    if plan.only_ids_not_in_export:
        listed = ", ".join(plan.only_ids_not_in_export)
        click.secho(f"--only: not in the export, nothing sent for: {listed}", fg="yellow", err=True)
    if plan.kept_quarantined:
        click.secho(
            f"{plan.kept_quarantined} known record(s) are quarantined in this export: the "
            "service keeps their last acknowledged version (fix the rows; `pms-sync validate` "
            "lists them)",
            fg="yellow",
            err=True,
        )
    for row in plan.units_with_stays.itertuples(index=False):
        verb = "deactivated although" if row.released else "held, not deactivated:"
        click.secho(
            f"unit {row.account_id}/{row.unit_id} {verb} {row.stays} stay(s) until "
            f"{row.last_checkout}"
            + (
                ""
                if row.released
                else " (approve with --allow-deactivation-with-stays, or wait for the stays to end)"
            ),
            fg="yellow",
            err=True,
        )
    if plan.status_error:
        click.secho(plan.status_error, fg="red", err=True)
    for entity, reason in plan.unusable.items():
        click.secho(
            f"nothing usable for {entity}: {reason} (nothing of it was sent, and nothing was "
            "deactivated or cancelled because of it)",
            fg="red",
            err=True,
        )


def _print_report(plan: Plan, document: dict[str, Any], settings: SyncSettings) -> None:
    click.echo(plan.summary_table())
    click.echo("")
    outcomes = document["outcomes"]
    click.echo("  ".join(f"{name} {outcomes[str(name)]}" for name in OUTCOMES))
    click.echo(
        f"requests {document['requests']}  duration {document['duration_s']:.1f} s  "
        f"service {settings.client.base_url}  snapshot {document['snapshot']}"
        + ("  (dry run: nothing sent)" if document["dry_run"] else "")
    )
    if document["deferred"]:
        unsent = ", ".join(f"{k} {v}" for k, v in document["unsent_by_urgency"].items() if v)
        click.secho(
            f"budget reached: {document['deferred']} change(s) left for the next run ({unsent})",
            fg="yellow",
        )
    if document["throttled"]:
        click.echo(f"{document['throttled']} request(s) answered 429 (rate limited) and retried")
    _echo_reads(plan, document.get("cursors_committed"))
    _print_accounts(document)
    _echo_drift(document)
    for account, message in document["stopped_accounts"].items():
        click.secho(f"account {account} stopped: {message}", fg="red", err=True)
    for problem in document["problems"]:
        request_id = next((r for r in reversed(problem["request_ids"]) if r), "-")
        click.echo(
            f"  {problem['outcome']:<13} {problem['entity']} {problem['account_id']}/"
            f"{problem['record_id']}: HTTP {problem['http_status'] or '-'} "
            f"{problem['message']} (x-request-id {request_id})"
        )
    hidden = document["problems_total"] - len(document["problems"])
    if hidden > 0:
        click.echo(f"  … and {hidden} more (see the dead_letters table of the snapshot)")
    if document["disagreements_total"]:
        click.echo(f"{document['disagreements_total']} response(s) disagreed with what was sent:")
        for item in document["disagreements"]:
            click.echo(
                f"  {item['entity']} {item['account_id']}/{item['record_id']}: {item['detail']}"
                f" (x-request-id {item['request_id'] or '-'})"
            )
    _print_quarantine(document["quarantine"], document["quarantine_sample"], as_json=False)


QUARANTINE_SHOWN = 10
"""Quarantine problems printed by `plan` and `sync` (`pms-sync validate` lists them all)."""


def _print_quarantine(counts: dict[str, int], sample: list[dict[str, Any]], as_json: bool) -> None:
    """The mapping's quarantine: problems per entity and the first ones, as `validate` shows
    them (on stderr with ``--json``, whose document carries them as ``quarantine`` and
    ``quarantine_sample``)."""
    total = sum(counts.values())
    if not total:
        return
    per_entity = ", ".join(f"{entity} {count}" for entity, count in counts.items() if count)
    click.echo(
        f"{total} row problem(s) quarantined by the mapping (not sent): {per_entity}", err=as_json
    )
    for row in sample[:QUARANTINE_SHOWN]:
        value = f" [value: {row['value']}]" if row.get("value") else ""
        click.echo(
            f"  {row['input']}:{row['rows']} {row['entity']} {row['record_id'] or '-'} "
            f"{row['field']}: {row['reason']}{value}",
            err=as_json,
        )
    if total > min(len(sample), QUARANTINE_SHOWN):
        click.echo("  … `pms-sync validate MAPPING` lists every problem", err=as_json)


def _print_accounts(document: dict[str, Any]) -> None:
    """Account discovery, token renewals and property changes of the run, if any."""
    discovery = document["accounts_discovery"]
    if discovery["open_api_client"]:
        api = discovery["open_api"]
        click.echo(
            f"accounts: {discovery['resolved']} resolved by external id, "
            f"{len(discovery['unknown_external_ids'])} unknown; Open API requests "
            f"{api['requests']} (pages {api['pages']}, lookups {api['lookups']}, cached "
            f"{api['cache_hits']})"
        )
    if document["token_renewals"] or document["retried_after_renewal"]:
        click.echo(
            f"account tokens renewed: {document['token_renewals']} "
            f"({discovery['renewed_after_401']} after a 401; "
            f"{document['retried_after_renewal']} request(s) sent again)"
        )
    for external_id, rows in discovery["unknown_external_ids"].items():
        click.secho(
            f"external id {external_id!r}: no account of the Open API client has it; "
            f"{rows} row(s) quarantined",
            fg="yellow",
            err=True,
        )
    for account in document["properties"]["left_active"]:
        click.secho(
            f"property {account}: gone from the export, left active (offboarding is off: "
            "PMS_SYNC_OFFBOARD_PROPERTIES)",
            fg="yellow",
            err=True,
        )
    for change in document["properties"]["changes"]:
        click.secho(
            f"property {change['account_id']}: {change['action']} {change['outcome']}"
            + (f" ({change['message']})" if change["message"] else ""),
            fg="green" if change["outcome"] == "applied" else "yellow",
            err=change["outcome"] != "applied",
        )


def _echo_drift(document: dict[str, Any]) -> None:
    resend, drift = document["resend"], document["drift"]
    if any(resend["planned"].values()):
        sent = ", ".join(
            f"{reason} {resend['acknowledged'].get(reason, 0)}/{n}"
            for reason, n in resend["planned"].items()
            if n
        )
        dropped = sum(resend["dropped_by_budget"].values())
        click.echo(
            f"re-sent unchanged records (acknowledged/planned): {sent}"
            + (f"; {dropped} left to a later run by the budget" if dropped else "")
        )
    if drift["found"] or drift["healed"] or drift["open"]:
        still_open = (
            f", open {drift['open']} (re-sent by the next run)" if drift["open"] else ", open 0"
        )
        click.secho(
            f"drift at the service: found {drift['found']}, healed {drift['healed']}{still_open}",
            fg="yellow" if drift["open"] else None,
        )
        for item in drift["sample"]:
            state = "healed" if item["healed"] else "open"
            click.echo(
                f"  {item['entity']} {item['account_id']}/{item['record_id']} {item['kind']} "
                f"({state}): {item['detail']} (x-request-id {item['request_id'] or '-'})"
            )


@contextmanager
def _progress(enabled: bool) -> Iterator[Callable[[int, int], None] | None]:
    if not enabled:
        yield None
        return
    bar: Any = None

    def advance(done: int, total: int) -> None:
        nonlocal bar
        if bar is None:
            bar = click.progressbar(length=total, label="pushing", file=sys.stdout)
            bar.__enter__()
        bar.update(done - bar.pos)

    try:
        yield advance
    finally:
        if bar is not None:
            bar.__exit__(None, None, None)


def json_error(message: str, code: int, status: str = "error") -> str:
    """The one JSON document ``--json`` prints when the command could not do its work."""
    return json.dumps({"status": status, "error": message, "exit_code": code}, sort_keys=True)


@contextmanager
def _errors_to_exit(as_json: bool = False) -> Iterator[None]:
    try:
        yield
    except PmsSyncError as error:
        # Imported as the commands import the pipeline: when needed (it sets the allocator).
        from connector.pipeline import verdict_of_error

        message = mask_text(str(error))
        verdict = verdict_of_error(error)
        code = int(verdict.exit_code)
        if as_json:
            click.echo(json_error(message, code, verdict.status))
        click.secho(f"error: {message}", fg="red", err=True)
        sys.exit(code)
