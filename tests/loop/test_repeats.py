"""Repeats told from redeliveries, over real sockets: the sandbox names each emission in
``X-Delivery-Id`` and keeps it on redeliveries. A receiver told that header stores three
emissions of one event as three events and a redelivery as a delivery of its own; without it,
one body is one event (the documented default, docs/loop.md)."""

from __future__ import annotations

from pathlib import Path

from connector.events import new_events
from connector.sandbox.events import DELIVERY_ID_HEADER
from connector.sandbox.testing import SandboxHandle
from tests.loop.loop_samples import post_reservation, running_receiver
from tests.loop.test_sandbox_events import configure, hook

EVENT = "guestLinkOpenedCheckIn"


def _emit_three_times_and_redeliver_the_first(
    sandbox: SandboxHandle, tmp_path: Path, **receiver: object
) -> tuple[list[dict], list[dict]]:
    """The events stored, and the sandbox's delivery log of the event."""
    with running_receiver(tmp_path / "events.duckdb", **receiver) as running:
        configure(
            sandbox, tmp_path, hook("opened", f"{running.base_url}/events/hotel", event=EVENT)
        )
        post_reservation(sandbox, "B0")
        emitted = [sandbox.emit_event(EVENT, "demo", "B0") for _ in range(3)]
        sandbox.wait_for_deliveries()
        (first,) = emitted[0]["deliveries"]
        sandbox.redeliver([first])
        log = sandbox.wait_for_deliveries()
    stored = new_events(tmp_path / "events.duckdb", "hotel").events
    log = [delivery for delivery in log if delivery["event"] == EVENT]
    assert [delivery["status"] for delivery in log] == ["delivered"] * 4
    return stored[stored["event"] == EVENT].to_dict("records"), log


def test_with_the_delivery_id_header_three_emissions_are_three_events(
    events_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    stored, _ = _emit_three_times_and_redeliver_the_first(
        events_sandbox, tmp_path, delivery_id_header=DELIVERY_ID_HEADER
    )

    assert len(stored) == 3
    assert len({row["resource"] for row in stored}) == 1  # the same body each time
    # The redelivery of the first emission is counted on its own event, not stored again.
    assert sorted(int(row["deliveries"]) for row in stored) == [1, 1, 2]


def test_without_it_one_body_is_one_event_counted_per_delivery(
    events_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    stored, log = _emit_three_times_and_redeliver_the_first(events_sandbox, tmp_path)

    assert len(stored) == 1
    assert int(stored[0]["deliveries"]) == 4

    # The sandbox names three emissions and the redelivery keeps the first one's name.
    first, second, third, again = log
    assert len({first["emissionId"], second["emissionId"], third["emissionId"]}) == 3
    assert again["redeliveryOf"] == first["id"]
    assert again["emissionId"] == first["emissionId"]
