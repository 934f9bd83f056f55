"""The result of sending one record to a sync webhook, retries included."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum

from connector.contract import AccommodationSyncResponse, ReservationSyncResponse


class Delivery(StrEnum):
    ACKNOWLEDGED = (
        "acknowledged"  # 2xx with a documented answer (connector/client/_acknowledgement.py)
    )
    # 2xx whose body is not a documented answer, or whose counts say nothing was stored, until
    # the retry budget ran out: whether the service holds the record is unknown.
    UNCONFIRMED = "unconfirmed"
    REFUSED = "refused"  # 400 or 403: the record (or the account's permission) is at fault
    UNAUTHORIZED = "unauthorized"  # 401: the token is missing or invalid
    UNDELIVERED = "undelivered"  # transient failures until the retry budget ran out
    UNEXPECTED = "unexpected"  # any other answer (404, 405, 3xx, …): a configuration problem


@dataclass
class SyncAttempts:
    """What happened to one record: the final answer and every attempt's x-request-id."""

    delivery: Delivery
    status: int | None  # HTTP status of the last attempt; None when no answer came
    message: str  # what went wrong (service message, transport error, unconfirmed), masked
    # The documented answer of the last attempt: set when acknowledged, and when unconfirmed
    # because its counts say nothing was stored.
    answer: AccommodationSyncResponse | ReservationSyncResponse | None = None
    request_ids: list[str | None] = field(default_factory=list)
    attempts: int = 0  # HTTP requests sent, retries included
    unconfirmed_answers: int = 0  # 2xx answers that were no acknowledgement, retries included
    # An attempt before the last one may have been stored without its answer reaching the
    # client (a broken connection, a 5xx, an unconfirmed 2xx): a last answer of "skipped" or
    # "already known" is then explained by that attempt. For a record left undelivered or
    # unconfirmed, any attempt, the last included: the push remembers it as possibly stored.
    answer_lost_before: bool = False
    # The service asked (429 Retry-After) to wait past the run's deadline: why, masked. The
    # push then stops the account's push (connector/push/_push.py).
    postponed: str | None = None
    stopped: bool = False  # a stop request ended the retries (connector/client/_stop.py)

    @property
    def request_id(self) -> str | None:
        """The x-request-id of the last attempt (the one support asks for)."""
        return self.request_ids[-1] if self.request_ids else None
