"""What the rolling refresh costs: requests per night and their time under the rate limits.

Computed for 10k, 100k and 1M acknowledged records under the documented limits (15/s, 120/min,
5,000/h) with ``connector.client.estimate_seconds``, the function the backlog's ETA uses; and
measured at 10k on the hotel example's export (``bench/data``): a first sync into a sandbox
process, then nightly runs with a 7-day refresh (past stays included, so every record is
eligible), counting the requests of each night and timing them.

    python -m bench.refresh_cost [--size 10000] [--nights 7] [--limited]
    python -m bench.refresh_cost --size 100000 --plan-cost

``--limited`` also times one refresh night with the documented limits enforced by the client
against a sandbox that enforces them too (about 12 minutes at 10k).
"""

from __future__ import annotations

import argparse
import json
import math
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from bench.data import prepare
from connector.client import DOCUMENTED_WINDOWS, estimate_seconds
from connector.pipeline import run_sync
from connector.plan import RefreshPolicy
from connector.sandbox.config import SandboxConfig
from connector.sandbox.rate_limits import RateLimit
from connector.sandbox.testing import sandbox_process
from connector.settings import SyncSettings, load_settings

SIZES = (10_000, 100_000, 1_000_000)
DAY_S = 24 * 3600


def computed(shares: tuple[float, ...] = (1 / 7, 1 / 30), cap: int | None = 5000) -> list[dict]:
    """Requests per night and their time under the documented limits, per size and share."""
    rows = []
    for size in SIZES:
        for share in shares:
            for limit in (None, cap):
                requests = math.ceil(share * size - 1e-9)
                if limit is not None:
                    requests = min(requests, limit)
                seconds = estimate_seconds(requests, DOCUMENTED_WINDOWS) or 0.0
                rows.append(
                    {
                        "records": size,
                        "share": round(share, 4),
                        "cap": limit,
                        "requests_per_night": requests,
                        "hours_under_limits": round(seconds / 3600, 2),
                        "fits_in_a_day": seconds < DAY_S,
                        "every_record_within_nights": math.ceil(size / requests),
                    }
                )
    return rows


def _settings(base_url: str, snapshot: Path, refresh: RefreshPolicy, **kwargs: Any) -> SyncSettings:
    base = load_settings(base_url=base_url, snapshot=snapshot, token="demo-token", env={}, **kwargs)
    return replace(base, refresh=refresh)


def measured(size: int, nights: int, limited: bool) -> dict[str, Any]:
    dataset = prepare(size)
    refresh = RefreshPolicy(share=1 / 7, include_past_stays=True)
    result: dict[str, Any] = {"records": None, "nights": []}
    with tempfile.TemporaryDirectory(prefix="pms-sync-refresh-") as folder:
        snapshot = Path(folder) / "snapshot.duckdb"
        with sandbox_process(Path(folder) / "sandbox") as service:
            first = run_sync(
                dataset.mapping, _settings(service.base_url, snapshot, RefreshPolicy())
            )
            result["records"] = first.requests
            result["first_run_s"] = round(first.duration_s, 1)
            sent: dict[str, int] = {}
            for night in range(1, nights + 1):
                started = time.perf_counter()
                report = run_sync(dataset.mapping, _settings(service.base_url, snapshot, refresh))
                ids = report.plan.changes["record_id"].tolist()
                for record_id in ids:
                    sent[record_id] = sent.get(record_id, 0) + 1
                result["nights"].append(
                    {
                        "night": night,
                        "requests": report.requests,
                        "refresh_planned": report.plan.resends["refresh"],
                        "run_s": round(time.perf_counter() - started, 2),
                        "push_s": round(report.push.duration_s, 2),
                    }
                )
            result["records_refreshed_over_the_nights"] = len(sent)
            result["most_sends_of_one_record"] = max(sent.values()) if sent else 0
        if limited:
            result["limited_night"] = _limited_night(dataset.mapping, snapshot, refresh, folder)
    return result


def _limited_night(
    mapping: Path, snapshot: Path, refresh: RefreshPolicy, folder: str
) -> dict[str, Any]:
    """One refresh night with the documented limits on both sides (client and sandbox), the
    sandbox restarted on the same data."""
    limits = RateLimit(second=15, minute=120, hour=5000)
    config = SandboxConfig.demo().model_copy(update={"rate_limits": {"*": limits}})
    # The same data folder: the restarted sandbox holds what the first sync stored.
    with sandbox_process(Path(folder) / "sandbox", config) as service:
        settings = _settings(service.base_url, snapshot, refresh, rate_limits="15/s,120/min,5000/h")
        started = time.perf_counter()
        report = run_sync(mapping, settings)
        elapsed = time.perf_counter() - started
    return {
        "requests": report.requests,
        "run_s": round(elapsed, 1),
        "push_s": round(report.push.duration_s, 1),
        "estimated_s": estimate_seconds(report.requests, DOCUMENTED_WINDOWS),
        "throttled_429": report.push.throttled,
    }


def plan_cost(size: int, runs: int = 3) -> dict[str, Any]:
    """Median time of a read-only plan with the refresh off and at 7 days, against a snapshot
    seeded with every record (no HTTP): what choosing and fetching the re-sends costs."""
    from bench.stage import stage_seed
    from connector.pipeline import load_batches
    from connector.plan import ResendOptions, build_plan
    from connector.snapshot import Snapshot

    dataset = prepare(size)
    found: dict[str, Any] = {"records": size}
    with tempfile.TemporaryDirectory(prefix="pms-sync-refresh-plan-") as folder:
        snapshot = str(Path(folder) / "snapshot.duckdb")
        stage_seed(str(dataset.mapping), snapshot)
        batches, policy = load_batches(dataset.mapping)
        for name, refresh in (
            ("off", RefreshPolicy()),
            ("7d", RefreshPolicy(share=1 / 7, include_past_stays=True)),
        ):
            times = []
            for _ in range(runs):
                with Snapshot.open(snapshot, read_only=True) as store:
                    started = time.perf_counter()
                    plan = build_plan(
                        store, batches, policy=policy, resend=ResendOptions(refresh=refresh)
                    )
                    times.append(time.perf_counter() - started)
            found[name] = {
                "plan_s": round(sorted(times)[len(times) // 2], 3),
                "requests": plan.request_count,
            }
    return found


def main() -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--nights", type=int, default=7)
    parser.add_argument("--limited", action="store_true")
    parser.add_argument("--computed-only", action="store_true")
    parser.add_argument("--plan-cost", action="store_true", help="time the plan only")
    args = parser.parse_args()
    result: dict[str, Any] = {"computed": computed()}
    if args.plan_cost:
        result["plan_cost"] = plan_cost(args.size)
    elif not args.computed_only:
        result["measured"] = measured(args.size, args.nights, args.limited)
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
