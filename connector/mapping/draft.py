"""A first mapping file drafted from a newcomer's own exports (``pms-sync init``).

Each export (CSV, XLSX, or the tables of a database URL) becomes an input with its layout
detected (encoding, delimiter, header line). Its columns are matched by name to the members of
the contract (arrival/check-in → ``checkin``, e-mail → ``email``, …) and their sample values
choose the expression: a date format, a decimal comma, year/month/day columns composed with
``date_parts``, check-out from a night count, price from a nightly rate, a row number where the
export has no id. Every required member without a match is written as a ``fill_in``
placeholder saying what belongs there: the file passes the schema, ``pms-sync validate`` lists
the placeholders "to fill in", and nothing runs before each is replaced.
"""

from __future__ import annotations

import contextlib
import os
import re
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb
import yaml

from connector.contract import Entity
from connector.errors import MappingError, PmsSyncError, SourceError
from connector.mapping.draft_relations import (
    GUEST_TABLE,
    UNIT_TABLE,
    Reference,
    joined_select,
    joins_from,
    link_table,
    named_references,
    references,
    value_counts,
)
from connector.mapping.model import DEFAULT_NULL_VALUES
from connector.mapping.status_vocabulary import CANCELLATION, CANCELLED, CODE, classify
from connector.sources.base import quote_identifier, to_text
from connector.sources.detect import SAMPLE_ROWS, detect_csv

NULL_TOKENS = ("NA", "N.A.", "-", "--", "none", "None", "NONE", "nan", "NaN", "#N/A", "NULL")
"""Cell texts exports use for "no value" beyond the defaults of every input."""

_ISO_DATE = re.compile(
    r"^\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?)?$"
)
DATE_FORMATS = (
    "%d.%m.%Y",
    "%d.%m.%y",
    "%d/%m/%Y",
    "%m/%d/%Y",
    "%Y/%m/%d",
    "%d-%m-%Y",
    "%Y%m%d",
    "%d %b %Y",
    "%d %B %Y",
    "%b %d, %Y",
    "%d-%b-%y",
    "%d-%b-%Y",
)
"""strptime formats tried on a date column's samples, in order (day first before month first)."""

_FLOAT_ID = re.compile(r"^\d+\.0+$|^\d(\.\d+)?[eE]\+?\d+$")
_DECIMAL_COMMA = re.compile(r"^-?\d{1,3}(\.\d{3})*,\d+$|^-?\d+,\d+$")
_NUMBER = re.compile(r"^-?\d+([.,]\d+)?$")

# Normalised column names (lower case, no accents, letters and digits only) that name each
# member, one member a line; "unit." members are the accommodation's.
_SYNONYM_TABLE = """
id: bookingid bookingno bookingnr bookingnumber bookingref bookingreference booking
    reservationid reservationno reservationnr reservationnumber reservation resid resno resnr
    res confirmationno confirmationnumber confirmation buchungsnummer buchungsnr buchung
    reservierungsnummer reservierung confno confnr confnumber booknumber bookno booknr id
status: status bookingstatus reservationstatus state orderstate orderstatus bookingstate
    reservationstate currentstate
createdAt: createdat created bookedat bookedon bookingdate bookeddate booked reservationdate
    datecreated creationdate buchungsdatum gebuchtam dateadd dateadded
firstName: firstname first givenname forename vorname prenom nombre
lastName: lastname last surname familyname nachname apellido
fullName: guest guestname name fullname gast gastname customer customername
email: email emailaddress mail guestemail emailadresse
phone: phone telephone tel mobile phonenumber telefon handy
country: country nationality countrycode land nation pays herkunftsland
language: language lang sprache langue
channelName: channel channelname bookingsource source distributionchannel
marketSegment: marketsegment segment
agent: agent agency
guestNumber: guestno guestnumber guestnr guestindex guestpos gastnr gastnummer
mainGuest: mainguest primaryguest isprimary ismainguest ismain leadguest isleadguest
    hauptgast booker isbooker mainguestflag primaryflag
ratePlan: rateplan rateplancode rateplanname ratecode tarif tariff
cancellationPolicyCode: cancellationpolicycode cancellationpolicy cancelpolicy
    cancellationcode stornobedingung
unitId: room roomno roomnr roomnumber roomid unit unitid unitno apartment apartmentid zimmer
    zimmernr zimmernummer listing listingid flat
unitName: roomname unitname apartmentname listingname zimmername roomnum
unitRoomTypeName: roomtype reservedroomtype category kategorie zimmertyp unittype unitgroup
    spacecategory roomcategory
adults: adults adult pax persons guests numberofguests erwachsene adultes personen pers adl
    noofadult noofadults numberofadults adultcount nbadultes erw
children: children child kids kinder enfants chl noofchild noofchildren numberofchildren
    childcount nbenfants
babies: babies baby infants infant
checkin: arrival arrivaldate checkin checkindate from start startdate anreise anreisedatum
    datefrom arrivee llegada staydatefrom stayfrom
checkout: departure departuredate checkout checkoutdate to end enddate abreise abreisedatum
    dateto depart salida staydateto stayto
nights: nights numberofnights nachte naechte lengthofstay los
leadTime: leadtime leaddays daysinadvance vorlauf
rate: adr rate nightlyrate dailyrate pricepernight averagedailyrate
price: price amount total totalprice betrag revenue totalamount preis roomprice bookingprice
    gesamtpreis gesamtbetrag totalinclusiverate totalinclusive totalrate grandtotal
currency: currency wahrung waehrung devise
estimatedCheckInTime: eta arrivaltime checkintime expectedarrival ankunftszeit
estimatedCheckOutTime: etd departuretime checkouttime abreisezeit
comments: comments comment notes note remarks bemerkung bemerkungen
unit.id: unitid roomid id unit room roomno roomnumber zimmer zimmernr zimmernummer
    apartmentid apartment propertyid code
unit.name: name unitname roomname title bezeichnung apartmentname
street: street strasse streetname addressline1 address adresse
streetNumber: streetnumber housenumber streetno houseno hausnummer hausnr no nr
city: city town ort stadt ville
postalCode: zip zipcode postalcode postcode plz
wifiName: wifiname wifi ssid wlan wlanname wifinetwork wifissid
wifiCode: wifipassword wifipass wifikey wificode wlanpasswort wlanpassword wlancode password
doorCode: doorcode door keycode accesscode pin lockcode turcode tuercode
maxNumberOfGuests: maxguests maxoccupancy capacity maxpersons maxpersonen maxnumberofguests
bedroomsNumber: bedrooms bedroomsnumber schlafzimmer
floor: floor etage stock
sizeSqM: size sqm sizesqm m2 flache groesse
property: hotel hotelname hotelcode property propertyname propertyid objekt haus
"""


def _synonyms(table: str) -> dict[str, tuple[str, ...]]:
    found: dict[str, tuple[str, ...]] = {}
    member = ""
    for line in table.strip().splitlines():
        if not line.startswith(" "):
            member, _, line = line.partition(":")
            found[member] = ()
        found[member] += tuple(line.split())
    return found


SYNONYMS: dict[str, tuple[str, ...]] = _synonyms(_SYNONYM_TABLE)

_ACCOMMODATION_SIGNS = ("street", "city", "postalCode", "wifiName", "wifiCode", "doorCode")


def normalise(name: str) -> str:
    """A column name reduced for matching: ``"Check-in Date"`` → ``"checkindate"``."""
    text = unicodedata.normalize("NFKD", name.replace("ß", "ss"))
    text = "".join(char for char in text if not unicodedata.combining(char))
    return re.sub(r"[^a-z0-9]", "", text.lower())


# ------------------------------------------------------------------------------- exports


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


def _relative(path: Path, folder: Path) -> str:
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
    spec = {**first.spec, "path": _relative(parent, folder) + "/" + pattern}
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
    spec: dict[str, Any] = {"type": "csv", "path": _relative(path, folder)}
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
    spec: dict[str, Any] = {"type": "xlsx", "path": _relative(path, folder)}
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
        database = _relative(Path(parsed.database), folder)
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


# ------------------------------------------------------------------------------- matching


@dataclass
class Fill:
    """A placeholder: what belongs in a required member the export has no column for."""

    hint: str


@dataclass
class Draft:
    """A drafted mapping: its YAML text and what was matched or left to fill in."""

    text: str
    inputs: dict[str, str]  # input name → what was detected
    matched: dict[str, dict[str, str]]  # entity → contract path → how it is computed
    to_fill_in: list[str] = field(default_factory=list)  # contract paths left as placeholders
    unused_inputs: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # choices of the draft to check


class _Columns:
    """The columns of one export table, matched to members by name and sample values."""

    def __init__(self, table: ExportTable) -> None:
        self.table = table
        self.by_norm: dict[str, str] = {}
        joined: list[tuple[str, str, str]] = []
        for column in table.columns:
            if column in table.references:
                continue  # the id of another table's row: that table's columns hold values
            alias, dot, name = column.partition(".")
            if dot and table.joins and any(join["as"] == alias for join in table.joins):
                joined.append((column, alias, name))
            else:
                self.by_norm.setdefault(normalise(column), column)
        # A joined column is found by its own name when the table has none of that name, and
        # by its table's ("countries.name" as countryname).
        for column, _, name in joined:
            self.by_norm.setdefault(normalise(name), column)
        for column, alias, name in joined:
            self.by_norm.setdefault(normalise(_singular(alias) + name), column)
        # A table of labels (order_states) names its rows by its first name-like column: it
        # is found by the table's name (orderstate).
        for alias in dict.fromkeys(alias for _, alias, _ in joined):
            names = {name: column for column, other, name in joined if other == alias}
            label = next((names[n] for n in _LABEL_COLUMNS if n in names), None)
            if label is not None:
                self.by_norm.setdefault(normalise(_singular(alias)), label)
        self.used: set[str] = set()

    def find(
        self,
        member: str,
        accept: Any = None,
        *,
        loosely: Any = None,
        reuse: bool = False,
    ) -> str | None:
        """The column named like ``member`` whose sample values ``accept`` takes: exact names
        first, then names containing a synonym, whose values ``loosely`` must take too."""
        synonyms = SYNONYMS[member]
        exact = [self.by_norm[name] for name in synonyms if name in self.by_norm]
        # Names containing a synonym ("arrival_date" holds "arrival") count for the longer
        # synonyms only: "total" would find "total_of_special_requests".
        contained = [
            column
            for name in synonyms
            if len(name) >= 6
            for norm, column in self.by_norm.items()
            if name in norm and column not in exact
        ]
        for column in [*exact, *contained]:
            if column in self.used and not reuse:
                continue
            values = self.table.values(column)
            if values and accept is not None and not accept(values):
                continue
            if values and loosely is not None and column not in exact and not loosely(values):
                continue
            self.used.add(column)
            return column
        return None


_LABEL_COLUMNS = ("iso_code", "name", "label", "title", "code", "description")


def _singular(name: str) -> str:
    """``countries`` → ``country``, ``order_states`` → ``order_state``."""
    if name.endswith("ies"):
        return name[:-3] + "y"
    return name[:-1] if name.endswith("s") and not name.endswith("ss") else name


def _date_format(values: list[str]) -> str | None:
    """ "" for ISO dates, a strptime format every sample parses with, or None."""
    if all(_ISO_DATE.match(value) for value in values):
        return ""
    for base in DATE_FORMATS:
        for suffix in ("", " %H:%M", " %H:%M:%S", " %I:%M %p"):
            try:
                for value in values:
                    datetime.strptime(value, base + suffix)
                return base + suffix
            except ValueError:
                continue
    return None


def _is_date(values: list[str]) -> bool:
    return _date_format(values) is not None


def _is_number(values: list[str]) -> bool:
    return all(
        _NUMBER.match(value.replace(" ", ""))
        or _FLOAT_ID.match(value)
        or _DECIMAL_COMMA.match(value)
        for value in values
    )


def _is_key(values: list[str]) -> bool:
    """Values that can identify rows: (nearly) all different."""
    return len(values) < 5 or len(set(values)) >= 0.9 * len(values)


def _not_a_date(values: list[str]) -> bool:
    return not _is_date(values)


_TRUE_WORDS = frozenset({"y", "yes", "true", "1", "x", "j", "ja", "oui", "si", "sí", "main"})


def _is_flag(values: list[str]) -> bool:
    """Two values, one of them saying yes (Y/N, true/false, 1/0)."""
    distinct = {value.lower() for value in values}
    return 1 <= len(distinct) <= 2 and bool(distinct & _TRUE_WORDS)


def _is_count(values: list[str]) -> bool:
    return all(re.fullmatch(r"\d+(\.0+)?", value) for value in values)


class _Drafter:
    def __init__(self, table: ExportTable) -> None:
        self.table = table
        self.columns = _Columns(table)
        self.matched: dict[str, str] = {}
        self.notes: list[str] = []  # what a person must check in the draft
        self.to_fill_in: list[str] = []
        self.filters: list[dict[str, str]] = []  # the entity's row filter

    def fill(self, path: str, hint: str) -> Fill:
        self.to_fill_in.append(path)
        return Fill(hint)

    def note(self, path: str, value: Any) -> Any:
        self.matched[path] = flow_yaml(value)
        return value

    def text_column(self, column: str) -> Any:
        """A column as text; an id that the export wrote as a float keeps its digits."""
        values = self.table.values(column)
        # A spreadsheet writes 4711 for most ids but 9.290212028640288e+17 for long ones.
        if any(_FLOAT_ID.match(value) for value in values) and _is_number(values):
            return {"column": column, "as": "number_text"}
        return column

    def date(self, member: str) -> Any:
        """A date from one column (its format detected) or from year, month and day columns."""
        column = self.columns.find(member, _is_date)
        if column is not None:
            found = _date_format(self.table.values(column))
            return {"column": column, "format": found} if found else column
        if member == "checkin":
            return self.date_parts()
        return None

    def date_parts(self) -> Any:
        norms = self.columns.by_norm
        for norm, column in norms.items():
            if not norm.endswith("year"):
                continue
            prefix = norm[: -len("year")]
            if prefix and not any(name in prefix for name in SYNONYMS["checkin"]):
                continue
            month = norms.get(prefix + "month")
            day = norms.get(prefix + "dayofmonth") or norms.get(prefix + "day")
            if month and day:
                self.columns.used.update((column, month, day))
                return {"date_parts": {"year": column, "month": month, "day": day}}
        return None

    def nights(self) -> Any:
        columns = [
            column
            for norm, column in self.columns.by_norm.items()
            if ("night" in norm or "nacht" in norm or norm in SYNONYMS["nights"])
            and column not in self.columns.used
            and _is_count(self.table.values(column) or ["0"])
        ]
        if not columns:
            return None
        self.columns.used.update(columns)
        return columns[0] if len(columns) == 1 else {"sum": columns}

    def status(self, column: str) -> Any:
        """The status column with a ``map`` sending the values that look like a cancellation
        to CANCELLED (the others are sent as the PMS writes them); a column of numeric codes
        is a placeholder: only the PMS knows which code means cancelled."""
        counts = self.table.value_counts(column)
        kinds = classify(counts)

        def shown(values: Iterable[str]) -> str:
            return ", ".join(f"{value!r} ({counts[value]})" for value in values)

        codes = [value for value in counts if kinds.get(value) == CODE]
        if counts and len(codes) == len(counts):
            self.notes.append(
                f"status: column {column!r} holds numeric codes ({shown(codes)}): say which "
                "mean cancelled (fill_in)"
            )
            return self.fill(
                "status",
                f"the reservation status: column {column} holds the codes "
                f"{', '.join(codes)}; map those that mean cancelled to CANCELLED and declare "
                f"the others live: {{column: {column}, map: {{'<code>': CANCELLED}}, "
                "not_cancelled: [<the other codes>]}",
            )
        if codes:
            self.notes.append(
                f"status: numeric codes {shown(codes)} besides words: say which mean cancelled "
                "(`pms-sync validate` lists them)"
            )
        cancelled = [value for value in counts if kinds.get(value) == CANCELLATION]
        others = [value for value in counts if not kinds.get(value) and value != CANCELLED]
        if not cancelled:
            return self.note("status", column)
        self.notes.append(
            f"status: {shown(cancelled)} look like cancellations, sent as CANCELLED by the "
            f"map; {shown(others) or 'no other value'} sent as they are. Check the map; a "
            "value that means no cancellation is declared with not_cancelled (docs/mapping.md)"
        )
        return self.note("status", {"column": column, "map": dict.fromkeys(cancelled, CANCELLED)})

    def number(self, column: str) -> Any:
        values = self.table.values(column)
        if values and all(_DECIMAL_COMMA.match(value) for value in values):
            return {"column": column, "decimal": ","}
        return column


def _reservation(table: ExportTable) -> tuple[dict[str, Any], _Drafter]:
    drafter = _Drafter(table)
    find, note = drafter.columns.find, drafter.note
    fields: dict[str, Any] = {}
    units: dict[str, Any] = {}
    # A booking id repeats on the rows of one booking (rooms, guests): only a column merely
    # containing an id's name must hold different values to count.
    # A link table's rows are a booking's units: its booking key is the reservation's id,
    # its unit key the unit's.
    booking = table.record_id or find("id", _not_a_date, loosely=_is_key)
    room = table.unit_reference or find("unitId")
    checkin = drafter.date("checkin")
    checkout = drafter.date("checkout")
    nights = drafter.nights() if checkout is None else None

    if booking is not None:
        fields["id"] = note("id", drafter.text_column(booking))
    else:
        fields["id"] = note("id", {"row_number": True})
    status = find("status")
    fields["status"] = (
        drafter.status(status)
        if status
        else drafter.fill(
            "status",
            "the reservation status: a status column, or {constant: CONFIRMED} when the "
            "export lists confirmed bookings only",
        )
    )
    created = drafter.date("createdAt")
    lead = find("leadTime", _is_count)
    if created is not None:
        fields["createdAt"] = note("createdAt", created)
    elif lead is not None and checkin is not None:
        base = checkin if isinstance(checkin, dict) else {"column": checkin}
        fields["createdAt"] = note("createdAt", {**base, "subtract_days": lead})
    else:
        fields["createdAt"] = drafter.fill(
            "createdAt",
            "when the booking was made: a booking-date column, or the arrival date "
            "when the export has none",
        )
    guest: dict[str, Any] = {}
    first, last = find("firstName"), find("lastName")
    full = find("fullName") if first is None else None
    if first is not None:
        guest["firstName"] = note("primaryGuest.firstName", first)
    elif full is not None:
        guest["firstName"] = note("primaryGuest.firstName", {"column": full, "regex": r"^(\S+)"})
        if last is None:
            guest["lastName"] = note(
                "primaryGuest.lastName", {"column": full, "regex": r"^\S+\s+(.*)$"}
            )
    else:
        guest["firstName"] = drafter.fill(
            "primaryGuest.firstName",
            "the guest's first name; the export has no guest name: a constant such as Guest",
        )
    if last is not None:
        guest["lastName"] = note("primaryGuest.lastName", last)
    for member, accept in (
        ("email", lambda values: all("@" in value for value in values)),
        ("phone", None),
        ("country", None),
        ("language", None),
    ):
        column = find(member, accept)
        if column is not None:
            guest[member] = note(f"primaryGuest.{member}", column)
    fields["primaryGuest"] = guest
    for member in ("channelName", "marketSegment", "agent", "ratePlan", "cancellationPolicyCode"):
        column = find(member)
        if column is not None:
            fields[member] = note(member, drafter.text_column(column))

    own_id = "id" if table.record_id and "id" in table.columns else None
    if own_id is not None:
        units["id"] = note("unitReservations.id", drafter.text_column(own_id))
    elif booking is not None and room is not None:
        room_text = drafter.text_column(room)
        placeholder = "{" + room + ("|number_text" if isinstance(room_text, dict) else "") + "}"
        booking_text = drafter.text_column(booking)
        booking_part = (
            "{" + booking + ("|number_text" if isinstance(booking_text, dict) else "") + "}"
        )
        units["id"] = note("unitReservations.id", {"template": f"{booking_part}-{placeholder}"})
    elif booking is not None:
        units["id"] = note("unitReservations.id", drafter.text_column(booking))
    else:
        units["id"] = note("unitReservations.id", {"row_number": True})
    name = find("unitName") or find("unitRoomTypeName")
    if room is not None:
        units["unitId"] = note("unitReservations.unitId", drafter.text_column(room))
        units["unitName"] = note("unitReservations.unitName", name or drafter.text_column(room))
    elif name is not None:
        units["unitId"] = note("unitReservations.unitId", {"template": "{" + name + "|slug}"})
        units["unitName"] = note("unitReservations.unitName", name)
    else:
        units["unitId"] = drafter.fill(
            "unitReservations.unitId", "the booked unit's id (a room or apartment column)"
        )
        units["unitName"] = drafter.fill(
            "unitReservations.unitName", "the booked unit's name (a room or apartment column)"
        )
    for member, required in (("adults", True), ("children", False), ("babies", False)):
        column = find(member, _is_count)
        if column is not None:
            units[member] = note(f"unitReservations.{member}", column)
        elif required:
            units[member] = drafter.fill(
                f"unitReservations.{member}", "the number of adults (a guests or persons column)"
            )
    units["checkin"] = (
        note("unitReservations.checkin", checkin)
        if checkin is not None
        else drafter.fill("unitReservations.checkin", "the arrival date (check-in)")
    )
    if checkout is not None:
        units["checkout"] = note("unitReservations.checkout", checkout)
    elif nights is not None and checkin is not None:
        base = checkin if isinstance(checkin, dict) else {"column": checkin}
        units["checkout"] = note("unitReservations.checkout", {**base, "add_days": nights})
    else:
        units["checkout"] = drafter.fill(
            "unitReservations.checkout",
            "the departure date (check-out), or the arrival date with add_days: nights",
        )
    price = find("price", _is_number)
    rate = find("rate", _is_number) if price is None else None
    if price is not None:
        units["price"] = note("unitReservations.price", drafter.number(price))
    elif rate is not None and nights is not None:
        units["price"] = note(
            "unitReservations.price", {"product": [drafter.number(rate), nights], "round": 2}
        )
    for member in ("currency", "estimatedCheckInTime", "estimatedCheckOutTime", "comments"):
        column = find(member)
        if column is not None:
            units[member] = note(f"unitReservations.{member}", column)
    # One row per guest: the booking is read from its main guest's row (the first by
    # position, or the one a flag marks), the others become the unit reservation's guests.
    position = find("guestNumber", _is_count)
    first_guest: str | None = None
    if position is not None:
        first_guest = min(drafter.table.values(position) or ["1"], key=float)
    else:
        position = find("mainGuest", _is_flag)
        if position is not None:
            first_guest = next(
                value
                for value in sorted(set(drafter.table.values(position)))
                if value.lower() in _TRUE_WORDS
            )
    if (
        position is not None
        and first_guest is not None
        and booking is not None
        and "firstName" in guest
    ):
        drafter.filters.append({"column": position, "equals": first_guest})
        others = {"firstName": guest["firstName"]}
        others.update({key: guest[key] for key in ("lastName", "email", "country") if key in guest})
        units["guests"] = {
            "input": table.name,
            "on": {booking: booking},
            "filter": [{"column": position, "not_equals": first_guest}],
            "fields": others,
        }
        note(
            "unitReservations.guests", f"rows of {table.name} whose {position} is not {first_guest}"
        )
    fields["unitReservations"] = {"fields": units}
    return fields, drafter


def _accommodation(table: ExportTable) -> tuple[dict[str, Any], _Drafter]:
    drafter = _Drafter(table)
    find, note = drafter.columns.find, drafter.note
    fields: dict[str, Any] = {}
    unit = find("unit.id", _not_a_date, loosely=_is_key)
    fields["id"] = (
        note("id", drafter.text_column(unit)) if unit else drafter.fill("id", "the unit's id")
    )
    name = find("unit.name", reuse=True)
    fields["name"] = note("name", name) if name else drafter.fill("name", "the unit's name")
    street = find("street")
    number = find("streetNumber")
    if street is not None:
        values = drafter.table.values(street)
        if number is None and values and all(re.search(r"\d", value) for value in values):
            # One address column: "Main Street 12a" → street and number.
            fields["street"] = note("street", {"column": street, "regex": r"^(.*?)\s*\d"})
            fields["streetNumber"] = note(
                "streetNumber", {"column": street, "regex": r"(\d+\w*)\s*$"}
            )
        else:
            fields["street"] = note("street", street)
    else:
        fields["street"] = drafter.fill("street", "the street of the unit's address")
    if "streetNumber" not in fields:
        fields["streetNumber"] = (
            note("streetNumber", drafter.text_column(number))
            if number
            else drafter.fill("streetNumber", "the house number of the unit's address")
        )
    for member, hint in (
        ("country", "the unit's country, e.g. {constant: DE}"),
        ("city", "the unit's city"),
        ("wifiName", "the Wi-Fi network's name"),
        ("wifiCode", "the Wi-Fi password"),
        ("doorCode", "the door code"),
    ):
        column = find(member)
        fields[member] = note(member, column) if column else drafter.fill(member, hint)
    for member in ("postalCode", "floor", "maxNumberOfGuests", "bedroomsNumber", "sizeSqM"):
        column = find(member)
        if column is not None:
            value = drafter.text_column(column) if member in ("postalCode", "floor") else column
            fields[member] = note(member, value)
    return fields, drafter


def _texts(node: Any) -> Iterator[str]:
    """Every string of a drafted member tree (column names, templates, map keys)."""
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from _texts(key)
            yield from _texts(value)
    elif isinstance(node, list):
        for item in node:
            yield from _texts(item)


def _used_joins(joins: list[dict[str, Any]], fields: dict[str, Any]) -> list[dict[str, Any]]:
    """The joins the fields read a column of, and those their keys go through."""
    texts = list(_texts(fields))
    needed = {
        join["as"]
        for join in joins
        for text in texts
        if text.startswith(f"{join['as']}.") or f"{{{join['as']}." in text  # column, template
    }
    for join in reversed(joins):  # a join's key may name an earlier join's column
        if join["as"] in needed:
            own = next(iter(join["on"].values()))
            alias, dot, _ = own.partition(".")
            if dot:
                needed.add(alias)
    return [join for join in joins if join["as"] in needed]


def _entity_tables(
    tables: list[ExportTable],
) -> tuple[ExportTable | None, ExportTable | None]:
    """The reservations' table and the units': a table joining bookings to units first; the
    units' table then the one it refers to as the unit. Else by the columns' names, a guests
    table (customers, with an address of their own) never the units'."""
    linked = next((table for table in tables if table.unit_reference is not None), None)
    if linked is not None:
        unit_input = linked.references[linked.unit_reference]  # type: ignore[index]
        units = next((t for t in tables if t.spec.get("table") == unit_input), None)
        return linked, units
    by_reservation = max(tables, key=_reservation_score)
    reservation = by_reservation if _reservation_score(by_reservation) else None
    referred = set(reservation.references.values()) if reservation is not None else set()
    candidates = [
        table
        for table in tables
        if table is not reservation
        and not (GUEST_TABLE.search(table.name) and not UNIT_TABLE.search(table.name))
    ]
    # A table the reservations refer to and named like units wins; else one named like
    # units with a unit id (a villas table no key declares).
    named = [
        t for t in candidates if t.spec.get("table") in referred and UNIT_TABLE.search(t.name)
    ] or [t for t in candidates if UNIT_TABLE.search(t.name) and _Columns(t).find("unit.id")]
    by_units = max(named or candidates, key=_accommodation_score, default=None)
    accommodation = (
        by_units if by_units and (named or _accommodation_score(by_units) >= 3) else None
    )
    return reservation, accommodation


def _reservation_score(table: ExportTable) -> int:
    columns = _Columns(table)
    found = [columns.find(member) for member in ("checkin", "checkout", "adults", "id", "unitId")]
    has_dates = found[0] is not None or _Drafter(table).date_parts() is not None
    return (sum(1 for item in found if item) + 1) if has_dates else 0


def _accommodation_score(table: ExportTable) -> int:
    columns = _Columns(table)
    return sum(1 for member in _ACCOMMODATION_SIGNS if columns.find(member) is not None)


# ------------------------------------------------------------------------------- writing


def flow_yaml(value: Any) -> str:
    """A value in YAML flow style, on one line (a scalar is dumped inside a list: alone it
    would end with yaml's document marker)."""
    if isinstance(value, dict | list):
        return yaml.safe_dump(
            value, default_flow_style=True, width=10_000, allow_unicode=True, sort_keys=False
        ).strip()
    return flow_yaml([value])[1:-1]


def _emit(node: dict[str, Any], indent: int, lines: list[str]) -> None:
    pad = " " * indent
    for key, value in node.items():
        if isinstance(value, Fill):
            lines.append(f"{pad}{key}: {flow_yaml({'fill_in': value.hint})}")
        elif isinstance(value, dict) and not _is_expression(value):
            lines.append(f"{pad}{key}:")
            _emit(value, indent + 2, lines)
        else:
            lines.append(f"{pad}{key}: {flow_yaml(value)}")


def _is_expression(value: dict[str, Any]) -> bool:
    from connector.mapping.expressions import SOURCE_KEYS

    return any(key in value for key in SOURCE_KEYS)


def _schema_line(folder: Path) -> list[str]:
    schema = Path(__file__).resolve().parents[2] / "mappings" / "schema.json"
    if not schema.is_file():
        return []
    return [f"# yaml-language-server: $schema={_relative(schema, folder)}"]


def _account_hint(tables: list[ExportTable]) -> str:
    hint = "the service account (accountId) of these records, e.g. {constant: demo}"
    for table in tables:
        column = _Columns(table).find("property")
        names = sorted(set(table.values(column))) if column else []
        if len(names) > 1:
            shown = ", ".join(names[:5])
            return (
                f"{hint}; this export holds several properties in column {column!r} ({shown}): "
                f"send each to its account with {{column: {column}, lookup: NAME}} and a "
                "lookups table (docs/mapping.md, Cookbook)"
            )
    return hint


def draft_mapping(exports: list[str], out: Path, *, account: str | None = None) -> Draft:
    """Draft a mapping file for ``exports``, to be written at ``out`` (paths relative to it)."""
    folder = out.parent
    tables = read_exports(exports, folder)
    if not tables:
        raise SourceError("no export to draft a mapping from")
    reservation, accommodation = _entity_tables(tables)
    if reservation is None and accommodation is None:
        reservation = tables[0]

    lines = [
        *_schema_line(folder),
        f"# Drafted by `pms-sync init` from {', '.join(Path(item).name if '://' not in item else 'a database' for item in exports)}.",
        "# Replace every fill_in placeholder, then run `pms-sync validate` on this file;",
        "# docs/mapping.md explains every member (its Cookbook, the common export shapes).",
    ]
    top: dict[str, Any] = {
        "account": {"constant": account} if account else Fill(_account_hint(tables))
    }
    to_fill_in = [] if account else ["account"]
    inputs = {table.name: table.spec for table in tables}
    entities: dict[str, Any] = {}
    matched: dict[str, dict[str, str]] = {}
    notes: list[str] = []
    for entity, table, build in (
        (Entity.ACCOMMODATION, accommodation, _accommodation),
        (Entity.RESERVATION, reservation, _reservation),
    ):
        if table is None:
            continue
        fields, drafter = build(table)
        entities[entity.value] = {"input": table.name}
        joins = _used_joins(table.joins, fields)
        if joins:
            entities[entity.value]["joins"] = joins
        if drafter.filters:
            entities[entity.value]["filter"] = drafter.filters
        entities[entity.value]["fields"] = fields
        matched[entity.value] = drafter.matched
        notes += drafter.notes
        to_fill_in += [f"{entity.value}.{path}" for path in drafter.to_fill_in]
    body: list[str] = []
    _emit(top, 0, body)
    body.append("inputs:")
    for name, spec in inputs.items():
        body.append(f"  {name}: {flow_yaml(spec)}")
    body.append("entities:")
    _emit(entities, 2, body)
    text = "\n".join([*lines, *body]) + "\n"
    used = {spec["input"] for spec in entities.values()}
    used |= {join["input"] for spec in entities.values() for join in spec.get("joins", [])}
    return Draft(
        text=text,
        inputs={table.name: table.described for table in tables},
        matched=matched,
        to_fill_in=to_fill_in,
        unused_inputs=[table.name for table in tables if table.name not in used],
        notes=notes,
    )


def write_draft(
    exports: list[str], out: Path, *, account: str | None = None, force: bool = False
) -> Draft:
    """Draft the mapping and write it to ``out``; the file is loaded back to prove it passes
    the schema (its placeholders aside, it is a mapping file like any other)."""
    from connector.mapping.loader import load_mapping

    if out.exists() and not force:
        raise MappingError(f"{out} exists; pass --force to overwrite it", file=str(out))
    draft = draft_mapping(exports, out, account=account)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(draft.text, encoding="utf-8")
    load_mapping(out)
    return draft
