"""Settings of the event receiver (``pms-sync receive``): where it listens, the secret header
that authenticates the service's calls, how large a body may be, and where events are kept.
Their variables and defaults: connector.config's ``ReceiverSection`` (docs/configuration.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from connector.config import ReceiverSection
from connector.errors import ConfigError
from connector.sandbox.local_guard import AllowedHosts
from connector.secrets import MASK, checked_secret
from connector.snapshot import SnapshotLocation, state_dir

DEFAULT_HOST: str = ReceiverSection.default("host")
DEFAULT_PORT: int = ReceiverSection.default("port")
DEFAULT_SECRET_HEADER: str = ReceiverSection.default("header")
DEFAULT_MAX_BODY: int = ReceiverSection.default("max_body")
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
    delivery_id_header: str | None = None  # the service's id of an emission, if it sends one

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
        for header in (self.secret_header, self.delivery_id_header):
            if header is not None and (not header or any(c.isspace() or c == ":" for c in header)):
                raise ConfigError(f"not a header name: {header!r}")

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
    delivery_id_header: str | None = None,
    env: Mapping[str, str] | None = None,
) -> ReceiverSettings:
    """Explicit values, then ``PMS_SYNC_RECEIVER_*`` variables (``env``; None: the
    process's), then defaults. The secret comes from the environment only: a command line is
    visible to other users."""
    section = ReceiverSection.read(
        env,
        {
            "host": host,
            "port": port,
            "header": secret_header,
            "max_body": max_body_bytes,
            "events": store,
            "delivery_id_header": delivery_id_header,
        },
    )
    return ReceiverSettings(
        store_path=section.events or state_dir(snapshot_path) / EVENTS_FILE,
        host=section.host,
        port=section.port,
        secret=section.secret.get_secret_value() if section.secret is not None else None,
        secret_header=section.header,
        max_body_bytes=section.max_body,
        allowed_hosts=AllowedHosts.of(section.host, [*allowed_hosts, *section.allowed_hosts]).names,
        delivery_id_header=section.delivery_id_header or None,
    )


def events_store_path(
    snapshot_path: SnapshotLocation,
    env: Mapping[str, str] | None = None,
    *,
    store: Path | None = None,
) -> Path:
    """Where the receiver keeps events: ``store`` (``--events``), else ``PMS_SYNC_EVENTS``,
    else beside the snapshot."""
    return (
        ReceiverSection.read(env, {"events": store}).events
        or state_dir(snapshot_path) / EVENTS_FILE
    )
