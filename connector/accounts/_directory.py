"""The accounts of one Open API client: listed, looked up by external id, remembered.

A connection of a hundred hotels must not cost a hundred lookups every night. The directory
starts from what the snapshot remembers of earlier lookups (external id → account id, the
account-level token and its expiry) and asks the service only for what it does not know:

- an external id it has never resolved: the accounts are listed once per run (pages of 50,
  spec §4.3), and each listed external id is looked up once (``?externalId=``), which hands
  out the account id and token; an external id the listing does not hold is unknown without
  a lookup;
- a token near its expiry: one lookup renews it (the token source does that when the token is
  about to be used, so a run with nothing to send renews nothing).

The account id behind an external id does not change; a cached mapping is used until a
lookup says otherwise.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Collection, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, replace
from typing import Any

from connector.accounts._settings import OpenApiSettings
from connector.client import (
    ClientConfig,
    OpenApiClient,
    RateLimiter,
    WindowLimiter,
    effective_windows,
    limiter_for,
    limiter_key,
)
from connector.contract import Account
from connector.snapshot import DiscoveredAccount

LOOKUP_CONCURRENCY = 4
"""Lookups in flight at once; the rate limiter paces them under the client's limits."""


@dataclass
class DirectoryStats:
    """What the directory cost and found, for the run's report."""

    requests: int = 0  # HTTP requests to the Open API, token requests and retries included
    token_requests: int = 0  # OAuth2 tokens issued to the client (cached on disk otherwise)
    pages: int = 0  # pages of the accounts listing read
    listed: int | None = None  # accounts the listing holds (None: not listed this run)
    lookups: int = 0  # externalId lookups
    cache_hits: int = 0  # external ids resolved from the snapshot, no request
    renewals: int = 0  # account tokens renewed (near expiry, or after a 401)
    throttled: int = 0  # 429 answers of the Open API

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "token_requests": self.token_requests,
            "pages": self.pages,
            "listed": self.listed,
            "lookups": self.lookups,
            "cache_hits": self.cache_hits,
            "renewals": self.renewals,
            "throttled": self.throttled,
        }


class AccountDirectory:
    """``async with directory.session(): await directory.resolve({...})``.

    ``known``: what the snapshot remembers; ``fetched`` collects what lookups returned (new
    accounts, renewed tokens) and ``gone`` the cached entries a lookup no longer finds, for the
    caller to save.
    """

    def __init__(
        self,
        settings: OpenApiSettings,
        client: ClientConfig,
        known: Iterable[DiscoveredAccount] = (),
        *,
        limiter_history: Iterable[float] = (),
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings
        self.client_config = replace(client, base_url=settings.base_url)
        self._known: dict[str, DiscoveredAccount] = {a.external_id: a for a in known}
        self.fetched: dict[str, DiscoveredAccount] = {}
        self.gone: set[str] = set()
        self.listing: list[Account] | None = None
        self.stats = DirectoryStats()
        self._clock = clock
        # One limiter for the client across sessions: a run's requests share its windows.
        self.limiter: RateLimiter = limiter_for(
            self.client_config.rate_limit, effective_windows(self.client_config)
        )
        if isinstance(self.limiter, WindowLimiter):
            self.limiter.preload(limiter_history)
        self._api: OpenApiClient | None = None
        self._lookup_slots: asyncio.Semaphore | None = None

    @property
    def limiter_key(self) -> str:
        """The key of the client's rate-limit history in the snapshot (never the secret)."""
        return limiter_key(self.settings.base_url, f"open-api-client:{self.settings.client_id}")

    @property
    def known(self) -> dict[str, DiscoveredAccount]:
        """External id → account, as known now (cached, fetched and renewed)."""
        return dict(self._known)

    def by_account_id(self) -> dict[str, DiscoveredAccount]:
        return {a.account_id: a for a in self._known.values()}

    @asynccontextmanager
    async def session(self) -> AsyncIterator[AccountDirectory]:
        """The Open API client opened in the running event loop for the block."""
        api = OpenApiClient(
            self.client_config,
            self.settings.credentials,
            cache_path=self.settings.token_cache,
            renew_margin=self.settings.renew_margin_s,
            limiter=self.limiter,
        )
        async with api:
            self._api = api
            self._lookup_slots = asyncio.Semaphore(LOOKUP_CONCURRENCY)
            try:
                # The accounts and tokens remembered were found with the client's secret then:
                # a changed secret is tried before they are used (free when it is the same).
                await api.verify_credentials()
                yield self
            finally:
                self._api = None
                self.stats.requests += api.requests
                self.stats.token_requests += api.token_requests
                self.stats.throttled += api.throttled

    @property
    def api(self) -> OpenApiClient:
        if self._api is None:
            raise RuntimeError("the account directory is used outside `async with session()`")
        return self._api

    # -- the service ----------------------------------------------------------------------

    async def list_accounts(self) -> list[Account]:
        """Every account of the client's scope (each page once per run); empty for a
        single-account scope (spec §4.3 rule 1)."""
        if self.listing is None:
            found: list[Account] = []
            async for page in self.api.account_pages():
                self.stats.pages += 1
                found.extend(page.data)
            self.listing = found
            self.stats.listed = len(found)
        return self.listing

    async def lookup(self, external_id: str) -> DiscoveredAccount | None:
        """Ask the service for one account by external id: its id and a fresh token."""
        assert self._lookup_slots is not None
        async with self._lookup_slots:
            account = await self.api.account(external_id)
        self.stats.lookups += 1
        now = self._clock()
        if account is None or not account.id or not account.token:
            if external_id in self._known:
                self.gone.add(external_id)
                del self._known[external_id]
            return None
        found = DiscoveredAccount(
            external_id=external_id,
            account_id=account.id,
            name=account.name,
            token=account.token,
            expires_at=now + float(account.expires_in or 0),
            fetched_at=now,
        )
        self._known[external_id] = self.fetched[external_id] = found
        self.gone.discard(external_id)
        return found

    async def renew(self, account: DiscoveredAccount) -> DiscoveredAccount | None:
        """A new token for an account (near expiry, or refused): one lookup."""
        renewed = await self.lookup(account.external_id)
        if renewed is not None:
            self.stats.renewals += 1
        return renewed

    # -- resolving ------------------------------------------------------------------------

    async def resolve(self, external_ids: Collection[str]) -> dict[str, DiscoveredAccount | None]:
        """External id → its account, or None when no account of the client has it."""
        found: dict[str, DiscoveredAccount | None] = {}
        missing: list[str] = []
        for external_id in sorted(set(external_ids)):
            cached = self._known.get(external_id)
            if cached is not None:
                self.stats.cache_hits += 1
                found[external_id] = cached
            else:
                missing.append(external_id)
        if missing:
            listed = {account.externalId for account in await self.list_accounts()}
            ask = [e for e in missing if e in listed]
            found.update(dict.fromkeys(missing))
            looked_up = await asyncio.gather(*(self.lookup(e) for e in ask))
            found.update(zip(ask, looked_up, strict=True))
        return found

    async def find_account_ids(self, account_ids: Collection[str]) -> dict[str, DiscoveredAccount]:
        """Account id → its discovered account, for accounts a mapping names by id.

        The listing carries no ids, so the listed external ids not known yet are looked up
        until every account asked for is found (each found account is remembered).
        """
        wanted = set(account_ids)
        found = {i: a for i, a in self.by_account_id().items() if i in wanted}
        if wanted <= set(found):
            return found
        for account in await self.list_accounts():
            if wanted <= set(found):
                break
            if account.externalId in self._known or not account.externalId:
                continue
            looked_up = await self.lookup(account.externalId)
            if looked_up is not None and looked_up.account_id in wanted:
                found[looked_up.account_id] = looked_up
        return found

    def unknown_reason(self, external_id: str) -> str:
        """Why an external id has no account, for the quarantine."""
        client = self.settings.client_id
        if self.listing is not None and not self.listing:
            return (
                f"external id {external_id!r} matches no account: the Open API client "
                f"{client!r} lists no accounts (a single-account scope, spec §4.3); map this "
                "account by id with a token instead"
            )
        scope = f" ({len(self.listing)} accounts in its scope)" if self.listing is not None else ""
        return (
            f"external id {external_id!r} matches no account of the Open API client "
            f"{client!r}{scope}"
        )
