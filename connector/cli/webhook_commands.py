"""``pms-sync webhooks plan FILE`` and ``pms-sync webhooks apply FILE``: the connection's
outgoing-webhook configurations as code (docs/loop.md).

``plan`` shows what ``apply`` would create, update or delete at the service (matched by name,
field-level differences, header values masked) and sends only GET requests; ``apply`` makes
the changes, after which a second plan is empty.

Exit codes: 0 planned, or every change applied; 1 the file is invalid, no Open API client is
configured or the service could not be reached; 3 some changes failed (the others are
applied); 4 the Open API refused the client's credentials. With ``--json``, stdout carries
exactly one JSON document.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from connector.cli.account_commands import service_options
from connector.cli.sync_commands import (
    EXIT_AUTHENTICATION,
    EXIT_INCOMPLETE,
    EXIT_OK,
    _errors_to_exit,
)
from connector.plan import render_value
from connector.settings import SyncSettings, load_settings
from connector.webhooks import WebhooksReport


def register(group: click.Group) -> None:
    """Add this module's commands to the top-level group."""
    group.add_command(webhooks_group)


@click.group("webhooks")
def webhooks_group() -> None:
    """Outgoing-webhook configurations declared in a file, planned and applied."""


def _common(command: Any) -> Any:
    command = service_options(command)
    command = click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")(
        command
    )
    return click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))(
        command
    )


@webhooks_group.command("plan")
@_common
def plan_command(file: Path, as_json: bool, **service: Any) -> None:
    """Show what `apply` would create, update or delete for FILE."""
    from connector.webhooks import plan_webhooks_file

    _run(plan_webhooks_file, file, as_json, service)


@webhooks_group.command("apply")
@_common
def apply_command(file: Path, as_json: bool, **service: Any) -> None:
    """Create, update and delete the service's configurations so they match FILE."""
    from connector.webhooks import apply_webhooks_file

    _run(apply_webhooks_file, file, as_json, service)


def _run(
    step: Callable[[Path, SyncSettings], WebhooksReport],
    file: Path,
    as_json: bool,
    service: dict[str, Any],
) -> None:
    with _errors_to_exit(as_json):
        report = step(file, load_settings(**service))
    _finish(report, as_json)


def exit_code(report: WebhooksReport) -> int:
    if report.status == "unauthorized":
        return EXIT_AUTHENTICATION
    return EXIT_INCOMPLETE if report.status == "incomplete" else EXIT_OK


def _finish(report: WebhooksReport, as_json: bool) -> None:
    code = exit_code(report)
    if as_json:
        document = report.to_json_dict() | {"exit_code": code}
        click.echo(json.dumps(document, sort_keys=True, default=str))
    else:
        _print(report)
    if report.stopped:
        click.secho(f"error: {report.stopped}", fg="red", err=True)
    sys.exit(code)


def _print(report: WebhooksReport) -> None:
    plan = report.plan
    outcomes = {(item.change.action, item.change.name): item for item in report.applied or []}
    for change in plan.changes:
        applied = outcomes.get((change.action, change.name))
        state = ""
        if applied is not None:
            state = (
                "  [applied]" if applied.outcome == "applied" else f"  [failed: {applied.message}]"
            )
        ident = f" ({change.webhook_id})" if change.webhook_id else ""
        reason = f": {change.reason}" if change.reason else ""
        click.echo(f"{change.action:<7} {change.name}{ident}{reason}{state}")
        for item in change.fields:
            click.echo(f"    {item.field}: {render_value(item.old)} → {render_value(item.new)}")
    counts = plan.counts
    verb = "applied" if report.applied is not None else "to apply"
    click.echo(
        f"{counts['create']} create, {counts['update']} update, {counts['delete']} delete "
        f"{verb}; {counts['unchanged']} unchanged"
        + (f"; {len(plan.unmanaged)} outside the prefix left alone" if plan.unmanaged else "")
        + f" ({report.open_api_url}, {report.requests} request(s))"
    )
