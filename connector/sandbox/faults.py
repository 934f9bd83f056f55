"""Fault injection: the failures a client must survive, on demand and reproducibly.

Faults apply to the sync webhooks and the Open API, never to the admin API under /_sandbox/.
A fault is decided before the request is processed, so an injected 500 or 429 stores nothing.
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass
from enum import StrEnum
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator


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
    seed: int | None = Field(default=None, description="Seed of the random draws (reproducible).")

    @model_validator(mode="after")
    def _rates_fit_one_draw(self) -> Self:
        if self.error_rate + self.rate_limit_rate + self.timeout_rate + self.drop_rate > 1:
            raise ValueError(
                "error_rate + rate_limit_rate + timeout_rate + drop_rate must not exceed 1"
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
        )


class FaultKind(StrEnum):
    ERROR = "error"
    RATE_LIMIT = "rate_limit"
    TIMEOUT = "timeout"
    DROP = "drop"  # processed, then the connection closes before the answer


@dataclass(frozen=True, slots=True)
class Fault:
    kind: FaultKind
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
            self._random = random.Random(settings.seed)
            self._active = settings.is_active

    @property
    def settings(self) -> FaultSettings:
        """The settings as they stand now: fail_next counts down as failures are served."""
        with self._lock:
            return self._settings.model_copy(update={"fail_next": self._remaining_failures})

    def decide(self) -> FaultDecision:
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
            return FaultDecision(latency_s, None)
