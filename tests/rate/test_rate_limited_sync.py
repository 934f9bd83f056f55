"""Syncs against a sandbox with rate limits: no 429 storm, urgency order, budgets."""

from __future__ import annotations

import threading
from pathlib import Path

from connector.contract import Entity
from connector.pipeline import SyncReport, sync_batches
from connector.plan import Budget
from connector.sandbox.testing import SandboxHandle
from tests.push.push_samples import batches_of, hotel
from tests.rate.rate_samples import delivery_summary, limited_settings, sync_statuses


def reservations_in_received_order(service: SandboxHandle, account: str = "demo") -> list[str]:
    records = service.records(account, "reservation")
    return [r["id"] for r in sorted(records, key=lambda r: r["firstSeq"])]


def test_a_sync_of_160_changes_under_limits_gets_no_429_and_arrives_in_urgency_order(
    service: SandboxHandle, snapshot_file: Path
) -> None:
    # Check-ins from 70 days ago to 70 ahead; two "minutes" of requests, so both limits bind.
    source = hotel(units=20, reservations=140)

    report = sync_batches(batches_of(source), limited_settings(service.base_url, snapshot_file))

    assert report.outcomes["acknowledged"] == 160
    assert sync_statuses(service.stats()) == {"200": 160}
    assert report.push.throttled == 0
    planned = report.plan.changes
    planned_ids = list(planned.loc[planned["entity"] == str(Entity.RESERVATION), "record_id"])
    received = reservations_in_received_order(service)
    # Four workers may swap neighbours; nothing travels further than that.
    position = {record_id: i for i, record_id in enumerate(planned_ids)}
    assert max(abs(position[r] - i) for i, r in enumerate(received)) < 4
    classes = list(planned.loc[planned["entity"] == str(Entity.RESERVATION), "urgency"])
    assert classes == sorted(classes, key=["upcoming", "future", "past"].index)


def test_a_second_client_sharing_the_token_is_adapted_to_and_its_429s_are_counted(
    service: SandboxHandle, tmp_path: Path
) -> None:
    reports: dict[str, SyncReport] = {}

    def run(account: str) -> None:
        source = hotel(account=account, units=10, reservations=140)
        settings = limited_settings(service.base_url, tmp_path / account / "snapshot.duckdb")
        reports[account] = sync_batches(batches_of(source), settings)

    threads = [threading.Thread(target=run, args=(account,)) for account in ("demo", "demo-2")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    statuses = sync_statuses(service.stats())
    assert {a: r.outcomes["acknowledged"] for a, r in reports.items()} == {
        "demo": 150,
        "demo-2": 150,
    }, delivery_summary(reports)
    assert all(r.push.foreign_requests > 0 for r in reports.values())  # each saw the other
    throttled = sum(r.push.throttled for r in reports.values())
    assert statuses.get("429", 0) == throttled  # every 429 counted and reported
    # Two greedy clients on 0.4 s windows collide now and then at a window's edge; without
    # adapting to the headers every other request would be refused.
    assert throttled <= 0.2 * 300


def test_a_budget_of_50_sends_the_50_most_urgent_and_the_next_run_sends_the_rest_once(
    service: SandboxHandle, snapshot_file: Path
) -> None:
    source = hotel(units=10, reservations=140)
    budgeted = limited_settings(service.base_url, snapshot_file, budget=Budget(max_requests=50))

    first = sync_batches(batches_of(source), budgeted)
    sent_first = {r["id"] for r in service.records()}
    second = sync_batches(batches_of(source), limited_settings(service.base_url, snapshot_file))
    third = sync_batches(batches_of(source), limited_settings(service.base_url, snapshot_file))

    most_urgent = set(first.plan.changes["record_id"].head(50))
    assert sent_first == most_urgent
    assert first.outcomes["acknowledged"] == 50
    assert sum(first.push.deferred.values()) == 100
    assert first.status == "incomplete"
    assert second.plan.request_count == 100
    assert second.outcomes["acknowledged"] == 100
    assert third.plan.request_count == 0
    assert sync_statuses(service.stats()) == {"200": 150}  # nothing sent twice
    assert all(r["firstSeq"] == r["lastSeq"] for r in service.records())
