"""Incremental cursors: the largest cursor value a read saw, kept as text with its kind; what
a read of an input was (in full or since a value, how many rows); the full-read interval.

The value is taken from the rows a run loaded (``connector.sources.cursors``), not asked of
the source again: what is stored is exactly what was read. Its kind says how to bind it back
as a parameter of the column's type, so the database compares values, not texts.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from enum import StrEnum
from typing import Any

__all__ = ["CursorKind", "CursorValue", "ReadMode", "SourceRead", "parse_interval"]


class CursorKind(StrEnum):
    INTEGER = "integer"
    DECIMAL = "decimal"
    DATE = "date"
    TIMESTAMP = "timestamp"  # without a time zone
    TIMESTAMPTZ = "timestamptz"  # with an offset
    TEXT = "text"


class ReadMode(StrEnum):
    FULL = "full"
    INCREMENTAL = "incremental"


@dataclass(frozen=True)
class CursorValue:
    """A cursor value as its text (exactly as read) and its kind."""

    text: str
    kind: CursorKind

    def bound(self, backend: str, *, text: bool = False) -> Any:
        """The value to bind for a database of SQLAlchemy backend ``backend``: of the column's
        Python type, but the text for a column of text (``text``) and on SQLite, which holds
        dates and times as text and compares them so (its driver's date adapters are
        deprecated)."""
        kind = self.kind
        if text:
            return self.text
        if kind == CursorKind.INTEGER:
            return int(self.text)
        if kind == CursorKind.DECIMAL:
            return Decimal(self.text)
        if backend == "sqlite" or kind == CursorKind.TEXT:
            return self.text
        if kind == CursorKind.DATE:
            return date.fromisoformat(self.text)
        return datetime.fromisoformat(self.text)

    def to_json_dict(self) -> dict[str, str]:
        return {"value": self.text, "kind": str(self.kind)}


@dataclass(frozen=True)
class SourceRead:
    """How a run read one input with a cursor."""

    input: str
    mode: ReadMode
    rows: int  # rows read (loaded)
    since: CursorValue | None = None  # incremental: the rows of keys changed since this value
    upto: CursorValue | None = None  # the largest cursor value among the rows read
    reason: str = ""  # why a read was full (first read, interval elapsed, --full-read, …)
    scope: str = ""  # what the read covered (connector.pipeline._incremental)
    key: str | None = None  # the column whose rows make one record

    @property
    def incremental(self) -> bool:
        return self.mode == ReadMode.INCREMENTAL

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "input": self.input,
            "mode": str(self.mode),
            "rows": self.rows,
            "since": self.since.text if self.since else None,
            "upto": self.upto.text if self.upto else None,
            "reason": self.reason,
        }

    def describe(self) -> str:
        """One line for a person: ``stays: incremental since 2026-01-01 10:00:00, 12 rows``."""
        if self.incremental and self.since is not None:
            how = f"incremental since {self.since.text}"
        else:
            how = f"full read ({self.reason})" if self.reason else "full read"
        return f"{self.input}: {how}, {self.rows} row(s)"


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


def parse_interval(text: str) -> float:
    """Seconds of a full-read interval: ``7d``, ``12h``, ``90m``, ``30s``, ``2w`` or plain
    seconds; ``0``, ``none`` and ``off`` are 0 (always a full read)."""
    value = text.strip().lower()
    if value in ("", "0", "none", "off"):
        return 0.0
    unit = _UNITS.get(value[-1])
    number = value[:-1] if unit is not None else value
    try:
        seconds = float(number) * (unit or 1)
    except ValueError:
        raise ValueError(
            f"must be a duration such as 7d, 12h, 90m or seconds (0, none, off: always a full "
            f"read), got {text!r}"
        ) from None
    if seconds < 0 or seconds != seconds:
        raise ValueError(f"must not be negative, got {text!r}")
    return seconds
