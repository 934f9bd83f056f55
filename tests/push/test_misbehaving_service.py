"""The client and the push against a service that misbehaves in ways the sandbox cannot:
answers written byte by byte on a raw socket (a charset Python does not know, a gzip stream
that does not decode, a Retry-After of a day, rate-limit headers that are no counts).

Every answer must end as an acknowledgement, a retry or a pending record with a message,
never as an exception that ends the run, and never as a pause past the retry policy.
"""

from __future__ import annotations

import asyncio
import gzip
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Literal

import pytest
from push_samples import FAST_RETRY, batches_of, hotel, settings_for, unit

from connector.canonical import canonical_json
from connector.client import (
    AccountTokens,
    ClientConfig,
    ClientCredentials,
    Delivery,
    OpenApiClient,
    RetryPolicy,
    ServiceClient,
    SyncAttempts,
    Transport,
    parse_retry_after,
)
from connector.contract import Entity, SyncEvent
from connector.errors import ServiceError
from connector.pipeline import sync_batches
from connector.snapshot import Snapshot

PAYLOAD = canonical_json(unit("U1"))
SAVED = b'{"savedProperties":1,"skippedProperties":0}'
SKIPPED = b'{"savedProperties":0,"skippedProperties":1}'

Script = Callable[[int], bytes]
"""The bytes written in answer to the n-th request (1-based) the server reads; no bytes:
the connection is closed instead, after the request was read (the service stored it, its
answer is lost)."""


def answer(
    status: int = 200, body: bytes = SAVED, headers: tuple[tuple[str, str], ...] = ()
) -> bytes:
    lines = [f"HTTP/1.1 {status} Answer", f"Content-Length: {len(body)}"]
    lines += [f"{name}: {value}" for name, value in headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


class ScriptedService:
    """An HTTP/1.1 server on a raw asyncio socket, in a thread of its own (the push runs its
    own event loop), answering each request with what ``script`` writes."""

    def __init__(self) -> None:
        self.script: Script = lambda n: answer()
        # After each answer: keep the connection, close it, hold it open and write no more, or
        # write one more chunk of a chunked body every 50 ms, for ever.
        self.then: Literal["keep", "close", "stall", "trickle"] = "keep"
        self.requests = 0
        self._loop = asyncio.new_event_loop()
        self._server: asyncio.Server | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)

    def start(self) -> ScriptedService:
        self._thread.start()
        self._server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self._serve, "127.0.0.1", 0), self._loop
        ).result(5)
        return self

    @property
    def base_url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.sockets[0].getsockname()[1]}"

    def stop(self) -> None:
        asyncio.run_coroutine_threadsafe(self._shutdown(), self._loop).result(5)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    async def _shutdown(self) -> None:
        """Stop listening and end the connections still open, so nothing outlives the loop."""
        if self._server is not None:
            self._server.close()
        current = asyncio.current_task()
        serving = [task for task in asyncio.all_tasks() if task is not current]
        for task in serving:
            task.cancel()
        await asyncio.gather(*serving, return_exceptions=True)

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":", 1)[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    ),
                    0,
                )
                await reader.readexactly(length)
                self.requests += 1
                written = self.script(self.requests)
                if not written:
                    break
                writer.write(written)
                await writer.drain()
                if self.then == "close":
                    break
                if self.then == "stall":
                    await asyncio.sleep(3600)  # cancelled by stop()
                while self.then == "trickle":
                    writer.write(b"1\r\n \r\n")
                    await writer.drain()
                    await asyncio.sleep(0.05)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass  # the client closed its pooled connection
        finally:
            writer.close()


@pytest.fixture
def scripted() -> Iterator[ScriptedService]:
    service = ScriptedService().start()
    try:
        yield service
    finally:
        service.stop()


def send(
    base_url: str, transport: Transport = Transport.AIOHTTP, *, read_timeout: float | None = None
) -> SyncAttempts:
    """One record sent as a push sends it; with ``read_timeout``, in two attempts at most."""
    config = ClientConfig(base_url=base_url, transport=transport, retry=FAST_RETRY)
    if read_timeout is not None:
        config = ClientConfig(
            base_url=base_url,
            transport=transport,
            read_timeout=read_timeout,
            retry=RetryPolicy(max_attempts=2, base_delay=0.001),
        )

    async def run() -> SyncAttempts:
        async with ServiceClient(config, AccountTokens(default="demo-token")) as client:
            # Bounded here so that a regression fails the test instead of hanging it.
            return await asyncio.wait_for(
                client.send_record(Entity.ACCOMMODATION, "demo", SyncEvent.CREATE, PAYLOAD), 10
            )

    return asyncio.run(run())


@pytest.mark.parametrize("transport", list(Transport))
def test_an_error_answer_in_a_charset_python_does_not_know_is_read_as_utf_8(
    scripted: ScriptedService, transport: Transport
) -> None:
    # It crashed the run with LookupError: unknown encoding (traceback, exit 1).
    unknown = (("Content-Type", "text/plain; charset=x-unknown"),)
    scripted.script = lambda n: answer(503, "überlastet".encode(), unknown)

    result = send(scripted.base_url, transport)

    assert (result.delivery, result.status) == (Delivery.UNDELIVERED, 503)
    assert result.attempts == FAST_RETRY.max_attempts
    assert result.message == "überlastet"


def test_a_run_answered_in_an_unknown_charset_leaves_the_record_pending_and_the_rerun_sends_it(
    scripted: ScriptedService, tmp_path: Path
) -> None:
    snapshot = tmp_path / "snapshot.duckdb"
    settings = settings_for(scripted.base_url, snapshot)
    refused = answer(400, b"doorCode invalid", (("Content-Type", "text/plain; charset=bogus"),))
    scripted.script = lambda n: answer(500, b"down", (("Content-Type", "text/plain; charset=?"),))

    first = sync_batches(batches_of(hotel(units=2, reservations=0)), settings)

    assert first.outcomes["pending"] == 2 and first.status != "succeeded"
    assert {p.message for p in first.push.problems} == {"down"}
    with Snapshot.open(snapshot) as store:
        assert store.acknowledged().empty  # nothing the service did not confirm
    scripted.script = lambda n: refused if n % 2 else answer()

    second = sync_batches(batches_of(hotel(units=2, reservations=0)), settings)

    assert (second.outcomes["acknowledged"], second.outcomes["dead_lettered"]) == (1, 1)
    assert [p.message for p in second.push.problems] == ["doorCode invalid"]
    with Snapshot.open(snapshot) as store:
        assert len(store.acknowledged()) == 1


@pytest.mark.parametrize("transport", list(Transport))
def test_a_body_whose_gzip_does_not_decode_is_an_answer_lost_after_the_headers(
    scripted: ScriptedService, transport: Transport
) -> None:
    # On httpx's transport it crashed the run with httpx.DecodingError; aiohttp's
    # ClientPayloadError was already a transient failure.
    broken = gzip.compress(SAVED)[:-8] + b"\x00" * 8  # the CRC and length do not match
    gzipped = (("Content-Encoding", "gzip"), ("Content-Type", "application/json"))
    scripted.script = lambda n: answer(200, broken, gzipped) if n == 1 else answer(body=SKIPPED)

    result = send(scripted.base_url, transport)

    assert (result.delivery, result.attempts) == (Delivery.ACKNOWLEDGED, 2)
    # The service may have stored the first attempt: its "skipped" is explained.
    assert result.answer_lost_before
    scripted.script = lambda n: answer(200, broken, gzipped)

    never = send(scripted.base_url, transport)

    assert (never.delivery, never.status) == (Delivery.UNDELIVERED, None)
    assert never.message.startswith(
        "the connection broke after the HTTP 200 status line and headers, before the body"
    )


CLOSE_DELIMITED = b"HTTP/1.0 200 OK\r\nConnection: close\r\nContent-Type: application/json\r\n\r\n"
CUT_BODY = answer(body=SAVED)[:-10]  # the Content-Length promises 10 bytes more


@pytest.mark.parametrize("transport", list(Transport))
@pytest.mark.parametrize(
    ("written", "then", "expected"),
    [
        # Read to the end of the connection, as HTTP/1.0 says: a documented answer.
        (CLOSE_DELIMITED + SAVED, "close", Delivery.ACKNOWLEDGED),
        # The service may have stored it: retried, never acknowledged.
        (CUT_BODY, "close", Delivery.UNDELIVERED),
        (CUT_BODY, "stall", Delivery.UNDELIVERED),
        (
            answer(body=b"OK", headers=(("Content-Type", "text/plain"),)),
            "keep",
            Delivery.UNCONFIRMED,
        ),
        # Read no further than 1 MiB: 200 MB cost a gigabyte of memory.
        (answer(body=b'{"summary": "' + b"x" * (2 << 20) + b'"}'), "keep", Delivery.UNDELIVERED),
        (CLOSE_DELIMITED + b"x" * (2 << 20), "close", Delivery.UNDELIVERED),
    ],
    ids=[
        "http-1.0-close-delimited",
        "closed-mid-body",
        "stalled-mid-body",
        "200-text-plain",
        "2-mib-body",
        "2-mib-close-delimited-body",
    ],
)
def test_answers_cut_short_or_in_another_shape_are_never_taken_for_an_acknowledgement(
    scripted: ScriptedService,
    transport: Transport,
    written: bytes,
    then: Literal["keep", "close", "stall"],
    expected: Delivery,
) -> None:
    scripted.script, scripted.then = (lambda n: written), then

    result = send(scripted.base_url, transport, read_timeout=0.2)

    assert result.delivery == expected
    if expected != Delivery.ACKNOWLEDGED:
        assert result.attempts == 2 and result.answer_lost_before  # remembered for a rerun
        assert result.message


@pytest.mark.parametrize("transport", list(Transport))
def test_a_body_trickled_for_ever_is_given_up_one_read_timeout_after_its_headers(
    scripted: ScriptedService, transport: Transport
) -> None:
    # Every socket read got a byte well within the read timeout, so the request, and the
    # run, hung for ever (past PMS_SYNC_TIMEOUT and --max-duration alike).
    chunked = (("Transfer-Encoding", "chunked"), ("Content-Type", "application/json"))
    head = answer(body=b"", headers=chunked).replace(b"Content-Length: 0\r\n", b"")
    scripted.script, scripted.then = (lambda n: head), "trickle"

    started = time.monotonic()
    result = send(scripted.base_url, transport, read_timeout=0.3)

    assert (result.delivery, result.status, result.attempts) == (Delivery.UNDELIVERED, None, 2)
    assert result.answer_lost_before  # the service may hold it: remembered for the rerun
    assert "before the body (TimeoutError)" in result.message
    assert time.monotonic() - started < 2


@pytest.mark.parametrize(
    "retry_after",
    ["86400", "inf", "Fri, 31 Dec 9999 23:59:59 GMT", "Mon, 01 Jan 99999999999 00:00:00 GMT"],
)
def test_a_retry_after_of_a_day_or_beyond_any_date_pauses_no_longer_than_the_policy_allows(
    scripted: ScriptedService, retry_after: str
) -> None:
    # The backoff capped it, but the limiter paused every request of the token for the raw
    # value: the run hung for a day (or forever); a year no datetime holds raised
    # OverflowError.
    throttled = answer(429, b"slow down", (("Retry-After", retry_after),))
    scripted.script = lambda n: throttled if n == 1 else answer()

    started = time.monotonic()
    result = send(scripted.base_url)

    assert (result.delivery, result.attempts) == (Delivery.ACKNOWLEDGED, 2)
    assert time.monotonic() - started < 2  # FAST_RETRY caps Retry-After at 0.05 s


def test_the_open_api_client_pauses_no_longer_than_the_policy_allows_either(
    scripted: ScriptedService, tmp_path: Path
) -> None:
    throttled = answer(429, b"slow down", (("Retry-After", "86400"),))
    issued = answer(body=b'{"access_token":"issued-token-1","expires_in":3600}')
    scripted.script = lambda n: throttled if n == 1 else issued
    config = ClientConfig(base_url=scripted.base_url, retry=FAST_RETRY)

    async def run() -> str:
        credentials = ClientCredentials("client-1", "client-secret-1")
        async with OpenApiClient(config, credentials, cache_path=tmp_path / "t.json") as api:
            return await asyncio.wait_for(api.access_token(), 10)

    started = time.monotonic()

    assert asyncio.run(run()) == "issued-token-1"
    assert time.monotonic() - started < 2


@pytest.mark.parametrize(
    ("body", "found"),
    [
        (b"<html><body>Accept the terms</body></html>", "a text/html body that is not JSON"),
        (b'{"access_token": ["issued-token-2"], "expires_in": 60}', "access_token: string_type"),
        (b'{"access_token": "issued-token-2", "expires_in": "soon"}', "expires_in: int_parsing"),
    ],
)
def test_an_open_api_answer_that_is_no_documented_json_is_a_service_error_quoting_no_value(
    scripted: ScriptedService, tmp_path: Path, body: bytes, found: str
) -> None:
    # JSONDecodeError or pydantic's ValidationError ended `pms-sync accounts` (and a sync
    # through client credentials) with a traceback; the latter quotes the values it refused.
    media = "text/html" if body.startswith(b"<") else "application/json"
    scripted.script = lambda n: answer(body=body, headers=(("Content-Type", media),))
    config = ClientConfig(base_url=scripted.base_url, retry=FAST_RETRY)

    async def run() -> str:
        credentials = ClientCredentials("client-1", "client-secret-1")
        async with OpenApiClient(config, credentials, cache_path=tmp_path / "t.json") as api:
            return await api.access_token()

    with pytest.raises(ServiceError) as caught:
        asyncio.run(run())

    assert str(caught.value).startswith(
        f"POST /openapi/v1/oauth2/token: the HTTP 200 answer is not the JSON the client reads "
        f"({found})"
    )
    assert "issued-token-2" not in str(caught.value)


def test_a_retry_after_that_no_datetime_holds_is_read_as_absent() -> None:
    assert parse_retry_after("Mon, 01 Jan 99999999999 00:00:00 GMT") is None
    assert parse_retry_after("Mon, 01 Jan 2026 00:00:00 +99999999999999999999") is None
    assert parse_retry_after("7") == 7.0


@pytest.mark.parametrize(
    "headers",
    [
        (("X-RateLimit-Limit-Second", "15"), ("X-RateLimit-Remaining-Second", "inf")),
        (("X-RateLimit-Limit-Second", "-5"), ("X-RateLimit-Remaining-Second", "1")),
        (("X-RateLimit-Limit-Hour", "1e400"), ("X-RateLimit-Remaining-Hour", "0")),
    ],
    ids=["remaining-inf", "limit-negative", "limit-overflow"],
)
def test_rate_limit_headers_that_are_no_counts_do_not_end_the_run(
    scripted: ScriptedService, headers: tuple[tuple[str, str], ...]
) -> None:
    # OverflowError or ValueError out of the limiter ended the push with a traceback.
    # (Counts it would log millions of tickets for: tests/rate/test_limiter_rules.py.)
    scripted.script = lambda n: answer(headers=headers)

    result = send(scripted.base_url)

    assert (result.delivery, result.attempts) == (Delivery.ACKNOWLEDGED, 1)


def test_a_change_whose_only_lost_answer_was_its_last_attempt_is_remembered_as_possibly_stored(
    scripted: ScriptedService, tmp_path: Path
) -> None:
    # Throttled (nothing stored) until the last attempt, whose answer is lost after the
    # request was read. The change was left pending without a possibly_stored row, so the
    # next run's "skipped" was listed as a disagreement (status disagreed, exit 3) instead of
    # a re-send after a lost answer.
    snapshot = tmp_path / "snapshot.duckdb"
    settings = settings_for(scripted.base_url, snapshot, concurrency=1)
    throttled = answer(429, b"slow down", (("Retry-After", "0"),))
    scripted.script = lambda n: throttled if n < FAST_RETRY.max_attempts else b""

    first = sync_batches(batches_of(hotel(units=1, reservations=0)), settings)

    assert first.outcomes["pending"] == 1 and scripted.requests == FAST_RETRY.max_attempts
    scripted.script = lambda n: answer(body=SKIPPED)

    second = sync_batches(batches_of(hotel(units=1, reservations=0)), settings)

    assert second.outcomes["acknowledged"] == 1
    assert second.push.disagreements == []
    assert second.push.resent_after_lost_answer == 1
