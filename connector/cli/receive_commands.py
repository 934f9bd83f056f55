"""``pms-sync receive``: serve the receiver of the service's outgoing events (docs/loop.md).

The service POSTs each event to ``http://HOST:PORT/events/<connection>`` (the URL a webhooks
file gives); the receiver checks the secret header, stores the event once in its DuckDB file
and answers at once. Runs until interrupted.

Exit codes: 1 it could not start (the port is taken, a non-loopback address without a
secret, a setting is invalid). Ctrl-C or SIGTERM shut it down gracefully (the batch being
written is committed and answered); the process then ends with the signal's own status, as
uvicorn re-raises it.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from connector.cli.setting_options import setting_option
from connector.config import ReceiverSection, RunSection
from connector.errors import PmsSyncError
from connector.events import receiver_settings, serve_forever
from connector.secrets import mask_text
from connector.snapshot import snapshot_location

SECRET_VARIABLE = ReceiverSection.variable("secret")


def register(group: click.Group) -> None:
    """Add this module's commands to the top-level group."""
    group.add_command(receive_command)


@click.command("receive")
@setting_option(
    ReceiverSection,
    "host",
    metavar="ADDRESS",
    help=f"Address to listen on; any other than loopback needs {SECRET_VARIABLE}.",
)
@setting_option(ReceiverSection, "port", metavar="PORT", help="Port; 0: any free port.")
@setting_option(
    ReceiverSection,
    "header",
    metavar="NAME",
    help=f"Header carrying the secret (its value: env {SECRET_VARIABLE}, never an option).",
)
@setting_option(
    ReceiverSection,
    "delivery_id_header",
    metavar="NAME",
    help="Header in which the service names an event's emission (the same on redeliveries): "
    "repeats of one event are then stored apart. Without it, one body is one event.",
)
@setting_option(ReceiverSection, "max_body", metavar="BYTES", help="Largest body accepted.")
@setting_option(ReceiverSection, "events", "--events", "store", help="Events store (DuckDB).")
@setting_option(
    ReceiverSection,
    "allowed_hosts",
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME[:PORT]",
    help="A Host name answered besides its own address and loopback (a reverse proxy's or a "
    "DNS name; any port unless given); repeatable, the variable a comma list.",
)
@setting_option(
    RunSection,
    "snapshot",
    metavar="FILE|URL",
    help="Snapshot file, whose folder holds the events store by default.",
)
def receive_command(
    host: str | None,
    port: int | None,
    secret_header: str | None,
    delivery_id_header: str | None,
    max_body: int | None,
    store: str | None,
    allowed_hosts: tuple[str, ...],
    snapshot: str | None,
) -> None:
    """Receive the service's outgoing events and store each one once."""
    try:
        snapshot_path = snapshot_location(RunSection.read(given={"snapshot": snapshot}).snapshot)
        settings = receiver_settings(
            snapshot_path=snapshot_path,
            host=host,
            port=port,
            secret_header=secret_header,
            max_body_bytes=max_body,
            store=Path(store) if store is not None else None,
            allowed_hosts=allowed_hosts,
            delivery_id_header=delivery_id_header,
        )
        serve_forever(settings)
    except PmsSyncError as error:
        click.secho(f"error: {mask_text(str(error))}", fg="red", err=True)
        sys.exit(1)
