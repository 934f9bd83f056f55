"""How close the client's limiter gets to the service's limits without a 429.

Starts the sandbox as a child process with the documented limits' shape (15 requests per
second, 120 per "minute"; the minute shortened to ``--minute-s`` seconds so a run takes well
under a minute), syncs ``--requests`` accommodations through the real pipeline, and prints the
achieved requests per window as a share of each limit. Target: ≥ 95 % of the binding window
(the minute here) with no 429.

    python -m bench.rate_limit [--requests 361] [--minute-s 12] [--concurrency 16]

Achieved share of a window = the time the limit allows for the requests (each full window of
``limit`` requests, then the next window) / the time they took.
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

from connector.client import ClientConfig, RetryPolicy, Window
from connector.contract import Entity
from connector.mapping.batches import mapped_records_from_resources
from connector.pipeline import sync_batches
from connector.push import PushOptions
from connector.sandbox.config import SandboxConfig
from connector.sandbox.rate_limits import RateLimit
from connector.sandbox.testing import sandbox_process
from connector.settings import load_settings


def _units(count: int) -> list[tuple[str, dict[str, Any]]]:
    return [
        (
            "demo",
            {
                "id": f"U{n}",
                "status": "ACTIVE",
                "name": f"Room {n}",
                "street": "Hauptstraße",
                "streetNumber": "7",
                "country": "DE",
                "city": "Berlin",
                "wifiName": "guest",
                "wifiCode": "bench-wifi",
                "doorCode": "bench-door",
            },
        )
        for n in range(count)
    ]


def measure(requests: int = 361, minute_s: float = 12.0, concurrency: int = 16) -> dict[str, Any]:
    """Sync ``requests`` units under 15/s and 120 per ``minute_s``; return the shares."""
    limits = RateLimit(second=15, minute=120, minute_s=minute_s)
    windows = (Window("Second", 15, 1.0), Window("Minute", 120, minute_s))
    config = SandboxConfig.demo().model_copy(update={"rate_limits": {"*": limits}})
    with (
        tempfile.TemporaryDirectory(prefix="pms-sync-bench-") as folder,
        sandbox_process(Path(folder) / "sandbox", config) as service,
    ):
        base = load_settings(
            base_url=service.base_url,
            snapshot=Path(folder) / "snapshot.duckdb",
            token="demo-token",
            env={},
        )
        settings = replace(
            base,
            client=ClientConfig(
                base_url=service.base_url,
                concurrency=concurrency,
                rate_windows=windows,
                retry=RetryPolicy(max_attempts=8, max_retry_after=5.0),
            ),
            push=PushOptions(concurrency=concurrency),
        )
        batches = {
            Entity.ACCOMMODATION: mapped_records_from_resources(
                Entity.ACCOMMODATION, _units(requests)
            )
        }
        started = time.perf_counter()
        report = sync_batches(batches, settings, mapping="bench")
        elapsed = report.push.duration_s or (time.perf_counter() - started)
        stats = service.stats()["requests"]
    statuses: dict[str, int] = {}
    for endpoint, by_status in stats.items():
        if "/api/v1/hooks/" in endpoint:
            for status, n in by_status.items():
                statuses[status] = statuses.get(status, 0) + n
    shares = {}
    for window in windows:
        # The limit lets ``limit`` requests go at once, then waits a window: the last of
        # ``requests`` may leave after (ceil(requests / limit) - 1) windows.
        allowed_s = (math.ceil(requests / window.limit) - 1) * window.seconds
        shares[window.name] = round(allowed_s / elapsed, 3) if elapsed > 0 else 0.0
    binding = max(windows, key=lambda w: (math.ceil(requests / w.limit) - 1) * w.seconds)
    return {
        "requests": requests,
        "acknowledged": report.outcomes["acknowledged"],
        "duration_s": round(elapsed, 2),
        "limits": {w.name: f"{w.limit}/{w.seconds:g}s" for w in windows},
        "share_of_limit": shares,
        "binding_window": binding.name,
        "binding_share": shares[binding.name],
        "status_429": statuses.get("429", 0),
        "client_throttled": report.push.throttled,
        "target_met": shares[binding.name] >= 0.95 and statuses.get("429", 0) == 0,
    }


def main() -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=361)
    parser.add_argument("--minute-s", type=float, default=12.0)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    result = measure(args.requests, args.minute_s, args.concurrency)
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
