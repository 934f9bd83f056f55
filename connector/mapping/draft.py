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

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from connector.contract import Entity
from connector.errors import MappingError, SourceError
from connector.mapping.draft_exports import ExportTable, read_exports, relative_to
from connector.mapping.draft_relations import (
    GUEST_TABLE,
    UNIT_TABLE,
)
from connector.mapping.draft_values import (
    ACCOMMODATION_SIGNS,
    DECIMAL_COMMA,
    FLOAT_ID,
    SYNONYMS,
    TRUE_WORDS,
    date_format,
    is_count,
    is_date,
    is_flag,
    is_key,
    is_number,
    normalise,
    not_a_date,
)
from connector.mapping.status_vocabulary import CANCELLATION, CANCELLED, CODE, classify

"""Cell texts exports use for "no value" beyond the defaults of every input."""

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
        if any(FLOAT_ID.match(value) for value in values) and is_number(values):
            return {"column": column, "as": "number_text"}
        return column

    def date(self, member: str) -> Any:
        """A date from one column (its format detected) or from year, month and day columns."""
        column = self.columns.find(member, is_date)
        if column is not None:
            found = date_format(self.table.values(column))
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
            and is_count(self.table.values(column) or ["0"])
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
        if values and all(DECIMAL_COMMA.match(value) for value in values):
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
    booking = table.record_id or find("id", not_a_date, loosely=is_key)
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
    lead = find("leadTime", is_count)
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
        column = find(member, is_count)
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
    price = find("price", is_number)
    rate = find("rate", is_number) if price is None else None
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
    position = find("guestNumber", is_count)
    first_guest: str | None = None
    if position is not None:
        first_guest = min(drafter.table.values(position) or ["1"], key=float)
    else:
        position = find("mainGuest", is_flag)
        if position is not None:
            first_guest = next(
                value
                for value in sorted(set(drafter.table.values(position)))
                if value.lower() in TRUE_WORDS
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
    unit = find("unit.id", not_a_date, loosely=is_key)
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
    return sum(1 for member in ACCOMMODATION_SIGNS if columns.find(member) is not None)


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
    return [f"# yaml-language-server: $schema={relative_to(schema, folder)}"]


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
