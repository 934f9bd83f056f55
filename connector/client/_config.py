"""How the client talks to the service: where, with which credentials, how fast, how patiently."""

from __future__ import annotations

import random
import urllib.parse
from dataclasses import dataclass, field
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from enum import StrEnum
from urllib.parse import urlsplit

from connector.client._event_loop import EventLoop, default_event_loop
from connector.client._limiter import DOCUMENTED_WINDOWS, Window
from connector.config import (
    DEFAULT_BASE_URL,
    DEFAULT_CONCURRENCY,
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_READ_TIMEOUT_S,
)


class Transport(StrEnum):
    """The HTTP library of the client (see docs/decisions.md, "Transport", for the figures)."""

    # The default: sync webhooks posted with aiohttp directly, the Open API through httpx
    # over httpx_aiohttp.AiohttpTransport.
    AIOHTTP = "aiohttp"
    HTTPX = "httpx"  # httpx's own async transport (httpcore) for every request


class TokenPlacement(StrEnum):
    """Where the sync-webhook token travels; the spec leaves it open, public docs say a header."""

    WISHBOX_HEADER = "x-wishbox-auth-token"
    BEARER = "bearer"  # Authorization: Bearer <token>
    API_TOKEN_MEMBER = "apiToken"  # the body member seen in the spec's request sample


class AcknowledgementPolicy(StrEnum):
    """Which 2xx answers acknowledge a record (docs/decisions.md, "Acknowledgements and
    disagreements"). Either way the body must be the JSON object of spec §4.1/§4.2 with every
    documented member present of its documented type, and no error shape."""

    COUNTS = "counts"  # and at least one count member: the service said what it did
    DOCUMENTED = "documented"  # also {} and objects without counts (a summary only)


@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff with full jitter for transient failures.

    429, 5xx, timeouts and connection errors are retried; 400/401/403 never are. A 429's
    Retry-After is honoured (capped at ``max_retry_after``) and is a floor under the backoff.
    """

    max_attempts: int = DEFAULT_MAX_ATTEMPTS  # requests per record and run, the first one included
    base_delay: float = 0.25  # seconds; attempt n waits up to base * 2**(n-1)
    max_delay: float = 20.0
    max_retry_after: float = 60.0

    def delay(self, attempt: int, retry_after: float | None = None) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        ceiling = min(self.max_delay, self.base_delay * 2 ** (attempt - 1))
        backoff = random.uniform(0, ceiling)
        if retry_after is not None:
            return max(min(retry_after, self.max_retry_after), backoff)
        return backoff


@dataclass(frozen=True)
class ClientConfig:
    base_url: str = DEFAULT_BASE_URL
    token_placement: frozenset[TokenPlacement] = field(
        default_factory=lambda: frozenset({TokenPlacement.WISHBOX_HEADER, TokenPlacement.BEARER})
    )
    transport: Transport = Transport.AIOHTTP
    event_loop: EventLoop = field(default_factory=default_event_loop)  # the push's
    concurrency: int = DEFAULT_CONCURRENCY  # requests in flight at once (and pooled connections)
    rate_limit: float | None = None  # a plain requests-per-second bucket instead of windows
    # Per-token windows (second, minute, hour). None: the documented limits of the real
    # service (15/s, 120/min, 5,000/h) for a remote base URL, none for a loopback one (the
    # local sandbox, unlimited unless configured); () turns client-side windows off. Limits
    # the service announces in X-RateLimit-* headers are adopted either way.
    rate_windows: tuple[Window, ...] | None = None
    connect_timeout: float = 5.0
    read_timeout: float = DEFAULT_READ_TIMEOUT_S
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    # TLS certificates are always verified, except for a base URL named here on purpose (a
    # PMS-side test server with a self-signed certificate). There is no blanket switch.
    insecure_tls_hosts: frozenset[str] = frozenset()
    trust_env: bool = True  # proxy variables (HTTPS_PROXY, NO_PROXY) and SSL_CERT_FILE
    # Which 2xx bodies acknowledge a record; anything else is retried, then left pending.
    acknowledgement: AcknowledgementPolicy = AcknowledgementPolicy.COUNTS

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be at least 1, got {self.concurrency}")
        if self.rate_limit is not None and self.rate_limit <= 0:
            raise ValueError(f"rate limit must be positive, got {self.rate_limit}")

    @property
    def verify_tls(self) -> bool:
        """False only when this client's base URL is one of ``insecure_tls_hosts``."""
        return normalize_base_url(self.base_url) not in {
            normalize_base_url(url) for url in self.insecure_tls_hosts
        }


def normalize_base_url(url: str) -> str:
    """``HTTPS://Host:8443/`` → ``https://host:8443``: the form base URLs are compared in."""
    parts = urllib.parse.urlsplit(url.strip())
    return urllib.parse.urlunsplit(
        (parts.scheme.lower(), parts.netloc.lower(), parts.path.rstrip("/"), "", "")
    )


_LOOPBACK = ("127.0.0.1", "localhost", "::1", "[::1]")


def effective_windows(config: ClientConfig) -> tuple[Window, ...]:
    """The windows the client enforces for ``config`` (see ``ClientConfig.rate_windows``)."""
    if config.rate_windows is not None:
        return config.rate_windows
    host = urlsplit(config.base_url).hostname or ""
    return () if host in _LOOPBACK else DOCUMENTED_WINDOWS


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a Retry-After header: delta-seconds or an HTTP date (RFC 9110 §10.2.3)."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        return max(0.0, (when - datetime.now(UTC)).total_seconds())
    # OverflowError: a date no datetime holds (year 99999999999, an offset of +9999…); such
    # a header is as unreadable as garbage, and must not end the run.
    except (TypeError, ValueError, OverflowError):
        return None
