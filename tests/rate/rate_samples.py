"""Settings and sources of the rate-limit tests."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

from connector.client import ClientConfig, Window
from connector.pipeline import SyncReport
from connector.plan import Budget
from connector.sandbox.rate_limits import RateLimit
from connector.settings import SyncSettings
from tests.push.push_samples import FAST_RETRY, settings_for

# 10 requests per "second" of 0.4 s and 80 per "minute" of 4 s (≈ 20 requests/s, the minute
# binding): the shape of the documented 15/s and 120/min, fast enough for tests. Windows of
# 0.4 s rather than shorter ones: two clients sharing a token can only collide at a window's
# edge, and on a loaded 2-core machine the scheduling jitter of shorter windows made edges
# (and collisions) too frequent to tell adaptation from none.
LIMITS = RateLimit(second=10, minute=80, second_s=0.4, minute_s=4.0)
CLIENT_WINDOWS = (Window("Second", 10, 0.4), Window("Minute", 80, 4.0))

# Retries honour Retry-After fully here: a 429 is an event to count, not to hurry past.
PATIENT_RETRY = replace(FAST_RETRY, max_attempts=8, max_retry_after=2.0)


def limited_settings(
    base_url: str,
    snapshot: Path,
    *,
    concurrency: int = 4,
    budget: Budget | None = None,
    windows: Any = CLIENT_WINDOWS,
) -> SyncSettings:
    settings = settings_for(base_url, snapshot, concurrency=concurrency, retry=PATIENT_RETRY)
    client: ClientConfig = replace(settings.client, rate_windows=windows)
    push = replace(settings.push, budget=budget or Budget())
    return replace(settings, client=client, push=push)


def sync_statuses(stats: dict[str, Any]) -> dict[str, int]:
    """Answers of the sync webhooks by status code."""
    found: dict[str, int] = {}
    for endpoint, by_status in stats["requests"].items():
        if "/api/v1/hooks/" in endpoint:
            for status, n in by_status.items():
                found[status] = found.get(status, 0) + n
    return found


def delivery_summary(reports: dict[str, SyncReport]) -> dict[str, Any]:
    """Per account: the outcomes and the first records not acknowledged (status, attempts,
    message), for an assertion's message: a record left pending says what used its attempts."""
    return {
        account: {
            "outcomes": dict(report.outcomes),
            "problems": [
                (p.record_id, str(p.outcome), p.http_status, p.attempts, p.message[:120])
                for p in report.push.problems[:5]
            ],
        }
        for account, report in reports.items()
    }
