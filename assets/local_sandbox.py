"""The local sandbox behind ``make demo`` and ``make dev``, started only when it is needed.

The embedded defaults talk to the sandbox on ``http://127.0.0.1:8765``. When the configured
service is a loopback address and nothing answers there, the sandbox is started as a child
process for as long as the block runs (its data under ``.pms-sync/sandbox``), so the first
Materialize in the UI reaches a service instead of failing after minutes of retries. A remote
address that does not answer is reported, never replaced by a sandbox.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import httpx

from assets.project import STATE_DIR
from connector.sandbox.testing import sandbox_process

LOOPBACK_HOSTS = ("127.0.0.1", "localhost")
SANDBOX_DATA = STATE_DIR / "sandbox"


def answers(base_url: str) -> bool:
    """Whether anything speaking HTTP answers at ``base_url`` (a sandbox, or the service: a
    sandbox could not take its port anyway)."""
    try:
        httpx.get(f"{base_url.rstrip('/')}/_sandbox/health", timeout=1.0)
    except httpx.HTTPError:
        return False
    return True


def start_command(base_url: str) -> str:
    """The command that starts the sandbox a person would run for ``base_url`` themselves."""
    port = urlparse(base_url).port or 80
    return f".venv/bin/pms-sync sandbox --port {port}"


@contextlib.contextmanager
def sandbox_if_needed(base_url: str, data_dir: Path | None = None) -> Iterator[bool]:
    """The local sandbox on ``base_url``'s port for the block, unless something answers there
    or the address is not a loopback one. Yields whether this call started it."""
    address = urlparse(base_url)
    data_dir = data_dir or SANDBOX_DATA
    if answers(base_url):
        yield False
        return
    if address.hostname not in LOOPBACK_HOSTS:
        print(
            f"nothing answers on {base_url} (the configured service, PMS_SYNC_BASE_URL): a "
            "Materialize will fail until it does",
            flush=True,
        )
        yield False
        return
    print(
        f"nothing answers on {base_url}: starting the local sandbox there (data in {data_dir}; "
        f"to run it yourself: {start_command(base_url)})",
        flush=True,
    )
    with sandbox_process(data_dir, port=address.port or 80):
        yield True
