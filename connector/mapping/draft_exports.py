"""The exports a draft reads (``pms-sync init``): each CSV, XLSX or database table as an
input with its detected layout, a sample of its rows and its columns' value counts."""

from __future__ import annotations

import contextlib
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import duckdb

from connector.errors import PmsSyncError, SourceError
from connector.mapping.draft_relations import (
    Reference,
    joined_select,
    joins_from,
    link_table,
    named_references,
    references,
    value_counts,
)
from connector.mapping.model import DEFAULT_NULL_VALUES
from connector.sources.base import quote_identifier, to_text
from connector.sources.detect import SAMPLE_ROWS, detect_csv

NULL_TOKENS = ("NA", "N.A.", "-", "--", "none", "None", "NONE", "nan", "NaN", "#N/A", "NULL")


@dataclass
class ExportTable:
    """One input of the draft: its YAML members, columns and a sample of its rows."""

    name: str
    spec: dict[str, Any]
    columns: list[str]
    rows: list[list[str | None]]
    described: str
    # Every value of a column in the whole export, with its rows (None: the sample only).
    read_values: Callable[[str], dict[str, int]] | None = None
    # A database table with the tables its foreign keys reach: the entity's joins, and the
    # columns that refer to another table (ids of other rows, never values of a member).
    joins: list[dict[str, Any]] = field(default_factory=list)
    references: dict[str, str] = field(default_factory=dict)  # column → referred table
    record_id: str | None = None  # the column naming a booking (a link table's booking key)
    unit_reference: str | None = None  # the column naming the booked unit

    def value_counts(self, column: str) -> dict[str, int]:
        """The present values of ``column`` in the whole export with their rows, most frequent
        first; the sample's when the export cannot be read whole."""
        found: dict[str, int] | None = None
        if self.read_values is not None:
            with contextlib.suppress(PmsSyncError, duckdb.Error, OSError, ValueError):
                found = self.read_values(column)
        if found is None:
            found = dict(Counter(self.values(column)))
        return dict(sorted(found.items(), key=lambda item: (-item[1], item[0])))

    def values(self, column: str) -> list[str]:
        """The sample's present values of ``column`` (null texts left out)."""
        index = self.columns.index(column)
        nulls = set(self.spec.get("null_values", [])) | set(DEFAULT_NULL_VALUES)
        found = []
        for row in self.rows:
            value = row[index] if index < len(row) else None
            if value is not None and value.strip() not in nulls:
                found.append(value.strip())
        return found


def _input_name(stem: str, taken: Iterable[str]) -> str:
    name = re.sub(r"[^0-9a-zA-Z_]+", "_", stem).strip("_").lower() or "export"
    if name[0].isdigit():
        name = f"export_{name}"
    base, number = name, 2
    while name in taken:
        name, number = f"{base}_{number}", number + 1
    return name


def _null_tokens(rows: list[list[str | None]]) -> list[str]:
    """Null texts the rows use beyond the defaults every input has."""
    found = {cell.strip() for row in rows for cell in row if cell is not None}
    return [token for token in NULL_TOKENS if token in found and token not in DEFAULT_NULL_VALUES]


def relative_to(path: Path, folder: Path) -> str:
    return Path(os.path.relpath(path.resolve(), folder.resolve())).as_posix()


def read_exports(exports: list[str], folder: Path) -> list[ExportTable]:
    """Every export as inputs of a mapping written in ``folder``; files of one shape in one
    folder (yearly or monthly exports) as one input whose path is a glob."""
    tables: list[ExportTable] = []
    files: list[tuple[Path, ExportTable]] = []
    for export in exports:
        taken = [table.name for table in tables]
        if "://" in export:
            tables.extend(_sql_tables(export, folder, taken))
            continue
        path = Path(export)
        if not path.is_file():
            raise SourceError(f"no such export file: {export}")
        if path.suffix.lower() in (".xlsx", ".xlsm"):
            table = _xlsx_table(path, folder, _input_name(path.stem, taken))
        else:
            table = _csv_table(path, folder, _input_name(path.stem, taken))
        tables.append(table)
        files.append((path, table))
    for group in _same_shaped(files):
        members = {id(table) for _, table in group}
        others = [table for table in tables if id(table) not in members]
        merged = _glob_table(group, folder, [table.name for table in others])
        if merged is not None:
            first = next(i for i, table in enumerate(tables) if id(table) in members)
            tables = [*others[:first], merged, *others[first:]]
    return tables


def _shape(path: Path, table: ExportTable) -> tuple[Any, ...]:
    """What files read as one input share: folder, reader settings but the path and the null
    texts (a sample may lack one), and columns."""
    settings = {k: v for k, v in table.spec.items() if k not in ("path", "null_values")}
    return path.resolve().parent, path.suffix.lower(), sorted(settings.items()), table.columns


def _same_shaped(files: list[tuple[Path, ExportTable]]) -> list[list[tuple[Path, ExportTable]]]:
    groups: dict[str, list[tuple[Path, ExportTable]]] = {}
    for path, table in files:
        groups.setdefault(repr(_shape(path, table)), []).append((path, table))
    return [group for group in groups.values() if len(group) > 1]


def _common_start(texts: list[str]) -> str:
    """The characters every text starts with (of names, not of path components)."""
    start = ""
    for chars in zip(*texts, strict=False):
        if len(set(chars)) > 1:
            break
        start += chars[0]
    return start


def _glob_table(
    group: list[tuple[Path, ExportTable]], folder: Path, taken: list[str]
) -> ExportTable | None:
    """The files of ``group`` as one input: the glob of their common prefix and suffix, when
    it reads exactly them (another file it would match keeps them apart)."""
    names = sorted(path.name for path, _ in group)
    prefix = _common_start(names)
    suffix = _common_start([name[len(prefix) :][::-1] for name in names])[::-1]
    parent = group[0][0].resolve().parent
    # A year or a month differs in its last digits: all_2022, all_2023 read as all_*.
    patterns = [f"{prefix.rstrip('0123456789')}*{suffix.lstrip('0123456789')}"]
    patterns.append(f"{prefix}*{suffix}")
    pattern = next(
        (p for p in patterns if sorted(path.name for path in parent.glob(p)) == names), None
    )
    if pattern is None:
        return None
    prefix = pattern.split("*", 1)[0]
    first = group[0][1]
    spec = {**first.spec, "path": relative_to(parent, folder) + "/" + pattern}
    if spec["path"].startswith("./"):
        spec["path"] = spec["path"][2:]
    nulls = sorted({token for _, table in group for token in table.spec.get("null_values", [])})
    spec.pop("null_values", None)
    if nulls:
        spec["null_values"] = nulls
    stem = re.sub(r"[^0-9A-Za-z]+$", "", prefix) or Path(names[0]).stem
    described = (
        f"{pattern}: {len(names)} files of the same columns ({', '.join(names)}), read as one "
        f"input in name order; {first.described.split(': ', 1)[1]}"
    )
    return ExportTable(
        _input_name(stem, taken),
        spec,
        first.columns,
        [row for _, table in group for row in table.rows],
        described,
        _file_values(first.name, spec, parent / pattern),
    )


def _csv_table(path: Path, folder: Path, name: str) -> ExportTable:
    layout = detect_csv(path)
    spec: dict[str, Any] = {"type": "csv", "path": relative_to(path, folder)}
    if layout.delimiter != ",":
        spec["delimiter"] = layout.delimiter
    if layout.encoding != "utf-8":
        spec["encoding"] = layout.encoding
    if layout.header_row != 1:
        spec["header_row"] = layout.header_row
    rows: list[list[str | None]] = [list(row) for row in layout.rows]
    tokens = _null_tokens(rows)
    if tokens:
        spec["null_values"] = tokens
    shown = {"\t": "tab", ",": "comma", ";": "semicolon", "|": "pipe"}[layout.delimiter]
    described = (
        f"{path.name}: {shown}-separated, {layout.encoding}, header on line {layout.header_row}, "
        f"{len(layout.columns)} columns"
    )
    return ExportTable(name, spec, layout.columns, rows, described, _file_values(name, spec, path))


def _xlsx_table(path: Path, folder: Path, name: str) -> ExportTable:
    import openpyxl

    from connector.sources.limits import MAX_COMPRESSION_RATIO, MAX_UNCOMPRESSED
    from connector.sources.xlsx_archive import check_xlsx_archive

    check_xlsx_archive(
        path,
        input_name=name,
        max_uncompressed=MAX_UNCOMPRESSED.resolve(None),
        max_ratio=MAX_COMPRESSION_RATIO.resolve(None),
    )
    workbook = openpyxl.load_workbook(path, read_only=True, data_only=True)
    try:
        sheet = workbook.worksheets[0]
        rows = [
            [to_text(cell) for cell in row]
            for row in sheet.iter_rows(max_row=SAMPLE_ROWS + 20, values_only=True)
        ]
        sheet_name = sheet.title
    finally:
        workbook.close()
    width = max((len([cell for cell in row if cell not in (None, "")]) for row in rows), default=0)
    header_index = next(
        (
            index
            for index, row in enumerate(rows)
            if len([cell for cell in row if cell not in (None, "")]) == width
        ),
        0,
    )
    columns = [cell or "" for cell in rows[header_index]] if rows else []
    while columns and columns[-1] == "":
        columns.pop()
    data = [
        row[: len(columns)]
        for row in rows[header_index + 1 :]
        if any(cell not in (None, "") for cell in row)
    ]
    spec: dict[str, Any] = {"type": "xlsx", "path": relative_to(path, folder)}
    if len(workbook.sheetnames) > 1:
        spec["sheet"] = sheet_name
    if header_index:
        spec["header_row"] = header_index + 1
    tokens = _null_tokens(data)
    if tokens:
        spec["null_values"] = tokens
    described = (
        f"{path.name}: sheet {sheet_name!r}, header on row {header_index + 1}, "
        f"{len(columns)} columns"
    )
    return ExportTable(name, spec, columns, data, described, _file_values(name, spec, path))


def _sql_tables(url: str, folder: Path, taken: list[str]) -> list[ExportTable]:
    import sqlalchemy as sa
    from sqlalchemy.engine import make_url

    from connector.sources import safe_url

    parsed = make_url(url)
    engine = sa.create_engine(url)
    written = url
    if parsed.password:
        # Credentials never go into the file: it names an environment variable instead.
        written = "${PMS_DB_URL}"
    elif parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        database = relative_to(Path(parsed.database), folder)
        written = parsed.set(database=database).render_as_string(hide_password=False)
    tables: list[ExportTable] = []
    try:
        inspector = sa.inspect(engine)
        names = inspector.get_table_names()
        refs = named_references(
            inspector, names, {table: references(inspector, table) for table in names}
        )
        with engine.connect() as connection:
            for table in names:
                quoted = engine.dialect.identifier_preparer.quote(table)
                result = connection.execute(sa.text(f"SELECT * FROM {quoted} LIMIT {SAMPLE_ROWS}"))
                columns = list(result.keys())
                rows = [[to_text(value) for value in row] for row in result]
                name = _input_name(table, [*taken, *(t.name for t in tables)])
                spec = {"type": "sql", "url": written, "table": table}
                described = f"{safe_url(url)} table {table}: {len(columns)} columns"
                found = ExportTable(name, spec, columns, rows, described, _sql_values(url, table))
                found.references = {ref.column: ref.referred for ref in refs[table]}
                tables.append(found)
            if any(refs.values()):
                tables = _with_joins(tables, names, refs, url, connection)
    except sa.exc.SQLAlchemyError as error:
        raise SourceError(f"cannot read the tables of {safe_url(url)}: {error}") from None
    finally:
        engine.dispose()
    return tables


def _with_joins(
    tables: list[ExportTable],
    names: list[str],
    refs: dict[str, list[Reference]],
    url: str,
    connection: Any,
) -> list[ExportTable]:
    """Each table that refers to others, with the tables its foreign keys reach joined (its
    sample and value counts read through the joins); a table that joins bookings to units
    marked as the reservations' (its booking and unit keys)."""
    import sqlalchemy as sa

    by_table = dict(zip(names, tables, strict=True))
    quote = connection.dialect.identifier_preparer.quote
    link = link_table(refs, names)
    extended: list[ExportTable] = []
    for table, base in by_table.items():
        joins = joins_from(table, refs)
        if not joins:
            extended.append(base)
            continue
        joined = {join.table: by_table[join.table].columns for join in joins}
        select = joined_select(table, base.columns, joins, joined, quote)
        result = connection.execute(sa.text(f"{select} LIMIT {SAMPLE_ROWS}"))
        view = replace(
            base,
            columns=list(result.keys()),
            rows=[[to_text(value) for value in row] for row in result],
            read_values=_joined_values(url, select),
            joins=[
                {
                    "input": by_table[join.table].name,
                    "as": by_table[join.table].name,
                    "on": {join.on[0]: _aliased(join.on[1], by_table)},
                }
                for join in joins
            ],
            references={
                **base.references,
                **{
                    f"{by_table[join.table].name}.{ref.column}": ref.referred
                    for join in joins
                    for ref in refs[join.table]
                },
                # A joined table's key is what the join matched on, not a value.
                **{f"{by_table[join.table].name}.{join.on[0]}": join.table for join in joins},
            },
        )
        view.columns = [_aliased(column, by_table) for column in view.columns]
        if link is not None and table == link[0]:
            view.record_id = next(r.column for r in refs[table] if r.referred == link[1])
            view.unit_reference = next(r.column for r in refs[table] if r.referred == link[2])
        extended.append(view)
    return extended


def _joined_values(url: str, select: str) -> Callable[[str], dict[str, int]]:
    def read(column: str) -> dict[str, int]:
        return value_counts(url, column, select=select)

    return read


def _aliased(column: str, by_table: dict[str, ExportTable]) -> str:
    """``table.column`` named by the table's input (the join's alias)."""
    table, dot, rest = column.partition(".")
    return f"{by_table[table].name}.{rest}" if dot and table in by_table else column


def _file_values(name: str, spec: dict[str, Any], path: Path) -> Callable[[str], dict[str, int]]:
    """How to read a column of the file export at ``path`` whole, as the mapping will read it."""

    def read(column: str) -> dict[str, int]:
        from pydantic import TypeAdapter

        from connector.mapping.model import InputSpec
        from connector.sources import open_source

        found = path.parent.resolve() / path.name  # a file, or a glob of files
        model = TypeAdapter(InputSpec).validate_python({**spec, "path": found.name})
        source = open_source(name, model, found.parent)
        with duckdb.connect(":memory:") as connection:
            source.load_into(connection, "export")
            return _counts(connection, "export", column)

    return read


def _sql_values(url: str, table: str) -> Callable[[str], dict[str, int]]:
    """How to read a column of a database table whole."""

    def read(column: str) -> dict[str, int]:
        return value_counts(url, column, table=table)

    return read


def _counts(connection: duckdb.DuckDBPyConnection, table: str, column: str) -> dict[str, int]:
    """Each value of ``column`` exactly as the mapping reads it (a map's keys must match)."""
    rows = connection.execute(
        f"SELECT {quote_identifier(column)} AS v, count(*) FROM {quote_identifier(table)} "
        "WHERE v IS NOT NULL GROUP BY v"
    ).fetchall()
    return {str(value): int(count) for value, count in rows}
