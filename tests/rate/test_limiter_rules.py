"""The limiter's rules without a network: windows, configuration, estimates, shared state."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from connector.client import (
    DOCUMENTED_WINDOWS,
    AccountTokens,
    ClientConfig,
    ServiceClient,
    Window,
    WindowLimiter,
    effective_windows,
    estimate_seconds,
    load_shared_state,
    parse_windows,
    save_shared_state,
)
from connector.plan import backlog
from connector.snapshot import Snapshot


class FakeClock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def test_documented_limits_apply_to_a_remote_service_and_none_to_the_local_sandbox() -> None:
    remote = ClientConfig(base_url="https://api.example.com")
    local = ClientConfig(base_url="http://127.0.0.1:8765")
    configured = ClientConfig(base_url="http://127.0.0.1:8765", rate_windows=parse_windows("5/s"))

    assert effective_windows(remote) == DOCUMENTED_WINDOWS
    assert effective_windows(local) == ()
    assert effective_windows(configured) == (Window("Second", 5, 1.0),)


def test_rate_limits_are_written_as_requests_per_window() -> None:
    assert parse_windows("15/s, 120/min,5000/h") == DOCUMENTED_WINDOWS
    assert parse_windows("off") == ()
    with pytest.raises(ValueError, match="120/min"):
        parse_windows("120 per minute")


def test_a_window_exhausted_by_another_client_is_not_sent_into_until_it_has_reset() -> None:
    clock = FakeClock()
    limiter = WindowLimiter([Window("Minute", 10, 60.0)], clock=clock)

    async def scenario() -> float:
        ticket = await limiter.acquire()
        limiter.done(ticket)
        # Our one request, yet the service says none is left: someone used the other nine.
        limiter.observe(
            {"X-RateLimit-Limit-Minute": "10", "X-RateLimit-Remaining-Minute": "0"}, ticket
        )
        return limiter._wait(clock.now)

    wait = asyncio.run(scenario())

    assert limiter.foreign == 9
    assert wait == pytest.approx(60.01)


def test_limits_the_service_announces_lower_than_configured_are_adopted() -> None:
    limiter = WindowLimiter([Window("Minute", 120, 60.0)], clock=FakeClock())

    limiter.observe({"X-RateLimit-Limit-Minute": "60", "X-RateLimit-Remaining-Minute": "60"})

    assert limiter.windows["Minute"].limit == 60


@pytest.mark.parametrize(
    ("limit", "remaining"),
    [
        ("10", "-2000000"),  # "two million fewer than none left"
        ("2000000", "0"),  # beyond any window the client could fill
        ("15", "inf"),
        ("-5", "1"),
        ("1e400", "0"),
        ("ten", "nine"),
    ],
)
def test_rate_limit_headers_that_are_no_counts_are_ignored(limit: str, remaining: str) -> None:
    # A misbehaving service's headers: each foreign request is logged as one ticket, so
    # believing them logged millions (10¹² in the worst case: out of memory), and "inf" or a
    # negative limit raised OverflowError or ValueError out of the push.
    clock = FakeClock()
    configured = WindowLimiter([Window("Second", 15, 1.0)], clock=clock)
    learning = WindowLimiter([], clock=clock)

    for limiter in (configured, learning):
        for name in ("Second", "Hour"):
            limiter.observe(
                {f"X-RateLimit-Limit-{name}": limit, f"X-RateLimit-Remaining-{name}": remaining}
            )

    # A count that is one (a remaining 0) still tells the configured window it is full.
    assert configured.foreign <= 15 and learning.foreign == 0
    assert configured.windows == {"Second": Window("Second", 15, 1.0)}
    assert learning.windows == {}


def test_the_backlog_eta_is_paced_by_the_binding_window() -> None:
    # 121 requests at 15/s, 120/min: the 121st waits for the next minute.
    assert estimate_seconds(121, DOCUMENTED_WINDOWS) == pytest.approx(60.01)
    # 100,000 at 5,000/h: the last of 20 hourly batches leaves 19 h after the first.
    assert estimate_seconds(100_000, DOCUMENTED_WINDOWS) / 3600 == pytest.approx(19.0, rel=0.01)
    rows = backlog({"unit": 20, "upcoming": 100, "future": 1, "past": 0}, DOCUMENTED_WINDOWS)
    assert [(r.urgency, r.requests) for r in rows][:3] == [
        ("unit", 20),
        ("upcoming", 100),
        ("future", 1),
    ]
    # 120 requests: eight bursts of 15 a second apart; the 121st waits for the next minute.
    assert rows[1].eta_s == pytest.approx(7.07) and rows[2].eta_s == pytest.approx(60.01)
    assert backlog({"upcoming": 3}, ())[1].eta_s is None  # no limit configured


def test_a_run_starts_from_the_requests_earlier_runs_sent_with_the_same_token(
    tmp_path: Path,
) -> None:
    config = ClientConfig(base_url="https://api.example.com", rate_windows=parse_windows("10/min"))
    tokens = AccountTokens(default="secret-token-123")

    async def first_run(snapshot) -> None:
        client = ServiceClient(config, tokens)
        keys = load_shared_state(snapshot, client)
        limiter = client.limiter_of("secret-token-123")
        for _ in range(10):
            limiter.done(await limiter.acquire())
        save_shared_state(snapshot, client, keys)

    with Snapshot.open(tmp_path / "snapshot.duckdb") as snapshot:
        asyncio.run(first_run(snapshot))
        stored = snapshot._query("SELECT * FROM rate_limit_log")  # type: ignore[attr-defined]
        client = ServiceClient(config, tokens)
        load_shared_state(snapshot, client)

    limiter = client.limiter_of("secret-token-123")
    assert isinstance(limiter, WindowLimiter)
    assert len(limiter.history()) == 10
    assert limiter._wait(limiter._clock()) > 50  # the next request waits for the minute
    assert not stored["limiter_key"].str.contains("secret-token-123").any()
