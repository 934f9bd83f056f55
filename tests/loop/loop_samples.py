"""Connections, settings and servers of the tests of guest links, webhooks and events."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import sqlalchemy as sa

from connector.events import BackgroundReceiver, ReceiverSettings
from connector.sandbox.config import EventDeliverySettings, SandboxConfig
from connector.sandbox.testing import SandboxHandle, multi_account_config
from connector.settings import SyncSettings, load_settings
from tests.dagster.exports import Export, booking, unit

RECEIVER_SECRET = "receiver-secret-for-tests-0123"
PMS_SYNC = str(Path(sys.executable).parent / "pms-sync")
"""The installed command: tests run it as a cron job or a service manager would."""


def fast_delivery_config() -> SandboxConfig:
    """The tests' accounts, with event deliveries retried after 50 ms (doubling to 0.5 s)
    instead of after a second, for about 22 s in all: a receiver started while a delivery is
    retried may take several seconds to listen on a loaded machine."""
    return multi_account_config().model_copy(
        update={
            "event_delivery": EventDeliverySettings(
                max_attempts=50, backoff_s=0.05, max_backoff_s=0.5, timeout_s=2.0
            )
        }
    )


def settings_for(base_url: str, state: Path, **env: str) -> SyncSettings:
    """The demo account's token and the demo Open API client, a snapshot in ``state``."""
    return load_settings(
        base_url=base_url,
        env={
            "PMS_SYNC_TOKEN": "demo-token",
            "PMS_SYNC_CLIENT_ID": "demo-client",
            "PMS_SYNC_CLIENT_SECRET": "demo-secret",
            "PMS_SYNC_SNAPSHOT": str(state / "snapshot.duckdb"),
            **env,
        },
    )


def arrivals(
    days: list[int], *, nights: dict[int, int] | None = None, today: date | None = None
) -> list[dict]:
    """One booking per entry, checking in that many days from today (``B<index>``), two
    nights long unless ``nights`` says otherwise for that index."""
    today = today or date.today()
    rows = []
    for index, offset in enumerate(days):
        checkin = today + timedelta(days=offset)
        row = booking(index, checkin)
        stay = (nights or {}).get(index, 2)
        row["checkout"] = (checkin + timedelta(days=stay)).isoformat()
        rows.append(row)
    return rows


def post_reservation(
    sandbox: SandboxHandle, reservation_id: str, *, days: int = 1, nights: int = 2, **members: Any
) -> int:
    """Create or update one reservation of ``demo`` through the sync webhook; the status."""
    checkin = date.today() + timedelta(days=days)
    resource = {
        "id": reservation_id,
        "status": "CONFIRMED",
        "createdAt": "2025-01-02T10:00:00Z",
        "primaryGuest": {"firstName": "Anna"},
        "unitReservations": [
            {
                "id": reservation_id,
                "adults": 2,
                "checkin": checkin.isoformat(),
                "checkout": (checkin + timedelta(days=nights)).isoformat(),
                "unitId": "U1",
                "unitName": "U1",
            }
        ],
        **members,
    }
    answer = sandbox.http.post(
        "/api/v1/hooks/reservation/connect",
        json={
            "accountId": "demo",
            "event": "create",
            "entity": "reservation",
            "resource": resource,
        },
        headers={"X-Wishbox-Auth-Token": "demo-token"},
    )
    return answer.status_code


def write_connection(
    folder: Path, bookings: list[dict], extra: str = "", name: str = "hotel"
) -> Path:
    """A connection (one unit, ``name``) whose mapping has ``extra`` appended; its path."""
    export = Export(folder, name)
    export.write([unit(1)], bookings, extra=extra)
    return export.mapping


@contextlib.contextmanager
def running_receiver(
    store: Path, *, secret: str | None = RECEIVER_SECRET, port: int = 0, **options: object
) -> Iterator[BackgroundReceiver]:
    receiver = BackgroundReceiver(
        ReceiverSettings(store_path=store, port=port, secret=secret, **options)  # type: ignore[arg-type]
    )
    receiver.start()
    try:
        yield receiver
    finally:
        receiver.stop()


def table_rows(url: str, table: str, schema: str | None = None) -> list[dict]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as connection:
            found = sa.Table(table, sa.MetaData(), autoload_with=connection, schema=schema)
            return [dict(row._mapping) for row in connection.execute(sa.select(found))]
    finally:
        engine.dispose()


def run_plain(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``pms-sync ARGS`` in a process of its own, ``env`` added to the environment."""
    return subprocess.run(
        [PMS_SYNC, *args], capture_output=True, text=True, env={**os.environ, **env}, timeout=120
    )


def run_command(*args: str, **env: str) -> tuple[int, dict[str, Any], str]:
    """``pms-sync ARGS --json`` in a process of its own: exit code, document, stderr."""
    done = run_plain(*args, "--json", **env)
    return done.returncode, json.loads(done.stdout), done.stderr


def default_stop_signals() -> None:
    """Run in a child before exec: SIGTERM and SIGINT as a service manager leaves them."""
    for number in (signal.SIGTERM, signal.SIGINT):
        signal.signal(number, signal.SIG_DFL)


@contextlib.contextmanager
def receive_command(store: Path, *options: str, secret: str = RECEIVER_SECRET) -> Iterator[str]:
    """``pms-sync receive`` (with ``options``) in a process of its own, on a free port: its
    base URL."""
    process = subprocess.Popen(
        [PMS_SYNC, "receive", "--port", "0", "--events", str(store), *options],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PMS_SYNC_RECEIVER_SECRET": secret},
        # As a service manager starts it (see test_receiver.py): SIGTERM stops it gracefully.
        preexec_fn=default_stop_signals,
    )
    try:
        assert process.stdout is not None
        banner = process.stdout.readline().decode()  # printed once the port is bound
        assert "listening on " in banner, banner
        yield banner.split("listening on ")[1].split("/events")[0]
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(15)
