"""The sandbox sends outgoing events: ``reservationCreated`` when the sync webhook creates a
reservation, any event of spec §6.2 through the admin API, to every enabled configuration
whose event and conditions match, with its headers, in the background, retried while the
receiver fails."""

from __future__ import annotations

import json
import socket
import time
from pathlib import Path

import pytest

from connector.contract import OutgoingEventName
from connector.events import new_events
from connector.pipeline import run_sync
from connector.sandbox.testing import SandboxHandle
from connector.webhooks import apply_webhooks_file
from tests.loop.loop_samples import (
    RECEIVER_SECRET,
    arrivals,
    post_reservation,
    running_receiver,
    settings_for,
    write_connection,
)


def configure(sandbox: SandboxHandle, tmp_path: Path, *hooks: str) -> None:
    path = tmp_path / "webhooks.yaml"
    path.write_text("webhooks:\n" + "".join(hooks))
    report = apply_webhooks_file(path, settings_for(sandbox.base_url, tmp_path))
    assert report.status == "ok"


def hook(
    name: str,
    url: str,
    *,
    event: str = "reservationCreated",
    secret: str = RECEIVER_SECRET,
    extra: str = "",
) -> str:
    return (
        f"  - name: {name}\n    event: {event}\n    url: {url}\n"
        f"    headers: {{X-Receiver-Secret: {secret}}}\n{extra}"
    )


def sync(sandbox: SandboxHandle, tmp_path: Path, bookings: list[dict]) -> None:
    mapping = write_connection(tmp_path / "hotel", bookings)
    assert run_sync(mapping, settings_for(sandbox.base_url, tmp_path)).status == "succeeded"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_created_reservations_reach_each_matching_configuration_with_their_links(
    events_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    with running_receiver(tmp_path / "events.duckdb") as receiver:
        url = f"{receiver.base_url}/events/hotel"
        configure(
            events_sandbox,
            tmp_path,
            hook("all", url),
            hook(
                "long-stays",
                url,
                extra="    conditions: [{filterType: 6, op: '>=', value: 4}]\n"
                "    dataPoints: [timestamp]\n",
            ),
        )
        sync(events_sandbox, tmp_path, arrivals([1, 2, 3], nights={1: 5}))
        log = events_sandbox.wait_for_deliveries()

    assert sorted((d["webhookName"], d["reservationId"]) for d in log) == [
        ("all", "B0"),
        ("all", "B1"),
        ("all", "B2"),
        ("long-stays", "B1"),
    ]
    assert {d["status"] for d in log} == {"delivered"}
    stored = new_events(tmp_path / "events.duckdb", "hotel").events
    assert len(stored) == 4 and set(stored["event"]) == {"reservationCreated"}
    resource = json.loads(stored.loc[stored["resource"].str.contains('"B1"')].iloc[0]["resource"])
    links = events_sandbox.http.get(
        "/openapi/v1/reservations/links",
        params={"externalId": "B1"},
        headers={"Authorization": f"Bearer {_token(events_sandbox)}"},
    ).json()
    assert resource["externalId"] == "B1"
    assert resource["guestAppLink"] == links["guestApp"]
    assert resource["preCheckInLink"] == links["onlineCheckInLink"]
    assert resource["preCheckOutLink"].endswith(links["guestApp"].rsplit("/", 1)[1])


def test_an_update_of_a_known_reservation_emits_nothing(
    events_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    with running_receiver(tmp_path / "events.duckdb") as receiver:
        configure(events_sandbox, tmp_path, hook("all", f"{receiver.base_url}/events/hotel"))
        post_reservation(events_sandbox, "B0")
        events_sandbox.wait_for_deliveries()
        post_reservation(events_sandbox, "B0", agent="Travel Co")
        log = events_sandbox.wait_for_deliveries()

    assert [d["reservationId"] for d in log] == ["B0"]
    assert [r["writes"] for r in events_sandbox.records("demo", "reservation")] == [2]


def test_a_disabled_configuration_or_another_event_receives_nothing(
    events_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    url = "http://127.0.0.1:9/events/hotel"
    configure(
        events_sandbox,
        tmp_path,
        hook("off", url, extra="    isEnabled: false\n"),
        hook("orders", url, event="orderDenied"),
    )
    post_reservation(events_sandbox, "B0")

    emitted = events_sandbox.emit_event("reservationCreated", "demo", "B0")

    assert emitted["deliveries"] == []
    assert sorted(s["reason"] for s in emitted["skipped"]) == [
        "configured for orderDenied",
        "disabled",
    ]


def failed_attempt(sandbox: SandboxHandle, timeout_s: float = 10.0) -> list[dict]:
    """The delivery log once the first delivery has had an attempt that failed."""
    deadline = time.monotonic() + timeout_s
    while True:
        log = sandbox.deliveries()
        if (log and log[0]["lastError"] is not None) or time.monotonic() >= deadline:
            return log
        time.sleep(0.02)


def test_a_receiver_that_is_down_gets_the_event_once_it_is_back(
    events_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    port = free_port()
    configure(events_sandbox, tmp_path, hook("all", f"http://127.0.0.1:{port}/events/hotel"))
    post_reservation(events_sandbox, "B0")
    # The receiver starts only after an attempt has failed: started while the first attempt is
    # still connecting, it would receive that attempt and nothing would have been retried.
    first = failed_attempt(events_sandbox)

    with running_receiver(tmp_path / "events.duckdb", port=port):
        log = events_sandbox.wait_for_deliveries()

    assert first[0]["status"] == "pending" and first[0]["lastError"] is not None
    assert log[0]["status"] == "delivered" and log[0]["attempts"] > 1
    assert len(new_events(tmp_path / "events.duckdb", "hotel").events) == 1


def test_a_delivery_the_receiver_refuses_is_not_retried(
    events_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    with running_receiver(tmp_path / "events.duckdb") as receiver:
        configure(
            events_sandbox,
            tmp_path,
            hook("wrong", f"{receiver.base_url}/events/hotel", secret="not-the-receiver-secret"),
        )
        post_reservation(events_sandbox, "B0")
        log = events_sandbox.wait_for_deliveries()

    assert [(d["status"], d["attempts"], d["lastStatus"]) for d in log] == [("failed", 1, 401)]
    assert log[0]["headerNames"] == ["X-Receiver-Secret"]
    assert "not-the-receiver-secret" not in json.dumps(log)


def test_the_sync_webhook_answers_while_the_receiver_still_hangs(
    events_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    with socket.socket() as silent:  # accepts connections, never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        port = silent.getsockname()[1]
        configure(events_sandbox, tmp_path, hook("all", f"http://127.0.0.1:{port}/events/hotel"))

        assert post_reservation(events_sandbox, "B0") == 200

        assert [d["status"] for d in events_sandbox.deliveries()] == ["pending"]
    events_sandbox.reset()  # drop the hung delivery


@pytest.mark.parametrize("event", list(OutgoingEventName))
def test_the_admin_api_emits_every_event_of_the_spec(
    events_sandbox: SandboxHandle, tmp_path: Path, event: OutgoingEventName
) -> None:
    with running_receiver(tmp_path / "events.duckdb") as receiver:
        configure(
            events_sandbox, tmp_path, hook("one", f"{receiver.base_url}/events/hotel", event=event)
        )
        post_reservation(events_sandbox, "B0")
        events_sandbox.wait_for_deliveries()

        emitted = events_sandbox.emit_event(event.value, "demo", "B0", note="from a test")
        events_sandbox.wait_for_deliveries()

    stored = new_events(tmp_path / "events.duckdb", "hotel").events
    assert len(emitted["deliveries"]) == 1
    mine = stored[stored["resource"].str.contains("from a test")]
    assert mine["event"].tolist() == [event.value]
    resource = json.loads(mine.iloc[0]["resource"])
    assert resource["externalId"] == "B0"
    if event.value.startswith("guestLinkOpened"):
        assert resource["link"].startswith("https://guest.sandbox.invalid/demo/")


def test_the_admin_api_refuses_an_unknown_event_or_reservation(
    events_sandbox: SandboxHandle,
) -> None:
    renamed = events_sandbox.http.post(
        "/_sandbox/events",
        json={"event": "guestLinkOpened", "accountId": "demo", "reservationId": "B0"},
    )
    missing = events_sandbox.http.post(
        "/_sandbox/events",
        json={"event": "orderDenied", "accountId": "demo", "reservationId": "nope"},
    )

    assert renamed.status_code == 400 and "guestLinkOpenedGuestApp" in renamed.text
    assert missing.status_code == 404


def _token(sandbox: SandboxHandle) -> str:
    return sandbox.http.post(
        "/openapi/v1/oauth2/token",
        data={
            "grant_type": "client_credentials",
            "client_id": "demo-client",
            "client_secret": "demo-secret",
        },
    ).json()["access_token"]
