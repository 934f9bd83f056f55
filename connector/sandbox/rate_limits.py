"""Per-token rate limits over several fixed windows (second, minute, hour), as the public
documentation of a service with this interface describes them: a refused request gets 429 with
Retry-After, and every limited response carries X-RateLimit-Limit-* and X-RateLimit-Remaining-*.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

WILDCARD = "*"


class RateLimit(BaseModel):
    """Requests allowed per window; a window left out is not limited."""

    model_config = ConfigDict(extra="forbid")

    second: int | None = Field(default=None, ge=1)
    minute: int | None = Field(default=None, ge=1)
    hour: int | None = Field(default=None, ge=1)
    # Window lengths. Only tests change them: a "minute" of 2 s keeps a test of the minute
    # window fast while the headers keep the documented names.
    second_s: float = Field(default=1.0, gt=0)
    minute_s: float = Field(default=60.0, gt=0)
    hour_s: float = Field(default=3600.0, gt=0)

    def windows(self) -> list[tuple[str, float, int]]:
        """(header suffix, window length in seconds, limit) of each limited window."""
        spans = (
            ("Second", self.second_s, self.second),
            ("Minute", self.minute_s, self.minute),
            ("Hour", self.hour_s, self.hour),
        )
        return [(name, seconds, limit) for name, seconds, limit in spans if limit is not None]


@dataclass(frozen=True, slots=True)
class RateDecision:
    allowed: bool
    retry_after_s: int
    headers: dict[str, str]


ALLOWED_WITHOUT_LIMIT = RateDecision(allowed=True, retry_after_s=0, headers={})


@dataclass(slots=True)
class _Window:
    start: float = 0.0
    count: int = 0


@dataclass(slots=True)
class _Counter:
    windows: dict[str, _Window] = field(default_factory=dict)


class RateLimiter:
    """Counts requests per key (a sync token or an Open API client id) in fixed windows."""

    def __init__(
        self, limits: dict[str, RateLimit], clock: Callable[[], float] = time.time
    ) -> None:
        self._limits = dict(limits)
        self._clock = clock
        self._counters: dict[str, _Counter] = {}
        self._lock = threading.Lock()

    @property
    def enabled(self) -> bool:
        return bool(self._limits)

    def _limit_for(self, key: str) -> RateLimit | None:
        return self._limits.get(key) or self._limits.get(WILDCARD)

    def reset(self) -> None:
        with self._lock:
            self._counters.clear()

    def check(self, key: str) -> RateDecision:
        """Count one request for ``key`` unless a window is full; say what to answer."""
        limit = self._limit_for(key) if self._limits else None
        if limit is None:
            return ALLOWED_WITHOUT_LIMIT
        now = self._clock()
        with self._lock:
            counter = self._counters.setdefault(key, _Counter())
            windows = []
            for name, seconds, allowed in limit.windows():
                window = counter.windows.setdefault(name, _Window())
                start = math.floor(now / seconds) * seconds
                if window.start != start:
                    window.start, window.count = start, 0
                windows.append((name, seconds, allowed, window))
            full = [
                (seconds, window)
                for _, seconds, allowed, window in windows
                if window.count >= allowed
            ]
            if not full:
                for *_, window in windows:
                    window.count += 1
            headers: dict[str, str] = {}
            for name, _, allowed, window in windows:
                headers[f"X-RateLimit-Limit-{name}"] = str(allowed)
                headers[f"X-RateLimit-Remaining-{name}"] = str(max(allowed - window.count, 0))
        if not full:
            return RateDecision(allowed=True, retry_after_s=0, headers=headers)
        retry_after = max(math.ceil(window.start + seconds - now) for seconds, window in full)
        headers["Retry-After"] = str(max(retry_after, 1))
        return RateDecision(allowed=False, retry_after_s=max(retry_after, 1), headers=headers)
