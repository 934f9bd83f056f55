"""The HTTP client of the service's sync webhooks.

One ``httpx.AsyncClient`` per run: pooled keep-alive connections, a client-side rate limit,
retries with exponential backoff and jitter for transient failures, and the x-request-id of
every attempt kept for support. Nothing here touches the snapshot: the push decides what an
answer means for the record.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import urllib.parse
import urllib.request
from collections.abc import Iterable
from types import TracebackType
from typing import Any

import aiohttp
import httpx
from httpx_aiohttp import AiohttpTransport

from connector.client._config import (
    ClientConfig,
    TokenPlacement,
    Transport,
    effective_windows,
    parse_retry_after,
)
from connector.client._limiter import RateLimiter, WindowLimiter, limiter_for
from connector.client._sync import Delivery, SyncAttempts
from connector.client._tokens import AccountTokens
from connector.contract import SYNC_PATHS, Entity, SyncEvent
from connector.errors import ServiceError
from connector.secrets import MASK, is_sensitive

_TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    httpx.TransportError,  # timeouts, connection and protocol errors
    aiohttp.ClientError,  # the aiohttp transport does not map every one of its errors
    asyncio.TimeoutError,
    OSError,
)
_MAX_MESSAGE = 2000
REQUEST_ID_HEADER = "x-request-id"


class ServiceClient:
    """``async with ServiceClient(config, tokens) as client: await client.send_record(...)``."""

    def __init__(
        self,
        config: ClientConfig,
        tokens: AccountTokens,
        *,
        limiter: RateLimiter | None = None,
    ) -> None:
        self.config = config
        self.tokens = tokens
        # The service limits each token: one limiter per token, unless one is imposed.
        self._shared_limiter = limiter
        self.limiters: dict[str, RateLimiter] = {}
        self.throttled = 0  # 429 answers received
        self._http: httpx.AsyncClient | None = None

    def limiter_of(self, token: str) -> RateLimiter:
        if self._shared_limiter is not None:
            return self._shared_limiter
        limiter = self.limiters.get(token)
        if limiter is None:
            limiter = self.limiters[token] = limiter_for(
                self.config.rate_limit, effective_windows(self.config)
            )
        return limiter

    @property
    def limiter(self) -> RateLimiter:
        """The limiter of the default token (or the imposed one)."""
        return self.limiter_of(self.tokens.default or "")

    def window_limiters(self) -> dict[str, WindowLimiter]:
        """Per-token window limiters in use (their state is shared through the snapshot)."""
        found = {t: lim for t, lim in self.limiters.items() if isinstance(lim, WindowLimiter)}
        if isinstance(self._shared_limiter, WindowLimiter):
            found[self.tokens.default or ""] = self._shared_limiter
        return found

    async def __aenter__(self) -> ServiceClient:
        self._http = open_http(self.config, {"content-type": "application/json"})
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    @property
    def http(self) -> httpx.AsyncClient:
        if self._http is None:
            raise ServiceError("the service client is not open: use it as `async with`")
        return self._http

    async def send_record(
        self, entity: Entity, account_id: str, event: SyncEvent, payload: str
    ) -> SyncAttempts:
        """POST one resource (canonical JSON) to its sync webhook, retrying transient failures."""
        token = self.tokens.for_account(account_id)
        if not token:
            return SyncAttempts(
                Delivery.UNAUTHORIZED,
                None,
                f"no token configured for account {account_id!r}: set PMS_SYNC_TOKEN or add "
                f"the account to the tokens file (PMS_SYNC_TOKENS_FILE)",
            )
        body = _envelope(entity, account_id, event, payload, token, self.config.token_placement)
        headers = _auth_headers(token, self.config.token_placement)
        outcome = SyncAttempts(Delivery.UNDELIVERED, None, "")
        retry = self.config.retry
        limiter = self.limiter_of(token)
        for attempt in range(1, retry.max_attempts + 1):
            ticket = await limiter.acquire()
            outcome.attempts = attempt
            retry_after: float | None = None
            try:
                try:
                    response = await self.http.post(
                        SYNC_PATHS[entity], content=body, headers=headers
                    )
                finally:
                    # Answered, failed or cancelled: the request is no longer in flight.
                    limiter.done(ticket)
            except _TRANSIENT_ERRORS as error:
                outcome.request_ids.append(None)
                outcome.status = None
                outcome.message = f"{type(error).__name__}: {error}".strip()
            else:
                outcome.request_ids.append(response.headers.get(REQUEST_ID_HEADER))
                outcome.status = response.status_code
                limiter.observe(response.headers, ticket)
                if response.is_success:
                    outcome.delivery = Delivery.ACKNOWLEDGED
                    outcome.body = _json_object(response)
                    outcome.message = ""
                    return outcome
                outcome.message = _masked_message(response.text, token, payload)
                if response.status_code in (400, 403):
                    outcome.delivery = Delivery.REFUSED
                    return outcome
                if response.status_code == 401:
                    outcome.delivery = Delivery.UNAUTHORIZED
                    return outcome
                if response.status_code != 429 and response.status_code < 500:
                    outcome.delivery = Delivery.UNEXPECTED
                    return outcome
                retry_after = parse_retry_after(response.headers.get("retry-after"))
                if response.status_code == 429:
                    self.throttled += 1
                    limiter.throttled(retry_after)
            if attempt < retry.max_attempts:
                await asyncio.sleep(retry.delay(attempt, retry_after))
        outcome.delivery = Delivery.UNDELIVERED
        return outcome


def open_http(config: ClientConfig, headers: dict[str, str] | None = None) -> httpx.AsyncClient:
    """The pooled httpx client both service clients use: one transport, timeouts and identity."""
    return httpx.AsyncClient(
        base_url=config.base_url,
        transport=_transport(config),
        # No pool timeout: bounded concurrency already queues requests before the pool does.
        timeout=httpx.Timeout(config.read_timeout, connect=config.connect_timeout, pool=None),
        headers={"user-agent": "pms-sync", **(headers or {})},
    )


def _transport(config: ClientConfig) -> httpx.AsyncBaseTransport:
    limits = httpx.Limits(
        max_connections=config.concurrency, max_keepalive_connections=config.concurrency
    )
    if config.transport == Transport.AIOHTTP:

        def session() -> aiohttp.ClientSession:
            ssl_context = ssl.create_default_context() if config.verify_tls else False
            connector = aiohttp.TCPConnector(limit=config.concurrency, ssl=ssl_context)
            # trust_env stays off here: aiohttp would look proxies and .netrc up in a thread
            # on every request (≈ 2 executor calls each); the proxy is resolved once instead.
            return aiohttp.ClientSession(connector=connector, trust_env=False)

        proxy = _environment_proxy(config.base_url) if config.trust_env else None
        return AiohttpTransport(
            verify=config.verify_tls,
            limits=limits,
            client=session,
            proxy=httpx.Proxy(proxy) if proxy else None,
        )
    return httpx.AsyncHTTPTransport(
        verify=config.verify_tls, limits=limits, trust_env=config.trust_env
    )


def _environment_proxy(base_url: str) -> str | None:
    """The proxy HTTP(S)_PROXY/ALL_PROXY name for ``base_url``, unless NO_PROXY exempts it."""
    parts = urllib.parse.urlsplit(base_url)
    if urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    proxies = urllib.request.getproxies()
    return proxies.get(parts.scheme) or proxies.get("all")


def _envelope(
    entity: Entity,
    account_id: str,
    event: SyncEvent,
    payload: str,
    token: str,
    placement: Iterable[TokenPlacement],
) -> bytes:
    # The resource is already canonical JSON: splice it in rather than parse and re-dump it.
    members = [
        f'"accountId":{json.dumps(account_id)}',
        f'"entity":"{entity}"',
        f'"event":"{event}"',
        f'"resource":{payload}',
    ]
    if TokenPlacement.API_TOKEN_MEMBER in placement:
        members.append(f'"apiToken":{json.dumps(token)}')
    return ("{" + ",".join(members) + "}").encode()


def _auth_headers(token: str, placement: Iterable[TokenPlacement]) -> dict[str, str]:
    headers: dict[str, str] = {}
    if TokenPlacement.WISHBOX_HEADER in placement:
        headers["X-Wishbox-Auth-Token"] = token
    if TokenPlacement.BEARER in placement:
        headers["Authorization"] = f"Bearer {token}"
    return headers


def _json_object(response: httpx.Response) -> dict[str, Any] | None:
    try:
        parsed = response.json()
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) else None


def _secret_values(value: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(value, dict):
        for key, member in value.items():
            if is_sensitive(str(key)) and isinstance(member, str | int | float) and member != "":
                found.add(str(member))
            else:
                found |= _secret_values(member)
    elif isinstance(value, list):
        for item in value:
            found |= _secret_values(item)
    return found


def mask_message(message: str, secrets: Iterable[str]) -> str:
    """The message with every known secret value replaced, longest first, and truncated."""
    for secret in sorted((s for s in secrets if len(s) >= 3), key=len, reverse=True):
        message = message.replace(secret, MASK)
    return message[:_MAX_MESSAGE]


def _masked_message(text: str, token: str, payload: str) -> str:
    # A service may echo what it refused; codes and contact data must not reach the
    # dead-letter table or the logs through that echo.
    try:
        secrets = _secret_values(json.loads(payload))
    except ValueError:
        secrets = set()
    return mask_message(text.strip(), {token, *secrets})
