"""The result of sending one record to a sync webhook, retries included."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


class Delivery(StrEnum):
    ACKNOWLEDGED = "acknowledged"  # 2xx
    REFUSED = "refused"  # 400 or 403: the record (or the account's permission) is at fault
    UNAUTHORIZED = "unauthorized"  # 401: the token is missing or invalid
    UNDELIVERED = "undelivered"  # transient failures until the retry budget ran out
    UNEXPECTED = "unexpected"  # any other answer (404, 405, 3xx, …): a configuration problem


@dataclass
class SyncAttempts:
    """What happened to one record: the final answer and every attempt's x-request-id."""

    delivery: Delivery
    status: int | None  # HTTP status of the last attempt; None when no answer came
    message: str  # the service's message (plain-string body) or the transport error, masked
    body: dict[str, Any] | None = None  # the parsed 2xx response
    request_ids: list[str | None] = field(default_factory=list)
    attempts: int = 0  # HTTP requests sent, retries included

    @property
    def request_id(self) -> str | None:
        """The x-request-id of the last attempt (the one support asks for)."""
        return self.request_ids[-1] if self.request_ids else None
