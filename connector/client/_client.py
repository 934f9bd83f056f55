"""The HTTP client of the service's sync webhooks.

One pooled HTTP session per run: keep-alive connections, a client-side rate limit, retries
with exponential backoff and jitter for transient failures, and the x-request-id of every
attempt kept for support. Nothing here touches the snapshot: the push decides what an answer
means for the record.

The sync webhooks are the one hot path (one request per changed record), so on the default
transport they are posted with aiohttp directly: httpx's request and response models on top
of aiohttp cost about as much CPU as aiohttp itself (docs/decisions.md, "Transport"). The
Open API client, a few requests per run, keeps httpx (``open_http``).
"""

from __future__ import annotations

import asyncio
import json
import ssl
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping
from types import TracebackType
from typing import Any, NamedTuple, Protocol

import aiohttp
import httpx
import orjson
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
from connector.secrets import mask_text, sensitive_values

_TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    httpx.TransportError,  # timeouts, connection and protocol errors
    aiohttp.ClientError,  # the aiohttp transport does not map every one of its errors
    asyncio.TimeoutError,
    OSError,
)
_MAX_MESSAGE = 2000
REQUEST_ID_HEADER = "x-request-id"
_SYNC_HEADERS = {"content-type": "application/json"}


class _Answer(NamedTuple):
    """One HTTP answer, read in full, whichever library fetched it."""

    status: int
    headers: Mapping[str, str]  # case-insensitive (aiohttp's CIMultiDict, httpx's Headers)
    body: bytes
    charset: str | None

    @property
    def is_success(self) -> bool:
        return 200 <= self.status < 300

    @property
    def text(self) -> str:
        return self.body.decode(self.charset or "utf-8", errors="replace")


class _Poster(Protocol):
    """POSTs a body to a path of the service; raises the transport's errors."""

    async def post(self, path: str, body: bytes, headers: Mapping[str, str]) -> _Answer: ...

    async def aclose(self) -> None: ...


class _AiohttpPoster:
    """aiohttp directly: the same session, TLS, timeouts and proxy as the httpx transport."""

    def __init__(self, config: ClientConfig) -> None:
        self._session = _aiohttp_session(
            config,
            headers={"user-agent": "pms-sync", **_SYNC_HEADERS},
            # As httpx.Timeout(read, connect=..., pool=None) on the httpx transports.
            timeout=aiohttp.ClientTimeout(
                total=None, sock_connect=config.connect_timeout, sock_read=config.read_timeout
            ),
        )
        self._base = config.base_url.rstrip("/")  # httpx's base_url joins paths the same way
        self._proxy = _environment_proxy(config.base_url) if config.trust_env else None

    async def post(self, path: str, body: bytes, headers: Mapping[str, str]) -> _Answer:
        # Redirects are not followed (as with httpx): a 3xx is a configuration problem.
        async with self._session.post(
            self._base + path, data=body, headers=headers, proxy=self._proxy, allow_redirects=False
        ) as response:
            content = await response.read()
            return _Answer(response.status, response.headers, content, response.charset)

    async def aclose(self) -> None:
        await self._session.close()


class _HttpxPoster:
    """httpx over the configured transport (``Transport.HTTPX``: httpx's own)."""

    def __init__(self, config: ClientConfig) -> None:
        self._http = open_http(config, _SYNC_HEADERS)

    async def post(self, path: str, body: bytes, headers: Mapping[str, str]) -> _Answer:
        response = await self._http.post(path, content=body, headers=dict(headers))
        return _Answer(
            response.status_code, response.headers, response.content, response.charset_encoding
        )

    async def aclose(self) -> None:
        await self._http.aclose()


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
        self._poster: _Poster | None = None

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
        if self.config.transport == Transport.AIOHTTP:
            self._poster = _AiohttpPoster(self.config)
        else:
            self._poster = _HttpxPoster(self.config)
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._poster is not None:
            await self._poster.aclose()
            self._poster = None

    @property
    def poster(self) -> _Poster:
        if self._poster is None:
            raise ServiceError("the service client is not open: use it as `async with`")
        return self._poster

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
                    response = await self.poster.post(SYNC_PATHS[entity], body, headers)
                finally:
                    # Answered, failed or cancelled: the request is no longer in flight.
                    limiter.done(ticket)
            except _TRANSIENT_ERRORS as error:
                outcome.request_ids.append(None)
                outcome.status = None
                outcome.message = f"{type(error).__name__}: {error}".strip()
            else:
                outcome.request_ids.append(response.headers.get(REQUEST_ID_HEADER))
                outcome.status = response.status
                limiter.observe(response.headers, ticket)
                if response.is_success:
                    outcome.delivery = Delivery.ACKNOWLEDGED
                    outcome.body = _json_object(response.body)
                    outcome.message = ""
                    return outcome
                outcome.message = _masked_message(response.text, token, payload)
                if response.status in (400, 403):
                    outcome.delivery = Delivery.REFUSED
                    return outcome
                if response.status == 401:
                    outcome.delivery = Delivery.UNAUTHORIZED
                    return outcome
                if response.status != 429 and response.status < 500:
                    outcome.delivery = Delivery.UNEXPECTED
                    return outcome
                retry_after = parse_retry_after(response.headers.get("retry-after"))
                if response.status == 429:
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
        proxy = _environment_proxy(config.base_url) if config.trust_env else None
        return AiohttpTransport(
            verify=config.verify_tls,
            limits=limits,
            client=lambda: _aiohttp_session(config),
            proxy=httpx.Proxy(proxy) if proxy else None,
        )
    return httpx.AsyncHTTPTransport(
        verify=config.verify_tls, limits=limits, trust_env=config.trust_env
    )


def _aiohttp_session(
    config: ClientConfig,
    *,
    headers: Mapping[str, str] | None = None,
    timeout: aiohttp.ClientTimeout | None = None,
) -> aiohttp.ClientSession:
    """The pooled aiohttp session of both paths (direct and under httpx)."""
    ssl_context = ssl.create_default_context() if config.verify_tls else False
    connector = aiohttp.TCPConnector(limit=config.concurrency, ssl=ssl_context)
    # trust_env stays off here: aiohttp would look proxies and .netrc up in a thread on every
    # request (≈ 2 executor calls each); the proxy is resolved once instead.
    if timeout is None:  # under httpx: httpx hands its timeouts to each request
        return aiohttp.ClientSession(connector=connector, trust_env=False, headers=headers)
    return aiohttp.ClientSession(
        connector=connector, trust_env=False, headers=headers, timeout=timeout
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


def _json_object(body: bytes) -> dict[str, Any] | None:
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    return parsed if isinstance(parsed, dict) else None


def mask_message(message: str, secrets: Iterable[str]) -> str:
    """The message without a known secret (registered or given) in any encoding, truncated."""
    # Masked before the cut: a cut first could leave the start of a secret behind. The scan
    # itself is bounded, far beyond what any secret's encoding spans.
    return mask_text(message[: _MAX_MESSAGE * 4], secrets)[:_MAX_MESSAGE]


def _masked_message(text: str, token: str, payload: str) -> str:
    # A service may echo what it refused, raw, JSON-escaped or URL-encoded; codes and contact
    # data must not reach the dead-letter table or the logs through that echo.
    try:
        secrets = sensitive_values(orjson.loads(payload))
    except orjson.JSONDecodeError:
        secrets = set()
    return mask_message(text.strip(), {token, *secrets})
