"""A database's tables as ``pms-sync init`` drafts from them: each table with the tables its
foreign keys reach (joins of several hops, room → room type → property → country), so that a
member is matched to the column that holds it rather than to a reference to it.

A foreign key is followed from the referencing table to the referenced one only: that join is
many-to-one, so it never multiplies the rows of the table it starts from.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import sqlalchemy as sa

from connector.mapping.model import DEFAULT_NULL_VALUES
from connector.sources.base import to_text

MAX_HOPS = 3
"""How far a table's foreign keys are followed: a room's type, its property, the country."""

UNIT_TABLE = re.compile(r"room|unit|apartment|villa|listing|flat|zimmer|cabin|suite", re.I)
GUEST_TABLE = re.compile(r"customer|guest|client|person|contact|user|gast|kunde", re.I)
BOOKING_TABLE = re.compile(r"book|reserv|order|stay|buchung", re.I)


@dataclass(frozen=True)
class Reference:
    """A single-column foreign key: ``column`` of a table refers to ``referred.key``."""

    column: str
    referred: str
    key: str


@dataclass(frozen=True)
class Join:
    """One table joined to a base table, reached through ``on`` (its key → the column of the
    base, or ``alias.column`` of a join before it)."""

    table: str
    alias: str
    on: tuple[str, str]


def references(inspector: sa.engine.Inspector, table: str) -> list[Reference]:
    """The table's single-column foreign keys (composite ones are left to the person)."""
    found = []
    for key in inspector.get_foreign_keys(table):
        columns, referred = key.get("constrained_columns") or [], key.get("referred_columns") or []
        if len(columns) == 1 and len(referred) == 1 and key.get("referred_table"):
            found.append(Reference(columns[0], str(key["referred_table"]), referred[0]))
    return found


_REFERENCE_NAME = re.compile(
    r"^(?:id_?(?P<after>[a-z][a-z0-9_]*)|(?P<before>[a-z][a-z0-9_]*?)_?id)$"
)


def named_references(
    inspector: sa.engine.Inspector, tables: list[str], declared: dict[str, list[Reference]]
) -> dict[str, list[Reference]]:
    """Declared foreign keys, and references read from names where a schema declares none
    (many PMS databases do not): ``customer_id`` or ``id_customer`` refers to the one table
    named ``customer``/``customers`` (after any prefix such as ``qlo_``) whose primary key is
    ``id``, ``id_customer`` or ``customer_id``."""
    keys = {
        table: inspector.get_pk_constraint(table).get("constrained_columns") or []
        for table in tables
    }
    found: dict[str, list[Reference]] = {}
    for table in tables:
        refs = list(declared.get(table, []))
        named = {ref.column for ref in refs}
        for column in (c["name"] for c in inspector.get_columns(table)):
            match = _REFERENCE_NAME.match(column.lower())
            if column in named or match is None or column in keys[table]:
                continue
            stem = match.group("after") or match.group("before") or ""
            keyed = [
                other
                for other in tables
                if other != table
                and len(keys[other]) == 1
                and keys[other][0].lower() in ("id", f"id_{stem}", f"{stem}_id")
            ]
            # Named by the stem (qlo_orders for id_order), else holding it as a word of its
            # name (qlo_htl_room_information for id_room); only one such table is taken.
            word = re.escape(stem) + "(s|es)?"
            targets: list[str] = []
            for pattern in (rf"(^|_){word}$", rf"(^|_){word}(_|$)"):
                targets = [other for other in keyed if re.search(pattern, other.lower())]
                if targets:
                    break
            if len(targets) == 1:
                refs.append(Reference(column, targets[0], keys[targets[0]][0]))
        found[table] = refs
    return found


def joins_from(
    base: str, refs: dict[str, list[Reference]], *, avoid: Iterable[str] = ()
) -> list[Join]:
    """The tables ``base``'s foreign keys reach within ``MAX_HOPS``, breadth first, each
    once: a table reached again (a country of the guest and of the hotel) keeps its first
    path. ``avoid``: tables not joined (nor followed)."""
    joins: list[Join] = []
    seen = {base, *avoid}
    frontier: list[tuple[str, str | None]] = [(base, None)]  # (table, its alias)
    for _ in range(MAX_HOPS):
        following: list[tuple[str, str | None]] = []
        for table, alias in frontier:
            for ref in refs.get(table, []):
                if ref.referred in seen:
                    continue
                seen.add(ref.referred)
                own = ref.column if alias is None else f"{alias}.{ref.column}"
                joins.append(Join(ref.referred, ref.referred, (ref.key, own)))
                following.append((ref.referred, ref.referred))
        frontier = following
    return joins


def link_table(
    refs: dict[str, list[Reference]], tables: Iterable[str]
) -> tuple[str, str, str] | None:
    """A table joining bookings to units (a booking's rooms): (link, booking table, unit
    table), the link referring to both. Its rows are the unit reservations."""
    for name in tables:
        targets = {ref.referred for ref in refs.get(name, [])}
        booking = next((t for t in sorted(targets) if BOOKING_TABLE.search(t)), None)
        unit = next((t for t in sorted(targets) if UNIT_TABLE.search(t) and t != booking), None)
        if booking is not None and unit is not None:
            return name, booking, unit
    return None


def joined_select(
    base: str,
    columns: list[str],
    joins: list[Join],
    joined_columns: dict[str, list[str]],
    quote: Callable[[str], str],
) -> str:
    """``SELECT`` of the base's columns and each join's as ``"alias.column"``."""
    select = [f"b.{quote(column)}" for column in columns]
    clauses = []
    aliases: dict[str, str] = {}
    for index, join in enumerate(joins):
        sql_alias = f"j{index}"
        aliases[join.alias] = sql_alias
        key, own = join.on
        prefix, dot, column = own.partition(".")
        side = f"{aliases[prefix]}.{quote(column)}" if dot else f"b.{quote(own)}"
        clauses.append(
            f"LEFT JOIN {quote(join.table)} {sql_alias} ON {sql_alias}.{quote(key)} = {side}"
        )
        select += [
            f"{sql_alias}.{quote(column)} AS {quote(join.alias + '.' + column)}"
            for column in joined_columns[join.table]
        ]
    return f"SELECT {', '.join(select)} FROM {quote(base)} b {' '.join(clauses)}"


def value_counts(
    url: str, column: str, *, table: str | None = None, select: str | None = None
) -> dict[str, int]:
    """Each value of ``column`` of a table (or of the rows ``select`` gives, its joins), with
    how many rows hold it, as text the mapping reads."""
    engine = sa.create_engine(url)
    try:
        quote = engine.dialect.identifier_preparer.quote
        rows_of = quote(table) if table is not None else f"({select}) q"
        with engine.connect() as connection:
            rows = connection.execute(
                sa.text(
                    f"SELECT v, count(*) FROM (SELECT {quote(column)} AS v FROM {rows_of}) c "
                    "WHERE v IS NOT NULL GROUP BY v"
                )
            ).all()
    finally:
        engine.dispose()
    found: Counter[str] = Counter()
    for value, count in rows:
        text = to_text(value)
        if text is not None and text not in DEFAULT_NULL_VALUES:
            found[text] += int(count)
    return dict(found)
