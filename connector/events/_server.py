"""Serving the receiver with uvicorn on a socket bound by the sandbox's helpers: in the
foreground (``pms-sync receive``) or in a background thread (tests, demos).

It listens beyond loopback only with a secret: without one, anyone who reaches the port could
write events into the store.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import uvicorn

from connector.errors import PmsSyncError
from connector.events._app import create_receiver_app
from connector.events._settings import ReceiverSettings
from connector.events._writer import EventWriter
from connector.sandbox.server import (
    GRACEFUL_SHUTDOWN_S,
    ThreadedServer,
    base_url_of,
    bind_socket,
    is_loopback,
)


class ReceiverExposedError(PmsSyncError):
    """Asked to listen beyond loopback without a secret."""


def exposure_warning(settings: ReceiverSettings) -> str | None:
    """None on loopback with a secret; a warning otherwise (ReceiverExposedError beyond
    loopback without a secret)."""
    if is_loopback(settings.host):
        if settings.secret is None:
            return (
                "warning: no receiver secret (PMS_SYNC_RECEIVER_SECRET): every local process "
                "may post events; set one and configure it as a header of the webhooks"
            )
        return None
    if settings.secret is None:
        raise ReceiverExposedError(
            f"refusing to listen on {settings.host or 'every interface'} without a secret: "
            "anyone who reaches the port could store events. Set PMS_SYNC_RECEIVER_SECRET "
            f"(sent by the service in the {settings.secret_header} header of each webhook, "
            "see `pms-sync webhooks`), or listen on 127.0.0.1 behind a reverse proxy"
        )
    return None


def build_server(settings: ReceiverSettings, *, log_level: str = "warning") -> uvicorn.Server:
    writer = EventWriter(settings.store_path, settings.lock_timeout_s)
    app = create_receiver_app(settings, writer)
    return uvicorn.Server(
        uvicorn.Config(
            app,
            log_level=log_level,
            access_log=False,
            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
            lifespan="on",
        )
    )


def serve_forever(
    settings: ReceiverSettings,
    *,
    announce: Callable[[str], None] = lambda text: print(text, flush=True),
    warn: Callable[[str], None] = lambda text: print(text, file=sys.stderr, flush=True),
) -> None:
    """Receive events in the foreground until interrupted (Ctrl-C or SIGTERM)."""
    warning = exposure_warning(settings)
    if warning is not None:
        warn(warning)
    sock = bind_socket(settings.host, settings.port)
    server = build_server(settings, log_level="info")
    announce(
        f"pms-sync receiver listening on {base_url_of(sock)}/events/<connection>\n"
        f"events: {settings.store_path.resolve()}\n"
        f"secret header: {settings.secret_header}"
        + (" (required)" if settings.secret else " (none configured)")
    )
    server.run(sockets=[sock])


class BackgroundReceiver(ThreadedServer):
    """A receiver served by uvicorn in a daemon thread of this process."""

    what = "the receiver"

    def __init__(self, settings: ReceiverSettings) -> None:
        exposure_warning(settings)  # the same rule as the CLI
        self.settings = settings
        super().__init__(build_server(settings), settings.host, settings.port)
