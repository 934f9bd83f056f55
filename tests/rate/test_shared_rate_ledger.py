"""Runs sharing a token on one PostgreSQL snapshot share its rate-limit log: two concurrent
syncs against the limited sandbox stay under the limits together, without the 429s that
separate logs (each run pacing only itself) run into."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

from connector.pipeline import SyncReport, sync_batches
from connector.sandbox.testing import SandboxHandle
from tests.push.push_samples import batches_of, hotel
from tests.rate.rate_samples import delivery_summary, limited_settings, sync_statuses

ACCOUNTS = ("demo", "demo-2")  # both written with demo-token: one token, one set of limits


def concurrent_syncs(
    service: SandboxHandle, snapshot_of: Callable[[str], Path | str]
) -> dict[str, SyncReport]:
    """The two accounts synced at once, 80 changes each, with the same token: a few
    seconds of pushing at the minute limit, enough for separate logs to collide."""
    reports: dict[str, SyncReport] = {}

    def run(account: str) -> None:
        source = hotel(account=account, units=10, reservations=70)
        settings = limited_settings(service.base_url, snapshot_of(account), concurrency=8)
        reports[account] = sync_batches(batches_of(source), settings, mapping=account)

    threads = [threading.Thread(target=run, args=(account,)) for account in ACCOUNTS]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return reports


def test_two_runs_sharing_a_token_on_one_postgresql_snapshot_get_no_429(
    service: SandboxHandle, tmp_path: Path, postgres_snapshot_url: str
) -> None:
    separate = concurrent_syncs(service, lambda account: tmp_path / account / "snap.duckdb")
    separate_429 = sync_statuses(service.stats()).get("429", 0)
    service.reset()

    shared = concurrent_syncs(service, lambda account: postgres_snapshot_url)

    statuses = sync_statuses(service.stats())
    for reports in (separate, shared):
        assert {a: r.outcomes["acknowledged"] for a, r in reports.items()} == {
            "demo": 80,
            "demo-2": 80,
        }, delivery_summary(reports)
    assert statuses == {"200": 160}  # not one 429: each request was admitted against both runs
    assert sum(r.push.throttled for r in shared.values()) == 0
    # The premise: with separate logs each run paces only itself and learns of the other from
    # the headers after the fact, so they collide (dozens of requests refused).
    assert separate_429 > 0
