"""Urgency classes: which changes matter soonest to guests, so they are sent first.

Under a service's rate limits (120 requests a minute) a large backlog takes hours; what is
sent first decides whether tomorrow's guests get their check-in links. The order, applied by
:func:`connector.plan.delivery_order`:

1. ``unit`` — accommodations, because reservations reference them;
2. ``upcoming`` — stays in progress and arrivals within ``horizon_days``, soonest check-in
   first; cancellations of stays that have not ended belong here too (a cancelled stay left
   active in the service keeps sending pre-arrival messages);
3. ``future`` — other future stays, soonest first;
4. ``past`` — stays that ended (backfills), most recent first.
"""

from __future__ import annotations

from dataclasses import dataclass

from connector.config import DEFAULT_HORIZON_DAYS

URGENCY_CLASSES: tuple[str, ...] = ("unit", "upcoming", "future", "past")
"""Delivery classes in the order they are sent."""


@dataclass(frozen=True)
class UrgencyPolicy:
    """How far ahead an arrival counts as upcoming, and whether cancellations jump the queue."""

    horizon_days: int = DEFAULT_HORIZON_DAYS
    cancellations_urgent: bool = True

    def __post_init__(self) -> None:
        if self.horizon_days < 0:
            raise ValueError(f"the urgency horizon must be 0 days or more, got {self.horizon_days}")
