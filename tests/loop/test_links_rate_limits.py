"""Guest links under the Open API's rate limits: with the sandbox limited to 2 requests a
second and 20 a minute, a links run sends no request over the limit, fetches the arrivals in
date order, and reports what is left with an ETA; the next run takes up where it stopped,
still under the limits."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from connector.links import run_links
from connector.pipeline import run_sync
from connector.plan import Budget
from connector.sandbox.rate_limits import RateLimit
from connector.sandbox.testing import multi_account_config, running_sandbox
from tests.loop.loop_samples import arrivals, settings_for, write_connection

LINKS = "GET /openapi/v1/reservations/links"
TOKEN = "POST /openapi/v1/oauth2/token"


@pytest.mark.slow
def test_a_links_run_under_2_per_second_and_20_per_minute_stays_under_them(
    tmp_path: Path,
) -> None:
    config = multi_account_config().model_copy(
        update={"rate_limits": {"demo-client": RateLimit(second=2, minute=20)}}
    )
    offsets = [13, 2, 7, 0, 11, 5, 9, 1, 12, 3, 8, 4, 10, 6, 14] * 2  # 30 arrivals, shuffled
    with running_sandbox(tmp_path / "sandbox", config) as sandbox:
        mapping = write_connection(tmp_path / "hotel", arrivals(offsets), "links: {}\n")
        settings = settings_for(sandbox.base_url, tmp_path)
        assert run_sync(mapping, settings).status == "succeeded"

        # The token request and 15 links: 16 of the minute's 20.
        report = run_links(mapping, settings, budget=Budget(max_requests=15))
        first = sandbox.stats()["requests"]
        # Right after, with the windows configured (as they are by default for a remote
        # service): the first run's requests, kept in the snapshot, count against them.
        configured = settings_for(sandbox.base_url, tmp_path, PMS_SYNC_RATE_LIMITS="2/s,20/min")
        then = run_links(mapping, configured, budget=Budget(max_requests=4))

        answered = sandbox.stats()["requests"]
    by_checkin = sorted(range(30), key=lambda i: (offsets[i], f"B{i}"))
    assert report.fetched == [f"B{i}" for i in by_checkin[:15]]
    assert [item.reservation_id for item in report.pending] == [f"B{i}" for i in by_checkin[15:]]
    assert first[LINKS] == {"200": 15} and first[TOKEN] == {"200": 1}
    assert report.throttled == 0
    assert then.fetched == [f"B{i}" for i in by_checkin[15:19]]
    assert answered[LINKS] == {"200": 19} and answered[TOKEN] == {"200": 1}
    assert then.throttled == 0
    backlog = {row.urgency: row for row in report.backlog}
    assert backlog["upcoming"].requests == 15
    # The windows the sandbox announced: 15 more requests at 2 a second.
    assert backlog["upcoming"].eta_s == pytest.approx(7 * 1.01, abs=0.1)
    assert report.last_checkin - report.first_checkin == timedelta(days=14)
