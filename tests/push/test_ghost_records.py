"""No ghosts: a record whose answer was lost is reconciled like an acknowledged one when it
leaves the export. Syncs against the sandbox over real sockets, on both snapshot backends."""

from __future__ import annotations

from pathlib import Path

from push_samples import FAST_RETRY, batches_of, hotel, reservation, settings_for, unit

from connector.contract import Entity
from connector.pipeline import sync_batches
from connector.plan import ReconcilePolicy
from connector.sandbox.faults import Misbehaviour
from connector.sandbox.testing import SandboxHandle
from connector.snapshot import OnMissing

EVERY_ATTEMPT = FAST_RETRY.max_attempts
CANCEL_FUTURE = ReconcilePolicy(
    on_missing={
        Entity.ACCOMMODATION: OnMissing.DEACTIVATE,
        Entity.RESERVATION: OnMissing.CANCEL_FUTURE,
    }
)


def held_status(service: SandboxHandle, entity: Entity, record_id: str) -> str:
    [record] = [r for r in service.records(entity=str(entity)) if r["id"] == record_id]
    return str(record["resource"]["status"])


def test_a_unit_and_a_future_stay_whose_answers_were_lost_are_retired_when_they_leave(
    service: SandboxHandle, snapshot_file: Path
) -> None:
    source = hotel(units=25, reservations=30)
    settings = settings_for(service.base_url, snapshot_file)
    assert sync_batches(batches_of(source), settings, policy=CANCEL_FUTURE).status == "succeeded"
    source[Entity.ACCOMMODATION].append(("demo", unit("U-lost")))
    source[Entity.RESERVATION].append(("demo", reservation("R-lost", "U0", 10)))
    # Stored by the service, every answer lost: both stay possibly stored.
    service.set_faults(
        misbehave_next=2 * EVERY_ATTEMPT, misbehaviour=Misbehaviour.RESET_AFTER_HEADERS
    )
    lost = sync_batches(batches_of(source), settings, policy=CANCEL_FUTURE)
    service.set_faults()
    source[Entity.ACCOMMODATION].pop()
    source[Entity.RESERVATION].pop()

    gone = sync_batches(batches_of(source), settings, policy=CANCEL_FUTURE)
    after = sync_batches(batches_of(source), settings, policy=CANCEL_FUTURE)

    assert lost.outcomes["pending"] == 2
    assert held_status(service, Entity.ACCOMMODATION, "U-lost") == "INACTIVE"
    assert held_status(service, Entity.RESERVATION, "R-lost") == "CANCELLED"
    reasons = set(zip(gone.plan.changes["record_id"], gone.plan.changes["reason"], strict=True))
    assert reasons == {("U-lost", "possibly_stored_gone"), ("R-lost", "possibly_stored_gone")}
    assert gone.outcomes["acknowledged"] == 2
    assert (gone.status, after.status, after.requests) == ("succeeded", "succeeded", 0)
    assert gone.push.disagreements == []


def test_a_lost_retirement_of_a_never_acknowledged_record_is_sent_again(
    service: SandboxHandle, snapshot_file: Path
) -> None:
    source = hotel(units=25, reservations=30)
    settings = settings_for(service.base_url, snapshot_file)
    sync_batches(batches_of(source), settings)
    source[Entity.ACCOMMODATION].append(("demo", unit("U-lost")))
    service.set_faults(misbehave_next=EVERY_ATTEMPT, misbehaviour=Misbehaviour.RESET_AFTER_HEADERS)
    sync_batches(batches_of(source), settings)
    source[Entity.ACCOMMODATION].pop()
    service.set_faults(misbehave_next=EVERY_ATTEMPT, misbehaviour=Misbehaviour.RESET_AFTER_HEADERS)
    lost_retirement = sync_batches(batches_of(source), settings)
    service.set_faults()

    resent = sync_batches(batches_of(source), settings)
    after = sync_batches(batches_of(source), settings)

    assert lost_retirement.outcomes["pending"] == 1
    assert resent.plan.counts["deactivate"] == 1
    assert resent.outcomes["acknowledged"] == 1
    assert held_status(service, Entity.ACCOMMODATION, "U-lost") == "INACTIVE"
    assert (after.status, after.requests) == ("succeeded", 0)


def test_a_stay_whose_answer_was_lost_protects_its_unit(
    service: SandboxHandle, snapshot_file: Path
) -> None:
    source = hotel(units=25, reservations=30)
    settings = settings_for(service.base_url, snapshot_file)
    sync_batches(batches_of(source), settings)
    source[Entity.RESERVATION].append(("demo", reservation("R-lost", "U12", 3)))
    service.set_faults(misbehave_next=EVERY_ATTEMPT, misbehaviour=Misbehaviour.RESET_AFTER_HEADERS)
    sync_batches(batches_of(source), settings)
    service.set_faults()
    # U12 (its own stays are past) leaves; R-lost (reservations: ignored) stays booked.
    source[Entity.ACCOMMODATION] = [u for u in source[Entity.ACCOMMODATION] if u[1]["id"] != "U12"]
    source[Entity.RESERVATION].pop()

    report = sync_batches(batches_of(source), settings)

    assert held_status(service, Entity.ACCOMMODATION, "U12") == "ACTIVE"
    [held] = report.plan.units_with_stays_json()
    assert (held["unit_id"], held["stays"]) == ("U12", 1)
    assert report.plan.counts.get("deactivate", 0) == 0
