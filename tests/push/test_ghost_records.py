"""No ghosts: a record whose answer was lost is reconciled like an acknowledged one when it
leaves the export. Syncs against the sandbox over real sockets, on both snapshot backends."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from push_samples import FAST_RETRY, batches_of, hotel, reservation, settings_for, unit

from connector.client import RunStop
from connector.contract import Entity
from connector.pipeline import sync_batches
from connector.plan import ReconcilePolicy
from connector.sandbox.faults import Misbehaviour
from connector.sandbox.testing import SandboxHandle
from connector.snapshot import OnMissing, Snapshot

EVERY_ATTEMPT = FAST_RETRY.max_attempts
EXAMPLE = Path(__file__).resolve().parents[2] / "mappings" / "hotel"
PMS_SYNC = Path(sys.executable).with_name("pms-sync")  # the installed console script
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
    # Stored by the service, every answer lost (the issue's `--drop-rate 1`): both stay
    # possibly stored.
    service.set_faults(drop_rate=1)
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


def wait_for_in_flight(service: SandboxHandle, predicate: object, timeout_s: float = 30) -> None:
    """Until the sandbox's count of requests being answered satisfies ``predicate``."""
    assert callable(predicate)
    deadline = time.monotonic() + timeout_s
    while not predicate(service.stats()["in_flight"]):
        assert time.monotonic() < deadline, "the sandbox's in-flight count never got there"
        time.sleep(0.02)


def test_a_unit_whose_request_a_stop_cancelled_is_retired_when_it_leaves(
    service: SandboxHandle, snapshot_file: Path
) -> None:
    """A forced stop (a second SIGTERM) while the unit's request is at the service cancels it:
    it is possibly stored with what reconciliation needs, so it is deactivated once it leaves."""
    source = hotel(units=25, reservations=30)
    settings = settings_for(service.base_url, snapshot_file)
    sync_batches(batches_of(source), settings, policy=CANCEL_FUTURE)
    source[Entity.ACCOMMODATION].append(("demo", unit("U-cut")))
    service.set_faults(latency_ms=3000)
    stop = RunStop(None)

    def stop_once_the_request_is_at_the_service() -> None:
        wait_for_in_flight(service, lambda n: n >= 1)
        stop.request("SIGTERM")
        stop.request("SIGTERM", force=True)

    stopper = threading.Thread(target=stop_once_the_request_is_at_the_service)
    stopper.start()
    cut = sync_batches(batches_of(source), settings, policy=CANCEL_FUTURE, stop=stop)
    stopper.join()
    # The service still finishes the delayed request; the retirement must come after it.
    wait_for_in_flight(service, lambda n: n == 0)
    service.set_faults()
    source[Entity.ACCOMMODATION].pop()

    gone = sync_batches(batches_of(source), settings, policy=CANCEL_FUTURE)

    assert (cut.status, cut.outcomes["pending"]) == ("stopped", 1)
    reasons = set(zip(gone.plan.changes["record_id"], gone.plan.changes["reason"], strict=True))
    assert reasons == {("U-cut", "possibly_stored_gone")}
    assert held_status(service, Entity.ACCOMMODATION, "U-cut") == "INACTIVE"
    assert gone.status == "succeeded"


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


def _sync(mapping: Path, env: dict[str, str]) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [str(PMS_SYNC), "sync", str(mapping), "--json"],
        env={**os.environ, **env},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


@pytest.mark.slow
def test_a_sync_killed_with_answers_in_flight_is_followed_by_a_run_without_disagreements(
    service: SandboxHandle, tmp_path: Path
) -> None:
    mapping = shutil.copytree(EXAMPLE, tmp_path / "hotel") / "mapping.yaml"
    tokens = tmp_path / "tokens.json"
    tokens.write_text(json.dumps({"demo": "demo-token", "hotel-a": "hotel-a-token"}))
    env = {
        "PMS_SYNC_BASE_URL": service.base_url,
        "PMS_SYNC_TOKENS_FILE": str(tokens),
        "PMS_SYNC_CONCURRENCY": "4",
        "HOTEL_BER_ACCOUNT": "demo",
        "HOTEL_MUC_ACCOUNT": "hotel-a",
    }
    # The kill must land after the service stored a record and before the killed run
    # committed its answer (answers are committed every 0.25 s): tried again on a fresh
    # snapshot and service in the rare case it did not.
    for attempt in range(5):
        service.reset()
        service.set_faults(latency_ms=60)
        env["PMS_SYNC_SNAPSHOT"] = str(tmp_path / f"snapshot-{attempt}.duckdb")
        victim = _sync(mapping, env)
        deadline = time.monotonic() + 60
        while service.count() < 30 and time.monotonic() < deadline and victim.poll() is None:
            time.sleep(0.005)
        os.kill(victim.pid, signal.SIGKILL)
        victim.communicate(timeout=10)
        assert victim.returncode == -signal.SIGKILL, "the sync must still have been running"
        stored_before_kill = service.count()
        service.set_faults()
        clean = _sync(mapping, env)
        out, err = clean.communicate(timeout=120)
        report = json.loads(out)
        acknowledged_before_kill = service.count() - report["counts"]["create"]
        if acknowledged_before_kill < stored_before_kill:
            break
    else:
        pytest.fail("no kill landed between a stored record and its committed answer")

    assert clean.returncode == 0, err.decode()
    assert (report["status"], report["disagreements"]) == ("succeeded", [])
    assert report["resent_after_lost_answer"] == stored_before_kill - acknowledged_before_kill
    with Snapshot.open(env["PMS_SYNC_SNAPSHOT"]) as snapshot:
        assert snapshot.possibly_stored() == {}
