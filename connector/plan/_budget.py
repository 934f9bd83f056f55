"""Budgets of a run and the backlog they leave.

A run may be given at most ``max_requests`` requests or ``max_duration_s`` seconds. The push
takes changes in delivery (urgency) order while the budget lasts; the rest are *deferred*:
not sent, not acknowledged, so the next run's plan holds them again, still in urgency order.
Nothing is re-sent twice (what was acknowledged is in the snapshot) and nothing is lost (what
was not is still different from the snapshot).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from connector.client import Window, estimate_seconds
from connector.plan._urgency import URGENCY_CLASSES


@dataclass(frozen=True)
class Budget:
    max_requests: int | None = None  # records started; a started record's retries finish
    max_duration_s: float | None = None  # no new record is started after this

    def __post_init__(self) -> None:
        if self.max_requests is not None and self.max_requests < 0:
            raise ValueError(f"max requests must be 0 or more, got {self.max_requests}")
        if self.max_duration_s is not None and self.max_duration_s <= 0:
            raise ValueError(f"max duration must be positive, got {self.max_duration_s}")

    @property
    def limited(self) -> bool:
        return self.max_requests is not None or self.max_duration_s is not None


class BudgetGate:
    """Hands out the budget to the push's workers, one record at a time."""

    def __init__(self, budget: Budget, clock: Any = time.monotonic) -> None:
        self.budget = budget
        self._clock = clock
        self._started_at = clock()
        self.taken = 0

    def take(self) -> bool:
        """May one more record be started?"""
        budget = self.budget
        if budget.max_requests is not None and self.taken >= budget.max_requests:
            return False
        if (
            budget.max_duration_s is not None
            and self._clock() - self._started_at >= budget.max_duration_s
        ):
            return False
        self.taken += 1
        return True


@dataclass(frozen=True)
class BacklogRow:
    urgency: str
    requests: int
    eta_s: float | None  # until this class (and every more urgent one) is sent; None: no limit


def backlog(by_urgency: Mapping[str, int], windows: Iterable[Window]) -> list[BacklogRow]:
    """Requests per urgency class and the time to clear it under the limits, in send order."""
    windows = tuple(windows)
    rows: list[BacklogRow] = []
    cumulative = 0
    for urgency in URGENCY_CLASSES:
        count = int(by_urgency.get(urgency, 0))
        cumulative += count
        rows.append(BacklogRow(urgency, count, estimate_seconds(cumulative, windows)))
    return rows


def backlog_json(rows: Iterable[BacklogRow]) -> dict[str, dict[str, Any]]:
    return {
        row.urgency: {
            "requests": row.requests,
            "eta_s": None if row.eta_s is None else round(row.eta_s, 1),
        }
        for row in rows
    }


def backlog_table(rows: Iterable[BacklogRow]) -> str:
    """One line per urgency class: requests and when it is cleared under the limits."""
    lines = [f"{'urgency':<9} {'requests':>8}  cleared after"]
    for row in rows:
        lines.append(f"{row.urgency:<9} {row.requests:>8}  {format_duration(row.eta_s)}")
    return "\n".join(lines)


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "no limit configured"
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 3600:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"
