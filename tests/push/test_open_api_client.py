"""The Open API client against the sandbox: tokens persisted and renewed, pagination, links,
property status, webhook configurations."""

from __future__ import annotations

import asyncio
import json
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TypeVar

import pytest
from push_samples import FAST_RETRY, batches_of, hotel, settings_for

from connector.client import (
    CachedToken,
    ClientConfig,
    ClientCredentials,
    OpenApiClient,
    TokenCache,
)
from connector.contract import AccommodationStatus, OutgoingEventName, WebhookConfig
from connector.errors import AuthenticationError
from connector.pipeline import sync_batches
from connector.sandbox.testing import MULTI_CLIENT_ID, MULTI_CLIENT_SECRET, SandboxHandle

T = TypeVar("T")
MULTI = ClientCredentials(MULTI_CLIENT_ID, MULTI_CLIENT_SECRET)


def call(
    service: SandboxHandle,
    cache: Path,
    action: Callable[[OpenApiClient], Awaitable[T]],
    credentials: ClientCredentials = MULTI,
) -> tuple[T, int]:
    async def run() -> tuple[T, int]:
        config = ClientConfig(base_url=service.base_url, retry=FAST_RETRY)
        async with OpenApiClient(config, credentials, cache_path=cache) as api:
            return await action(api), api.token_requests

    return asyncio.run(run())


def test_accounts_are_listed_across_pages_with_one_persisted_token(
    service: SandboxHandle, tmp_path: Path
) -> None:
    cache = tmp_path / "tokens.json"

    accounts, first_tokens = call(service, cache, lambda api: api.accounts(page_size=2))
    again, second_tokens = call(service, cache, lambda api: api.accounts(page_size=1))

    assert sorted(a.externalId for a in accounts) == ["demo", "ext-a", "ext-b"]
    assert [a.name for a in again] == [a.name for a in accounts]
    assert (first_tokens, second_tokens) == (1, 0)  # the second process reused the file
    assert stat.S_IMODE(cache.stat().st_mode) == 0o600


def test_a_token_near_expiry_is_renewed_before_use(service: SandboxHandle, tmp_path: Path) -> None:
    cache = tmp_path / "tokens.json"
    call(service, cache, lambda api: api.accounts())
    key, entry = next(iter(json.loads(cache.read_text()).items()))
    TokenCache(cache).put(
        key, CachedToken(entry["access_token"], entry["expires_at"] - 3570), MULTI_CLIENT_SECRET
    )

    _, tokens = call(service, cache, lambda api: api.accounts())

    assert tokens == 1


def test_a_revoked_cached_token_is_replaced_once(service: SandboxHandle, tmp_path: Path) -> None:
    cache = tmp_path / "tokens.json"
    TokenCache(cache).put(
        f"{service.base_url}|{MULTI_CLIENT_ID}",
        CachedToken("revoked", 4_000_000_000),
        MULTI_CLIENT_SECRET,
    )

    accounts, tokens = call(service, cache, lambda api: api.accounts())

    assert (len(accounts), tokens) == (3, 1)


def test_a_single_account_lookup_returns_its_account_level_token(
    service: SandboxHandle, tmp_path: Path
) -> None:
    account, _ = call(service, tmp_path / "t.json", lambda api: api.account("ext-a"))

    assert account is not None
    assert (account.id, account.externalId) == ("hotel-a", "ext-a")
    assert account.token and account.expires_in and account.expires_in > 0


def test_wrong_client_secret_is_an_authentication_error_without_the_secret(
    service: SandboxHandle, tmp_path: Path
) -> None:
    with pytest.raises(AuthenticationError) as caught:
        call(
            service,
            tmp_path / "t.json",
            lambda api: api.accounts(),
            ClientCredentials(MULTI_CLIENT_ID, "not-the-secret"),
        )

    assert caught.value.status == 401
    assert "not-the-secret" not in str(caught.value)


def test_links_property_status_and_webhooks_of_synced_records(
    service: SandboxHandle, tmp_path: Path
) -> None:
    sync_batches(
        batches_of(hotel(account="demo", units=1, reservations=1)),
        settings_for(service.base_url, tmp_path / "snapshot.duckdb"),
    )
    cache = tmp_path / "t.json"
    config = WebhookConfig(
        name="arrivals", event=OutgoingEventName.RESERVATION_CREATED, url="https://hook.example/in"
    )

    async def exercise(api: OpenApiClient) -> tuple[object, ...]:
        links = await api.guest_links("R0", last_message=True)
        status = await api.set_property_status("U0", AccommodationStatus.INACTIVE)
        created = await api.create_webhook(config)
        renamed = await api.update_webhook(
            created.id, config.model_copy(update={"name": "arrivals-2"})
        )
        listed = await api.webhooks()
        await api.delete_webhook(created.id)
        return links, status, created, renamed, listed, await api.webhooks()

    (links, status, created, renamed, listed, after), _ = call(
        service, cache, exercise, ClientCredentials("demo-client", "demo-secret")
    )

    assert links.guestApp.startswith("https://") and links.chatLastMessage is not None
    assert status.status == AccommodationStatus.INACTIVE
    assert renamed.id == created.id and renamed.name == "arrivals-2"
    assert [w.id for w in listed] == [created.id]
    assert after == []
    stored = {r["id"]: r for r in service.records(entity="accommodation")}
    assert stored["U0"]["resource"]["status"] == "INACTIVE"
