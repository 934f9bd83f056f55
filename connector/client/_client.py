"""The HTTP client of the service's sync webhooks.

One pooled HTTP session per run: keep-alive connections, a client-side rate limit, retries
with exponential backoff and jitter for transient failures, and the x-request-id of every
attempt kept for support. Nothing here touches the snapshot: the push decides what an answer
means for the record. A 2xx acknowledges a record only when its body is a documented answer
(``connector/client/_acknowledgement.py``); any other 2xx is retried like a 5xx and, when it
outlasts the retry budget, reported as unconfirmed.

The sync webhooks are the one hot path (one request per changed record), so on the default
transport they are posted with aiohttp directly: httpx's request and response models on top
of aiohttp cost about as much CPU as aiohttp itself (docs/decisions.md, "Transport"). The
Open API client, a few requests per run, keeps httpx (``open_http``).
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import ssl
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Iterable, Mapping
from types import TracebackType
from typing import NamedTuple, Protocol

import aiohttp
import httpx
import orjson
from httpx_aiohttp import AiohttpTransport

from connector.client._acknowledgement import read_answer
from connector.client._config import (
    ClientConfig,
    TokenPlacement,
    Transport,
    effective_windows,
    parse_retry_after,
)
from connector.client._limiter import RateLimiter, WindowLimiter, limiter_for
from connector.client._stop import RunStop
from connector.client._sync import Delivery, SyncAttempts
from connector.client._tokens import TokenSource
from connector.contract import SYNC_PATHS, Entity, SyncEvent
from connector.errors import ServiceError
from connector.secrets import mask_text, sensitive_values

_MAX_BODY = 1 << 20
"""Bytes of an answer read at most. A sync answer is a few hundred bytes and an error page a
few kilobytes; a body of hundreds of megabytes cost five times its size in memory."""


class BodyTooLarge(Exception):
    """An answer longer than :data:`_MAX_BODY`: given up like a body cut off."""

    def __init__(self) -> None:
        super().__init__(f"the body is longer than {_MAX_BODY:,} bytes, beyond any answer")


_TRANSIENT_ERRORS: tuple[type[BaseException], ...] = (
    BodyTooLarge,
    httpx.TransportError,  # timeouts, connection and protocol errors
    # A body whose Content-Encoding does not decode (a broken gzip stream): not a transport
    # error to httpx, but the answer is lost all the same (aiohttp raises ClientPayloadError).
    httpx.DecodingError,
    aiohttp.ClientError,  # the aiohttp transport does not map every one of its errors
    asyncio.TimeoutError,
    OSError,
)
# Failures that happen before the request could reach the service: nothing was stored.
_NEVER_SENT: tuple[type[BaseException], ...] = (
    aiohttp.ClientConnectorError,
    aiohttp.ConnectionTimeoutError,
    httpx.ConnectError,
    httpx.ConnectTimeout,
)
_MAX_MESSAGE = 2000
_QUOTED_ERROR = 200
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
        try:
            return self.body.decode(self.charset or "utf-8", errors="replace")
        except LookupError:
            # A charset Python does not know (``charset=x-unknown``): the message is still
            # read, as UTF-8, rather than the run failing on the service's header.
            return self.body.decode("utf-8", errors="replace")


class _AnswerCutOff(Exception):
    """The status line and headers came, the body did not: the connection broke.

    The service may have processed the request (and its x-request-id came with the headers),
    so this is a transient failure after which the record may be stored.
    """

    def __init__(self, status: int, request_id: str | None, error: BaseException) -> None:
        self.request_id = request_id
        cause = _transport_message(error)[:_QUOTED_ERROR]
        self.message = (
            f"the connection broke after the HTTP {status} status line and headers, "
            f"before the body ({cause})"
        )
        super().__init__(self.message)


async def _body_within(
    seconds: float, chunks: AsyncIterator[bytes], declared: int | None = None
) -> bytes:
    """The rest of a body, which must arrive whole within ``seconds`` of its headers and be
    at most :data:`_MAX_BODY` long (``declared``: its Content-Length, when it has one).

    The read timeout bounds each socket read, not the body: a service trickling a byte
    every few seconds (or a chunked body that never ends) would hold the request, and the
    run, for ever. A sync answer is a few hundred bytes, so one read timeout is ample; a
    body cut off by it is an answer lost after the headers (``asyncio.TimeoutError``).
    """
    if declared is not None and declared > _MAX_BODY:
        raise BodyTooLarge
    parts: list[bytes] = []
    size = 0
    async with asyncio.timeout(seconds):
        async for chunk in chunks:
            size += len(chunk)
            if size > _MAX_BODY:
                raise BodyTooLarge
            parts.append(chunk)
    return b"".join(parts)


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
        self._read_timeout = config.read_timeout

    async def post(self, path: str, body: bytes, headers: Mapping[str, str]) -> _Answer:
        # Redirects are not followed (as with httpx): a 3xx is a configuration problem.
        async with self._session.post(
            self._base + path, data=body, headers=headers, proxy=self._proxy, allow_redirects=False
        ) as response:
            try:
                if response.content.is_eof():  # the body came with the headers (most answers)
                    content = await response.read()
                else:
                    content = await _body_within(
                        self._read_timeout, response.content.iter_any(), response.content_length
                    )
            except _TRANSIENT_ERRORS as error:
                request_id = response.headers.get(REQUEST_ID_HEADER)
                raise _AnswerCutOff(response.status, request_id, error) from error
            return _Answer(response.status, response.headers, content, response.charset)

    async def aclose(self) -> None:
        await self._session.close()


class _HttpxPoster:
    """httpx over the configured transport (``Transport.HTTPX``: httpx's own)."""

    def __init__(self, config: ClientConfig) -> None:
        self._http = open_http(config, _SYNC_HEADERS)
        self._read_timeout = config.read_timeout

    async def post(self, path: str, body: bytes, headers: Mapping[str, str]) -> _Answer:
        # Streamed, so that a body lost after the headers still yields the x-request-id.
        async with self._http.stream("POST", path, content=body, headers=dict(headers)) as response:
            try:
                content = await _body_within(self._read_timeout, response.aiter_bytes())
            except _TRANSIENT_ERRORS as error:
                request_id = response.headers.get(REQUEST_ID_HEADER)
                raise _AnswerCutOff(response.status_code, request_id, error) from error
            return _Answer(
                response.status_code, response.headers, content, response.charset_encoding
            )

    async def aclose(self) -> None:
        await self._http.aclose()


class ServiceClient:
    """``async with ServiceClient(config, tokens) as client: await client.send_record(...)``."""

    def __init__(
        self,
        config: ClientConfig,
        tokens: TokenSource,
        *,
        limiter: RateLimiter | None = None,
    ) -> None:
        self.config = config
        self.tokens = tokens
        # The service limits each token: one limiter per token, unless one is imposed.
        self._shared_limiter = limiter
        self.limiters: dict[str, RateLimiter] = {}
        self.throttled = 0  # 429 answers received
        self.retried_after_renewal = 0  # requests sent again after a 401 renewed their token
        self._poster: _Poster | None = None
        # Set by the push for its run: no new attempt after a stop request, and a Retry-After
        # past the deadline postpones the account (connector/client/_stop.py).
        self.stop: RunStop | None = None

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
        await self.tokens.open()
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
        await self.tokens.close()

    @property
    def poster(self) -> _Poster:
        if self._poster is None:
            raise ServiceError("the service client is not open: use it as `async with`")
        return self._poster

    async def send_record(
        self, entity: Entity, account_id: str, event: SyncEvent, payload: str
    ) -> SyncAttempts:
        """POST one resource (canonical JSON) to its sync webhook, retrying transient failures.

        A 401 with a token the token source can renew (an account-level token discovered
        through the Open API that expired) costs one renewal and one more try of the request
        before the account is given up.
        """
        token = await self.tokens.token_for(account_id)
        if not token:
            return SyncAttempts(
                Delivery.UNAUTHORIZED,
                None,
                f"no token for account {account_id!r}: {self.tokens.missing_hint(account_id)}",
            )
        outcome = await self._send_with_token(token, entity, account_id, event, payload)
        if outcome.delivery != Delivery.UNAUTHORIZED:
            return outcome
        renewed = await self.tokens.renew(account_id, token)
        if not renewed or renewed == token:
            return outcome
        self.retried_after_renewal += 1
        # The refused attempt stored nothing (401), but one before it may have.
        retried = await self._send_with_token(
            renewed, entity, account_id, event, payload, maybe_stored=outcome.answer_lost_before
        )
        retried.attempts += outcome.attempts
        retried.request_ids[:0] = outcome.request_ids
        retried.unconfirmed_answers += outcome.unconfirmed_answers
        if retried.delivery == Delivery.UNAUTHORIZED:
            retried.message = f"{retried.message} (a renewed account token was refused too)"
        return retried

    async def _send_with_token(
        self,
        token: str,
        entity: Entity,
        account_id: str,
        event: SyncEvent,
        payload: str,
        *,
        maybe_stored: bool = False,
    ) -> SyncAttempts:
        body = _envelope(entity, account_id, event, payload, token, self.config.token_placement)
        headers = _auth_headers(token, self.config.token_placement)
        outcome = SyncAttempts(Delivery.UNDELIVERED, None, "")
        retry = self.config.retry
        limiter = self.limiter_of(token)
        # ``maybe_stored``: whether an attempt so far may have been stored without an answer the
        # client could read: a later "skipped" or "already known" is then explained
        # (connector/push/_push.py).
        stop = self.stop
        for attempt in range(1, retry.max_attempts + 1):
            if stop is not None and stop.requested:
                outcome.stopped = True
                break
            ticket = await limiter.acquire()
            outcome.attempts = attempt
            outcome.answer_lost_before = maybe_stored
            outcome.delivery = Delivery.UNDELIVERED
            outcome.answer = None
            retry_after: float | None = None
            try:
                try:
                    response = await self.poster.post(SYNC_PATHS[entity], body, headers)
                finally:
                    # Answered, failed or cancelled: the request is no longer in flight.
                    limiter.done(ticket)
            except _AnswerCutOff as cut_off:
                outcome.request_ids.append(cut_off.request_id)
                outcome.status = None
                outcome.message = cut_off.message
                maybe_stored = True
            except _TRANSIENT_ERRORS as error:
                outcome.request_ids.append(None)
                outcome.status = None
                outcome.message = _transport_message(error)
                maybe_stored = maybe_stored or not isinstance(error, _NEVER_SENT)
            else:
                outcome.request_ids.append(response.headers.get(REQUEST_ID_HEADER))
                outcome.status = response.status
                limiter.observe(response.headers, ticket)
                if response.is_success:
                    reading = read_answer(
                        entity,
                        response.status,
                        response.headers.get("content-type"),
                        response.body,
                        self.config.acknowledgement,
                    )
                    outcome.answer = reading.answer
                    if reading.acknowledged:
                        outcome.delivery = Delivery.ACKNOWLEDGED
                        outcome.message = ""
                        return outcome
                    # Retried like a 5xx: the answer may come from something in front of the
                    # service (a proxy, a captive portal) or from a service that failed.
                    outcome.delivery = Delivery.UNCONFIRMED
                    outcome.unconfirmed_answers += 1
                    outcome.message = _masked_message(
                        f"unconfirmed: {reading.problem}", token, payload
                    )
                    # A documented answer saying nothing was stored is believed; any other
                    # body may stand in front of a write that happened.
                    maybe_stored = maybe_stored or reading.answer is None
                else:
                    outcome.message = _failure_message(response, token, payload)
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
                        # Capped as the backoff caps it: the limiter pauses every request of
                        # the token, and a Retry-After of a day (or a date in 9999) would
                        # hold the run far past its timeouts.
                        limiter.throttled(
                            None if retry_after is None else min(retry_after, retry.max_retry_after)
                        )
                        if retry_after is not None and stop is not None:
                            left = stop.remaining()
                            if left is not None and retry_after > left:
                                # Waiting would end past the deadline: the account waits for
                                # the next run instead (connector/push/_push.py).
                                outcome.postponed = (
                                    f"the service asked to wait {retry_after:.0f} s (HTTP 429 "
                                    f"Retry-After), past the run's deadline in {max(left, 0):.0f} s"
                                )
                                break
                    else:
                        maybe_stored = True  # a 5xx may come after the write (a gateway's 504)
            if attempt < retry.max_attempts:
                delay = retry.delay(attempt, retry_after)
                if stop is None:
                    await asyncio.sleep(delay)
                elif not await stop.sleep(delay):
                    outcome.stopped = True
                    break
        # The last attempt's kind: UNCONFIRMED (a 2xx that was no acknowledgement) or
        # UNDELIVERED (no answer, 429 or 5xx). The last attempt counts too now: when it alone
        # may have been stored (throttled until then), the push must still remember the
        # change as possibly stored, or the next run's "skipped" reads as a disagreement.
        outcome.answer_lost_before = maybe_stored
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
    connector = aiohttp.TCPConnector(limit=config.concurrency, ssl=_tls_context(config))
    # trust_env stays off here: aiohttp would look proxies and .netrc up in a thread on every
    # request; the proxy is resolved once instead.
    if timeout is None:  # under httpx: httpx hands its timeouts to each request
        return aiohttp.ClientSession(connector=connector, trust_env=False, headers=headers)
    return aiohttp.ClientSession(
        connector=connector, trust_env=False, headers=headers, timeout=timeout
    )


def _tls_context(config: ClientConfig) -> ssl.SSLContext | bool:
    """False (no verification) for a base URL named insecure; else a verifying context.

    ``True`` is aiohttp's own verifying context (``ssl.create_default_context()`` with ALPN
    ``http/1.1``), made once when aiohttp is imported, with the CA bundle OpenSSL found in
    ``SSL_CERT_FILE``/``SSL_CERT_DIR`` then. Only when those variables changed since is
    another context made, once per pair of values: loading a CA store is too costly to do
    per session.
    """
    if not config.verify_tls:
        return False
    locations = _ca_locations()
    if locations == _CA_LOCATIONS_AT_IMPORT:
        return True
    return _verifying_context(*locations)


def _ca_locations() -> tuple[str | None, str | None]:
    """Where OpenSSL looks for CA certificates beyond its defaults, as the environment says."""
    return os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")


# aiohttp made its verifying context when it was imported, above this module's first line.
_CA_LOCATIONS_AT_IMPORT = _ca_locations()


@functools.lru_cache(maxsize=4)
def _verifying_context(cafile: str | None, capath: str | None) -> ssl.SSLContext:
    # OpenSSL reads the variables itself; the arguments only key the cache.
    context = ssl.create_default_context()
    context.set_alpn_protocols(("http/1.1",))
    return context


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
    placement: frozenset[TokenPlacement],
) -> bytes:
    # The resource is already canonical JSON: spliced in rather than parsed and re-dumped,
    # between the members that only change with the account, entity, event and token.
    before, after = _envelope_around(entity, account_id, event, token, placement)
    return before + payload.encode() + after


@functools.lru_cache(maxsize=1024)
def _envelope_around(
    entity: Entity,
    account_id: str,
    event: SyncEvent,
    token: str,
    placement: frozenset[TokenPlacement],
) -> tuple[bytes, bytes]:
    """The envelope's text before and after its resource (a few per run, one per request)."""
    before = f'{{"accountId":{json.dumps(account_id)},"entity":"{entity}","event":"{event}",'
    after = (
        f',"apiToken":{json.dumps(token)}}}'
        if TokenPlacement.API_TOKEN_MEMBER in placement
        else "}"
    )
    return (before + '"resource":').encode(), after.encode()


def _auth_headers(token: str, placement: Iterable[TokenPlacement]) -> dict[str, str]:
    headers: dict[str, str] = {}
    if TokenPlacement.WISHBOX_HEADER in placement:
        headers["X-Wishbox-Auth-Token"] = token
    if TokenPlacement.BEARER in placement:
        headers["Authorization"] = f"Bearer {token}"
    return headers


def _transport_message(error: BaseException) -> str:
    """``ServerDisconnectedError: Server disconnected``; the class alone when it says nothing."""
    text = str(error).strip()
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _failure_message(answer: _Answer, token: str, payload: str) -> str:
    """What a non-2xx answer says, never empty: the body (masked), or what the answer was."""
    if 300 <= answer.status < 400:
        location = answer.headers.get("location")
        where = f"redirect to {_without_userinfo(location)}" if location else "redirect"
        return _masked_message(
            f"HTTP {answer.status} {where} (redirects are not followed: check PMS_SYNC_BASE_URL)",
            token,
            payload,
        )
    text = answer.text.strip()
    if not text:
        return f"HTTP {answer.status} with an empty body"
    return _masked_message(text, token, payload)


def _without_userinfo(url: str) -> str:
    """``https://user:pw@host/x`` → ``https://host/x``: credentials never reach a message."""
    parts = urllib.parse.urlsplit(url.strip())
    if "@" not in parts.netloc:
        return url.strip()
    netloc = parts.netloc.rpartition("@")[2]
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


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
