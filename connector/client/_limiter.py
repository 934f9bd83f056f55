"""Client-side rate limiting, so the service's limits are respected rather than discovered."""

from __future__ import annotations

import asyncio
import time
from typing import Protocol


class RateLimiter(Protocol):
    """Waits until one more request may be sent. Issue 8 adds multi-window limiters."""

    async def acquire(self) -> None: ...

    def observe(self, headers: dict[str, str]) -> None:
        """Learn from a response's headers (X-RateLimit-Remaining-*); may be a no-op."""
        ...


class Unlimited:
    async def acquire(self) -> None:
        return None

    def observe(self, headers: dict[str, str]) -> None:
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

    def observe(self, headers: dict[str, str]) -> None:
        return None


def limiter_for(rate: float | None) -> RateLimiter:
    return TokenBucket(rate) if rate else Unlimited()
