"""Where a snapshot lives: a DuckDB file (a path) or a PostgreSQL database (a URL).

Every place that accepts a snapshot path (``--snapshot``, ``PMS_SYNC_SNAPSHOT``, the Dagster
resource) accepts ``postgresql://user@host:5432/db`` as well; a location is kept as a ``Path``
for a file and as the URL string otherwise (``Path`` would fold the URL's ``//``).
"""

from __future__ import annotations

from pathlib import Path

from connector.secrets import redact_url, register_url_password

POSTGRES_SCHEMES = ("postgresql://", "postgresql+psycopg://", "postgres://")

STATE_DIR = Path(".pms-sync")
"""Files that live next to a snapshot file (token cache, events store) live here when the
snapshot is a database."""

SnapshotLocation = Path | str


def is_database_url(location: str | Path) -> bool:
    return isinstance(location, str) and location.strip().lower().startswith(POSTGRES_SCHEMES)


def snapshot_location(value: str | Path) -> SnapshotLocation:
    """A file's ``Path``, or a PostgreSQL URL (its password registered as a secret)."""
    if isinstance(value, str) and is_database_url(value):
        register_url_password(value.strip())
        return value.strip()
    return Path(value).expanduser()


def state_dir(location: str | Path) -> Path:
    """The folder of the files kept beside the snapshot (token cache, events store)."""
    return STATE_DIR if is_database_url(location) else Path(location).expanduser().parent


def shown_location(location: str | Path) -> str:
    """The location as messages and reports show it: a URL without its user-info."""
    return redact_url(str(location)) if is_database_url(location) else str(location)


def sqlalchemy_url(url: str) -> str:
    """The URL with the psycopg driver SQLAlchemy needs (``postgresql+psycopg://``)."""
    scheme, rest = url.strip().split("://", 1)
    return f"postgresql+psycopg://{rest}" if scheme.lower() != "postgresql+psycopg" else url
