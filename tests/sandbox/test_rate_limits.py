"""Per-token rate limits over second, minute and hour windows (off unless configured)."""

from __future__ import annotations

from pathlib import Path

from connector.sandbox import RateLimit, SandboxConfig
from connector.sandbox.rate_limits import RateLimiter
from connector.sandbox.testing import multi_account_config, running_sandbox
from tests.sandbox import payloads


class FakeClock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_a_full_window_refuses_with_the_seconds_until_it_resets() -> None:
    clock = FakeClock(1_000_000.25)
    limiter = RateLimiter({"t": RateLimit(second=2, minute=100)}, clock=clock)

    decisions = [limiter.check("t") for _ in range(3)]

    assert [d.allowed for d in decisions] == [True, True, False]
    assert decisions[1].headers == {
        "X-RateLimit-Limit-Second": "2",
        "X-RateLimit-Remaining-Second": "0",
        "X-RateLimit-Limit-Minute": "100",
        "X-RateLimit-Remaining-Minute": "98",
    }
    assert decisions[2].retry_after_s == 1
    assert decisions[2].headers["Retry-After"] == "1"
    clock.now += 1
    assert limiter.check("t").allowed


def test_the_longest_full_window_decides_retry_after() -> None:
    clock = FakeClock(3600.0 * 1000 + 10)
    limiter = RateLimiter({"t": RateLimit(second=15, minute=2)}, clock=clock)

    limiter.check("t"), limiter.check("t")
    refused = limiter.check("t")

    assert not refused.allowed
    assert refused.retry_after_s == 50


def test_refused_requests_do_not_count() -> None:
    clock = FakeClock(0.5)
    limiter = RateLimiter({"t": RateLimit(second=1, hour=10)}, clock=clock)

    for _ in range(5):
        limiter.check("t")

    assert limiter.check("t").headers["X-RateLimit-Remaining-Hour"] == "9"


def test_keys_are_limited_separately_and_the_wildcard_covers_the_rest() -> None:
    limiter = RateLimiter({"a": RateLimit(minute=1), "*": RateLimit(minute=2)}, clock=FakeClock())

    assert [limiter.check("a").allowed for _ in range(2)] == [True, False]
    assert [limiter.check("b").allowed for _ in range(3)] == [True, True, False]
    assert [limiter.check("c").allowed for _ in range(2)] == [True, True]


def test_without_limits_nothing_is_refused_or_announced() -> None:
    limiter = RateLimiter({})

    decision = limiter.check("anyone")

    assert decision.allowed
    assert decision.headers == {}


def _limited_config() -> SandboxConfig:
    # Hour windows: a test cannot straddle a window boundary except once an hour.
    return multi_account_config().model_copy(
        update={
            "rate_limits": {
                "demo-token": RateLimit(hour=2),
                "multi-client": RateLimit(minute=1000, hour=3),
            }
        }
    )


def test_a_sync_token_over_its_limit_gets_429_with_retry_after(tmp_path: Path) -> None:
    body = payloads.envelope("reservation", payloads.reservation())
    with running_sandbox(tmp_path, _limited_config()) as sandbox:
        responses = [
            sandbox.http.post(
                "/api/v1/hooks/reservation/connect",
                json=body,
                headers={"X-Wishbox-Auth-Token": "demo-token"},
            )
            for _ in range(3)
        ]
        other_token = sandbox.http.post(
            "/api/v1/hooks/reservation/connect",
            json={**body, "accountId": "hotel-a"},
            headers={"X-Wishbox-Auth-Token": "hotel-a-token"},
        )

    assert [r.status_code for r in responses] == [200, 200, 429]
    assert responses[0].headers["X-RateLimit-Limit-Hour"] == "2"
    assert responses[0].headers["X-RateLimit-Remaining-Hour"] == "1"
    assert 0 < int(responses[2].headers["Retry-After"]) <= 3600
    assert responses[2].headers["content-type"].startswith("text/plain")
    assert other_token.status_code == 200
    assert "X-RateLimit-Limit-Hour" not in other_token.headers


def test_an_open_api_client_over_its_limit_gets_429(tmp_path: Path) -> None:
    with running_sandbox(tmp_path, _limited_config()) as sandbox:
        token = sandbox.http.post(
            "/openapi/v1/oauth2/token",
            data={
                "grant_type": "client_credentials",
                "client_id": "multi-client",
                "client_secret": "multi-secret",
            },
        )
        headers = {"Authorization": f"Bearer {token.json()['access_token']}"}
        responses = [
            sandbox.http.get("/api/openapi/v1/accounts", headers=headers) for _ in range(3)
        ]

    assert token.headers["X-RateLimit-Remaining-Minute"] == "999"
    assert [r.status_code for r in responses] == [200, 200, 429]
    assert responses[2].json()["error"] == "rate_limited"
    assert "Retry-After" in responses[2].headers
