"""The misbehaviour mode: answers a client must not take for an acknowledgement.

What a captive portal, a misconfigured proxy or a broken service answers instead of the
documented JSON object of spec §4.1/§4.2 (docs/sandbox.md, "Faults"). Some of them process
the request first, so the record *is* stored and only the answer goes wrong:
``wrong_types_200`` (counts written as strings), ``empty_object_200`` (``{}``: documented, as
every member is optional, but it says nothing), ``extra_counts_200`` (documented, but counting
one more record than was sent) and ``reset_after_headers`` (the status line and headers go
out, then the connection is reset).
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from connector.contract import SYNC_PATHS, Entity
from connector.sandbox.faults import STORED_BY, Misbehaviour

LOGIN_PATH = "/portal/login"
CAPTIVE_PORTAL_PAGE = (
    "<!DOCTYPE html><html><head><title>Guest Wi-Fi</title></head><body>"
    "<h1>Welcome to the hotel network</h1><p>Please accept the terms to continue.</p>"
    f'<form method="post" action="{LOGIN_PATH}"><button>Accept</button></form>'
    "</body></html>"
)
ERROR_BODY = {"error": "Service temporarily unable to process the request (sandbox misbehaviour)"}

ConnectionReset = Callable[[], Awaitable[None]]


async def misbehave(
    kind: Misbehaviour,
    app: ASGIApp,
    scope: Scope,
    receive: Receive,
    send: Send,
    reset: ConnectionReset,
) -> int:
    """Answer one sync-webhook request with ``kind``; returns the status sent (0: none)."""
    if kind in STORED_BY:
        status, headers, body = await _processed(app, scope, receive)
        if kind is Misbehaviour.RESET_AFTER_HEADERS:
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await reset()
            return status
        if status != 200:  # refused (401, 400, 403): the real answer, nothing to distort
            response: Response = _answer(status, headers, body)
        elif kind is Misbehaviour.EMPTY_OBJECT_200:
            response = JSONResponse({}, headers=_kept(headers))
        elif kind is Misbehaviour.EXTRA_COUNTS_200:
            response = _with_another_record(headers, body)
        else:
            response = _with_counts_as_strings(headers, body)
    elif kind is Misbehaviour.HTML_200:
        response = HTMLResponse(CAPTIVE_PORTAL_PAGE)
    elif kind is Misbehaviour.EMPTY_200:
        response = Response(b"", status_code=200)
    elif kind is Misbehaviour.ERROR_JSON_200:
        response = JSONResponse(ERROR_BODY)
    elif kind is Misbehaviour.ZERO_COUNTS_200:
        response = JSONResponse(_zero_counts(scope["path"]))
    else:  # REDIRECT_302
        response = RedirectResponse(_login_url(scope), status_code=302)
    await response(scope, receive, send)
    return response.status_code


async def _processed(
    app: ASGIApp, scope: Scope, receive: Receive
) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """Let the application handle the request (it stores the record); keep its answer."""
    status = 0
    headers: list[tuple[bytes, bytes]] = []
    chunks: list[bytes] = []

    async def keep(message: Message) -> None:
        nonlocal status, headers
        if message["type"] == "http.response.start":
            status = message["status"]
            headers = list(message.get("headers", ()))
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(scope, receive, keep)
    return status, headers, b"".join(chunks)


def _kept(headers: list[tuple[bytes, bytes]]) -> dict[str, str]:
    """The application's headers a replacement body keeps (rate-limit headers, say)."""
    kept = {k.decode("latin-1"): v.decode("latin-1") for k, v in headers}
    kept.pop("content-length", None)  # the replacement computes its own
    kept.pop("content-type", None)
    return kept


def _answer(status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> Response:
    content_type = dict(headers).get(b"content-type", b"").decode("latin-1") or None
    return Response(body, status_code=status, headers=_kept(headers), media_type=content_type)


def _with_counts_as_strings(headers: list[tuple[bytes, bytes]], body: bytes) -> Response:
    """The real answer with every integer member written as a string (``"1"``)."""
    try:
        document: Any = json.loads(body)
    except ValueError:
        document = None
    if not isinstance(document, dict):
        return _answer(200, headers, body)
    return JSONResponse(
        {
            member: str(value) if isinstance(value, int) and not isinstance(value, bool) else value
            for member, value in document.items()
        },
        headers=_kept(headers),
    )


def _with_another_record(headers: list[tuple[bytes, bytes]], body: bytes) -> Response:
    """The real answer counting one more record than was sent: its non-zero count plus one,
    and one more entry in ``reservationIds``."""
    try:
        document: Any = json.loads(body)
    except ValueError:
        document = None
    if not isinstance(document, dict):
        return _answer(200, headers, body)
    counted = next(
        (member for member, value in document.items() if isinstance(value, int) and value),
        None,
    )
    if counted is not None:
        document[counted] += 1
    if isinstance(document.get("reservationIds"), list):
        document["reservationIds"] = [*document["reservationIds"], "another-1"]
    return JSONResponse(document, headers=_kept(headers))


def _zero_counts(path: str) -> dict[str, Any]:
    if path == SYNC_PATHS[Entity.ACCOMMODATION]:
        return {"savedProperties": 0, "skippedProperties": 0, "summary": "0 saved, 0 skipped"}
    return {
        "newReservations": 0,
        "updatedReservations": 0,
        "skippedReservations": 0,
        "summary": "0 new, 0 updated, 0 skipped reservation(s)",
        "reservationIds": [],
    }


def _login_url(scope: Scope) -> str:
    headers = dict(scope.get("headers", ()))
    host = headers.get(b"host", b"").decode("latin-1")
    if not host and scope.get("server"):
        server_host, port = scope["server"]
        host = f"{server_host}:{port}"
    return f"{scope.get('scheme', 'http')}://{host}{LOGIN_PATH}?continue={scope['path']}"


def connection_reset(send: Send) -> ConnectionReset:
    """A reset (TCP RST) of the connection ``send`` writes to.

    ASGI has no way to reset a connection, so this reaches uvicorn's transport through its
    ``send`` (a bound method of the request cycle, which holds the transport), sets
    SO_LINGER to 0 and aborts it: the kernel sends RST instead of FIN. On a server that hides
    its transport the answer is left incomplete instead, and the server closes the connection.
    """

    async def reset() -> None:
        transport = getattr(getattr(send, "__self__", None), "transport", None)
        if transport is None or not hasattr(transport, "abort"):
            return
        sock = transport.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        transport.abort()
        # One turn of the loop: the server's connection_lost marks the request disconnected,
        # so it does not log the unfinished answer as an application error.
        await asyncio.sleep(0)

    return reset
