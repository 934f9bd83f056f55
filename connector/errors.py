"""One small hierarchy of errors: every failure pms-sync raises derives from PmsSyncError.

Messages say what was expected, what was found and where (file, row, field), and never carry a
secret value: callers pass values through :func:`connector.secrets.mask_value` first.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Self


class PmsSyncError(Exception):
    """Base of every error raised by pms-sync."""


class ConfigError(PmsSyncError):
    """A setting, environment variable or tokens file is missing or malformed."""


class OutOfMemoryError(PmsSyncError):
    """DuckDB ran out of the run's memory (``PMS_SYNC_MEMORY_LIMIT``) during a named step."""


class MappingError(PmsSyncError):
    """A mapping file is invalid. Carries the file, the line and the member when known.

    An error of several problems (``MappingError.listing``) lists each in its message, and in
    ``problems``; its own line and member are those of the first.
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | None = None,
        line: int | None = None,
        member: str | None = None,
    ) -> None:
        self.file = file
        self.line = line
        self.member = member
        self.message = message
        self.problems: tuple[MappingError, ...] = (self,)
        where = ":".join(str(part) for part in (file, line) if part is not None)
        prefix = f"{where}: " if where else ""
        suffix = f" (at {member})" if member else ""
        super().__init__(f"{prefix}{message}{suffix}")

    @classmethod
    def listing(cls, problems: Sequence[Self], what: str = "problems") -> Self:
        """One error for several problems of one file, each on its own line, in line order."""
        if len(problems) == 1:
            return problems[0]
        ordered = sorted(problems, key=lambda problem: problem.line or 0)
        lines = [
            f"  line {problem.line or '?'}: {problem.message}"
            + (f" (at {problem.member})" if problem.member else "")
            for problem in ordered
        ]
        error = cls(f"{len(problems)} {what}:\n" + "\n".join(lines), file=ordered[0].file)
        error.line, error.member = ordered[0].line, ordered[0].member
        error.problems = tuple(ordered)
        return error


class SourceError(PmsSyncError):
    """An input could not be read: missing file, bad encoding, unreachable database, missing column."""

    def __init__(
        self,
        message: str,
        *,
        source: str | None = None,
        row: int | None = None,
        field: str | None = None,
    ) -> None:
        self.source = source
        self.row = row
        self.field = field
        where = ", ".join(
            f"{label} {value}"
            for label, value in (("input", source), ("row", row), ("field", field))
            if value is not None
        )
        super().__init__(f"{message} ({where})" if where else message)


class SnapshotError(PmsSyncError):
    """The snapshot store cannot be opened, migrated or written."""


class SnapshotLockedError(SnapshotError):
    """Another process holds the snapshot file's write lock."""


class ServiceError(PmsSyncError):
    """The service answered in a way the connector cannot act on, or could not be reached."""

    def __init__(
        self, message: str, *, status: int | None = None, request_id: str | None = None
    ) -> None:
        self.status = status
        self.request_id = request_id
        self.message = message  # without the status and the x-request-id, which have fields
        details = ", ".join(
            f"{label} {value}"
            for label, value in (("HTTP", status), ("x-request-id", request_id))
            if value is not None
        )
        super().__init__(f"{message} ({details})" if details else message)


class AuthenticationError(ServiceError):
    """The service rejected the credentials (401): the account's push stops."""


class ExportIncompleteError(SourceError):
    """An export file is still being written (size or mtime changing, or a partial last line)."""


class MassChangeError(PmsSyncError):
    """A plan deactivates, cancels or loses more records than the safety rails allow."""


class PlanFileError(PmsSyncError):
    """A plan file cannot be applied: stale against the snapshot, edited, or not a plan file."""


class RunStopped(PmsSyncError):
    """SIGTERM or SIGINT arrived before the push started: the run ended, nothing was sent."""
