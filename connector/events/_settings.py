"""Settings of the event receiver (``pms-sync receive``): where it listens, the secret header
that authenticates the service's calls, how large a body may be, and where events are kept.

| setting | variable | default |
|---|---|---|
| address | PMS_SYNC_RECEIVER_HOST | 127.0.0.1 (loopback) |
| port | PMS_SYNC_RECEIVER_PORT | 8766 |
| secret expected in the header (never printed) | PMS_SYNC_RECEIVER_SECRET | none (loopback only) |
| header carrying it | PMS_SYNC_RECEIVER_HEADER | X-Receiver-Secret |
| largest body accepted, bytes | PMS_SYNC_RECEIVER_MAX_BODY | 65536 |
| events store (DuckDB) | PMS_SYNC_EVENTS | events.duckdb next to the snapshot |
| Host names answered besides its own address and loopback (comma list) | PMS_SYNC_RECEIVER_ALLOWED_HOSTS | none |
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from connector.errors import ConfigError
from connector.sandbox.local_guard import AllowedHosts
from connector.secrets import MASK, checked_secret
from connector.snapshot import SnapshotLocation, state_dir

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8766
DEFAULT_SECRET_HEADER = "X-Receiver-Secret"
DEFAULT_MAX_BODY = 64 * 1024
"""An event is a reservation's ids and links: a few hundred bytes; 64 KiB leaves room for
the data points and resources the service may add, and bounds what a stranger can send."""
EVENTS_FILE = "events.duckdb"
SECRET_MIN_LENGTH = 16


@dataclass(frozen=True)
class ReceiverSettings:
    store_path: Path
    host: str = DEFAULT_HOST
    port: int = DEFAULT_PORT
    secret: str | None = None
    secret_header: str = DEFAULT_SECRET_HEADER
    max_body_bytes: int = DEFAULT_MAX_BODY
    lock_timeout_s: float = 10.0  # waiting for a reader (the Dagster sensor) of the store
    allowed_hosts: tuple[str, ...] = ()  # Host names answered besides its own (a proxy's)

    def __post_init__(self) -> None:
        # A reader names the setting first (receiver_settings); this holds for other callers.
        object.__setattr__(self, "secret", checked_secret(self.secret, "the receiver's secret"))
        if self.secret is not None and len(self.secret) < SECRET_MIN_LENGTH:
            raise ConfigError(
                f"the receiver's secret must be at least {SECRET_MIN_LENGTH} characters "
                "(e.g. `python -c 'import secrets; print(secrets.token_urlsafe())'`)"
            )
        if self.max_body_bytes < 1024:
            raise ConfigError(
                f"the largest body must be 1024 bytes or more, got {self.max_body_bytes}"
            )
        if not self.secret_header or any(c.isspace() or c == ":" for c in self.secret_header):
            raise ConfigError(f"not a header name: {self.secret_header!r}")

    def __repr__(self) -> str:
        secret = MASK if self.secret else None
        return (
            f"ReceiverSettings(store_path={self.store_path!r}, host={self.host!r}, "
            f"port={self.port}, secret={secret!r}, secret_header={self.secret_header!r})"
        )


def receiver_settings(
    *,
    snapshot_path: SnapshotLocation,
    host: str | None = None,
    port: int | None = None,
    secret_header: str | None = None,
    max_body_bytes: int | None = None,
    store: Path | None = None,
    allowed_hosts: Iterable[str] = (),
    env: Mapping[str, str] | None = None,
) -> ReceiverSettings:
    """Explicit values, then ``PMS_SYNC_RECEIVER_*`` variables, then defaults. The secret
    comes from the environment only: a command line is visible to other users."""
    env = os.environ if env is None else env
    try:
        if port is None:  # 0 is a choice: any free port
            port = int(env.get("PMS_SYNC_RECEIVER_PORT") or DEFAULT_PORT)
        if max_body_bytes is None:
            max_body_bytes = int(env.get("PMS_SYNC_RECEIVER_MAX_BODY") or DEFAULT_MAX_BODY)
    except ValueError as error:
        raise ConfigError(f"receiver setting: expected an integer ({error})") from None
    return ReceiverSettings(
        store_path=Path(
            store or env.get("PMS_SYNC_EVENTS") or state_dir(snapshot_path) / EVENTS_FILE
        ),
        host=host or env.get("PMS_SYNC_RECEIVER_HOST") or DEFAULT_HOST,
        port=port,
        secret=checked_secret(env.get("PMS_SYNC_RECEIVER_SECRET"), "PMS_SYNC_RECEIVER_SECRET")
        or None,
        secret_header=secret_header or env.get("PMS_SYNC_RECEIVER_HEADER") or DEFAULT_SECRET_HEADER,
        max_body_bytes=max_body_bytes,
        allowed_hosts=AllowedHosts.of(
            host or env.get("PMS_SYNC_RECEIVER_HOST") or DEFAULT_HOST,
            [*allowed_hosts, *(env.get("PMS_SYNC_RECEIVER_ALLOWED_HOSTS") or "").split(",")],
        ).names,
    )


def events_store_path(
    snapshot_path: SnapshotLocation, env: Mapping[str, str] | None = None
) -> Path:
    """Where the receiver keeps events: ``PMS_SYNC_EVENTS``, else beside the snapshot."""
    env = os.environ if env is None else env
    return Path(env.get("PMS_SYNC_EVENTS") or state_dir(snapshot_path) / EVENTS_FILE)
