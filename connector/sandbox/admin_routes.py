"""The admin API under /_sandbox/ for tests, benchmarks and operators: stored records, request
statistics, fault injection, reset and health. Never subject to faults or rate limits.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from pydantic import ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from connector.contract import Entity
from connector.sandbox.faults import FaultSettings
from connector.sandbox.responses import api_error
from connector.sandbox.state import SandboxState
from connector.sandbox.validation_messages import describe_validation_error

Handler = Callable[[Request], Awaitable[Response]]


def _non_negative(value: str | None, name: str) -> int | str | None:
    """The parsed parameter, None when absent, or the problem with it as a message."""
    if value is None:
        return None
    if not value.isdigit():
        return f"{name}: expected a non-negative integer, got {value!r}"
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
        limit = _non_negative(params.get("limit"), "limit")
        offset = _non_negative(params.get("offset"), "offset")
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


def _reset(state: SandboxState) -> Handler:
    async def reset(_request: Request) -> Response:
        state.reset()
        return JSONResponse({"status": "reset"})

    return reset


def _health(state: SandboxState) -> Handler:
    async def health(_request: Request) -> Response:
        return JSONResponse(
            {
                "status": "ok",
                "accounts": [account.id for account in state.config.accounts],
                "records": state.store.counts(),
            }
        )

    return health


def admin_routes(state: SandboxState) -> list[Route]:
    return [
        Route("/_sandbox/records", _records(state), methods=["GET"]),
        Route("/_sandbox/stats", _stats(state), methods=["GET"]),
        Route("/_sandbox/faults", _faults(state), methods=["GET", "POST"]),
        Route("/_sandbox/reset", _reset(state), methods=["POST"]),
        Route("/_sandbox/health", _health(state), methods=["GET"]),
    ]
