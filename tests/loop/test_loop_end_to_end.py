"""The loop closed, over real sockets: webhook configurations applied from a file, a sync
whose new reservations the sandbox posts to the receiver (stored once each, redeliveries
included), and the guest links of the upcoming arrivals written to a PostgreSQL table and to
SQLite, then not fetched again; the events the receiver (``pms-sync receive``) stored written
to the PMS's table by ``pms-sync events write``, each once."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import pytest

from connector.events import new_events
from connector.links import run_links
from connector.pipeline import run_sync
from connector.sandbox.events import DELIVERY_ID_HEADER
from connector.sandbox.testing import SandboxHandle
from connector.webhooks import apply_webhooks_file, plan_webhooks_file
from tests.loop.loop_samples import (
    RECEIVER_SECRET,
    arrivals,
    receive_command,
    run_command,
    running_receiver,
    settings_for,
    table_rows,
    write_connection,
)
from tests.servers import postgres_schema

WEBHOOKS = """\
webhooks:
  - name: every-arrival
    event: reservationCreated
    url: {url}
    headers: {{X-Receiver-Secret: "${{HOTEL_RECEIVER_SECRET}}"}}
  - name: long-stays
    event: reservationCreated
    url: {url}
    headers: {{X-Receiver-Secret: "${{HOTEL_RECEIVER_SECRET}}"}}
    dataPoints: [timestamp]
    conditions:
      - {{filterType: nights, op: ">=", value: 4}}
"""

LINKS = """\
links:
  days_ahead: 14
  destination:
    - sql: {{url: "{postgres}", schema: {schema}, table: guest_links}}
    - sql: {{url: "sqlite:///pms.sqlite", table: guest_links}}
"""


@pytest.mark.slow
@pytest.mark.postgres
def test_webhooks_events_and_links_close_the_loop(
    events_sandbox: SandboxHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOTEL_RECEIVER_SECRET", RECEIVER_SECRET)
    settings = settings_for(events_sandbox.base_url, tmp_path)
    # Six arrivals in the next 14 days (B2 and B4 stay 4+ nights, B5 is cancelled), one in
    # 30 days: eight reservations created at the service.
    today = date.today()  # one day for the whole test, even across midnight
    bookings = arrivals([3, 0, 9, 30, 1, 6, 13], nights={2: 5, 4: 4}, today=today)
    bookings[5]["status"] = "CANCELLED"
    with (
        postgres_schema() as (postgres, schema),
        running_receiver(tmp_path / "events.duckdb") as receiver,
    ):
        hooks = tmp_path / "webhooks.yaml"
        hooks.write_text(WEBHOOKS.format(url=f"{receiver.base_url}/events/hotel"))
        planned = plan_webhooks_file(hooks, settings).plan.counts
        applied = apply_webhooks_file(hooks, settings).status
        replanned = plan_webhooks_file(hooks, settings).plan

        mapping = write_connection(
            tmp_path / "hotel", bookings, LINKS.format(postgres=postgres, schema=schema)
        )
        assert run_sync(mapping, settings).status == "succeeded"
        delivered = events_sandbox.wait_for_deliveries()
        events_sandbox.redeliver()
        redelivered = events_sandbox.wait_for_deliveries()

        links = run_links(mapping, settings, today=today)
        in_postgres = table_rows(postgres, "guest_links", schema)
        again = run_links(mapping, settings, today=today)

    assert planned == {"create": 2, "update": 0, "delete": 0, "unchanged": 0}
    assert applied == "ok" and replanned.empty
    assert len(delivered) == 7 + 2 and {d["status"] for d in delivered} == {"delivered"}
    assert len(redelivered) == 2 * len(delivered)

    stored = new_events(tmp_path / "events.duckdb", "hotel").events
    received = sorted(
        (json.loads(resource)["externalId"], "timestamp" in json.loads(resource))
        for resource in stored["resource"]
    )
    assert received == sorted([(f"B{n}", False) for n in range(7)] + [("B2", True), ("B4", True)])
    assert stored["deliveries"].tolist() == [2] * 9
    assert set(stored["event"]) == {"reservationCreated"}

    upcoming = ["B1", "B4", "B0", "B2", "B6"]  # by check-in; B3 is too far, B5 cancelled
    assert links.fetched == upcoming and links.status == "ok"
    in_sqlite = table_rows(f"sqlite:///{tmp_path / 'hotel' / 'pms.sqlite'}", "guest_links")
    by_id = {row["reservation_id"]: row["guest_app"] for row in in_postgres}
    assert sorted(by_id) == sorted(upcoming)
    assert {row["reservation_id"]: row["guest_app"] for row in in_sqlite} == by_id
    assert (len(again.fetched), again.reused, again.requests) == (0, 5, 0)


EVENT_HOOKS = """\
webhooks:
  - name: arrivals
    event: reservationCreated
    url: {url}
    headers: {{X-Receiver-Secret: "${{HOTEL_RECEIVER_SECRET}}"}}
  - name: check-in-opened
    event: guestLinkOpenedCheckIn
    url: {url}
    headers: {{X-Receiver-Secret: "${{HOTEL_RECEIVER_SECRET}}"}}
"""

EVENTS_TO_THE_PMS = """\
events:
  destination: {sql: {url: "sqlite:///pms.sqlite", table: pms_events}}
"""


@pytest.mark.slow
def test_events_of_a_sync_reach_the_pms_table_once_through_the_commands(
    events_sandbox: SandboxHandle, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOTEL_RECEIVER_SECRET", RECEIVER_SECRET)
    settings = settings_for(events_sandbox.base_url, tmp_path)
    store = tmp_path / "events.duckdb"
    # The sandbox names each emission in X-Delivery-Id, kept by its redeliveries.
    with receive_command(store, "--delivery-id-header", DELIVERY_ID_HEADER) as receiver:
        hooks = tmp_path / "webhooks.yaml"
        hooks.write_text(EVENT_HOOKS.format(url=f"{receiver}/events/hotel"))
        assert apply_webhooks_file(hooks, settings).status == "ok"
        mapping = write_connection(tmp_path / "hotel", arrivals([1, 2, 3]), EVENTS_TO_THE_PMS)
        write_events = ("events", "write", str(mapping), "--events", str(store))

        assert run_sync(mapping, settings).status == "succeeded"
        events_sandbox.wait_for_deliveries()
        events_sandbox.redeliver()  # the service delivers each event again
        events_sandbox.wait_for_deliveries()
        for _ in range(2):  # the guest opens the check-in link twice: two emissions
            events_sandbox.emit_event("guestLinkOpenedCheckIn", "demo", "B0")
            log = events_sandbox.wait_for_deliveries()
        first = run_command(*write_events)
        again = run_command(*write_events)
        # A redelivery after the write: the PMS table's row gets its count.
        opened = next(d["id"] for d in log if d["event"] == "guestLinkOpenedCheckIn")
        events_sandbox.redeliver([opened])
        events_sandbox.wait_for_deliveries()
        counted = run_command(*write_events)

    assert len(log) == 3 + 3 + 2 and {d["status"] for d in log} == {"delivered"}
    assert first[0] == 0, first[2]
    assert (first[1]["received"], first[1]["written"], first[1]["redeliveries"]) == (5, 5, 3)
    assert (again[0], again[1]["received"], again[1]["written"]) == (0, 0, 0)
    assert (counted[0], counted[1]["written"], counted[1]["redeliveries"]) == (0, 1, 1)
    rows = table_rows(f"sqlite:///{tmp_path / 'hotel' / 'pms.sqlite'}", "pms_events")
    in_table = sorted(
        (row["event"], json.loads(row["resource"])["externalId"], row["deliveries"]) for row in rows
    )
    # Each event once, its redelivery counted; the second emission of guestLinkOpenedCheckIn
    # (the same body, another emission) is an event of its own.
    assert in_table == [
        ("guestLinkOpenedCheckIn", "B0", 1),
        ("guestLinkOpenedCheckIn", "B0", 2),
        ("reservationCreated", "B0", 2),
        ("reservationCreated", "B1", 2),
        ("reservationCreated", "B2", 2),
    ]
    assert len({row["event_key"] for row in rows}) == len(rows)
