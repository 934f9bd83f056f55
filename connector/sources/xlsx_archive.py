"""Checking an .xlsx file as the zip archive it is, before openpyxl parses a byte of it.

A workbook of a few MB can expand to gigabytes of sheet XML (a zip bomb, or an export gone
wrong); openpyxl would spend minutes and gigabytes on it before any error. The archive's
directory states every member's compressed and uncompressed size, and Python's zipfile (which
openpyxl reads through) never inflates a member beyond its stated size, so checking the stated
sizes bounds what parsing can cost.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from connector.errors import SourceError
from connector.sources.limits import MIB, Limit, size_text

RATIO_CHECKED_ABOVE = MIB
"""Members smaller than this are not ratio-checked: small XML parts compress far beyond 100:1
when repetitive, and cost nothing to parse whatever their ratio."""

CONTENT_TYPES = "[Content_Types].xml"
"""The member every Office Open XML file has."""


def check_xlsx_archive(
    path: Path, *, input_name: str, max_uncompressed: Limit, max_ratio: Limit
) -> None:
    """Raise a SourceError naming the file and member when ``path`` is not a readable .xlsx
    archive or would expand beyond the limits in force."""
    try:
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
    except zipfile.BadZipFile as error:
        raise SourceError(
            f"{path.name} is not an Excel workbook (.xlsx): not a readable zip archive "
            f"({error}); is it cut off, an old .xls, or another format renamed? Export the "
            f"sheet again as .xlsx (or as CSV)",
            source=input_name,
        ) from None
    except OSError as error:
        raise SourceError(f"cannot read {path.name}: {error.strerror}", source=input_name) from None
    if not any(member.filename == CONTENT_TYPES for member in members):
        raise SourceError(
            f"{path.name} is a zip archive but not an Excel workbook (.xlsx): it has no "
            f"{CONTENT_TYPES}; export the sheet again as .xlsx (or as CSV)",
            source=input_name,
        )
    for member in members:
        if member.file_size <= RATIO_CHECKED_ABOVE:
            continue
        ratio = member.file_size / max(member.compress_size, 1)
        if ratio > max_ratio.value:
            raise SourceError(
                f"{path.name} was not opened: its member {member.filename} expands from "
                f"{size_text(member.compress_size)} to {size_text(member.file_size)} "
                f"(ratio {ratio:.0f}:1), beyond the limit of {max_ratio.describe()}; a sheet "
                f"compresses about 10:1, so this looks like a zip bomb; {max_ratio.advice()}",
                source=input_name,
            )
    total = sum(member.file_size for member in members)
    if total > max_uncompressed.bytes:
        largest = max(members, key=lambda member: member.file_size)
        raise SourceError(
            f"{path.name} was not opened: it expands from {size_text(path.stat().st_size)} to "
            f"{size_text(total)} (its largest member {largest.filename}: "
            f"{size_text(largest.file_size)}), beyond the limit of "
            f"{max_uncompressed.describe()}; {max_uncompressed.advice()}",
            source=input_name,
        )
