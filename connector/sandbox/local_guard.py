"""What keeps a web page open in the operator's browser away from a local server (the
sandbox, the event receiver): the Host check and the JSON content type.

**DNS rebinding.** A page can point a name of its own (``evil.example``) at 127.0.0.1 and then
read a loopback server's answers as same-origin: the stored door codes of the sandbox's admin
API, say. Its requests carry its own name in ``Host``. So a server answers only a ``Host``
naming itself: ``localhost``, ``127.0.0.1``, ``[::1]``, the address it was told to listen on,
or the address the connection arrived at, with the port it listens on if one is given; and
the names an operator allows (``--allowed-host``: a proxy's or a DNS name, any port unless one is given).
Anything else is answered 421 Misdirected Request. None of these names can be an attacker's.

**Cross-site "simple" requests.** Any page may POST a form or ``text/plain`` to
``http://127.0.0.1:8765`` (it cannot read the answer, but the request has its effect). It
cannot send ``Content-Type: application/json`` without the server agreeing to a CORS
preflight, which these servers never do: requests that change state without a credential a
page cannot know (the admin token, the receiver's secret) must be JSON (:func:`is_json`).
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from starlette.types import ASGIApp, Receive, Scope, Send

from connector.errors import ConfigError

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
_HOST_NAME = re.compile(r"[a-z0-9_]([a-z0-9_.-]*[a-z0-9_])?")
"""A DNS name or an IPv4 address, lowered (an IPv6 address comes in brackets)."""
MISDIRECTED = 421


def _host_and_port(value: str) -> tuple[str, int | None] | None:
    """``("name", port)`` of a Host header (``name``, ``name:port``, ``[v6]:port``), lowered
    and without a trailing dot; None when it is not one."""
    value = value.strip().lower()
    if value.startswith("["):
        name, bracket, rest = value[1:].partition("]")
        if not bracket or (rest and not rest.startswith(":")):
            return None
        port_text = rest[1:] if rest else ""
    elif value.count(":") > 1:
        return None  # an IPv6 address without brackets is no Host
    else:
        name, _, port_text = value.partition(":")
    name = name.rstrip(".")
    if not (_is_address(name) if value.startswith("[") else _HOST_NAME.fullmatch(name)):
        return None
    if not port_text:
        return name, None
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        return None
    return name, int(port_text)


def _is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _normal_address(name: str) -> str:
    """An IP address in one spelling (``::ffff:127.0.0.1`` and ``0:0::1`` compare as written
    by ipaddress); a name as it is."""
    try:
        return str(ipaddress.ip_address(name.strip("[]")))
    except ValueError:
        return name.strip("[]").lower().rstrip(".")


@dataclass(frozen=True)
class AllowedHosts:
    """The ``Host`` values a server answers (see the module's docstring)."""

    listen_host: str = "127.0.0.1"
    names: tuple[str, ...] = ()  # allowed by the operator: "name" (any port) or "name:port"

    def __post_init__(self) -> None:
        for name in self.names:
            if _host_and_port(name) is None:
                raise ConfigError(
                    f"--allowed-host: expected a host name or address, optionally with a "
                    f"port (sandbox.example.org, 10.0.0.5:8765, [::1]:8765), got {name!r}"
                )

    @classmethod
    def of(cls, listen_host: str, names: Iterable[str] = ()) -> AllowedHosts:
        return cls(listen_host, tuple(name.strip() for name in names if name.strip()))

    def allows(self, host: str | None, server: tuple[str, int] | None) -> bool:
        """Whether a request with header ``Host: host`` that arrived at ``server`` (the local
        address and port of its connection) is for this server."""
        parsed = _host_and_port(host or "")
        if parsed is None:
            return False
        name, port = _normal_address(parsed[0]), parsed[1]
        for allowed in self.names:
            allowed_name, allowed_port = _host_and_port(allowed) or ("", None)
            if name == _normal_address(allowed_name) and allowed_port in (None, port):
                return True
        own = {*LOOPBACK_NAMES, _normal_address(self.listen_host)}
        if server is not None:
            own.add(_normal_address(str(server[0])))
        if name not in own:
            return False
        # A port, when given, is the one it listens on (a Host without one names it too).
        return port is None or server is None or port == server[1]

    def describe(self, server: tuple[str, int] | None) -> str:
        port = f":{server[1]}" if server is not None else ""
        names = ["localhost", "127.0.0.1", "[::1]"]
        listen = _normal_address(self.listen_host)
        if listen not in LOOPBACK_NAMES:
            names.append(f"[{listen}]" if ":" in listen else listen)
        own = ", ".join(f"{name}{port}" for name in names)
        return own + "".join(f", {name}" for name in self.names)


async def refused_host(
    scope: Scope, receive: Receive, send: Send, allowed: AllowedHosts, setting: str
) -> bool:
    """Answer 421 and return True when the request's Host does not name this server.
    ``setting``: the option or variable that allows more names, for the message."""
    host = next((v.decode("latin-1") for k, v in scope.get("headers", ()) if k == b"host"), None)
    server = scope.get("server")
    if allowed.allows(host, server):
        return False
    shown = "none" if host is None else repr(host[:100])
    body = json.dumps(
        {
            "error": "misdirected_request",
            "message": f"this server answers requests for {allowed.describe(server)}; the Host "
            f"header names {shown}. Another name (a proxy's, a DNS name) must be allowed with "
            f"{setting}",
        }
    ).encode()
    await send(
        {
            "type": "http.response.start",
            "status": MISDIRECTED,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
    return True


def is_json(headers: Mapping[str, str]) -> bool:
    """Whether a request declares a JSON body (``application/json``, ``application/*+json``)."""
    media = headers.get("content-type", "").split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


class HostCheck:
    """An ASGI wrapper answering only requests whose Host names the server (the receiver)."""

    def __init__(self, app: ASGIApp, allowed: AllowedHosts, setting: str) -> None:
        self.app = app
        self.allowed = allowed
        self.setting = setting

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and await refused_host(
            scope, receive, send, self.allowed, self.setting
        ):
            return
        await self.app(scope, receive, send)
