"""Account tokens discovered through the Open API, kept valid for the length of a push.

An account-level token from the accounts lookup expires (``expires_in``). Before a request
uses a token that is about to expire, it is renewed with one lookup; a 401 for a discovered
token (it expired or was revoked early) renews it once and the request is sent again. Tokens
the operator gave (a tokens file, one token for every account) win where given and are never
renewed. Renewals of one account are serialised: concurrent requests of that account wait for
one renewal instead of each asking for its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping

from connector.accounts._directory import AccountDirectory
from connector.client import MISSING_TOKEN_HINT, AccountTokens
from connector.snapshot import DiscoveredAccount


class DiscoveredTokens:
    """A ``TokenSource`` of given tokens first, then discovered ones (renewed as needed)."""

    def __init__(
        self,
        given: AccountTokens,
        discovered: Mapping[str, DiscoveredAccount],
        directory: AccountDirectory | None,
        *,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.given = given
        self._discovered: dict[str, DiscoveredAccount] = dict(discovered)  # by account id
        self.directory = directory
        self._clock = clock
        self._locks: dict[str, asyncio.Lock] = {}
        self._session: contextlib.AsyncExitStack | None = None
        self.renewals = 0  # tokens renewed during the push (near expiry, or after a 401)
        self.renewed_after_refusal = 0  # of which after a 401
        self.renewed: dict[str, DiscoveredAccount] = {}  # by account id, to save

    @property
    def default(self) -> str | None:
        return self.given.default

    @property
    def per_account(self) -> Mapping[str, str]:
        tokens = {account_id: found.token for account_id, found in self._discovered.items()}
        return {**tokens, **self.given.per_account}

    def discovered(self, account_id: str) -> DiscoveredAccount | None:
        """The discovered account whose token ``account_id`` uses, unless a given one wins."""
        if self.given.given_for(account_id):
            return None
        return self._discovered.get(account_id)

    async def token_for(self, account_id: str) -> str | None:
        given = self.given.for_account(account_id)
        if given:
            return given
        found = self._discovered.get(account_id)
        if found is None:
            return None
        if found.due(self._clock(), margin_s=self._margin):
            found = await self._renew(account_id, found.token, refused=False) or found
        return found.token

    async def renew(self, account_id: str, refused: str) -> str | None:
        if self.discovered(account_id) is None:
            return None
        renewed = await self._renew(account_id, refused, refused=True)
        return renewed.token if renewed is not None else None

    def refused_hint(self, account_id: str) -> str:
        if self.directory is None or self.discovered(account_id) is None:
            return self.given.refused_hint(account_id)
        return (
            f"the token the Open API client {self.directory.settings.client_id!r} obtained for "
            "this account was refused, renewed or not: check that the client may still act "
            "for it (or give the account's own token in PMS_SYNC_TOKENS_FILE) and run again"
        )

    def missing_hint(self, account_id: str) -> str:
        if self.directory is None:
            return MISSING_TOKEN_HINT
        return (
            f"the Open API client {self.directory.settings.client_id!r} found no account with "
            "this id in its scope; give its token (PMS_SYNC_TOKEN, PMS_SYNC_TOKENS_FILE) or "
            "use a client whose scope covers it"
        )

    async def open(self) -> None:
        self._locks = {}  # locks belong to the event loop of the run
        if self.directory is not None:
            self._session = contextlib.AsyncExitStack()
            await self._session.enter_async_context(self.directory.session())

    async def close(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            await session.aclose()

    @property
    def _margin(self) -> float:
        return self.directory.settings.renew_margin_s if self.directory is not None else 0.0

    async def _renew(
        self, account_id: str, current: str, *, refused: bool
    ) -> DiscoveredAccount | None:
        if self.directory is None:
            return None
        lock = self._locks.setdefault(account_id, asyncio.Lock())
        async with lock:
            found = self._discovered[account_id]
            if found.token != current:
                return found  # renewed meanwhile by another request of the account
            if not refused and not found.due(self._clock(), margin_s=self._margin):
                return found
            renewed = await self.directory.renew(found)
            if renewed is None:
                return None
            self._discovered[account_id] = self.renewed[account_id] = renewed
            self.renewals += 1
            if refused:
                self.renewed_after_refusal += 1
            return renewed
