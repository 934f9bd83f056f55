"""The sandbox as an ASGI application: ``create_app(config, data_path)``."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Router

from connector.sandbox.admin_routes import admin_routes
from connector.sandbox.config import SandboxConfig
from connector.sandbox.local_guard import AllowedHosts
from connector.sandbox.middleware import SandboxMiddleware
from connector.sandbox.openapi_routes import open_api_routes
from connector.sandbox.responses import error_for_path
from connector.sandbox.state import SandboxState
from connector.sandbox.store import SandboxStore
from connector.sandbox.sync_routes import sync_routes


async def _http_error(request: Request, error: Exception) -> Response:
    # Unknown paths and wrong methods answer in the error format of the family they belong to.
    assert isinstance(error, HTTPException)
    return error_for_path(request.url.path, error.status_code, str(error.detail), error.headers)


def create_app(
    config: SandboxConfig, data_path: Path, host: str = "127.0.0.1"
) -> SandboxMiddleware:
    """The sandbox serving ``config``'s accounts, persisting into ``data_path``, answering
    requests whose Host names ``host`` (where it listens), loopback or ``config.allowed_hosts``.

    The data file is opened here and closed when the server's lifespan ends. The returned
    application's ``state`` is the :class:`SandboxState` its handlers share.
    """
    store = SandboxStore(data_path)
    state = SandboxState.build(config, store)

    @contextlib.asynccontextmanager
    async def lifespan(_app: Starlette) -> AsyncIterator[None]:
        await state.events.start()
        try:
            yield
        finally:
            await state.events.stop()  # pending deliveries end with the server
            store.close()

    routes = [*sync_routes(state), *open_api_routes(state), *admin_routes(state)]
    app = Starlette(
        routes=routes, lifespan=lifespan, exception_handlers={HTTPException: _http_error}
    )
    allowed = AllowedHosts.of(host, config.allowed_hosts)
    return SandboxMiddleware(app, Router(routes=routes), state, allowed)
