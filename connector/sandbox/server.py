"""Serving the sandbox with uvicorn: on a socket bound here (so port 0 yields a known free
port), in the foreground (CLI) or in a background thread (tests).

The admin API hands out every stored record, door codes and guest contact data included, so
the sandbox listens beyond loopback only with an admin token that guards it.
"""

from __future__ import annotations

import ipaddress
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType

import uvicorn

from connector.errors import PmsSyncError
from connector.sandbox.app import create_app
from connector.sandbox.config import ADMIN_TOKEN_VARIABLE, SandboxConfig
from connector.sandbox.state import SandboxState
from connector.secrets import MASK

GRACEFUL_SHUTDOWN_S = 2
"""A request hung by a timeout fault must not keep a stopping server alive for long."""


class SandboxStartError(PmsSyncError):
    """The sandbox could not bind its port or did not start."""


class SandboxExposedError(SandboxStartError):
    """Asked to listen beyond loopback without an admin token."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` only accepts connections from this machine. Names other than
    ``localhost`` are not resolved: they count as reachable from the network."""
    if host.lower().rstrip(".") == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def exposure_warning(host: str, config: SandboxConfig) -> str | None:
    """None on loopback; the warning to print when listening beyond it with an admin token.
    Without one a SandboxExposedError says why not and how."""
    if is_loopback(host):
        return None
    if config.admin_token is None:
        raise SandboxExposedError(
            f"refusing to listen on {host or 'every interface'}: the admin API (/_sandbox/) "
            f"returns every stored record, door codes and guest contact data included, and "
            f"without an admin token anyone who can reach the port may read it. Listen on "
            f"127.0.0.1 (the default) for local use, or set an admin token (--admin-token, "
            f"{ADMIN_TOKEN_VARIABLE}, or admin_token: in the config file) that every /_sandbox/ "
            f"request must then carry"
        )
    return (
        f"warning: the sandbox listens on {host or 'every interface'} and is reachable from the "
        f"network. Its admin API (/_sandbox/) requires the admin token; the sync webhooks and "
        f"the Open API take their usual tokens. It answers requests for its addresses only: "
        f"allow a DNS name with --allowed-host. It is a test double: give it no real guest data."
    )


def bind_socket(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as error:
        sock.close()
        raise SandboxStartError(f"cannot listen on {host}:{port}: {error.strerror}") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def base_url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


class SandboxServer(uvicorn.Server):
    """uvicorn's server, telling the sandbox when it stops so hung requests are released."""

    def __init__(self, config: uvicorn.Config, state: SandboxState) -> None:
        super().__init__(config)
        self.sandbox_state = state

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self.sandbox_state.shutting_down = True
        super().handle_exit(sig, frame)


def build_server(
    config: SandboxConfig,
    data_path: Path,
    *,
    access_log: bool,
    log_level: str = "warning",
    host: str = "127.0.0.1",
) -> SandboxServer:
    app = create_app(config, data_path, host)
    return SandboxServer(
        uvicorn.Config(
            app,
            access_log=access_log,
            log_level=log_level,
            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S,
            lifespan="on",
        ),
        app.state,
    )


BANNER_ACCOUNTS = 10
"""Accounts listed one by one at start; a generated connection of hundreds is summarised."""


def startup_banner(config: SandboxConfig, base_url: str, data_path: Path) -> str:
    """What the sandbox prints at start. Configured secrets are masked; the demo's are public."""

    def shown(secret: str) -> str:
        return secret if config.is_demo else MASK

    lines = [f"pms-sync sandbox listening on {base_url}", f"data: {data_path.resolve()}"]
    for account in config.accounts[:BANNER_ACCOUNTS]:
        tokens = ", ".join(shown(token) for token in account.sync_tokens) or "(none)"
        lines.append(
            f"account {account.id!r} ({account.name}, externalId {account.externalId!r}): "
            f"sync token {tokens}"
        )
    if len(config.accounts) > BANNER_ACCOUNTS:
        lines.append(f"… and {len(config.accounts) - BANNER_ACCOUNTS} more accounts")
    for client in config.clients:
        scope = (
            ", ".join(client.accounts)
            if len(client.accounts) <= BANNER_ACCOUNTS
            else f"{client.accounts[0]} … {client.accounts[-1]} ({len(client.accounts)})"
        )
        lifetime = f"tokens {client.token_lifetime_s} s"
        if client.account_token_lifetime != client.token_lifetime_s:
            lifetime += f", account tokens {client.account_token_lifetime} s"
        lines.append(
            f"Open API client {client.client_id!r} / secret {shown(client.client_secret)}: "
            f"accounts {scope} ({lifetime})"
        )
    if config.faults.is_active:
        lines.append(f"faults: {config.faults.model_dump(exclude_defaults=True)}")
    if config.rate_limits:
        lines.append(f"rate limits on {len(config.rate_limits)} token(s)/client(s)")
    if config.admin_token is not None:
        lines.append("admin API (/_sandbox/): admin token required")
    if config.allowed_hosts:
        lines.append(f"Host names answered besides its address: {', '.join(config.allowed_hosts)}")
    return "\n".join(lines)


def serve_forever(
    config: SandboxConfig,
    data_path: Path,
    *,
    host: str,
    port: int,
    access_log: bool,
    announce: Callable[[str], None] = lambda text: print(text, flush=True),
    warn: Callable[[str], None] = lambda text: print(text, file=sys.stderr, flush=True),
) -> None:
    """Run the sandbox in the foreground until interrupted (Ctrl-C or SIGTERM).

    A non-loopback ``host`` needs ``config.admin_token`` (SandboxExposedError otherwise, before
    anything is bound) and is warned about."""
    warning = exposure_warning(host, config)
    if warning is not None:
        warn(warning)
    sock = bind_socket(host, port)
    server = build_server(config, data_path, access_log=access_log, log_level="info", host=host)
    announce(startup_banner(config, base_url_of(sock), data_path))
    server.run(sockets=[sock])


class ThreadedServer:
    """A uvicorn server run in a daemon thread of this process, on its own bound socket."""

    what = "the server"  # named when it does not start

    def __init__(self, server: uvicorn.Server, host: str, port: int) -> None:
        # The caller builds the app (and opens its files) first: if that fails, no socket is
        # left bound.
        self._server = server
        self._sock = bind_socket(host, port)
        self.base_url = base_url_of(self._sock)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )

    def start(self, timeout_s: float = 10.0) -> None:
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self._server.started and self._thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        if not self._server.started:
            self.stop()
            raise SandboxStartError(f"{self.what} did not start within {timeout_s} s")

    def stop(self, timeout_s: float = 10.0) -> None:
        self._server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout_s)
        self._sock.close()


class BackgroundServer(ThreadedServer):
    """A sandbox served by uvicorn in a daemon thread of this process."""

    what = "the sandbox"

    def __init__(self, config: SandboxConfig, data_path: Path, host: str, port: int) -> None:
        exposure_warning(host, config)  # the same rule as the CLI: beyond loopback, a token
        self._sandbox_server = build_server(config, data_path, access_log=False, host=host)
        super().__init__(self._sandbox_server, host, port)

    def stop(self, timeout_s: float = 10.0) -> None:
        self._sandbox_server.sandbox_state.shutting_down = True
        super().stop(timeout_s)
