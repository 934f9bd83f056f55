"""``pms-sync events write MAPPING``: write the events the receiver stored (``pms-sync
receive``) back where the mapping's ``events: destination:`` says, each destination only the
events it does not hold yet (docs/loop.md). The same step as Dagster's
``<connection>/service_events``, sharing its cursors: a cron deployment closes the loop with it.

Exit codes: 0 every destination holds every stored event (written now or before); 1 the run
could not start (mapping, settings, no ``events: destination:``, the store held by another
process past ``--wait``); 3 incomplete: a destination could not be written (its events wait
for the next run) or the cursors could not be saved (the next run writes again, upserted).
With ``--json``, stdout carries exactly one JSON document.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from connector.cli.setting_options import setting_option
from connector.cli.sync_commands import EXIT_INCOMPLETE, EXIT_OK, _errors_to_exit
from connector.config import ReceiverSection, RunSection
from connector.errors import ConfigError
from connector.events import EventsWriteReport, events_store_path, write_new_events
from connector.snapshot import snapshot_location

DEFAULT_WAIT_S = 10.0
"""The receiver holds the store only while it writes a batch: a short wait rides one out."""


def register(group: click.Group) -> None:
    """Add this module's commands to the top-level group."""
    group.add_command(events_group)


@click.group("events")
def events_group() -> None:
    """Events the receiver stored, written back to the PMS."""


def exit_code(report: EventsWriteReport) -> int:
    return EXIT_INCOMPLETE if report.status == "incomplete" else EXIT_OK


@events_group.command("write")
@click.argument("mapping", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@setting_option(ReceiverSection, "events", "--events", "store", help="Events store (DuckDB).")
@setting_option(
    RunSection,
    "snapshot",
    metavar="FILE|URL",
    help="Snapshot file, whose folder holds the events store by default.",
)
@click.option(
    "--wait",
    type=click.FloatRange(min=0),
    default=DEFAULT_WAIT_S,
    show_default=True,
    metavar="SECONDS",
    help="Wait up to SECONDS for the receiver (or another run) holding the events store.",
)
def write_command(
    mapping: Path, as_json: bool, store: str | None, snapshot: str | None, wait: float
) -> None:
    """Write the events stored for MAPPING's connection where its `events:` section says."""
    from connector.mapping import load_mapping

    with _errors_to_exit(as_json):
        loaded = load_mapping(mapping)
        destinations = loaded.events.destinations if loaded.events is not None else []
        if not destinations:
            raise ConfigError(
                f"{mapping}: no `events: destination:` to write events to; declare a table "
                "(`sql: {url, table}`) or a file (docs/loop.md)"
            )
        location = snapshot_location(RunSection.read(given={"snapshot": snapshot}).snapshot)
        report = write_new_events(
            events_store_path(location, store=Path(store) if store is not None else None),
            loaded.name or mapping.stem,  # load_mapping names it after the file anyway
            destinations,
            base_dir=loaded.base_dir,
            lock_timeout_s=wait,
        )
    code = exit_code(report)
    if as_json:
        click.echo(json.dumps(report.to_json_dict() | {"exit_code": code}, sort_keys=True))
    else:
        _print(report)
    for problem in report.errors:
        click.secho(f"write-back failed: {problem}", fg="red", err=True)
    sys.exit(code)


def _print(report: EventsWriteReport) -> None:
    found = report.found
    click.echo(
        f"events of {found.connection}: {len(found.events)} new (after seq {found.after_seq}, "
        f"up to seq {found.upto_seq}), {found.redeliveries} redelivery(ies); {report.store}"
    )
    for event, count in found.counts.items():
        click.echo(f"  {event:<28} {count}")
    for write in report.writes:
        if write.error is not None:
            click.echo(f"not written to {write.destination} (held up to seq {write.after_seq})")
        elif write.upto_seq > write.after_seq:
            click.echo(f"written back to {write.destination}: {write.rows} row(s)")
        else:
            click.echo(f"{write.destination}: up to date (seq {write.upto_seq})")
