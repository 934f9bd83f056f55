"""Client-side rate limiting, so the service's limits are respected rather than discovered.

:class:`WindowLimiter` keeps, per window (second, minute, hour), the requests counted
against it in the last window length, and lets a request go only when every window has room.
A request is timed by its *answer* (in flight: counted as now): the service counted it at
some moment between sending and answer, so two requests the service could count in one
window are always both in the log when the later one is about to leave. That makes the limit
exact against the service's fixed windows whatever the network or event-loop delays. The service's ``X-RateLimit-Remaining-*`` headers
add what another process sharing the token used, so the limiter leaves that room alone; a
window the service reports exhausted is not sent into until it has certainly reset. A 429 is
a rare event, counted, and pauses every request for its ``Retry-After``.

Runs in other processes that share the token and a PostgreSQL snapshot share one log instead
(:meth:`WindowLimiter.share`, ``connector.snapshot._rate_ledger``): every request is admitted
against all of theirs, so together they stay under the limits without a 429.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

LIMIT_HEADER = "x-ratelimit-limit-"
REMAINING_HEADER = "x-ratelimit-remaining-"
_REMAINING_LENGTH = len(REMAINING_HEADER)


@dataclass(frozen=True)
class Window:
    """``limit`` requests per ``seconds``; ``name`` is the header suffix (Second, Minute, Hour)."""

    name: str
    limit: int
    seconds: float

    def __post_init__(self) -> None:
        if self.limit < 1 or self.seconds <= 0:
            raise ValueError(f"a rate window needs a positive limit and length, got {self}")

    @property
    def span(self) -> float:
        # 10 ms for clock granularity; delays are covered by timing requests by their answer.
        return self.seconds + 0.01


STANDARD_LENGTHS: dict[str, float] = {"Second": 1.0, "Minute": 60.0, "Hour": 3600.0}
DOCUMENTED_WINDOWS: tuple[Window, ...] = (
    Window("Second", 15, 1.0),
    Window("Minute", 120, 60.0),
    Window("Hour", 5000, 3600.0),
)
"""The public documentation's limits of a real service (see docs/rate-limits.md)."""

_UNITS = {"s": "Second", "sec": "Second", "second": "Second", "m": "Minute", "min": "Minute"}
_UNITS |= {"minute": "Minute", "h": "Hour", "hour": "Hour"}


def parse_windows(text: str) -> tuple[Window, ...]:
    """``"15/s,120/min,5000/h"`` → windows; ``"off"`` or ``""`` → none."""
    text = text.strip().lower()
    if text in ("", "off", "none", "0"):
        return ()
    windows: list[Window] = []
    for part in text.split(","):
        count, _, unit = part.strip().partition("/")
        name = _UNITS.get(unit.strip())
        if name is None or not count.strip().isdigit():
            raise ValueError(
                f"rate limit {part.strip()!r}: expected <requests>/<s|min|h>, e.g. 120/min"
            )
        windows.append(Window(name, int(count), STANDARD_LENGTHS[name]))
    return tuple(windows)


class RateLedger(Protocol):
    """A log of a token's requests that other processes write too (see ``share``)."""

    def reserve(
        self, key: str, windows: Sequence[tuple[int, float]], now: float
    ) -> tuple[float, float | None]: ...

    def answered(self, key: str, marker: float, at: float) -> None: ...


class RateLimiter(Protocol):
    """Waits until one more request may be sent, and learns from the answers."""

    async def acquire(self) -> Any:
        """Wait for room; returns a ticket to hand to :meth:`done` once answered."""
        ...

    def done(self, ticket: Any) -> None:
        """The request of ``ticket`` was answered (or failed)."""
        ...

    def observe(self, headers: Mapping[str, str], ticket: Any = None) -> None:
        """Learn from the headers (X-RateLimit-*) of the answer to ``ticket``'s request."""
        ...

    def throttled(self, retry_after: float | None) -> None:
        """The service answered 429: pause for its Retry-After."""
        ...


class Unlimited:
    async def acquire(self) -> None:
        return None

    def done(self, ticket: Any) -> None:
        return None

    def observe(self, headers: Mapping[str, str], ticket: Any = None) -> None:
        return None

    def throttled(self, retry_after: float | None) -> None:
        return None


class TokenBucket:
    """``rate`` requests per second on average, bursts of at most ``burst``."""

    def __init__(self, rate: float, burst: float | None = None) -> None:
        self.rate = rate
        self.capacity = burst if burst is not None else max(1.0, rate)
        self._tokens = self.capacity
        self._updated = time.monotonic()
        self._lock = asyncio.Lock()

    async def acquire(self) -> None:
        # The lock makes waiters queue in order, so no request starves behind newer ones.
        async with self._lock:
            while True:
                now = time.monotonic()
                self._tokens = min(self.capacity, self._tokens + (now - self._updated) * self.rate)
                self._updated = now
                if self._tokens >= 1:
                    self._tokens -= 1
                    return
                await asyncio.sleep((1 - self._tokens) / self.rate)

    def done(self, ticket: Any) -> None:
        return None

    def observe(self, headers: Mapping[str, str], ticket: Any = None) -> None:
        return None

    def throttled(self, retry_after: float | None) -> None:
        return None


_IN_FLIGHT = math.inf


class _Ticket:
    """One request in the logs: its answer time (infinity while in flight), its send order
    and, with a shared ledger, its row there."""

    __slots__ = ("at", "marker", "seq")

    def __init__(self, seq: int, at: float = _IN_FLIGHT, marker: float | None = None) -> None:
        self.at = at
        self.seq = seq
        self.marker = marker


class WindowLimiter:
    """Every window at once; adapts to what the service reports; state can be saved and loaded.

    Times are wall-clock seconds (``time.time``) so that a saved state means the same in the
    next process (see :meth:`history` and :meth:`preload`).
    """

    def __init__(
        self,
        windows: Iterable[Window],
        *,
        learn: bool = True,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.windows: dict[str, Window] = {w.name: w for w in windows}
        self.learn = learn  # adopt limits the service announces for windows not configured
        self._clock = clock
        self._log: dict[str, list[_Ticket]] = {name: [] for name in self.windows}
        self._blocked_until: dict[str, float] = {}
        self._paused_until = 0.0
        self._lock = asyncio.Lock()
        self._answered = asyncio.Event()
        self._seq = 0
        self.sent = 0
        self.throttled_responses = 0  # 429s received
        self.waited_s = 0.0  # time spent waiting for a window
        self.foreign = 0  # requests another user of the token made, as the headers revealed
        self._ledger: RateLedger | None = None
        self._ledger_key = ""

    def share(self, ledger: RateLedger | None, key: str = "") -> None:
        """Admit every request against ``ledger``, the log other runs on the token write too
        (None: this process's own log again). The ledger then holds the other runs' requests:
        the headers' shortfall is no longer counted as foreign on top of them."""
        self._ledger, self._ledger_key = ledger, key

    @property
    def limited(self) -> bool:
        return bool(self.windows)

    async def acquire(self) -> _Ticket:
        if not self.windows and not self._lock.locked() and self._paused_until <= self._clock():
            # No window, nobody queued and no 429 pause: what the loop below decides at once,
            # without the lock (taken once per request, thousands a second on loopback).
            return self._admit()
        # The lock makes waiters queue in order: requests leave in plan (urgency) order.
        async with self._lock:
            while True:
                now = self._clock()
                wait = self._wait(now)
                marker = None
                if wait <= 0 and self._ledger is not None and self.windows:
                    spans = [(w.limit, w.span) for w in self.windows.values()]
                    wait, marker = await asyncio.to_thread(
                        self._ledger.reserve, self._ledger_key, spans, now
                    )
                if wait <= 0:
                    return self._admit(marker)
                started = self._clock()
                self._answered.clear()
                # Wake up when the window frees, or earlier when an answer times a request.
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._answered.wait(), min(wait, 60.0))
                self.waited_s += self._clock() - started

    def _admit(self, marker: float | None = None) -> _Ticket:
        """Let one request go: its ticket, in every window's log."""
        self._seq += 1
        ticket = _Ticket(self._seq, marker=marker)
        for name in self.windows:
            self._log[name].append(ticket)
        self.sent += 1
        return ticket

    def done(self, ticket: Any) -> None:
        if isinstance(ticket, _Ticket) and ticket.at == _IN_FLIGHT:
            ticket.at = self._clock()
            if ticket.marker is not None and self._ledger is not None:
                self._ledger.answered(self._ledger_key, ticket.marker, ticket.at)
            self._answered.set()

    def _wait(self, now: float) -> float:
        wait = self._paused_until - now
        for name, window in self.windows.items():
            log = [t for t in self._log[name] if t.at > now - window.span]
            self._log[name] = log
            wait = max(wait, self._blocked_until.get(name, 0.0) - now)
            if len(log) >= window.limit:
                # The request that must leave the window before one more fits (in flight:
                # wait for its answer, which sets the event acquire waits on).
                times = sorted(t.at for t in log)
                wait = max(wait, times[len(times) - window.limit] + window.span - now)
        return wait

    def observe(self, headers: Mapping[str, str], ticket: Any = None) -> None:
        now = self._clock()
        # The answer tells the room left when *this* request was counted: our requests sent
        # after it are not in that figure yet.
        upto = ticket.seq if isinstance(ticket, _Ticket) else self._seq
        # Most answers (an unlimited service) carry none: the names are only looked at once.
        if not any(key[:_REMAINING_LENGTH].lower() == REMAINING_HEADER for key in headers):
            return
        lowered = {key.lower(): value for key, value in headers.items()}
        for key, value in lowered.items():
            if not key.startswith(REMAINING_HEADER):
                continue
            name = key[len(REMAINING_HEADER) :].capitalize()
            remaining = _integer(value)
            limit = _integer(lowered.get(LIMIT_HEADER + name.lower()))
            if remaining is None:
                continue
            window = self._window_for(name, limit)
            if window is None:
                continue
            log = self._log[window.name]
            counted = sum(1 for t in log if t.seq <= upto and t.at > now - window.span)
            # Room the service grants vs room our own log grants: any shortfall is requests
            # someone else sent with the same token. Count them as answered now.
            shortfall = (window.limit - counted) - remaining
            if shortfall > 0 and self._ledger is None:
                self.foreign += shortfall
                log.extend(_Ticket(upto, now) for _ in range(shortfall))
                if remaining == 0:
                    # Exhausted by someone else: its reset is unknown, but certainly within
                    # one window length from now.
                    self._blocked_until[window.name] = now + window.span

    def _window_for(self, name: str, announced: int | None) -> Window | None:
        window = self.windows.get(name)
        if window is None:
            if not (self.learn and announced and name in STANDARD_LENGTHS):
                return None
            window = Window(name, announced, STANDARD_LENGTHS[name])
        elif announced and announced < window.limit:
            window = Window(name, announced, window.seconds)  # the service knows better
        else:
            return window
        self.windows[name] = window
        self._log.setdefault(name, [])
        return window

    def throttled(self, retry_after: float | None) -> None:
        self.throttled_responses += 1
        pause = retry_after if retry_after is not None else 1.0
        self._paused_until = max(self._paused_until, self._clock() + pause)

    # -- shared state (see connector/client/_shared.py) -----------------------------------

    def history(self) -> list[float]:
        """Answer times of the requests still inside the longest window, oldest first."""
        if not self.windows:
            return []
        now = self._clock()
        longest = max(self.windows.values(), key=lambda w: w.span)
        times = (now if t.at == _IN_FLIGHT else t.at for t in self._log[longest.name])
        return sorted(t for t in times if t > now - longest.span)

    def preload(self, sent_at: Iterable[float]) -> None:
        """Count requests sent before this process started (by earlier runs on the token)."""
        now = self._clock()
        times = sorted(t for t in sent_at if t <= now)
        for name, window in self.windows.items():
            self._log[name].extend(_Ticket(0, t) for t in times if t > now - window.span)


def estimate_seconds(requests: int, windows: Iterable[Window]) -> float | None:
    """Time to send ``requests`` under the windows, from empty windows; None if unlimited."""
    windows = list(windows)
    if not windows:
        return None
    if requests <= 0:
        return 0.0
    # The binding window sends its limit, then waits a full window length, and so on.
    return max(math.ceil(requests / w.limit - 1) * w.span for w in windows)


_MAX_ANNOUNCED = 1_000_000
"""The largest count an X-RateLimit-* header is believed for (the documented hour is 5,000).
The limiter logs one ticket per request counted against a window, another user's included:
a header announcing a limit of 10¹² (or 10¹² fewer remaining than ours) would have it log
that many, and the run would run out of memory instead of sending."""


def _integer(value: str | None) -> int | None:
    """A count from an X-RateLimit-* header; None when it is no count (garbage, negative,
    infinite, beyond :data:`_MAX_ANNOUNCED`): the header is then ignored, not obeyed."""
    if value is None:
        return None
    try:
        count = int(float(value.strip()))
    except (ValueError, OverflowError):  # "soon", "nan"; "inf", "1e400"
        return None
    return count if 0 <= count <= _MAX_ANNOUNCED else None


def limiter_for(rate: float | None, windows: Iterable[Window] = ()) -> RateLimiter:
    windows = tuple(windows)
    if rate:
        return TokenBucket(rate)
    return WindowLimiter(windows)
