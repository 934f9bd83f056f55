"""Drift at the service healed by the rolling refresh and by the answers that reveal it:
nightly syncs against the sandbox over real sockets (docs/drift.md)."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path
from typing import Any

from push_samples import (
    Source,
    batches_of,
    expected_state,
    reservation,
    sandbox_state,
    settings_for,
    unit,
)

from connector.contract import Entity
from connector.pipeline import SyncReport, sync_batches
from connector.plan import Budget, RefreshPolicy
from connector.sandbox.testing import SandboxHandle
from connector.settings import SyncSettings
from connector.snapshot import Snapshot

ACCOUNT = "demo"
UNITS = [f"U{n}" for n in range(5)]
STAYS = [f"R{n}" for n in range(60)]


def future_hotel(changed: frozenset[str] = frozenset()) -> Source:
    """5 units and 60 stays arriving from tomorrow on; ``changed`` stays have a new channel."""
    return {
        Entity.ACCOMMODATION: [(ACCOUNT, unit(u)) for u in UNITS],
        Entity.RESERVATION: [
            (
                ACCOUNT,
                reservation(
                    r,
                    UNITS[n % len(UNITS)],
                    1 + n,
                    **({"channelName": "Phone"} if r in changed else {}),
                ),
            )
            for n, r in enumerate(STAYS)
        ],
    }


def sync_requests(service: SandboxHandle) -> int:
    return sum(
        sum(by_status.values())
        for endpoint, by_status in service.stats()["requests"].items()
        if "/api/v1/hooks/" in endpoint
    )


def refreshing(settings: SyncSettings, share: float, **budget: Any) -> SyncSettings:
    return replace(
        settings,
        refresh=RefreshPolicy(share=share),
        push=replace(settings.push, budget=Budget(**budget)),
    )


def drift_kinds(report: SyncReport) -> dict[tuple[str, str], str]:
    return {(d.entity, d.record_id): d.kind for d in report.push.drift}


def test_twenty_drifted_records_heal_within_seven_nightly_runs_of_a_seven_day_refresh(
    service: SandboxHandle, snapshot_file: Path
) -> None:
    settings = refreshing(settings_for(service.base_url, snapshot_file), 1 / 7)
    sync_batches(batches_of(future_hotel()), replace(settings, refresh=RefreshPolicy()))
    edited = [("accommodation", "U0"), ("accommodation", "U1")]
    edited += [("reservation", r) for r in ("R2", "R9", "R21", "R30", "R38", "R44", "R51", "R59")]
    deleted = [("accommodation", "U2")]
    deleted += [("reservation", r) for r in ("R3", "R12", "R17", "R25", "R33", "R40")]
    deleted += [("reservation", r) for r in ("R47", "R55", "R58")]
    for entity in ("accommodation", "reservation"):
        service.edit_records(
            ACCOUNT,
            entity,
            [r for e, r in edited if e == entity],
            {"name": "Renamed by staff"} if entity == "accommodation" else {"channelName": "Desk"},
        )
        service.delete_records(ACCOUNT, entity, [r for e, r in deleted if e == entity])
    drifted = set(edited) | set(deleted)
    # Night 2's export changes two deleted stays that the refresh reaches later: the answer
    # to their update reveals them first.
    changes_by_night = {2: frozenset({"R47", "R55"})}
    eligible = len(UNITS) + len(STAYS)
    share_per_night = math.ceil(eligible / 7)

    found_on: dict[tuple[str, str], int] = {}
    kinds: dict[tuple[str, str], str] = {}
    changed: frozenset[str] = frozenset()
    for night in range(1, 8):
        changed |= changes_by_night.get(night, frozenset())
        source = future_hotel(changed)
        before = sandbox_state(service.records())
        requests_before = sync_requests(service)

        report = sync_batches(batches_of(source), settings)

        sent = list(
            zip(report.plan.changes["entity"], report.plan.changes["record_id"], strict=True)
        )
        assert len(sent) == len(set(sent)), f"night {night}: a record sent twice"
        assert sync_requests(service) - requests_before == len(sent) == report.requests
        assert report.plan.resends["refresh"] <= share_per_night
        real = len(changes_by_night.get(night, ()))
        assert report.requests <= share_per_night + real
        held = sandbox_state(service.records())
        expected = expected_state(source)
        kinds |= drift_kinds(report)
        for entity, record_id in drift_kinds(report):
            found_on.setdefault((entity, record_id), night)
            key = (ACCOUNT, entity, record_id)
            # Healed in the run whose answer revealed it, not a run later.
            assert before.get(key) != expected[key] and held[key] == expected[key]
        assert report.push.drift_healed == len(report.push.drift)
        assert report.drift_json()["open"] == 0

    assert set(found_on) == drifted  # each found (and healed) once, all within 7 nights
    # A deleted stay answers "new" (lost); a unit's answer cannot tell deleted from edited.
    assert {kinds[key] for key in deleted if key[0] == "reservation"} == {"lost"}
    assert {kinds[key] for key in edited} | {kinds[("accommodation", "U2")]} == {"changed"}
    assert sandbox_state(service.records()) == expected_state(future_hotel(changed))
    assert found_on[("reservation", "R47")] == found_on[("reservation", "R55")] == 2
    with Snapshot.open(snapshot_file, read_only=True) as snapshot:
        assert snapshot.open_drift().empty


def test_the_refresh_goes_after_every_real_change_and_a_budget_drops_it_not_the_changes(
    service: SandboxHandle, snapshot_file: Path
) -> None:
    settings = settings_for(service.base_url, snapshot_file)
    sync_batches(batches_of(future_hotel()), settings)
    changed = frozenset({"R50", "R51", "R52"})

    report = sync_batches(
        batches_of(future_hotel(changed)), refreshing(settings, 1 / 7, max_requests=5)
    )

    reasons = report.plan.changes["reason"].tolist()
    assert reasons[:3] == ["changed"] * 3 and set(reasons[3:]) == {"refresh"}
    assert report.counts["update"] == 3 and report.plan.resends["refresh"] == 10
    assert report.requests == 5  # the three changes, then two refreshes
    assert report.push.resend_dropped["refresh"] == 8 and sum(report.push.deferred.values()) == 0
    assert report.status == "succeeded"
    assert sandbox_state(service.records()) == expected_state(future_hotel(changed))


def test_an_update_answered_as_new_heals_the_lost_record_in_the_same_run_without_refresh(
    service: SandboxHandle, snapshot_file: Path
) -> None:
    settings = settings_for(service.base_url, snapshot_file)
    sync_batches(batches_of(future_hotel()), settings)
    service.delete_records(ACCOUNT, "reservation", ["R5"])

    report = sync_batches(batches_of(future_hotel(frozenset({"R5"}))), settings)

    [found] = report.push.drift
    assert (found.record_id, found.kind, found.healed) == ("R5", "lost", True)
    assert report.drift_json()["by_account"] == [
        {"entity": "reservation", "account_id": ACCOUNT, "found": 1, "healed": 1, "open": 0}
    ]
    # Still a disagreement with what was sent (issue 13): the service had lost the record.
    assert [d.record_id for d in report.push.disagreements] == ["R5"]
    assert sandbox_state(service.records()) == expected_state(future_hotel(frozenset({"R5"})))


def test_counts_that_do_not_account_for_the_record_leave_drift_open_until_the_next_run(
    service: SandboxHandle, snapshot_file: Path
) -> None:
    settings = settings_for(service.base_url, snapshot_file)
    source = {Entity.ACCOMMODATION: [(ACCOUNT, unit("U0"))], Entity.RESERVATION: []}
    service.set_faults(misbehave_next=1, misbehaviour="extra_counts_200")

    first = sync_batches(batches_of(source), settings)
    second = sync_batches(batches_of(source), settings)
    third = sync_batches(batches_of(source), settings)

    [found] = first.push.drift
    assert (found.kind, found.healed) == ("unaccounted", False)
    assert "counts of 2 records" in found.detail
    assert first.drift_json()["open"] == 1
    assert second.plan.resends["drifted"] == 1 and second.requests == 1
    assert second.push.drift == [] and second.push.drift_healed == 1
    assert second.drift_json()["open"] == 0
    assert third.requests == 0


def test_a_deleted_reservation_is_restored_by_the_refresh_even_when_its_unit_was_deleted_too(
    service: SandboxHandle, snapshot_file: Path
) -> None:
    settings = settings_for(service.base_url, snapshot_file)
    source = {
        Entity.ACCOMMODATION: [(ACCOUNT, unit("U0"))],
        Entity.RESERVATION: [(ACCOUNT, reservation("R0", "U0", 3))],
    }
    sync_batches(batches_of(source), settings)
    service.delete_records(ACCOUNT, "accommodation", ["U0"])
    service.delete_records(ACCOUNT, "reservation", ["R0"])

    report = sync_batches(batches_of(source), refreshing(settings, 1.0))

    records = service.records()
    assert [(r["entity"], r["id"]) for r in records] == [
        ("accommodation", "U0"),
        ("reservation", "R0"),
    ]
    assert {(d.record_id, d.kind) for d in report.push.drift} == {
        ("U0", "changed"),
        ("R0", "lost"),
    }
    assert report.push.disagreements == []  # a re-send answered "new" is drift, healed
    assert report.status == "succeeded"
