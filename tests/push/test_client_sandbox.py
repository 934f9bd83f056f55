"""The sync-webhook client against the sandbox: retries, tokens, request ids, rate limit."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import pytest
from push_samples import FAST_RETRY, unit

from connector.canonical import canonical_json
from connector.client import (
    AccountTokens,
    ClientConfig,
    Delivery,
    RetryPolicy,
    ServiceClient,
    SyncAttempts,
    TokenPlacement,
    Transport,
    mask_message,
    parse_retry_after,
)
from connector.contract import Entity, SyncEvent
from connector.sandbox.testing import SandboxHandle

PAYLOAD = canonical_json(unit("U1"))


def send(
    config: ClientConfig, token: str | None = "demo-token", times: int = 1
) -> list[SyncAttempts]:
    async def run() -> list[SyncAttempts]:
        async with ServiceClient(config, AccountTokens(default=token)) as client:
            return list(
                await asyncio.gather(
                    *(
                        client.send_record(Entity.ACCOMMODATION, "demo", SyncEvent.CREATE, PAYLOAD)
                        for _ in range(times)
                    )
                )
            )

    return asyncio.run(run())


@pytest.mark.parametrize("transport", list(Transport))
def test_transient_failures_are_retried_and_every_attempt_keeps_its_request_id(
    service: SandboxHandle, transport: Transport
) -> None:
    service.set_faults(fail_next=2, fail_next_status=503)

    (answer,) = send(ClientConfig(base_url=service.base_url, transport=transport, retry=FAST_RETRY))

    assert answer.delivery == Delivery.ACKNOWLEDGED
    assert answer.attempts == 3
    assert len(answer.request_ids) == 3 and all(answer.request_ids)
    assert len(set(answer.request_ids)) == 3


def test_a_429_waits_for_retry_after(service: SandboxHandle) -> None:
    service.set_faults(fail_next=1, fail_next_status=429, retry_after_s=1)
    config = ClientConfig(base_url=service.base_url, retry=RetryPolicy(base_delay=0.001))

    started = time.monotonic()
    (answer,) = send(config)

    assert answer.delivery == Delivery.ACKNOWLEDGED
    assert time.monotonic() - started >= 0.95


def test_transient_failures_past_the_retry_budget_leave_the_record_undelivered(
    service: SandboxHandle,
) -> None:
    service.set_faults(error_rate=1.0)

    (answer,) = send(ClientConfig(base_url=service.base_url, retry=FAST_RETRY))

    assert (answer.delivery, answer.status, answer.attempts) == (Delivery.UNDELIVERED, 500, 6)


@pytest.mark.parametrize("transport", list(Transport))
def test_a_2xx_that_is_no_documented_answer_is_retried_like_a_5xx(
    service: SandboxHandle, transport: Transport
) -> None:
    service.set_faults(misbehave_next=2, misbehaviour="html_200")

    (answer,) = send(ClientConfig(base_url=service.base_url, transport=transport, retry=FAST_RETRY))

    assert (answer.delivery, answer.attempts, answer.unconfirmed_answers) == (
        Delivery.ACKNOWLEDGED,
        3,
        2,
    )
    assert len(set(answer.request_ids)) == 3 and all(answer.request_ids)
    # Whether something behind the page stored it cannot be known: a later "skipped" is
    # explained by it.
    assert answer.answer_lost_before
    assert answer.answer is not None and answer.answer.savedProperties == 1


@pytest.mark.parametrize("transport", list(Transport))
def test_unconfirmed_answers_past_the_retry_budget_leave_the_record_unconfirmed(
    service: SandboxHandle, transport: Transport
) -> None:
    service.set_faults(misbehaviour_rates={"empty_200": 1.0})

    (answer,) = send(ClientConfig(base_url=service.base_url, transport=transport, retry=FAST_RETRY))

    assert (answer.delivery, answer.status, answer.attempts) == (Delivery.UNCONFIRMED, 200, 6)
    assert answer.answer is None
    assert answer.message == (
        "unconfirmed: HTTP 200 with an empty body, not the JSON object of spec §4.1"
    )


@pytest.mark.parametrize("transport", list(Transport))
def test_a_connection_reset_after_the_headers_keeps_their_request_id_and_is_retried(
    service: SandboxHandle, transport: Transport
) -> None:
    service.set_faults(misbehave_next=1, misbehaviour="reset_after_headers")

    (answer,) = send(ClientConfig(base_url=service.base_url, transport=transport, retry=FAST_RETRY))

    assert (answer.delivery, answer.attempts) == (Delivery.ACKNOWLEDGED, 2)
    assert len(set(answer.request_ids)) == 2 and all(answer.request_ids)
    assert answer.answer_lost_before  # the first attempt was stored, its answer lost
    assert answer.answer is not None and answer.answer.skippedProperties == 1


@pytest.mark.parametrize("transport", list(Transport))
def test_an_answer_slower_than_the_read_timeout_is_a_transient_failure(
    service: SandboxHandle, transport: Transport
) -> None:
    service.set_faults(timeout_rate=1.0, timeout_s=2.0)
    config = ClientConfig(
        base_url=service.base_url,
        transport=transport,
        read_timeout=0.2,
        retry=RetryPolicy(max_attempts=2, base_delay=0.001),
    )

    started = time.monotonic()
    (answer,) = send(config)

    assert (answer.delivery, answer.status, answer.attempts) == (Delivery.UNDELIVERED, None, 2)
    assert answer.request_ids == [None, None]
    assert "Timeout" in answer.message
    assert time.monotonic() - started < 1.5  # gave up at the read timeout, not the answer


@pytest.mark.parametrize("transport", list(Transport))
def test_an_unexpected_answer_is_neither_retried_nor_acknowledged(
    service: SandboxHandle, transport: Transport
) -> None:
    config = ClientConfig(base_url=f"{service.base_url}/nowhere", transport=transport)

    (answer,) = send(config)

    assert (answer.delivery, answer.status, answer.attempts) == (Delivery.UNEXPECTED, 404, 1)
    assert answer.request_ids and answer.message


def test_refusals_are_not_retried(service: SandboxHandle) -> None:
    config = ClientConfig(base_url=service.base_url, retry=FAST_RETRY)

    (unauthorized,) = send(config, token="wrong")

    assert (unauthorized.delivery, unauthorized.status, unauthorized.attempts) == (
        Delivery.UNAUTHORIZED,
        401,
        1,
    )
    assert "wrong" not in unauthorized.message


def test_an_account_without_a_configured_token_is_not_sent(service: SandboxHandle) -> None:
    (answer,) = send(ClientConfig(base_url=service.base_url), token=None)

    assert (answer.delivery, answer.attempts) == (Delivery.UNAUTHORIZED, 0)
    assert "PMS_SYNC_TOKEN" in answer.message
    assert service.stats()["total"] == 0


@pytest.mark.parametrize(
    "placement",
    [
        {TokenPlacement.WISHBOX_HEADER},
        {TokenPlacement.BEARER},
        {TokenPlacement.API_TOKEN_MEMBER},
    ],
)
def test_each_token_placement_authenticates(
    service: SandboxHandle, placement: set[TokenPlacement]
) -> None:
    config = ClientConfig(base_url=service.base_url, token_placement=frozenset(placement))

    (answer,) = send(config)

    assert answer.delivery == Delivery.ACKNOWLEDGED
    assert answer.answer is not None
    assert (answer.answer.savedProperties, answer.answer.skippedProperties) == (1, 0)


def test_the_rate_limit_spaces_requests(service: SandboxHandle) -> None:
    config = ClientConfig(base_url=service.base_url, rate_limit=40, concurrency=8)

    started = time.monotonic()
    answers = send(config, times=60)  # 40 at once (the burst), then 20 at 40/s

    assert {a.delivery for a in answers} == {Delivery.ACKNOWLEDGED}
    assert time.monotonic() - started >= 0.45


def test_retry_after_is_read_as_seconds_or_as_an_http_date() -> None:
    later = datetime.now(UTC) + timedelta(seconds=30)

    assert parse_retry_after("7") == 7.0
    assert 28 <= (parse_retry_after(format_datetime(later, usegmt=True)) or 0) <= 30
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None


def test_backoff_grows_exponentially_within_bounds_and_honours_retry_after() -> None:
    policy = RetryPolicy(base_delay=1.0, max_delay=8.0, max_retry_after=5.0)

    assert all(0 <= policy.delay(1) <= 1.0 for _ in range(50))
    assert all(0 <= policy.delay(10) <= 8.0 for _ in range(50))
    assert policy.delay(1, retry_after=3.0) >= 3.0
    assert policy.delay(1, retry_after=600.0) <= 5.0 + 1.0


def test_service_messages_lose_every_known_secret_value() -> None:
    message = mask_message(
        "doorCode 'door-4711' invalid for token abc-123", ["door-4711", "abc-123"]
    )

    assert message == "doorCode '***' invalid for token ***"


def test_the_environment_proxy_applies_unless_no_proxy_exempts_the_host(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from connector.client._client import _environment_proxy

    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    monkeypatch.setenv("NO_PROXY", "localhost,127.0.0.1")

    assert _environment_proxy("https://service.example") == "http://proxy.internal:3128"
    assert _environment_proxy("http://127.0.0.1:8765") is None
