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

from connector.errors import PmsSyncError
from connector.events import DEFAULT_PORT, DEFAULT_SECRET_HEADER, receiver_settings, serve_forever
from connector.secrets import mask_text
from connector.settings import DEFAULT_SNAPSHOT
from connector.snapshot import snapshot_location


def register(group: click.Group) -> None:
    """Add this module's commands to the top-level group."""
    group.add_command(receive_command)


@click.command("receive")
@click.option(
    "--host",
    metavar="ADDRESS",
    help="Address to listen on [env PMS_SYNC_RECEIVER_HOST; default 127.0.0.1]; any other "
    "than loopback needs PMS_SYNC_RECEIVER_SECRET.",
)
@click.option(
    "--port",
    type=click.IntRange(min=0, max=65535),
    help=f"Port; 0: any free port [env PMS_SYNC_RECEIVER_PORT; default {DEFAULT_PORT}].",
)
@click.option(
    "--secret-header",
    metavar="NAME",
    help="Header carrying the secret (its value: env PMS_SYNC_RECEIVER_SECRET, never an "
    f"option) [env PMS_SYNC_RECEIVER_HEADER; default {DEFAULT_SECRET_HEADER}].",
)
@click.option(
    "--max-body",
    type=click.IntRange(min=1024),
    metavar="BYTES",
    help="Largest body accepted [env PMS_SYNC_RECEIVER_MAX_BODY; default 65536].",
)
@click.option(
    "--events",
    "store",
    type=click.Path(dir_okay=False, path_type=Path),
    help="Events store (DuckDB) [env PMS_SYNC_EVENTS; default events.duckdb beside the snapshot].",
)
@click.option(
    "--allowed-host",
    "allowed_hosts",
    multiple=True,
    metavar="NAME[:PORT]",
    help="A Host name answered besides its own address and loopback (a reverse proxy's or a "
    "DNS name; any port unless given); repeatable [env PMS_SYNC_RECEIVER_ALLOWED_HOSTS].",
)
@click.option(
    "--snapshot",
    metavar="FILE|URL",
    help="Snapshot file, whose folder holds the events store by default [env PMS_SYNC_SNAPSHOT].",
)
def receive_command(
    host: str | None,
    port: int | None,
    secret_header: str | None,
    max_body: int | None,
    store: Path | None,
    allowed_hosts: tuple[str, ...],
    snapshot: str | None,
) -> None:
    """Receive the service's outgoing events and store each one once."""
    import os

    snapshot_path = snapshot_location(
        snapshot or os.environ.get("PMS_SYNC_SNAPSHOT") or DEFAULT_SNAPSHOT
    )
    try:
        settings = receiver_settings(
            snapshot_path=snapshot_path,
            host=host,
            port=port,
            secret_header=secret_header,
            max_body_bytes=max_body,
            store=store,
            allowed_hosts=allowed_hosts,
        )
        serve_forever(settings)
    except PmsSyncError as error:
        click.secho(f"error: {mask_text(str(error))}", fg="red", err=True)
        sys.exit(1)
