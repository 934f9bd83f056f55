"""The layer around every request: only a Host naming the sandbox is answered (``local_guard.py``),
a fresh x-request-id on every response, the request
statistics, and the injected faults and misbehaviours (never on the admin API under
/_sandbox/; misbehaviours on the sync webhooks only).

A plain ASGI wrapper rather than Starlette middleware: it also wraps Starlette's own 500
handler (so even a crash answers with an x-request-id) and costs almost nothing per request.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from starlette.routing import Match, Router
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from connector.sandbox.faults import Fault, FaultKind, Misbehaviour
from connector.sandbox.local_guard import AllowedHosts, refused_host
from connector.sandbox.misbehaviours import connection_reset, misbehave
from connector.sandbox.responses import error_for_path, is_sync_path
from connector.sandbox.state import SandboxState

ADMIN_PREFIX = "/_sandbox/"
ALLOWED_HOST_SETTING = "--allowed-host (allowed_hosts: in the sandbox config)"
CLIENT_CLOSED_REQUEST = 499
"""Counted when a client gave up on a hung (timeout fault) request: nginx's convention."""


class SandboxMiddleware:
    def __init__(
        self, app: ASGIApp, router: Router, state: SandboxState, allowed_hosts: AllowedHosts
    ) -> None:
        self.app = app
        self.router = router
        self.state = state
        self.allowed_hosts = allowed_hosts

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        # Before anything else: a page that rebinds its own name to this address reads nothing.
        if await refused_host(scope, receive, send, self.allowed_hosts, ALLOWED_HOST_SETTING):
            return
        request_id = uuid.uuid4().hex.encode()
        status = 0

        async def send_with_request_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", ()), (b"x-request-id", request_id)]
            await send(message)

        path: str = scope["path"]
        if path.startswith(ADMIN_PREFIX):
            await self.app(scope, receive, send_with_request_id)
            return
        self.state.stats.arrived()
        try:
            decision = self.state.faults.decide(sync_webhook=is_sync_path(path))
            if decision.latency_s:
                await asyncio.sleep(decision.latency_s)
            fault = decision.fault
            if fault is None:
                await self.app(scope, receive, send_with_request_id)
                return
            self.state.stats.injected(fault.kind)
            if isinstance(fault.kind, Misbehaviour):
                status = await misbehave(
                    fault.kind,
                    self.app,
                    scope,
                    receive,
                    send_with_request_id,
                    connection_reset(send),
                )
            elif fault.kind is FaultKind.DROP:
                status = await _drop_answer(self.app, scope, receive, send)
            else:
                status = await self._inject(fault, scope, receive, send_with_request_id)
        finally:
            self.state.stats.count(self._endpoint(scope), status or CLIENT_CLOSED_REQUEST)

    def _endpoint(self, scope: Scope) -> str:
        route: Any = scope.get("route")
        if route is None:
            # An injected fault answers before routing: find the template the request matches.
            route = next(
                (r for r in self.router.routes if r.matches(scope)[0] is not Match.NONE), None
            )
        template = getattr(route, "path", None) or "(unknown path)"
        return f"{scope['method']} {template}"

    async def _inject(self, fault: Fault, scope: Scope, receive: Receive, send: Send) -> int:
        path = scope["path"]
        if fault.kind is FaultKind.TIMEOUT:
            timeout_s = self.state.faults.settings.timeout_s
            if await _client_gave_up(receive, timeout_s, self.state):
                return CLIENT_CLOSED_REQUEST
            response = error_for_path(
                path, 504, f"Gateway timeout: no answer within {timeout_s:g} s (sandbox fault)"
            )
        elif fault.kind is FaultKind.RATE_LIMIT:
            response = error_for_path(
                path,
                429,
                f"Too many requests: retry after {fault.retry_after_s} s (sandbox fault)",
                headers={"Retry-After": str(fault.retry_after_s)},
            )
        else:
            response = error_for_path(
                path, fault.status, f"Internal server error (sandbox fault, HTTP {fault.status})"
            )
        await response(scope, receive, send)
        return fault.status


async def _drop_answer(app: ASGIApp, scope: Scope, receive: Receive, send: Send) -> int:
    """Process the request (it is stored), then lose the answer: the status line goes out with
    a body that never follows, and uvicorn closes the connection when the app returns with the
    response incomplete. The client sees a broken connection after the write happened."""
    status = 0

    async def swallow(message: Message) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    await app(scope, receive, swallow)
    await send(
        {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"64")]}
    )
    return status or CLIENT_CLOSED_REQUEST


async def _client_gave_up(receive: Receive, timeout_s: float, state: SandboxState) -> bool:
    """Hang like a stuck server until the client disconnects (True), ``timeout_s`` passes or
    the server stops (False)."""

    async def wait_for_disconnect() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    waiting = asyncio.ensure_future(wait_for_disconnect())
    deadline = asyncio.get_running_loop().time() + timeout_s
    try:
        # Short slices so that a stopping server releases the request at once.
        while not state.shutting_down:
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                return False
            done, _ = await asyncio.wait({waiting}, timeout=min(remaining, 0.05))
            if done:
                return True
        return False
    finally:
        waiting.cancel()
