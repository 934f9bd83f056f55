"""Whether the service can be reached at all, asked once before a run touches the snapshot.

Without it, a service that is down when a run starts costs every record its full retry budget
(minutes for a large export), ends as "incomplete" with one problem per record, and leaves a
run in the snapshot's history. A TCP connection to the base URL's host and port, retried
briefly, tells the operator the one thing that matters instead.
"""

from __future__ import annotations

import socket
import time
import urllib.parse

from connector.client._client import _environment_proxy
from connector.client._config import ClientConfig
from connector.errors import ServiceError
from connector.secrets import redact_url

ATTEMPTS = 3
PAUSE_S = 0.5  # between attempts: a service restarting for a second is not "down"


class ServiceUnreachableError(ServiceError):
    """No TCP connection to the service's host and port: nothing was sent."""


def ensure_reachable(config: ClientConfig) -> None:
    """Raise ServiceUnreachableError when the base URL's host does not accept a connection.

    Behind a proxy (HTTPS_PROXY and friends) the direct connection proves nothing: skipped.
    """
    parts = urllib.parse.urlsplit(config.base_url)
    if not parts.hostname or (config.trust_env and _environment_proxy(config.base_url)):
        return
    port = parts.port or (443 if parts.scheme == "https" else 80)
    problem = ""
    for attempt in range(ATTEMPTS):
        if attempt:
            time.sleep(PAUSE_S)
        try:
            with socket.create_connection((parts.hostname, port), config.connect_timeout):
                return
        except OSError as error:
            problem = error.strerror or type(error).__name__
    raise ServiceUnreachableError(
        f"cannot reach the service at {redact_url(config.base_url)} ({problem}, {ATTEMPTS} attempts): "
        f"nothing was sent and the snapshot was not changed; check the base URL "
        f"(--base-url / PMS_SYNC_BASE_URL) and that the service is up, then run again"
    )
