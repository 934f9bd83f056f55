"""Account discovery for one run: external ids resolved before the plan, tokens for the push,
and what it all cost, saved in the snapshot for the next run."""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from connector.accounts._directory import AccountDirectory, DirectoryStats
from connector.accounts._properties import PropertyReport
from connector.accounts._resolve import external_ids_of, resolve_batch, resolve_policy
from connector.accounts._settings import OpenApiSettings
from connector.accounts._tokens import DiscoveredTokens
from connector.client import AccountTokens, ClientConfig, TokenSource, WindowLimiter
from connector.contract import Entity
from connector.errors import ConfigError
from connector.plan import ReconcilePolicy
from connector.records import MappedRecords
from connector.snapshot import SnapshotStore

CREDENTIALS_NEEDED = (
    "the mapping names accounts by their external id on the service (`external_id: true`): "
    "set the Open API client's credentials, PMS_SYNC_CLIENT_ID and PMS_SYNC_CLIENT_SECRET "
    "(or --client-id / --client-secret)"
)


@dataclass
class AccountsReport:
    """What discovery found and cost in one run, and the property changes it made."""

    client_id: str | None = None  # None: no Open API client configured
    resolved: dict[str, str] = field(default_factory=dict)  # external id → account id
    unknown: dict[str, int] = field(default_factory=dict)  # external id → rows set apart
    stats: DirectoryStats = field(default_factory=DirectoryStats)
    token_renewals: int = 0  # account tokens renewed during the push
    renewed_after_refusal: int = 0  # of which after a 401
    retried_after_renewal: int = 0  # requests sent again with a renewed token
    properties: PropertyReport = field(default_factory=PropertyReport)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "open_api_client": self.client_id,
            "resolved": len(self.resolved),
            "unknown_external_ids": dict(sorted(self.unknown.items())),
            "open_api": self.stats.to_json_dict(),
            "token_renewals": self.token_renewals,
            "renewed_after_401": self.renewed_after_refusal,
            "retried_after_renewal": self.retried_after_renewal,
        }


class AccountDiscovery:
    """Discovery against an open snapshot: ``resolve`` the batches, hand ``token_source`` to
    the push, then ``save`` what was learnt (nothing is saved to a read-only snapshot)."""

    def __init__(
        self, open_api: OpenApiSettings | None, client: ClientConfig, snapshot: SnapshotStore
    ) -> None:
        self.directory: AccountDirectory | None = None
        self.report = AccountsReport()
        if open_api is not None:
            self.directory = AccountDirectory(
                open_api, client, snapshot.discovered_accounts(open_api.client_key)
            )
            self._preload_history(snapshot)
            self.report.client_id = open_api.client_id
            self.report.stats = self.directory.stats

    def _preload_history(self, snapshot: SnapshotStore) -> None:
        """Start the client's rate limiter from the requests earlier runs made."""
        directory = self.directory
        if directory is not None and isinstance(directory.limiter, WindowLimiter):
            directory.limiter.preload(snapshot.limiter_history(directory.limiter_key))

    def resolve(
        self, batches: Mapping[Entity, MappedRecords], policy: ReconcilePolicy | None
    ) -> tuple[dict[Entity, MappedRecords], ReconcilePolicy | None]:
        """The batches (and the policy's scope) with account ids instead of external ids."""
        external = {e: b for e, b in batches.items() if b.account_is_external_id}
        if not external:
            return dict(batches), policy
        if self.directory is None:
            raise ConfigError(CREDENTIALS_NEEDED)
        directory = self.directory
        wanted = set().union(*(external_ids_of(b) for b in external.values()))
        if policy is not None and policy.accounts is not None:
            wanted |= set(policy.accounts)

        async def lookups() -> dict[str, Any]:
            async with directory.session():
                return await directory.resolve(wanted)

        found = asyncio.run(lookups()) if wanted else {}
        accounts = {e: a.account_id for e, a in found.items() if a is not None}
        resolved = {
            entity: resolve_batch(batch, accounts, directory.unknown_reason)
            for entity, batch in batches.items()
        }
        for batch in resolved.values():
            if len(batch.unresolved):
                counts = batch.unresolved["account_id"].astype(str).value_counts()
                for external_id, rows in counts.items():
                    self.report.unknown[str(external_id)] = self.report.unknown.get(
                        str(external_id), 0
                    ) + int(rows)
        self.report.resolved = accounts
        return resolved, (resolve_policy(policy, accounts) if policy is not None else None)

    def token_source(self, given: AccountTokens, account_ids: Collection[str]) -> TokenSource:
        """The tokens of the push: given ones first, then discovered ones for every other
        account of ``account_ids`` (looked up when a mapping names an account by id)."""
        directory = self.directory
        if directory is None:
            return given
        need = {a for a in account_ids if not given.given_for(a)}
        if not need:
            return given
        missing = need - set(directory.by_account_id())

        async def lookups() -> None:
            # Opening the session also tries a changed client secret before its remembered
            # account tokens are handed to the push.
            async with directory.session():
                if missing:
                    await directory.find_account_ids(missing)

        asyncio.run(lookups())
        known = directory.by_account_id()
        return DiscoveredTokens(given, {a: known[a] for a in need if a in known}, directory)

    def after_push(self, tokens: TokenSource, retried_after_renewal: int) -> None:
        if isinstance(tokens, DiscoveredTokens):
            self.report.token_renewals = tokens.renewals
            self.report.renewed_after_refusal = tokens.renewed_after_refusal
        self.report.retried_after_renewal = retried_after_renewal

    def save(self, snapshot: SnapshotStore) -> None:
        """Remember new accounts and renewed tokens, forget those no longer found, and keep
        the client's rate-limit history for the next run."""
        directory = self.directory
        if directory is None or snapshot.read_only:
            return
        key = directory.settings.client_key
        snapshot.save_discovered_accounts(key, list(directory.fetched.values()))
        snapshot.forget_discovered_accounts(key, directory.gone)
        directory.fetched.clear()
        limiter = directory.limiter
        if isinstance(limiter, WindowLimiter) and (limiter.sent or limiter.foreign):
            snapshot.save_limiter_history(directory.limiter_key, limiter.history())
