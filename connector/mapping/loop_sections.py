"""The mapping file's sections for what comes back from the service (docs/loop.md): guest
links written back to the PMS (``links:``), received events written back (``events:``), and
the connection's outgoing-webhook configurations as code (``webhooks:``, a file name).

A write-back destination is a table of the PMS's own database (SQLAlchemy URL; upserted by
key, created if missing) or a CSV/Parquet file (written whole, owner-only: it holds guest
links).
"""

from __future__ import annotations

from pathlib import PurePath

from pydantic import Field, StrictBool, field_validator, model_validator

from connector.mapping.expressions import StrictModel

FILE_SUFFIXES = (".csv", ".parquet")


class SqlDestination(StrictModel):
    """A table of a database reached through SQLAlchemy: rows upserted by key, the table
    created when missing."""

    url: str = Field(
        description="SQLAlchemy URL; write it as ${ENV_VAR} so credentials stay out of the file."
    )
    table: str = Field(min_length=1, description="Table name; created when missing.")
    db_schema: str | None = Field(
        default=None, alias="schema", description="Schema of the table (PostgreSQL)."
    )
    key: list[str] | None = Field(
        default=None,
        min_length=1,
        description="Columns rows are upserted by; an existing table must have them as its "
        "primary key or a unique key. Default: account_id and reservation_id for links "
        "(reservation ids are unique per account only), connection and event_key for events.",
    )


class Destination(StrictModel):
    """Where rows are written back: exactly one of ``sql`` and ``file``."""

    sql: SqlDestination | None = None
    file: str | None = Field(
        default=None,
        description="A .csv or .parquet file, relative to the mapping file; rewritten whole at "
        "each write, readable by its owner only (0600).",
    )

    @field_validator("file")
    @classmethod
    def _known_format(cls, value: str | None) -> str | None:
        if value is not None and PurePath(value).suffix.lower() not in FILE_SUFFIXES:
            raise ValueError(
                f"file {value!r}: expected a name ending in .csv or .parquet (the format)"
            )
        return value

    @model_validator(mode="after")
    def _exactly_one(self) -> Destination:
        if (self.sql is None) == (self.file is None):
            raise ValueError("a destination is either `sql: {url, table}` or `file: PATH`")
        return self


class LinksSettings(StrictModel):
    """Guest links of upcoming arrivals, fetched from the Open API after the reservations are
    synced and written back to the PMS (``pms-sync links``, Dagster ``<name>/guest_links``)."""

    destination: Destination | list[Destination] | None = Field(
        default=None,
        description="Where the links are written back (one destination or a list); none: the "
        "snapshot only.",
    )
    days_ahead: int = Field(
        default=14,
        ge=0,
        le=3660,
        description="Reservations checking in from today to this many days ahead get links.",
    )
    max_age_hours: float = Field(
        default=24.0,
        gt=0,
        description="Links fetched longer ago than this are fetched again (the chat's last "
        "message changes; the links themselves rarely do).",
    )
    last_message: StrictBool = Field(
        default=True,
        description="Ask for the chat's last message (includeLastMessage=1) and keep its "
        "metadata: author, author type, time, channel, attachment, seen.",
    )
    last_message_body: StrictBool = Field(
        default=False,
        description="Keep the text of the chat's last message too (guest correspondence: off "
        "unless the PMS needs it).",
    )

    @property
    def destinations(self) -> list[Destination]:
        return _as_list(self.destination)


class EventsSettings(StrictModel):
    """Events the service sends to the receiver (``pms-sync receive``) for this connection,
    written back where declared (Dagster ``<name>/service_events``)."""

    destination: Destination | list[Destination] | None = Field(
        default=None,
        description="Where received events are written back (one destination or a list); "
        "none: kept in the receiver's store only.",
    )

    @property
    def destinations(self) -> list[Destination]:
        return _as_list(self.destination)


def _as_list(destination: Destination | list[Destination] | None) -> list[Destination]:
    if destination is None:
        return []
    return destination if isinstance(destination, list) else [destination]
