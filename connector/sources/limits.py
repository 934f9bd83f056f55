"""Size limits of file inputs (one CSV row, an XLSX archive's expansion): the value in force
for one input, where it came from, and how an operator raises it.

A limit is set per input in the mapping (``max_line_mb:``, ``max_uncompressed_mb:``,
``max_compression_ratio:``); without one, an environment variable gives the default of every
input, and without that the built-in default applies. Error messages quote the value in force
and its origin, never a reader's internal default.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from connector.config import InputSection

MIB = 1024 * 1024


@dataclass(frozen=True)
class LimitSpec:
    """A kind of limit: its mapping option and its setting (connector.config), whose variable
    gives the default of every input."""

    option: str
    setting: str  # the field of InputSection
    shown_as: str  # how a value is printed: "{} MiB", "{}:1"

    @property
    def variable(self) -> str:
        return InputSection.variable(self.setting)

    @property
    def default(self) -> int:
        value: int = InputSection.default(self.setting)
        return value

    def resolve(self, configured: int | None, env: Mapping[str, str] | None = None) -> Limit:
        """The limit in force for an input whose mapping sets ``configured`` (None: unset)."""
        if configured is not None:
            return Limit(self, configured, f"the input's `{self.option}`")
        section = InputSection.read(env)
        if self.setting not in section.model_fields_set:
            return Limit(self, self.default, "the default")
        return Limit(self, getattr(section, self.setting), self.variable)


@dataclass(frozen=True)
class Limit:
    """A limit in force for one input."""

    spec: LimitSpec
    value: int
    origin: str  # the input's option, the environment variable, or the default

    @property
    def bytes(self) -> int:
        """The value in bytes, for the limits counted in MiB."""
        return self.value * MIB

    def describe(self) -> str:
        """The value and where it comes from, as messages quote it."""
        return f"{self.spec.shown_as.format(self.value)} ({self.origin})"

    def advice(self) -> str:
        """How to raise it."""
        return (
            f"if the file is genuine, raise the limit with `{self.spec.option}:` on the input in "
            f"the mapping, or {self.spec.variable} for every input"
        )


MAX_LINE = LimitSpec("max_line_mb", "csv_max_line_mb", "{} MiB")
"""One CSV row (a quoted value's line breaks included), as DuckDB's ``max_line_size``."""

MAX_UNCOMPRESSED = LimitSpec("max_uncompressed_mb", "xlsx_max_uncompressed_mb", "{} MiB")
"""Everything an .xlsx archive expands to."""

MAX_COMPRESSION_RATIO = LimitSpec("max_compression_ratio", "xlsx_max_compression_ratio", "{}:1")
"""Uncompressed to compressed size of one member of an .xlsx archive (sheets compress ~10:1)."""


def size_text(size: int) -> str:
    """A byte count as messages print it: bytes below 1 KiB, then KiB, MiB or GiB."""
    if size < 1024:
        return f"{size} bytes"
    for unit, scale in (("GiB", MIB * 1024), ("MiB", MIB), ("KiB", 1024)):
        if size >= scale:
            return f"{size / scale:.1f} {unit}"
    raise AssertionError("unreachable")
