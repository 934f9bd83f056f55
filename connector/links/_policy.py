"""Which reservations get guest links, how old links may get, and what of the chat is kept."""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import date, timedelta

from connector.mapping.loop_sections import LinksSettings


@dataclass(frozen=True)
class LinksPolicy:
    """Reservations checking in from today to ``days_ahead`` days ahead (not cancelled) get
    links; links older than ``max_age`` are fetched again; ``last_message`` asks for the
    chat's last message (its metadata is kept), ``last_message_body`` keeps its text too."""

    days_ahead: int = 14
    max_age: timedelta = timedelta(hours=24)
    last_message: bool = True
    last_message_body: bool = False

    def __post_init__(self) -> None:
        if self.days_ahead < 0:
            raise ValueError(f"days ahead must be 0 or more, got {self.days_ahead}")
        if self.max_age <= timedelta(0):
            raise ValueError(f"the links' maximum age must be positive, got {self.max_age}")

    @classmethod
    def from_settings(cls, settings: LinksSettings | None) -> LinksPolicy:
        if settings is None:
            return cls()
        return cls(
            days_ahead=settings.days_ahead,
            max_age=timedelta(hours=settings.max_age_hours),
            last_message=settings.last_message,
            last_message_body=settings.last_message_body,
        )

    def overridden(
        self, *, days_ahead: int | None = None, max_age_hours: float | None = None
    ) -> LinksPolicy:
        """This policy with the values a command line or a resource gives instead."""
        return replace(
            self,
            days_ahead=self.days_ahead if days_ahead is None else days_ahead,
            max_age=self.max_age if max_age_hours is None else timedelta(hours=max_age_hours),
        )

    def window(self, today: date) -> tuple[date, date]:
        """First and last check-in (both included) of the reservations that get links."""
        return today, today + timedelta(days=self.days_ahead)
