"""The HTTP client of the service interface: sync webhooks with auth, rate limit and retries,
and the Open API (OAuth2 tokens cached on disk, accounts, links, property status, webhooks)."""

from connector.client._client import REQUEST_ID_HEADER, ServiceClient, mask_message
from connector.client._config import (
    DEFAULT_BASE_URL,
    ClientConfig,
    RetryPolicy,
    TokenPlacement,
    Transport,
    parse_retry_after,
)
from connector.client._limiter import RateLimiter, TokenBucket, Unlimited, limiter_for
from connector.client._openapi import (
    CachedToken,
    ClientCredentials,
    OpenApiClient,
    TokenCache,
)
from connector.client._reachability import ServiceUnreachableError, ensure_reachable
from connector.client._sync import Delivery, SyncAttempts
from connector.client._tokens import AccountTokens

__all__ = [
    "DEFAULT_BASE_URL",
    "REQUEST_ID_HEADER",
    "AccountTokens",
    "CachedToken",
    "ClientConfig",
    "ClientCredentials",
    "Delivery",
    "OpenApiClient",
    "RateLimiter",
    "RetryPolicy",
    "ServiceClient",
    "ServiceUnreachableError",
    "SyncAttempts",
    "TokenBucket",
    "TokenCache",
    "TokenPlacement",
    "Transport",
    "Unlimited",
    "ensure_reachable",
    "limiter_for",
    "mask_message",
    "parse_retry_after",
]
