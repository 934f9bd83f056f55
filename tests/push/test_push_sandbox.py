"""Syncs against the sandbox over real sockets: what the service ends up holding, and at what cost."""

from __future__ import annotations

from pathlib import Path

from push_samples import (
    batches_of,
    expected_state,
    hotel,
    reservation,
    sandbox_state,
    settings_for,
    with_unchecked_record,
)

from connector.client import RetryPolicy
from connector.contract import Entity
from connector.pipeline import sync_batches
from connector.sandbox.testing import SandboxHandle
from connector.snapshot import Snapshot


def sync_requests(service: SandboxHandle) -> int:
    return sum(
        sum(by_status.values())
        for endpoint, by_status in service.stats()["requests"].items()
        if "/api/v1/hooks/" in endpoint
    )


def test_first_run_creates_everything_and_an_immediate_second_run_sends_nothing(
    service: SandboxHandle, snapshot_file: Path
) -> None:
    source = hotel(units=4, reservations=12)
    settings = settings_for(service.base_url, snapshot_file)

    first = sync_batches(batches_of(source), settings)
    second = sync_batches(batches_of(source), settings)

    assert first.counts["create"] == 16
    assert first.outcomes == {"acknowledged": 16, "dead_lettered": 0, "failed": 0, "pending": 0}
    assert first.requests == 16
    assert sandbox_state(service.records()) == expected_state(source)
    assert second.requests == 0
    assert second.counts["skip"] == 16
    assert sync_requests(service) == 16


def test_units_reach_the_service_before_the_reservations_that_reference_them(
    service: SandboxHandle, snapshot_file: Path
) -> None:
    sync_batches(
        batches_of(hotel(units=3, reservations=10)), settings_for(service.base_url, snapshot_file)
    )

    records = service.records()
    last_unit = max(r["firstSeq"] for r in records if r["entity"] == "accommodation")
    first_reservation = min(r["firstSeq"] for r in records if r["entity"] == "reservation")
    assert last_unit < first_reservation


def test_changing_one_field_of_one_reservation_sends_exactly_one_update(
    service: SandboxHandle, snapshot_file: Path
) -> None:
    source = hotel(units=2, reservations=8)
    settings = settings_for(service.base_url, snapshot_file)
    sync_batches(batches_of(source), settings)
    account, changed = source[Entity.RESERVATION][3]
    source[Entity.RESERVATION][3] = (account, {**changed, "channelName": "Airbnb"})
    before = sync_requests(service)

    report = sync_batches(batches_of(source), settings)

    assert report.counts == {"create": 0, "update": 1, "skip": 9, "deactivate": 0, "cancel": 0}
    assert sync_requests(service) - before == 1
    stored = {r["id"]: r for r in service.records(entity="reservation")}
    assert stored[changed["id"]]["resource"]["channelName"] == "Airbnb"
    assert stored[changed["id"]]["lastEvent"] == "update"
    assert stored[changed["id"]]["writes"] == 2


def test_removing_a_unit_from_a_full_export_sends_one_deactivation(
    service: SandboxHandle, snapshot_file: Path
) -> None:
    source = hotel(units=3, reservations=0)
    settings = settings_for(service.base_url, snapshot_file)
    sync_batches(batches_of(source), settings)
    gone = source[Entity.ACCOMMODATION].pop()

    # One of three units is a mass change for the guard (docs/safety-rails.md): approved here.
    report = sync_batches(
        batches_of(source), settings, allow_mass_change=True, release_units_with_stays=True
    )
    again = sync_batches(batches_of(source), settings)

    assert report.counts["deactivate"] == 1
    assert report.requests == 1
    stored = {r["id"]: r for r in service.records(entity="accommodation")}
    assert stored[gone[1]["id"]]["resource"]["status"] == "INACTIVE"
    assert stored[gone[1]["id"]]["lastEvent"] == "update"
    assert {r["resource"]["status"] for i, r in stored.items() if i != gone[1]["id"]} == {"ACTIVE"}
    assert again.requests == 0


def test_with_30_percent_500s_and_429s_repeated_runs_converge_without_duplicates_or_losses(
    service: SandboxHandle, snapshot_file: Path
) -> None:
    source = hotel(units=6, reservations=60)
    service.set_faults(error_rate=0.15, rate_limit_rate=0.15, retry_after_s=0, seed=7)
    # Two attempts per record and run: some records stay pending, later runs must finish them.
    settings = settings_for(
        service.base_url,
        snapshot_file,
        retry=RetryPolicy(max_attempts=2, base_delay=0.001, max_delay=0.01, max_retry_after=0.01),
    )

    reports = [sync_batches(batches_of(source), settings)]
    while not reports[-1].push.complete and len(reports) < 15:
        reports.append(sync_batches(batches_of(source), settings))

    assert reports[0].outcomes["pending"] > 0, "the faults should have left work for a later run"
    assert reports[-1].push.complete
    assert sum(r.outcomes["acknowledged"] for r in reports) == 66  # each record once
    records = service.records()
    assert sandbox_state(records) == expected_state(source)
    assert {r["writes"] for r in records} == {1}  # stored once: no duplicate write
    service.set_faults()
    assert sync_batches(batches_of(source), settings).requests == 0


def test_a_400_dead_letters_that_record_with_the_message_and_delivers_every_other(
    service: SandboxHandle, snapshot_file: Path
) -> None:
    source = hotel(units=2, reservations=6)
    batches = batches_of(source)
    broken = reservation("BROKEN", "U0", 3)
    broken["unitReservations"][0]["checkin"] = "03.07.2026"  # a format the service refuses
    batches[Entity.RESERVATION] = with_unchecked_record(batches[Entity.RESERVATION], "demo", broken)
    settings = settings_for(service.base_url, snapshot_file)

    report = sync_batches(batches, settings)
    again = sync_batches(batches, settings)

    assert report.outcomes == {"acknowledged": 8, "dead_lettered": 1, "failed": 0, "pending": 0}
    assert sandbox_state(service.records()) == expected_state(source)
    with Snapshot.open(snapshot_file) as snapshot:
        letters = snapshot.dead_letters()
    assert letters["record_id"].tolist() == ["BROKEN"]
    letter = letters.iloc[0]
    assert letter.http_status == 400
    assert "unitReservations.0.checkin" in letter.message
    assert letter.request_id
    assert "door-4711" not in letter.message
    assert (again.requests, again.plan.held) == (0, 1)  # not re-sent while unchanged
    assert again.to_json_dict()["dead_letters"] == {"400": 1}


def test_a_dead_lettered_record_is_sent_once_its_content_is_fixed_and_leaves_the_table(
    service: SandboxHandle, snapshot_file: Path
) -> None:
    source = hotel(units=1, reservations=1)
    batches = batches_of(source)
    broken = reservation("LATE", "U0", 3)
    broken["unitReservations"][0]["checkin"] = "next week"
    batches[Entity.RESERVATION] = with_unchecked_record(batches[Entity.RESERVATION], "demo", broken)
    settings = settings_for(service.base_url, snapshot_file)
    sync_batches(batches, settings)
    source[Entity.RESERVATION].append(("demo", reservation("LATE", "U0", 3)))

    fixed = sync_batches(batches_of(source), settings)

    assert (fixed.counts["create"], fixed.requests, fixed.outcomes["acknowledged"]) == (1, 1, 1)
    assert sandbox_state(service.records()) == expected_state(source)
    with Snapshot.open(snapshot_file) as snapshot:
        assert snapshot.dead_letters().empty


def test_a_403_for_an_account_the_token_may_not_write_is_dead_lettered(
    service: SandboxHandle, snapshot_file: Path
) -> None:
    settings = settings_for(service.base_url, snapshot_file, token="hotel-a-token")

    report = sync_batches(batches_of(hotel(account="hotel-b", units=1, reservations=0)), settings)

    assert report.outcomes["dead_lettered"] == 1
    assert report.push.problems[0].http_status == 403
    assert "hotel-b" in report.push.problems[0].message


def test_a_401_stops_that_account_with_a_clear_message_while_other_accounts_continue(
    service: SandboxHandle, snapshot_file: Path
) -> None:
    refused = hotel(account="demo", units=2, reservations=5)
    accepted = hotel(account="hotel-a", units=2, reservations=5)
    source = {entity: refused[entity] + accepted[entity] for entity in refused}
    settings = settings_for(
        service.base_url,
        snapshot_file,
        token=None,
        tokens={"demo": "expired-token", "hotel-a": "hotel-a-token"},
    )

    report = sync_batches(batches_of(source), settings)

    assert set(report.push.stopped_accounts) == {"demo"}
    message = str(report.push.stopped_accounts["demo"])
    assert "account 'demo'" in message and "401" in message and "pending" in message
    assert "expired-token" not in message
    assert report.outcomes == {"acknowledged": 7, "dead_lettered": 0, "failed": 1, "pending": 6}
    assert {r["accountId"] for r in service.records()} == {"hotel-a"}
    fixed = settings_for(
        service.base_url,
        snapshot_file,
        token=None,
        tokens={"demo": "demo-token", "hotel-a": "hotel-a-token"},
    )
    assert sync_batches(batches_of(source), fixed).outcomes["acknowledged"] == 7
    assert sandbox_state(service.records()) == expected_state(source)


def test_dry_run_sends_nothing_and_records_nothing(
    service: SandboxHandle, snapshot_file: Path
) -> None:
    source = hotel(units=2, reservations=3)
    settings = settings_for(service.base_url, snapshot_file)

    dry = sync_batches(batches_of(source), settings, dry_run=True)
    real = sync_batches(batches_of(source), settings)

    assert (dry.counts["create"], dry.requests, dry.status) == (5, 0, "dry_run")
    assert real.counts["create"] == 5
    assert sync_requests(service) == 5


def test_service_counts_that_disagree_with_what_was_sent_are_reported(
    service: SandboxHandle, tmp_path: Path
) -> None:
    snapshot_file = tmp_path / "pms-sync" / "snapshot.duckdb"  # a file, so it can be lost
    source = hotel(units=2, reservations=2)
    settings = settings_for(service.base_url, snapshot_file)
    sync_batches(batches_of(source), settings)
    snapshot_file.unlink()  # the snapshot is lost: every record is planned as a create again

    report = sync_batches(batches_of(source), settings)

    assert report.outcomes["acknowledged"] == 4
    assert len(report.push.disagreements) == 4
    assert {d.detail.split(" (")[0] for d in report.push.disagreements} == {
        "service skipped the accommodation",
        "service skipped the reservation",
    }


def test_each_run_is_recorded_with_counts_per_account_and_entity(
    service: SandboxHandle, snapshot_file: Path
) -> None:
    settings = settings_for(service.base_url, snapshot_file)
    report = sync_batches(batches_of(hotel(units=2, reservations=3)), settings, mapping="hotel")

    with Snapshot.open(snapshot_file) as snapshot:
        run = snapshot.runs().iloc[-1]
        counts = snapshot.run_counts(report.run_id).set_index("entity")

    assert (run.run_id, run.mapping, run.status, run.requests) == (
        report.run_id,
        "hotel",
        "succeeded",
        5,
    )
    assert counts.loc["reservation", "create"] == 3
    assert counts.loc["reservation", "acknowledged"] == 3
    assert counts.loc["accommodation", "extracted"] == 2
