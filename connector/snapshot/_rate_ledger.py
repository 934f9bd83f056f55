"""One rate-limit log per (service, token) that concurrent runs on a PostgreSQL snapshot share.

Runs that send with the same token share the service's limits. On DuckDB they never overlap
(one writer), so each run reads the log at its start and replaces it at its end
(``connector.client._shared``). On PostgreSQL they do: each request is admitted here, in a
transaction under an advisory lock of its key, against the requests every run logged in the
last window, and logged at once. The log is ``rate_limit_log`` (the same table): a row's
``sent_at`` is the request's answer time, or, while it is in flight, minus its send time (a
request in flight counts as now, as in ``connector.client._limiter``; one in flight longer
than ``STALE_IN_FLIGHT_S`` belongs to a process that died and no longer counts).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence

import sqlalchemy as sa

STALE_IN_FLIGHT_S = 120.0
"""Longer than any request's connect and read timeouts together."""
FOREIGN_IN_FLIGHT_POLL_S = 0.02
"""How often to look again when only another run's requests in flight fill a window (their
answers wake nobody here)."""


class PostgresRateLedger:
    """``reserve`` a request under the windows, ``answered`` when its answer came.

    One database connection of its own (the snapshot's is the push's writer's); calls from
    several threads (one limiter per token) take turns on it. ``answered`` is called on the
    event loop, so it only notes the answer: the answer times are written by the next
    ``reserve`` (already off the loop, in its transaction) or by ``close``. Until then the
    request counts as in flight, that is as sent now: never less than it used.
    """

    def __init__(self, connection: sa.Connection) -> None:
        self._connection = connection
        self._turn = threading.Lock()
        self._answers: list[dict[str, object]] = []
        self._answers_lock = threading.Lock()  # held for an append or a swap, never for I/O

    def reserve(
        self, key: str, windows: Sequence[tuple[int, float]], now: float
    ) -> tuple[float, float | None]:
        """Log a request sent now if every window (``limit``, ``span`` seconds) has room:
        ``(0, marker)``; otherwise ``(seconds to wait, None)`` and nothing is logged."""
        longest = max(span for _, span in windows)
        with self._turn, self._connection.begin():
            c = self._connection
            self._write_answers()
            c.execute(
                sa.text("SELECT pg_advisory_xact_lock(hashtextextended(:lock, 0))"),
                {"lock": f"pms-sync rate limit {key}"},
            )
            c.execute(
                sa.text(
                    "DELETE FROM rate_limit_log WHERE limiter_key = :key AND "
                    "((sent_at >= 0 AND sent_at <= :gone) OR (sent_at < 0 AND sent_at > :stale))"
                ),
                {"key": key, "gone": now - longest, "stale": -(now - STALE_IN_FLIGHT_S)},
            )
            logged = c.execute(
                sa.text("SELECT sent_at FROM rate_limit_log WHERE limiter_key = :key"),
                {"key": key},
            ).scalars()
            times = sorted(now if t < 0 else float(t) for t in logged)
            wait = 0.0
            for limit, span in windows:
                inside = [t for t in times if t > now - span]
                if len(inside) >= limit:
                    # The request that must leave the window before one more fits.
                    oldest = inside[len(inside) - limit]
                    wait = max(wait, oldest + span - now if oldest < now else 0.0)
                    if oldest >= now:  # still in flight
                        wait = max(wait, FOREIGN_IN_FLIGHT_POLL_S)
            if wait > 0:
                return wait, None
            c.execute(
                sa.text("INSERT INTO rate_limit_log VALUES (:key, :marker)"),
                {"key": key, "marker": -now},
            )
            return 0.0, -now

    def answered(self, key: str, marker: float, at: float) -> None:
        """The request logged with ``marker`` was answered at ``at`` (written later)."""
        with self._answers_lock:
            self._answers.append({"key": key, "marker": marker, "at": at})

    def _write_answers(self) -> None:
        """Write the answer times noted since the last call (inside a transaction)."""
        with self._answers_lock:
            answers, self._answers = self._answers, []
        if answers:
            self._connection.execute(
                sa.text(
                    "UPDATE rate_limit_log SET sent_at = :at WHERE ctid = (SELECT ctid FROM "
                    "rate_limit_log WHERE limiter_key = :key AND sent_at = :marker LIMIT 1)"
                ),
                answers,
            )

    def close(self) -> None:
        with self._turn:
            with self._connection.begin():
                self._write_answers()
            self._connection.close()
