"""The admin API under /_sandbox/ for tests, benchmarks and operators: stored records, request
statistics, fault injection, drift (records edited, deleted or reverted as staff or a restore
would), outgoing events (emitted for a reservation, their delivery log, redeliveries), reset
and health. Never subject to faults or rate limits.

It is meant for local use: it returns stored records whole, door codes included. With an admin
token configured, every request under /_sandbox/ (unknown paths too) must carry it, as
``Authorization: Bearer <token>`` or ``X-Sandbox-Admin-Token: <token>``, or is answered 401.
Without one, a request that changes state must be JSON (415 otherwise), and a Host that does
not name the sandbox is refused before any of this (``local_guard``).
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from connector.contract import Entity, OutgoingEventName
from connector.sandbox.events import StoredReservation
from connector.sandbox.faults import FaultSettings
from connector.sandbox.local_guard import is_json
from connector.sandbox.responses import api_error
from connector.sandbox.state import SandboxState
from connector.sandbox.validation_messages import describe_validation_error

Handler = Callable[[Request], Awaitable[Response]]


MAX_PAGE_PARAMETER = 1_000_000_000
"""Largest ``limit``/``offset`` accepted: far beyond any store the sandbox holds, far below
SQLite's integer range, so a bigger value is refused rather than overflowing."""

_DIGITS = re.compile(r"[0-9]+")
ADMIN_TOKEN_HEADER = "x-sandbox-admin-token"
_ANY_METHOD = ["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]
_SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def _page_parameter(value: str | None, name: str) -> int | str | None:
    """The parsed parameter, None when absent, or the problem with it as a message."""
    if value is None:
        return None
    if _DIGITS.fullmatch(value) is None or int(value) > MAX_PAGE_PARAMETER:
        shown = value if len(value) <= 40 else f"{value[:40]}… ({len(value)} characters)"
        return f"{name}: expected an integer from 0 to {MAX_PAGE_PARAMETER}, got {shown!r}"
    return int(value)


def _records(state: SandboxState) -> Handler:
    async def records(request: Request) -> Response:
        params = request.query_params
        entity = params.get("entity")
        if entity is not None and entity not in {e.value for e in Entity}:
            return api_error(
                400,
                "invalid_request",
                f"entity: expected accommodation or reservation, got {entity!r}",
            )
        limit = _page_parameter(params.get("limit"), "limit")
        offset = _page_parameter(params.get("offset"), "offset")
        for problem in (limit, offset):
            if isinstance(problem, str):
                return api_error(400, "invalid_request", problem)
        assert not isinstance(limit, str) and not isinstance(offset, str)
        account_id = params.get("accountId")
        found = state.store.records(account_id, entity, limit=limit, offset=offset or 0)
        return JSONResponse(
            {
                "records": [record.as_json() for record in found],
                "total": state.store.count(account_id, entity),
            }
        )

    return records


def _stats(state: SandboxState) -> Handler:
    async def stats(_request: Request) -> Response:
        return JSONResponse(state.stats.as_json())

    return stats


def _faults(state: SandboxState) -> Handler:
    async def faults(request: Request) -> Response:
        if request.method == "POST":
            try:
                settings = FaultSettings.model_validate_json(await request.body() or b"{}")
            except ValidationError as error:
                return api_error(400, "invalid_request", describe_validation_error(error))
            state.faults.configure(settings)
        return JSONResponse({"faults": state.faults.settings.model_dump()})

    return faults


class DriftRequest(BaseModel):
    """``POST /_sandbox/drift``: what happens to stored records behind the connector's back."""

    model_config = ConfigDict(extra="forbid")

    action: Literal["edit", "delete", "revert"]
    accountId: str
    entity: Entity
    ids: list[str] | None = Field(default=None, max_length=100_000)
    changes: dict[str, Any] | None = None  # edit: a JSON merge patch of the resource
    sinceSeq: int | None = Field(default=None, ge=0, le=MAX_PAGE_PARAMETER)  # revert

    @model_validator(mode="after")
    def _members_of_the_action(self) -> DriftRequest:
        if self.action == "edit" and not self.changes:
            raise ValueError("an edit needs `changes`, a JSON merge patch of the resource")
        if self.action != "edit" and self.changes is not None:
            raise ValueError(f"`changes` belongs to an edit, not a {self.action}")
        if self.action != "revert" and self.sinceSeq is not None:
            raise ValueError(f"`sinceSeq` belongs to a revert, not a {self.action}")
        if self.ids is None and not (self.action == "revert" and self.sinceSeq is not None):
            raise ValueError("name the records in `ids` (a revert may give `sinceSeq` instead)")
        if self.changes is not None and "id" in self.changes:
            raise ValueError("`changes` cannot change the record's `id`")
        return self


def _drift(state: SandboxState) -> Handler:
    async def drift(request: Request) -> Response:
        try:
            order = DriftRequest.model_validate_json(await request.body() or b"{}")
        except ValidationError as error:
            return api_error(400, "invalid_request", describe_validation_error(error))
        store, entity = state.store, order.entity.value
        if order.action == "edit":
            done = store.edit(order.accountId, entity, order.ids or [], order.changes or {})
        elif order.action == "delete":
            done = store.delete(order.accountId, entity, order.ids or [])
        else:
            done = store.revert(order.accountId, entity, order.ids, order.sinceSeq)
        missing = sorted(set(order.ids or []) - set(done))
        return JSONResponse({"action": order.action, "records": done, "missing": missing})

    return drift


class EmitRequest(BaseModel):
    """``POST /_sandbox/events``: emit an outgoing event of a stored reservation."""

    model_config = ConfigDict(extra="forbid")

    event: OutgoingEventName
    accountId: str = Field(min_length=1)
    reservationId: str = Field(min_length=1)
    resource: dict[str, Any] = Field(
        default_factory=dict, description="Members added to (or replacing) the event's resource."
    )


class RedeliverRequest(BaseModel):
    """``POST /_sandbox/events/redeliver``: send deliveries again (default: every delivered)."""

    model_config = ConfigDict(extra="forbid")

    ids: list[str] | None = Field(default=None, max_length=100_000)


def _events(state: SandboxState) -> Handler:
    async def events(request: Request) -> Response:
        if request.method == "GET":
            return JSONResponse({"deliveries": state.events.log(), "pending": state.events.pending})
        try:
            order = EmitRequest.model_validate_json(await request.body() or b"{}")
        except ValidationError as error:
            message = describe_validation_error(error)
            if "event" in message:
                message += f" (events: {', '.join(e.value for e in OutgoingEventName)})"
            return api_error(400, "invalid_request", message)
        found = state.store.find_records(
            (order.accountId,), Entity.RESERVATION.value, order.reservationId
        )
        if not found:
            return api_error(
                404,
                "not_found",
                f"no reservation {order.reservationId!r} stored in account {order.accountId!r}",
            )
        emitted = state.events.emit(order.event, StoredReservation.of(found[0]), order.resource)
        return JSONResponse(
            {
                "event": order.event.value,
                "deliveries": [delivery.id for delivery in emitted.deliveries],
                "skipped": emitted.skipped,
            },
            status_code=202,
        )

    return events


def _redeliver(state: SandboxState) -> Handler:
    async def redeliver(request: Request) -> Response:
        try:
            order = RedeliverRequest.model_validate_json(await request.body() or b"{}")
        except ValidationError as error:
            return api_error(400, "invalid_request", describe_validation_error(error))
        again = state.events.redeliver(order.ids)
        return JSONResponse(
            {"deliveries": [d.id for d in again], "redeliveryOf": [d.redelivery_of for d in again]},
            status_code=202,
        )

    return redeliver


def _reset(state: SandboxState) -> Handler:
    async def reset(_request: Request) -> Response:
        state.reset()
        return JSONResponse({"status": "reset"})

    return reset


def _health(state: SandboxState) -> Handler:
    async def health(_request: Request) -> Response:
        properties = state.store.property_statuses()
        return JSONResponse(
            {
                "status": "ok",
                "accounts": [account.id for account in state.config.accounts],
                "records": state.store.counts(),
                # Properties deactivated through PUT /properties/{account id}: their units
                # read as inactive (GET /_sandbox/records: propertyStatus).
                "inactiveProperties": sorted(
                    account for account, status in properties.items() if status == "INACTIVE"
                ),
            }
        )

    return health


def _presented_token(request: Request) -> str | None:
    """The admin token a request carries, from either header, or None."""
    token = request.headers.get(ADMIN_TOKEN_HEADER)
    if token is not None:
        return token.strip()
    scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
    return credentials.strip() if scheme.lower() == "bearer" else None


def _guarded(handler: Handler, admin_token: str | None, *, changes_state: bool) -> Handler:
    """``handler`` behind the admin token, when one is configured; without one, a request
    that changes state (any method but GET, HEAD, OPTIONS) must declare a JSON body, which
    a web page cannot send cross-site (``local_guard``)."""
    expected = admin_token.encode() if admin_token is not None else None

    async def guarded(request: Request) -> Response:
        if expected is None:
            if (
                changes_state
                and request.method not in _SAFE_METHODS
                and not is_json(request.headers)
            ):
                return api_error(
                    415,
                    "unsupported_media_type",
                    f"{request.method} {request.url.path} changes the sandbox's state: send "
                    "a JSON body with `Content-Type: application/json` (`{}` when there is "
                    "nothing to say), or the admin token; a form or text/plain request is what "
                    "a web page can send cross-site",
                    headers={"Accept": "application/json"},
                )
            return await handler(request)
        presented = _presented_token(request)
        # Compared in constant time; the presented value is never echoed.
        if presented is None or not hmac.compare_digest(presented.encode(), expected):
            problem = "no admin token" if presented is None else "a wrong admin token"
            return api_error(
                401,
                "unauthorized",
                f"the admin API requires the sandbox's admin token, this request carries "
                f"{problem}: send it as `Authorization: Bearer <token>` or "
                f"`X-Sandbox-Admin-Token: <token>`",
                headers={"WWW-Authenticate": 'Bearer realm="pms-sync sandbox admin"'},
            )
        return await handler(request)

    return guarded


def _unknown(known: dict[str, list[str]]) -> Handler:
    """Any other path under /_sandbox/ (reached only with the token, when one is set)."""

    async def unknown(request: Request) -> Response:
        methods = known.get(request.url.path)
        if methods is not None:
            return api_error(
                405,
                "method_not_allowed",
                f"{request.method} is not allowed on {request.url.path} "
                f"(allowed: {', '.join(methods)})",
                headers={"Allow": ", ".join(methods)},
            )
        return api_error(404, "not_found", f"no admin endpoint {request.url.path}")

    return unknown


def admin_routes(state: SandboxState) -> list[Route]:
    endpoints: list[tuple[str, Handler, list[str]]] = [
        ("/_sandbox/records", _records(state), ["GET"]),
        ("/_sandbox/stats", _stats(state), ["GET"]),
        ("/_sandbox/faults", _faults(state), ["GET", "POST"]),
        ("/_sandbox/drift", _drift(state), ["POST"]),
        ("/_sandbox/reset", _reset(state), ["POST"]),
        ("/_sandbox/events", _events(state), ["GET", "POST"]),
        ("/_sandbox/events/redeliver", _redeliver(state), ["POST"]),
        ("/_sandbox/health", _health(state), ["GET"]),
    ]
    token = state.config.admin_token
    known = {path: methods for path, _, methods in endpoints}
    return [
        *(
            Route(path, _guarded(handler, token, changes_state=True), methods=methods)
            for path, handler, methods in endpoints
        ),
        # Last: unknown admin paths and methods are answered behind the token as well.
        Route(
            "/_sandbox/{rest:path}",
            _guarded(_unknown(known), token, changes_state=False),
            methods=_ANY_METHOD,
        ),
    ]
