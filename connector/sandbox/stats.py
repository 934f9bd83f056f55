"""Counts of requests received, per endpoint (method and path template) and status, of the
faults and misbehaviours injected, per kind, and of the requests being answered right now."""

from __future__ import annotations

import threading
from collections import defaultdict
from typing import Any


class RequestStats:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._counts: defaultdict[str, defaultdict[str, int]] = defaultdict(
            lambda: defaultdict(int)
        )
        self._injected: defaultdict[str, int] = defaultdict(int)
        self._in_flight = 0

    def arrived(self) -> None:
        """A request is being answered (delayed, faulted or served) until :meth:`count`."""
        with self._lock:
            self._in_flight += 1

    def count(self, endpoint: str, status: int) -> None:
        with self._lock:
            self._counts[endpoint][str(status)] += 1
            self._in_flight -= 1

    def injected(self, kind: str) -> None:
        with self._lock:
            self._injected[str(kind)] += 1

    def reset(self) -> None:
        with self._lock:
            self._counts.clear()
            self._injected.clear()

    def as_json(self) -> dict[str, Any]:
        with self._lock:
            requests = {
                endpoint: dict(sorted(by_status.items()))
                for endpoint, by_status in sorted(self._counts.items())
            }
            injected = dict(sorted(self._injected.items()))
            in_flight = self._in_flight
        return {
            "requests": requests,
            "total": sum(sum(by_status.values()) for by_status in requests.values()),
            "injected": injected,
            # A test can act while a request is at the service (a stop with it in flight).
            "in_flight": in_flight,
        }
