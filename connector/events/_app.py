"""The receiver as an ASGI application: ``POST /events/{connection}`` (or ``/events``) takes
the service's ``{"accountId", "event", "resource"}``.

Checks, in order: the Host names the receiver (421 otherwise, ``local_guard``); the secret
header when one is configured (compared in constant time; 401 without telling which part was
wrong), else a JSON content type (415: a web page cannot post JSON cross-site); the connection named by the path (404 unless letters,
digits, ``_.-``), the body's size (413 past the bound, before it is
read whole), the body's shape (400). A valid event is stored once (its key: the SHA-256 of
the body's canonical JSON) and answered 200 at once; a redelivery is answered 200 too, so the
service stops retrying. When the store cannot be written, 503 with Retry-After asks the
service to deliver again later.
"""

from __future__ import annotations

import contextlib
import hashlib
import hmac
import json
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from connector.canonical import canonical_json
from connector.errors import PmsSyncError
from connector.events._settings import ReceiverSettings
from connector.events._writer import EventWriter
from connector.sandbox.local_guard import AllowedHosts, HostCheck, is_json
from connector.snapshot import IncomingEvent

CONNECTION_NAME = re.compile(r"^[A-Za-z0-9_.-]{1,100}$")
RETRY_AFTER_S = 5


class BodyTooLarge(Exception):
    pass


def _error(status: int, code: str, message: str, **headers: str) -> JSONResponse:
    return JSONResponse({"error": code, "message": message}, status_code=status, headers=headers)


async def _bounded_body(request: Request, limit: int) -> bytes:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise BodyTooLarge
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise BodyTooLarge
    return bytes(body)


def event_key(document: dict[str, Any], delivery_id: str | None = None) -> str:
    """The event's idempotency key: the same body delivered twice has the same key; with the
    service's id of the emission, the same body emitted twice (a repeat) has two."""
    text = canonical_json(document)
    if delivery_id:
        text += "\n" + delivery_id
    return hashlib.sha256(text.encode()).hexdigest()


def _shape_problem(document: Any) -> str | None:
    if not isinstance(document, dict):
        return "expected a JSON object {accountId, event, resource}"
    if not isinstance(document.get("event"), str) or not document["event"]:
        return "event: expected the event's name"
    if not isinstance(document.get("resource"), dict):
        return "resource: expected an object"
    if document.get("accountId") is not None and not isinstance(document["accountId"], str):
        return "accountId: expected a string"
    return None


class NotStrictJson(ValueError):
    """JSON that Python's parser accepts and RFC 8259 does not, or leaves ambiguous."""


def _refuse_constant(name: str) -> Any:
    # NaN and Infinity would be stored and written back as text no JSON parser reads.
    raise NotStrictJson(f"{name} is not a JSON value")


def _unique_members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    # With a member twice, parsers disagree on which value wins: refused, not guessed.
    document: dict[str, Any] = {}
    for name, value in pairs:
        if name in document:
            raise NotStrictJson(f"member {name!r} appears twice in one object")
        document[name] = value
    return document


def create_receiver_app(settings: ReceiverSettings, writer: EventWriter) -> HostCheck:
    expected = settings.secret.encode() if settings.secret else None

    async def receive(request: Request) -> Response:
        if expected is not None:
            presented = request.headers.get(settings.secret_header, "").encode()
            # Constant time whatever the presented value; the value is never echoed.
            if not hmac.compare_digest(presented, expected):
                return _error(
                    401, "unauthorized", f"missing or wrong {settings.secret_header} header"
                )
        elif not is_json(request.headers):
            # Without a secret, only JSON: a web page cannot post it cross-site.
            return _error(
                415,
                "unsupported_media_type",
                "send the event as JSON with `Content-Type: application/json`",
            )
        connection = request.path_params.get("connection", "")
        if connection and not CONNECTION_NAME.fullmatch(connection):
            return _error(404, "not_found", "the connection in the path is letters, digits, _.-")
        try:
            body = await _bounded_body(request, settings.max_body_bytes)
        except BodyTooLarge:
            return _error(413, "too_large", f"the body exceeds {settings.max_body_bytes} bytes")
        try:
            document = json.loads(
                body, parse_constant=_refuse_constant, object_pairs_hook=_unique_members
            )
        except NotStrictJson as error:
            return _error(400, "invalid_request", f"the body is not strict JSON: {error}")
        except (ValueError, RecursionError):
            return _error(400, "invalid_request", "the body is not JSON")
        problem = _shape_problem(document)
        if problem is not None:
            return _error(400, "invalid_request", problem)
        delivery_id = (
            request.headers.get(settings.delivery_id_header)
            if settings.delivery_id_header is not None
            else None
        )
        key = event_key(document, delivery_id)
        event = IncomingEvent(
            connection=connection,
            event_key=key,
            account_id=document.get("accountId"),
            event=document["event"],
            resource=canonical_json(document["resource"]),
            received_at=datetime.now(UTC).replace(tzinfo=None),
        )
        try:
            new = await writer.submit(event)
        except PmsSyncError:
            return _error(
                503,
                "unavailable",
                "the events store is busy; deliver again later",
                **{"Retry-After": str(RETRY_AFTER_S)},
            )
        return JSONResponse({"status": "stored" if new else "duplicate", "key": key})

    async def health(_request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        await writer.start()
        try:
            yield
        finally:
            await writer.stop()

    app = Starlette(
        lifespan=lifespan,
        routes=[
            Route("/events", receive, methods=["POST"]),
            Route("/events/{connection}", receive, methods=["POST"]),
            Route("/health", health, methods=["GET"]),
        ],
    )
    allowed = AllowedHosts.of(settings.host, settings.allowed_hosts)
    return HostCheck(app, allowed, "--allowed-host (PMS_SYNC_RECEIVER_ALLOWED_HOSTS)")
