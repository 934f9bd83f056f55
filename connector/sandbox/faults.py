"""Fault injection: the failures a client must survive, on demand and reproducibly.

Faults apply to the sync webhooks and the Open API, never to the admin API under /_sandbox/.
A fault is decided before the request is processed, so an injected 500 or 429 stores nothing.

Misbehaviours are answers a client must *not* take for an acknowledgement: a 200 with a
captive portal's page, an empty body, an error object or counts of nothing; counts of the
wrong type; a redirect to a login page; a connection reset after the headers. They apply to
the sync webhooks only (the answers the connector records as acknowledgements).
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Misbehaviour(StrEnum):
    """An answer a client must not take for an acknowledgement (docs/sandbox.md, "Faults")."""

    HTML_200 = "html_200"  # 200 text/html, a captive portal's page: not stored
    EMPTY_200 = "empty_200"  # 200 with an empty body: not stored
    ERROR_JSON_200 = "error_json_200"  # 200 {"error": "..."}: not stored
    ZERO_COUNTS_200 = "zero_counts_200"  # 200, the documented object, every count 0: not stored
    WRONG_TYPES_200 = "wrong_types_200"  # stored; 200 with the counts as strings ("1")
    REDIRECT_302 = "redirect_302"  # 302 to a login page: not stored
    RESET_AFTER_HEADERS = "reset_after_headers"  # stored; the connection resets after headers
    # Stored; 200 {}: every member of §4.1/§4.2 is optional, so this is documented but says
    # nothing (acknowledged only under PMS_SYNC_ACKNOWLEDGEMENT=documented).
    EMPTY_OBJECT_200 = "empty_object_200"
    # Stored; 200, the real answer with the counts (and reservationIds) of one more record, as
    # a service answering for a batch would: documented, acknowledged, but it does not account
    # for the one record sent (docs/drift.md: drift left open, the next run re-sends it).
    EXTRA_COUNTS_200 = "extra_counts_200"


STORED_BY: frozenset[Misbehaviour] = frozenset(
    {
        Misbehaviour.WRONG_TYPES_200,
        Misbehaviour.RESET_AFTER_HEADERS,
        Misbehaviour.EMPTY_OBJECT_200,
        Misbehaviour.EXTRA_COUNTS_200,
    }
)
"""The misbehaviours whose request is processed (and stored) before the answer goes wrong."""

Rate = Annotated[float, Field(ge=0, le=1)]


class FaultSettings(BaseModel):
    """What to inject. Rates are fractions of requests; one random draw per request decides."""

    model_config = ConfigDict(extra="forbid")

    error_rate: float = Field(default=0.0, ge=0, le=1, description="Fraction answered 500.")
    rate_limit_rate: float = Field(
        default=0.0, ge=0, le=1, description="Fraction answered 429 with Retry-After."
    )
    retry_after_s: int = Field(default=1, ge=0, description="Retry-After of injected 429s.")
    latency_ms: float = Field(default=0.0, ge=0, description="Delay added to every request.")
    timeout_rate: float = Field(
        default=0.0, ge=0, le=1, description="Fraction that never answer before timeout_s."
    )
    timeout_s: float = Field(
        default=30.0,
        gt=0,
        description="How long a timed-out request hangs (or until the client gives up); then 504.",
    )
    drop_rate: float = Field(
        default=0.0,
        ge=0,
        le=1,
        description="Fraction processed (and stored) whose answer is lost: the connection drops.",
    )
    fail_next: int = Field(default=0, ge=0, description="Answer the next N requests with an error.")
    fail_next_status: Literal[429, 500, 502, 503] = Field(
        default=500, description="Status of the fail_next errors."
    )
    misbehaviour_rates: dict[Misbehaviour, Rate] = Field(
        default_factory=dict,
        description="Fraction of sync-webhook requests answered with each misbehaviour.",
    )
    misbehave_next: int = Field(
        default=0,
        ge=0,
        description="Answer the next N sync-webhook requests with `misbehaviour`.",
    )
    misbehaviour: Misbehaviour | None = Field(
        default=None, description="The misbehaviour of the misbehave_next answers."
    )
    seed: int | None = Field(default=None, description="Seed of the random draws (reproducible).")

    @model_validator(mode="after")
    def _rates_fit_one_draw(self) -> Self:
        rates = self.error_rate + self.rate_limit_rate + self.timeout_rate + self.drop_rate
        if rates + sum(self.misbehaviour_rates.values()) > 1:
            raise ValueError(
                "error_rate + rate_limit_rate + timeout_rate + drop_rate + the "
                "misbehaviour_rates must not exceed 1"
            )
        if self.misbehave_next and self.misbehaviour is None:
            raise ValueError(
                f"misbehave_next needs a misbehaviour: one of {', '.join(Misbehaviour)}"
            )
        return self

    @property
    def is_active(self) -> bool:
        return bool(
            self.error_rate
            or self.rate_limit_rate
            or self.latency_ms
            or self.timeout_rate
            or self.drop_rate
            or self.fail_next
            or any(self.misbehaviour_rates.values())
            or self.misbehave_next
        )


class FaultKind(StrEnum):
    ERROR = "error"
    RATE_LIMIT = "rate_limit"
    TIMEOUT = "timeout"
    DROP = "drop"  # processed, then the connection closes before the answer


@dataclass(frozen=True, slots=True)
class Fault:
    kind: FaultKind | Misbehaviour
    status: int
    retry_after_s: int | None = None


@dataclass(frozen=True, slots=True)
class FaultDecision:
    latency_s: float
    fault: Fault | None


NO_FAULT = FaultDecision(latency_s=0.0, fault=None)


class FaultInjector:
    """Holds the current settings and decides, per request, which fault (if any) to inject."""

    def __init__(self, settings: FaultSettings | None = None) -> None:
        self._lock = threading.Lock()
        self.configure(settings or FaultSettings())

    def configure(self, settings: FaultSettings) -> None:
        with self._lock:
            self._settings = settings
            self._remaining_failures = settings.fail_next
            self._remaining_misbehaviours = settings.misbehave_next
            self._random = random.Random(settings.seed)
            self._active = settings.is_active

    @property
    def settings(self) -> FaultSettings:
        """The settings as they stand now: fail_next and misbehave_next count down."""
        with self._lock:
            return self._settings.model_copy(
                update={
                    "fail_next": self._remaining_failures,
                    "misbehave_next": self._remaining_misbehaviours,
                }
            )

    def decide(self, *, sync_webhook: bool = True) -> FaultDecision:
        """The fault of one request. Misbehaviours only hit sync-webhook requests: elsewhere
        a draw that picks one answers normally, and misbehave_next waits for a sync request."""
        if not self._active:
            return NO_FAULT
        with self._lock:
            settings = self._settings
            latency_s = settings.latency_ms / 1000
            if self._remaining_failures > 0:
                self._remaining_failures -= 1
                status = settings.fail_next_status
                if status == 429:
                    fault = Fault(FaultKind.RATE_LIMIT, 429, settings.retry_after_s)
                else:
                    fault = Fault(FaultKind.ERROR, status)
                return FaultDecision(latency_s, fault)
            if sync_webhook and self._remaining_misbehaviours > 0 and settings.misbehaviour:
                self._remaining_misbehaviours -= 1
                return FaultDecision(latency_s, _misbehaving(settings.misbehaviour))
            draw = self._random.random()
            if draw < settings.timeout_rate:
                return FaultDecision(latency_s, Fault(FaultKind.TIMEOUT, 504))
            draw -= settings.timeout_rate
            if draw < settings.error_rate:
                return FaultDecision(latency_s, Fault(FaultKind.ERROR, 500))
            draw -= settings.error_rate
            if draw < settings.rate_limit_rate:
                return FaultDecision(
                    latency_s, Fault(FaultKind.RATE_LIMIT, 429, settings.retry_after_s)
                )
            draw -= settings.rate_limit_rate
            if draw < settings.drop_rate:
                return FaultDecision(latency_s, Fault(FaultKind.DROP, 0))
            draw -= settings.drop_rate
            # In the enum's order, so a seed gives the same sequence whatever the dict's order.
            for kind in Misbehaviour:
                rate = settings.misbehaviour_rates.get(kind, 0.0)
                if draw < rate:
                    return FaultDecision(latency_s, _misbehaving(kind) if sync_webhook else None)
                draw -= rate
            return FaultDecision(latency_s, None)


def _misbehaving(kind: Misbehaviour) -> Fault:
    return Fault(kind, 302 if kind is Misbehaviour.REDIRECT_302 else 200)
