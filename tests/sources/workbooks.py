"""Workbooks the source tests build: real .xlsx files, some of them hostile."""

from __future__ import annotations

import zipfile
from pathlib import Path

import openpyxl

SHEET = (
    '<?xml version="1.0" encoding="UTF-8" standalone="yes"?>'
    '<worksheet xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"><sheetData>'
    '<row r="1"><c t="inlineStr"><is><t>id</t></is></c></row>{rows}</sheetData></worksheet>'
)


def inflating_workbook(path: Path, sheet_size: int) -> Path:
    """A real workbook whose sheet is ``sheet_size`` bytes of identical rows: it compresses
    several hundred times, as a zip bomb does, at a size a test can afford."""
    template = path.with_suffix(".template.xlsx")
    openpyxl.Workbook().save(template)
    row = '<row><c t="inlineStr"><is><t>U1</t></is></c></row>'
    sheet = SHEET.format(rows=row * (sheet_size // len(row)))
    with zipfile.ZipFile(template) as source, zipfile.ZipFile(path, "w") as target:
        for member in source.infolist():
            data = source.read(member)
            if member.filename == "xl/worksheets/sheet1.xml":
                data = sheet.encode()
            target.writestr(member, data, compress_type=zipfile.ZIP_DEFLATED, compresslevel=9)
    template.unlink()
    return path
