"""The HTTP client of the service interface: sync webhooks with auth, rate limit and retries,
and the Open API (OAuth2 tokens cached on disk, accounts, links, property status, webhooks)."""

from connector.client._acknowledgement import (
    COUNT_MEMBERS,
    AnswerReading,
    SyncAnswer,
    nothing_stored,
    present_counts,
    read_answer,
)
from connector.client._client import REQUEST_ID_HEADER, ServiceClient, mask_message
from connector.client._config import (
    DEFAULT_BASE_URL,
    AcknowledgementPolicy,
    ClientConfig,
    RetryPolicy,
    TokenPlacement,
    Transport,
    effective_windows,
    normalize_base_url,
    parse_retry_after,
)
from connector.client._event_loop import EventLoop, default_event_loop, run_on
from connector.client._limiter import (
    DOCUMENTED_WINDOWS,
    RateLimiter,
    TokenBucket,
    Unlimited,
    Window,
    WindowLimiter,
    estimate_seconds,
    limiter_for,
    parse_windows,
)
from connector.client._openapi import (
    CachedToken,
    ClientCredentials,
    OpenApiClient,
    TokenCache,
)
from connector.client._reachability import ServiceUnreachableError, ensure_reachable
from connector.client._shared import limiter_key, load_shared_state, save_shared_state
from connector.client._stop import (
    DEFAULT_MAX_DURATION_S,
    STOP_SIGNALS,
    RunStop,
    parse_max_duration,
)
from connector.client._sync import Delivery, SyncAttempts
from connector.client._tokens import MISSING_TOKEN_HINT, AccountTokens, TokenSource

__all__ = [
    "COUNT_MEMBERS",
    "DEFAULT_BASE_URL",
    "DEFAULT_MAX_DURATION_S",
    "DOCUMENTED_WINDOWS",
    "MISSING_TOKEN_HINT",
    "REQUEST_ID_HEADER",
    "STOP_SIGNALS",
    "AccountTokens",
    "AcknowledgementPolicy",
    "AnswerReading",
    "CachedToken",
    "ClientConfig",
    "ClientCredentials",
    "Delivery",
    "EventLoop",
    "OpenApiClient",
    "RateLimiter",
    "RetryPolicy",
    "RunStop",
    "ServiceClient",
    "ServiceUnreachableError",
    "SyncAnswer",
    "SyncAttempts",
    "TokenBucket",
    "TokenCache",
    "TokenPlacement",
    "TokenSource",
    "Transport",
    "Unlimited",
    "Window",
    "WindowLimiter",
    "default_event_loop",
    "effective_windows",
    "ensure_reachable",
    "estimate_seconds",
    "limiter_for",
    "limiter_key",
    "load_shared_state",
    "mask_message",
    "normalize_base_url",
    "nothing_stored",
    "parse_max_duration",
    "parse_retry_after",
    "parse_windows",
    "present_counts",
    "read_answer",
    "run_on",
    "save_shared_state",
]
