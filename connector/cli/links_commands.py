"""``pms-sync links MAPPING``: fetch the guest links of the connection's upcoming arrivals
from the Open API (soonest first, within the budget and the rate limits), keep them in the
snapshot, and write them back where the mapping declares (docs/loop.md).

Exit codes: 0 every link wanted is fetched or still fresh (and written back); 1 the run could
not start (mapping, settings, snapshot, no Open API client); 3 incomplete: links failed, are
left for the next run by the budget, or could not be written back; 4 the Open API refused the
client's credentials. With ``--json``, stdout carries exactly one JSON document.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from connector.cli.account_commands import service_options
from connector.cli.setting_options import setting_option
from connector.cli.sync_commands import (
    EXIT_AUTHENTICATION,
    EXIT_INCOMPLETE,
    EXIT_OK,
    _errors_to_exit,
)
from connector.config import ServiceSection
from connector.links import LinksReport
from connector.plan import Budget, backlog_table
from connector.settings import load_settings


def register(group: click.Group) -> None:
    """Add this module's commands to the top-level group."""
    group.add_command(links_command)


def exit_code(report: LinksReport) -> int:
    if report.status == "unauthorized":
        return EXIT_AUTHENTICATION
    return EXIT_INCOMPLETE if report.status == "incomplete" else EXIT_OK


@click.command("links")
@click.argument("mapping", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@service_options
@click.option(
    "--days-ahead",
    type=click.IntRange(min=0),
    help="Reservations checking in from today to N days ahead get links [mapping "
    "links.days_ahead; default 14].",
)
@click.option(
    "--max-age",
    "max_age_hours",
    type=click.FloatRange(min=0, min_open=True),
    metavar="HOURS",
    help="Fetch again links older than this [mapping links.max_age_hours; default 24].",
)
@click.option(
    "--max-requests",
    type=click.IntRange(min=0),
    help="Fetch at most N links, soonest arrival first; the rest wait for the next run.",
)
@click.option(
    "--max-duration",
    type=click.FloatRange(min=0, min_open=True),
    metavar="SECONDS",
    help="Start no link request after this many seconds; the rest wait for the next run.",
)
@setting_option(
    ServiceSection,
    "rate_limits",
    metavar="LIMITS",
    help="Open API windows, e.g. 15/s,120/min,5000/h, or off; by default the documented ones "
    "for a remote service, those the service announces locally.",
    show_default=False,
)
def links_command(
    mapping: Path,
    as_json: bool,
    days_ahead: int | None,
    max_age_hours: float | None,
    max_requests: int | None,
    max_duration: float | None,
    rate_limits: str | None,
    **service: Any,
) -> None:
    """Fetch guest links of MAPPING's upcoming arrivals and write them back."""
    from connector.links import run_links

    with _errors_to_exit(as_json):
        settings = load_settings(rate_limits=rate_limits, **service)
        report = run_links(
            mapping,
            settings,
            budget=Budget(max_requests=max_requests, max_duration_s=max_duration),
            days_ahead=days_ahead,
            max_age_hours=max_age_hours,
        )
    code = exit_code(report)
    document = report.to_json_dict() | {"exit_code": code}
    if as_json:
        click.echo(json.dumps(document, sort_keys=True, default=str))
    else:
        _print(report, document)
    if report.stopped:
        click.secho(f"error: {report.stopped}", fg="red", err=True)
    for problem in report.write_errors:
        click.secho(f"write-back failed: {problem}", fg="red", err=True)
    sys.exit(code)


def _print(report: LinksReport, document: dict[str, object]) -> None:
    click.echo(
        f"links of {report.connection}: check-ins {document['checkin_from']} to "
        f"{document['checkin_to']}, {report.candidates} reservation(s) at the service"
    )
    click.echo(
        f"fetched {len(report.fetched)}  reused {report.reused}  failed {len(report.failed)}  "
        f"pending {len(report.pending)}  written {report.written}"
    )
    renewed = f", account tokens renewed {report.token_renewals}" if report.token_renewals else ""
    click.echo(
        f"Open API requests {report.requests} (tokens {report.token_requests}{renewed}, "
        f"429 {report.throttled})  duration {report.duration_s:.1f} s"
    )
    for write in report.writes:
        click.echo(f"written back to {write.destination}: {write.rows} row(s)")
    for failure in report.failed[:20]:
        click.echo(
            f"  failed  {failure.account_id}/{failure.reservation_id}: HTTP "
            f"{failure.http_status or '-'} {failure.message} (x-request-id "
            f"{failure.request_id or '-'})"
        )
    if report.drift_recorded:
        click.secho(
            f"recorded as drift: {len(report.drift_recorded)} reservation(s) the service no "
            "longer holds (404); the next sync re-sends them, the links run after fetches "
            "their links",
            fg="yellow",
        )
    if report.pending:
        click.secho(
            f"budget reached: {len(report.pending)} reservation(s) wait for the next run",
            fg="yellow",
        )
        click.echo(backlog_table(report.backlog))
