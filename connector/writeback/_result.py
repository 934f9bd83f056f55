"""What a write-back did, and how it fails."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from connector.errors import PmsSyncError


class WriteBackError(PmsSyncError):
    """Rows could not be written back: the database refused them, or the table does not fit."""


@dataclass(frozen=True)
class WriteResult:
    destination: str  # the table (database URL without its password) or the file
    rows: int  # rows written (upserted, or in the rewritten file)
    created: bool = False  # the table or the file did not exist before

    def to_json_dict(self) -> dict[str, Any]:
        return {"destination": self.destination, "rows": self.rows, "created": self.created}
