"""Parent-failure holdback: a reservation is never sent to fail because its unit is missing."""

from __future__ import annotations

from pathlib import Path

from push_samples import batches_of, reservation, settings_for, unit, with_unchecked_record

from connector.contract import Entity
from connector.pipeline import sync_batches
from connector.sandbox.testing import SandboxHandle
from connector.snapshot import Snapshot


def requests_for(service: SandboxHandle, entity: str) -> int:
    return sum(
        sum(by_status.values())
        for endpoint, by_status in service.stats()["requests"].items()
        if "/api/v1/hooks/" in endpoint and entity in endpoint
    )


def test_a_reservation_whose_unit_got_a_400_is_held_and_delivered_with_one_request_once_fixed(
    service: SandboxHandle, snapshot_file: Path
) -> None:
    settings = settings_for(service.base_url, snapshot_file)
    source = {
        Entity.ACCOMMODATION: [("demo", unit("U1"))],
        Entity.RESERVATION: [
            ("demo", reservation("R1", "U1", 5)),
            ("demo", reservation("R2", "U2", 6)),
        ],
    }
    broken_unit = unit("U2", country="Germany")  # the service refuses it: 400
    batches = batches_of(source)
    batches[Entity.ACCOMMODATION] = with_unchecked_record(
        batches[Entity.ACCOMMODATION], "demo", broken_unit
    )

    first = sync_batches(batches, settings)
    second = sync_batches(batches, settings)  # the unit is still refused: still held

    assert first.outcomes == {"acknowledged": 2, "dead_lettered": 1, "failed": 0, "pending": 0}
    (held,) = first.push.held_back
    assert (held.record_id, held.unit_ids) == ("R2", ("U2",))
    assert "unit U2 was dead_lettered in this run (HTTP 400)" in held.reason
    assert first.held == 1 and first.status == "incomplete"
    assert [h.record_id for h in second.push.held_back] == ["R2"]
    assert "refused in an earlier run (HTTP 400" in second.push.held_back[0].reason
    assert second.requests == 0
    assert {r["id"] for r in service.records("demo", "reservation")} == {"R1"}
    with Snapshot.open(snapshot_file) as snapshot:
        assert snapshot.dead_letters()["record_id"].tolist() == ["U2"]  # R2 is not a dead letter
        held_counts = snapshot.run_counts(first.run_id).set_index("entity")
    assert held_counts.loc["reservation", "held"] == 1
    reservation_requests = requests_for(service, "reservation")

    source[Entity.ACCOMMODATION].append(("demo", unit("U2")))  # fixed in the PMS
    fixed = sync_batches(batches_of(source), settings)

    assert fixed.push.held_back == [] and fixed.status == "succeeded"
    assert requests_for(service, "reservation") - reservation_requests == 1
    stored = {r["id"]: r for r in service.records("demo", "reservation")}
    assert stored["R2"]["writes"] == 1
    assert fixed.counts["create"] == 2  # the unit and its reservation


def test_a_reservation_whose_unit_is_acknowledged_goes_even_when_another_unit_failed(
    service: SandboxHandle, snapshot_file: Path
) -> None:
    source = {
        Entity.ACCOMMODATION: [("demo", unit("U1"))],
        Entity.RESERVATION: [("demo", reservation("R1", "U1", 5))],
    }
    batches = batches_of(source)
    batches[Entity.ACCOMMODATION] = with_unchecked_record(
        batches[Entity.ACCOMMODATION], "demo", unit("U9", country="Nowhere")
    )

    report = sync_batches(batches, settings_for(service.base_url, snapshot_file))

    assert report.push.held_back == []
    assert {r["id"] for r in service.records("demo", "reservation")} == {"R1"}


def test_the_plan_lists_a_reservation_waiting_for_a_unit_refused_before(
    service: SandboxHandle, snapshot_file: Path
) -> None:
    settings = settings_for(service.base_url, snapshot_file)
    source = {
        Entity.ACCOMMODATION: [("demo", unit("U1"))],
        Entity.RESERVATION: [("demo", reservation("R2", "U2", 6))],
    }
    batches = batches_of(source)
    batches[Entity.ACCOMMODATION] = with_unchecked_record(
        batches[Entity.ACCOMMODATION], "demo", unit("U2", country="Germany")
    )

    first = sync_batches(batches, settings)  # U2 refused in this run: the push holds R2
    second = sync_batches(batches, settings)  # refused before: the plan says R2 waits

    assert first.plan.waiting_for_units == ()
    [waiting] = second.plan.waiting_for_units
    assert (waiting.record_id, waiting.unit_ids) == ("R2", ("U2",))
    assert "refused in an earlier run (HTTP 400" in waiting.reason
    assert [h.record_id for h in second.push.held_back] == ["R2"]
    listed = second.plan.to_json_dict()["waiting_for_units"]
    assert [(w["record_id"], w["unit_ids"]) for w in listed] == [("R2", ["U2"])]
