"""The Open API: OAuth2 client-credentials tokens (cached on disk, renewed before expiry),
accounts with pagination, guest links, property status and outgoing-webhook configurations.

The spec advises persisting and renewing tokens rather than requesting one per call (to stay
under the rate limits), so a token lives in a small JSON file (mode 0600, folders created 0700:
:mod:`connector.private_files`) keyed by service and client id and bound to the client secret
(a salted hash of it), shared by every process of the deployment, and is renewed
``renew_margin`` seconds (at most a quarter of its lifetime) before it expires, or once after
a 401. Every request, token requests included, waits for the client's
rate limiter (the documented 15/s, 120/min, 5,000/h for a remote service; the service's
``X-RateLimit-*`` headers are adopted either way).
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import hmac
import json
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

import httpx
from pydantic import BaseModel, RootModel, ValidationError

from connector.client._client import _TRANSIENT_ERRORS, REQUEST_ID_HEADER, open_http
from connector.client._config import ClientConfig, effective_windows, parse_retry_after
from connector.client._limiter import RateLimiter, limiter_for
from connector.client._tokens import TokenSource
from connector.config import OpenApiSection
from connector.contract import (
    AccommodationStatus,
    Account,
    AccountsPage,
    GuestLinks,
    PropertyStatusResponse,
    PropertyStatusUpdate,
    StoredWebhookConfig,
    TokenResponse,
    WebhookConfig,
)
from connector.errors import AuthenticationError, ConfigError, ServiceError
from connector.private_files import write_private
from connector.secrets import MASK, checked_secret, mask_text

TOKEN_PATH = "/openapi/v1/oauth2/token"
ACCOUNTS_PATH = "/api/openapi/v1/accounts"
LINKS_PATH = "/openapi/v1/reservations/links"
WEBHOOKS_PATH = "/api/openapi/v1/webhooks"
MAX_PAGE_SIZE = 50  # spec §8


@dataclass(frozen=True)
class ClientCredentials:
    client_id: str
    client_secret: str

    def __post_init__(self) -> None:
        # A reader names the setting first; this holds for every other caller.
        secret = checked_secret(self.client_secret, "the Open API client secret")
        client_id = checked_secret(self.client_id, "the Open API client id", secret=False)
        object.__setattr__(self, "client_secret", secret or "")
        object.__setattr__(self, "client_id", client_id or "")

    def __repr__(self) -> str:
        return f"ClientCredentials(client_id={self.client_id!r}, client_secret={MASK!r})"


@dataclass(frozen=True)
class CachedToken:
    access_token: str
    expires_at: float  # epoch seconds
    lifetime_s: float | None = None  # expires_in when issued (unknown for older cache entries)

    def __post_init__(self) -> None:
        # Issued or read from the cache: masked from now on, and checked (it is sent in a header).
        token = checked_secret(self.access_token, "the Open API's access token")
        object.__setattr__(self, "access_token", token or "")

    def fresh(self, margin: float) -> bool:
        # A short-lived token is not renewed at once: at most a quarter of its lifetime early.
        if self.lifetime_s is not None:
            margin = min(margin, self.lifetime_s / 4)
        return self.expires_at - margin > time.time()


SECRET_HASH_ITERATIONS = 10_000
"""PBKDF2 rounds of the client secret's hash in the cache: a weak secret is not guessed from
the file cheaply; a run computes it once or twice, so the cost is small."""


@functools.lru_cache(maxsize=16)
def _secret_digest(secret: str, salt: bytes, iterations: int) -> bytes:
    return hashlib.pbkdf2_hmac("sha256", secret.encode(), salt, iterations)


def secret_hash(secret: str, salt: bytes | None = None) -> str:
    """``pbkdf2-sha256$<rounds>$<salt>$<digest>`` of a client secret (a new salt when none)."""
    salt = secrets.token_bytes(16) if salt is None else salt
    digest = _secret_digest(secret, salt, SECRET_HASH_ITERATIONS)
    return f"pbkdf2-sha256${SECRET_HASH_ITERATIONS}${salt.hex()}${digest.hex()}"


def _matches(secret: str, stored: object) -> bool:
    """Whether ``stored`` (an entry's ``secret_hash``) is the hash of ``secret``; an entry
    without one (an older cache) or in an unknown form does not match."""
    if not isinstance(stored, str):
        return False
    scheme, _, rest = stored.partition("$")
    rounds, _, rest = rest.partition("$")
    salt, _, digest = rest.partition("$")
    try:
        if scheme != "pbkdf2-sha256" or not 1 <= int(rounds) <= 10_000_000:
            return False
        expected = _secret_digest(secret, bytes.fromhex(salt), int(rounds))
        return hmac.compare_digest(expected, bytes.fromhex(digest))
    except ValueError:
        return False


class TokenCache:
    """Access tokens on disk, so processes and runs share one token until it nears expiry.

    An entry is bound to the client secret that obtained it (a salted hash of the secret, never
    the secret): a process with another secret (rotated, or wrong) does not use it, and asks
    for a token of its own, which a wrong secret does not get.
    """

    def __init__(self, path: Path | None) -> None:
        self.path = path

    def _load(self) -> dict[str, dict[str, Any]]:
        if self.path is None or not self.path.is_file():
            return {}
        try:
            content = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}  # a damaged cache costs one token request, nothing more
        return content if isinstance(content, dict) else {}

    def get(self, key: str, secret: str) -> CachedToken | None:
        """The token cached for ``key``, if the client secret ``secret`` obtained it."""
        entry = self._load().get(key)
        if not isinstance(entry, dict) or not _matches(secret, entry.get("secret_hash")):
            return None
        try:
            lifetime = entry.get("lifetime_s")
            return CachedToken(
                str(entry["access_token"]),
                float(entry["expires_at"]),
                float(lifetime) if lifetime is not None else None,
            )
        except (KeyError, TypeError, ValueError, ConfigError):
            return None  # a damaged entry costs one token request

    def obtained_with(self, key: str, secret: str) -> bool:
        """Whether ``secret`` obtained the token cached for ``key`` (expired or not): the
        service accepted it then."""
        entry = self._load().get(key)
        return isinstance(entry, dict) and _matches(secret, entry.get("secret_hash"))

    def put(self, key: str, token: CachedToken, secret: str) -> None:
        if self.path is None:
            return
        content = self._load()
        content[key] = {
            "access_token": token.access_token,
            "expires_at": token.expires_at,
            "lifetime_s": token.lifetime_s,
            "secret_hash": secret_hash(secret),
        }
        # The file holds credentials: owner-only file (0600) in an owner-only folder (0700).
        write_private(self.path, json.dumps(content).encode())


class OpenApiClient:
    """``async with OpenApiClient(config, credentials, cache_path=...) as api: await api.accounts()``."""

    def __init__(
        self,
        config: ClientConfig,
        credentials: ClientCredentials,
        *,
        cache_path: Path | None = None,
        renew_margin: float = OpenApiSection.default("renew_margin"),
        limiter: RateLimiter | None = None,
    ) -> None:
        self.config = config
        self.credentials = credentials
        self.cache = TokenCache(cache_path)
        self.renew_margin = renew_margin
        # The service limits each Open API client: one limiter for every request of it.
        self.limiter = limiter or limiter_for(config.rate_limit, effective_windows(config))
        self._http: httpx.AsyncClient | None = None
        self._token: CachedToken | None = None
        self._token_lock = asyncio.Lock()
        self.token_requests = 0  # how many tokens this client asked for
        self.requests = 0  # HTTP requests sent, token requests and retries included
        self.throttled = 0  # 429 answers
        self.last_request_id: str | None = None  # x-request-id of the last answer

    async def __aenter__(self) -> OpenApiClient:
        self._http = open_http(self.config)
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

    # -- tokens ---------------------------------------------------------------------------

    @property
    def _cache_key(self) -> str:
        return f"{self.config.base_url}|{self.credentials.client_id}"

    async def access_token(self, *, renew: bool = False) -> str:
        """A valid access token: from memory, from the disk cache, or newly issued."""
        async with self._token_lock:
            if not renew:
                if self._token is not None and self._token.fresh(self.renew_margin):
                    return self._token.access_token
                cached = self.cache.get(self._cache_key, self.credentials.client_secret)
                if cached is not None and cached.fresh(self.renew_margin):
                    self._token = cached
                    return cached.access_token
            response = await self._send(
                "POST",
                TOKEN_PATH,
                data={
                    "grant_type": "client_credentials",
                    "client_id": self.credentials.client_id,
                    "client_secret": self.credentials.client_secret,
                },
            )
            self.token_requests += 1
            issued = _answer_of(TokenResponse, response)
            self._token = CachedToken(
                issued.access_token, time.time() + issued.expires_in, float(issued.expires_in)
            )
            self.cache.put(self._cache_key, self._token, self.credentials.client_secret)
            return self._token.access_token

    async def verify_credentials(self) -> None:
        """Make sure the service accepts the client secret before anything obtained with an
        earlier one (account tokens remembered in the snapshot) is used: free when the cache
        shows this secret obtained a token, else one token request (AuthenticationError when
        refused). A changed secret is thus tried at once, not when the cached tokens expire."""
        if self._token is not None:
            return
        if self.cache.obtained_with(self._cache_key, self.credentials.client_secret):
            return
        await self.access_token(renew=True)

    # -- resources ------------------------------------------------------------------------

    async def account_pages(self, page_size: int = MAX_PAGE_SIZE) -> AsyncIterator[AccountsPage]:
        page = 1
        while True:
            response = await self._authorised(
                "GET",
                ACCOUNTS_PATH,
                params={"page": page, "pageSize": min(page_size, MAX_PAGE_SIZE)},
            )
            result = _answer_of(AccountsPage, response)
            yield result
            if not result.pagination.hasMore or not result.data:
                return
            page += 1

    async def accounts(self, page_size: int = MAX_PAGE_SIZE) -> list[Account]:
        """Every account of a multi-account connection (empty for a single-account scope)."""
        return [account async for page in self.account_pages(page_size) for account in page.data]

    async def account(self, external_id: str) -> Account | None:
        """One account by external id, with its account-level token and lifetime."""
        response = await self._authorised("GET", ACCOUNTS_PATH, params={"externalId": external_id})
        data = _answer_of(AccountsPage, response).data
        return data[0] if data else None

    async def guest_links(self, reservation_id: str, *, last_message: bool = False) -> GuestLinks:
        links, _request_id = await self.fetch_guest_links(reservation_id, last_message=last_message)
        return links

    async def fetch_guest_links(
        self,
        reservation_id: str,
        *,
        last_message: bool = False,
        account_id: str | None = None,
        tokens: TokenSource | None = None,
    ) -> tuple[GuestLinks, str | None]:
        """A reservation's links and the answer's x-request-id. ``tokens``: the account-level
        tokens (``connector.accounts.DiscoveredTokens``) that scope the request to
        ``account_id``'s account, so a reservation id that several accounts of the client
        share is not ambiguous (the client's own token meets a 409 there). A token due is
        renewed before the request, a refused one once after it; an account without one, or
        whose renewed token is refused too, is asked with the client's own token."""
        params = {"externalId": reservation_id, "includeLastMessage": int(last_message)}
        response: httpx.Response | None = None
        token = await tokens.token_for(account_id) if tokens and account_id else None
        if token and tokens and account_id:
            response = await self._links_answer(params, token)
            if response is None:
                # Expired or revoked early: one renewal, one more try.
                renewed = await tokens.renew(account_id, token)
                if renewed and renewed != token:
                    response = await self._links_answer(params, renewed)
        if response is None:
            response = await self._authorised("GET", LINKS_PATH, params=params)
        links = _answer_of(GuestLinks, response)
        return links, response.headers.get(REQUEST_ID_HEADER)

    async def _links_answer(
        self, params: dict[str, Any], account_token: str
    ) -> httpx.Response | None:
        """The links asked with an account's token; None when the token is refused."""
        try:
            return await self._send("GET", LINKS_PATH, token=account_token, params=params)
        except AuthenticationError:
            return None

    async def set_property_status(
        self, property_id: str, status: AccommodationStatus, *, update_sub_units: bool = False
    ) -> PropertyStatusResponse:
        response = await self._authorised(
            "PUT",
            f"/properties/{property_id}",
            params={"updateSubUnits": str(update_sub_units).lower()},
            json=PropertyStatusUpdate(status=status).to_json_dict(),
        )
        return _answer_of(PropertyStatusResponse, response)

    async def webhooks(self) -> list[StoredWebhookConfig]:
        response = await self._authorised("GET", WEBHOOKS_PATH)
        body = _answer_of(_WebhookList, response).root
        items = body.get("data", []) if isinstance(body, dict) else body
        try:
            return [StoredWebhookConfig.model_validate(item) for item in items]
        except ValueError as error:
            raise _undocumented(response, error) from None

    async def create_webhook(self, config: WebhookConfig) -> StoredWebhookConfig:
        response = await self._authorised("POST", WEBHOOKS_PATH, json=config.to_json_dict())
        return _answer_of(StoredWebhookConfig, response)

    async def webhook(self, webhook_id: str) -> StoredWebhookConfig:
        response = await self._authorised("GET", f"{WEBHOOKS_PATH}/{webhook_id}")
        return _answer_of(StoredWebhookConfig, response)

    async def update_webhook(self, webhook_id: str, config: WebhookConfig) -> StoredWebhookConfig:
        response = await self._authorised(
            "PUT", f"{WEBHOOKS_PATH}/{webhook_id}", json=config.to_json_dict()
        )
        return _answer_of(StoredWebhookConfig, response)

    async def delete_webhook(self, webhook_id: str) -> None:
        await self._authorised("DELETE", f"{WEBHOOKS_PATH}/{webhook_id}")

    # -- transport ------------------------------------------------------------------------

    async def _authorised(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        token = await self.access_token()
        try:
            return await self._send(method, path, token=token, **kwargs)
        except AuthenticationError:
            # Revoked or expired early: one fresh token, one more try.
            token = await self.access_token(renew=True)
            return await self._send(method, path, token=token, **kwargs)

    async def _send(
        self, method: str, path: str, *, token: str | None = None, **kwargs: Any
    ) -> httpx.Response:
        if self._http is None:
            raise ServiceError("the Open API client is not open: use it as `async with`")
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        retry = self.config.retry
        for attempt in range(1, retry.max_attempts + 1):
            retry_after: float | None = None
            ticket = await self.limiter.acquire()
            self.requests += 1
            try:
                try:
                    response = await self._http.request(method, path, headers=headers, **kwargs)
                finally:
                    self.limiter.done(ticket)
            except _TRANSIENT_ERRORS as error:
                failure: ServiceError = ServiceError(f"{method} {path}: {type(error).__name__}")
            else:
                self.limiter.observe(response.headers, ticket)
                self.last_request_id = response.headers.get(REQUEST_ID_HEADER)
                if response.is_success:
                    return response
                failure = _error_of(method, path, response)
                if response.status_code != 429 and response.status_code < 500:
                    raise failure
                retry_after = parse_retry_after(response.headers.get("retry-after"))
                if response.status_code == 429:
                    self.throttled += 1
                    # Capped as the backoff caps it (as the sync webhooks' client does): a
                    # Retry-After of a day would pause every Open API request for a day.
                    self.limiter.throttled(
                        None if retry_after is None else min(retry_after, retry.max_retry_after)
                    )
            if attempt < retry.max_attempts:
                await asyncio.sleep(retry.delay(attempt, retry_after))
        raise failure


_Model = TypeVar("_Model", bound=BaseModel)


class _WebhookList(RootModel[dict[str, Any] | list[Any]]):
    """The webhook list: ``{"data": [...]}`` or a bare array (the spec does not show it)."""


def _answer_of(model: type[_Model], response: httpx.Response) -> _Model:
    """A 2xx answer read as ``model``; a ServiceError when it is none (a captive portal's
    page, a member of the wrong type) rather than the parser's exception, whose traceback
    ended the command and whose message quotes the values (a token among them)."""
    try:
        return model.model_validate(response.json())
    except ValueError as error:  # json.JSONDecodeError and pydantic's ValidationError
        raise _undocumented(response, error) from None


def _undocumented(response: httpx.Response, error: ValueError) -> ServiceError:
    request = response.request
    if isinstance(error, ValidationError):
        # Member names and error kinds only: the values may be anything, secrets included.
        found = "; ".join(
            f"{'.'.join(str(part) for part in item['loc']) or 'the body'}: {item['type']}"
            for item in error.errors()[:5]
        )
    else:
        media = response.headers.get("content-type", "").split(";", 1)[0].strip() or "no"
        found = f"a {media} body that is not JSON"
    return ServiceError(
        f"{request.method} {request.url.path}: the HTTP {response.status_code} answer is not "
        f"the JSON the client reads ({found})",
        status=response.status_code,
        request_id=response.headers.get(REQUEST_ID_HEADER),
    )


def _error_of(method: str, path: str, response: httpx.Response) -> ServiceError:
    try:
        body = response.json()
        message = body.get("message") or body.get("error") or response.text
    except (ValueError, AttributeError):
        message = response.text
    error_type = AuthenticationError if response.status_code == 401 else ServiceError
    return error_type(
        f"{method} {path}: {mask_text(str(message)[:2000])[:500]}",
        status=response.status_code,
        request_id=response.headers.get(REQUEST_ID_HEADER),
    )
