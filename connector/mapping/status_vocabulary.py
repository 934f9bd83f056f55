"""Reservation statuses that mean "cancelled" in a PMS's own words, caught before they are sent.

The service knows a stay is off only by the status ``CANCELLED`` (spec §2.8); any other text is a
live stay. A mapping that copies the PMS's status (``Cancelled``, ``Canceled by guest``,
``storniert``, ``annulé``, ``3``) would send cancelled bookings as live stays. So the
reservation's ``status`` is checked in the mapping's own SQL: a value that looks like a
cancellation, or a bare number (a code only the PMS can read), quarantines its record with the value,
unless the mapping declares it with ``not_cancelled``. The same vocabulary drafts the ``map:``
of `pms-sync init` (``classify``) and decides, when the file is loaded, whether a status can
need the check at all (``status_check_sql``): a constant, or a ``map``/``lookup`` with a
``map_default``, gives values known in advance, checked once instead of on every row.

No-show is not in the vocabulary: a no-show is decided on or after the arrival day, the booking
was real (often charged, the room held for a late arrival), and the PMS keeps it as a stay. Nor
is a single letter (``X``, ``C``): exports use them for opposite things.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

import duckdb

from connector.mapping.expressions import Expression, as_expression
from connector.mapping.reference_data import normalise_key
from connector.records import CANCELLATION_LIKE_REASON, NUMERIC_STATUS_REASON, StatusFinding
from connector.sources.base import sql_literal

if TYPE_CHECKING:
    from connector.mapping.model import Mapping

CANCELLED = "CANCELLED"
"""The one status that tells the service a reservation is cancelled (spec §2.8)."""

STATUS_MEMBER: tuple[str, ...] = ("entities", "reservation", "fields", "status")
"""Where a mapping file holds the reservation's status."""

CANCELLATION_WORDS: dict[str, tuple[str, ...]] = {
    "en": ("cancel", "annul"),  # cancelled, canceled, cancellation, annulled
    "de": ("storn", "annull", "abgesag", "gecancel"),  # storniert, Storno, annulliert, abgesagt
    "fr": ("annul",),  # annulé, annulée, annulation
    "es": ("cancel", "anul"),  # cancelada, cancelado, cancelación, anulada
    "it": ("cancell", "annull", "disdett"),  # cancellata, annullata, disdetta
    "nl": ("geannul", "annul", "afgezeg"),  # geannuleerd, annulering, afgezegd
    "pt": ("cancel", "anul"),  # cancelada, cancelado, cancelamento, anulada
}
"""Beginnings of words that mean cancelled, per language (ASCII: an accent never comes before
the part that tells). A value matches when one of its words begins so, in any case:
``Canceled by guest``, ``CANCELLED_BY_HOST``, ``Storniert (Gast)``, ``GuestCancelled``."""

CANCELLATION_CODES: tuple[str, ...] = (
    "cxl",
    "cnx",
    "canx",
    "cncl",
    "cnl",
    "canc",
    "void",
    "voided",
)
"""Codes and short words PMSs write for a cancelled booking, matched as whole words."""

STATUS_CODE_PATTERN = r"^\s*[0-9]+(\.0+)?\s*$"
"""A bare number (``3``, or ``3.0`` as a spreadsheet writes it): a status code whose meaning
only the PMS knows."""

CANCELLATION = "cancellation"
CODE = "code"


def _words_pattern() -> str:
    stems = sorted({stem for words in CANCELLATION_WORDS.values() for stem in words})
    anywhere = "|".join(stems)
    # "guestCancelled": a word that starts with a capital right after a lower-case letter.
    camel = "|".join(f"{stem[0].upper()}(?i:{stem[1:]})" for stem in stems)
    codes = "|".join(CANCELLATION_CODES)
    return (
        f"(?:^|[^A-Za-z])(?i:{anywhere})|[a-z](?:{camel})"
        f"|(?:^|[^A-Za-z0-9])(?i:{codes})(?:$|[^A-Za-z0-9])"
    )


WORDS_PATTERN = _words_pattern()
"""The vocabulary as one regular expression (RE2, as DuckDB runs it)."""


def _kind_sql(value: str) -> str:
    """SQL: 'cancellation', 'code', or NULL for a text ``value`` (CANCELLED itself is NULL)."""
    either = f"{WORDS_PATTERN}|{STATUS_CODE_PATTERN}"
    # One regular expression per row in the common case (a live status matches neither).
    return (
        f"CASE WHEN {value} IS NULL OR {value} = '{CANCELLED}' THEN NULL "
        f"WHEN NOT regexp_matches({value}, {sql_literal(either)}) THEN NULL "
        f"WHEN regexp_matches({value}, {sql_literal(WORDS_PATTERN)}) THEN '{CANCELLATION}' "
        f"ELSE '{CODE}' END"
    )


def declared_live(expression: Expression) -> list[str]:
    """The values the status expression declares live (``not_cancelled``), as written."""
    return [str(value) for value in getattr(expression, "not_cancelled", None) or []]


def problem_sql(value: str, declared: Sequence[str]) -> str:
    """SQL of the quarantine reason of a status ``value`` (text), or NULL when it may be sent:
    not cancellation-like, ``CANCELLED`` itself, or declared live (compared as ``pms_key`` does:
    case, accents and surrounding blanks aside)."""
    kind = _kind_sql(value)
    reasons = (
        f"CASE {kind} WHEN '{CANCELLATION}' THEN {sql_literal(_reason(CANCELLATION))} "
        f"WHEN '{CODE}' THEN {sql_literal(_reason(CODE))} END"
    )
    if not declared:
        return reasons
    keys = ", ".join(sql_literal(normalise_key(item)) for item in sorted(set(declared)))
    return f"CASE WHEN pms_key({value}) IN ({keys}) THEN NULL ELSE {reasons} END"


def _reason(kind: str) -> str:
    if kind == CANCELLATION:
        return f"{CANCELLATION_LIKE_REASON}: map it to {CANCELLED}, or declare it not_cancelled"
    return (
        f"{NUMERIC_STATUS_REASON}: map it to {CANCELLED} if it means cancelled, else declare it "
        "not_cancelled"
    )


@cache
def _classified(values: tuple[str, ...]) -> dict[str, str]:
    with duckdb.connect(":memory:") as connection:
        rows = connection.execute(
            f"SELECT v, {_kind_sql('v')} FROM unnest(?::VARCHAR[]) AS t(v)", [list(values)]
        ).fetchall()
    return {str(value): str(kind) for value, kind in rows if kind is not None}


def classify(values: Iterable[str]) -> dict[str, str]:
    """The values that look like a cancellation or a numeric code, each with its kind
    (``"cancellation"`` or ``"code"``), by the same SQL the mapping runs on every row."""
    return _classified(tuple(sorted({str(value) for value in values})))


# --------------------------------------------------------------------- the mapping's status


def known_outputs(expression: Expression, lookups: dict[str, dict[str, Any]]) -> set[str] | None:
    """Every status the expression can give, when the file alone tells (None: the data does).

    A constant; or a ``map`` or ``lookup`` whose ``map_default`` covers whatever else the data
    holds (a lookup without one gives nothing for unlisted values: the record then lacks its
    required status and is quarantined as such). ``default`` adds its value.
    """
    if expression.as_ not in (None, "string") or expression.split is not None:
        return None
    outputs: set[Any]
    if expression.source == "constant" and not any(
        getattr(expression, key) is not None for key in ("regex", "case", "map", "lookup")
    ):
        outputs = {expression.constant}
    elif expression.lookup is not None:
        # Whatever a map before it gives, the lookup's values (or map_default) come out.
        outputs = set(lookups.get(expression.lookup, {}).values())
        if expression.map_default is not None:
            outputs.add(expression.map_default)
    elif expression.map is not None and expression.map_default is not None:
        outputs = {*expression.map.values(), expression.map_default}
    else:
        return None
    if expression.default is not None:
        outputs.add(expression.default)
    return {_text(value) for value in outputs if value is not None}


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def status_check_sql(
    value: Any, member: tuple[str | int, ...], lookups: dict[str, dict[str, Any]], text_sql: str
) -> str | None:
    """SQL of the status problem of each row (see ``problem_sql``) when ``member`` is the
    reservation's status and some value it can give needs the check; else None."""
    if tuple(member) != STATUS_MEMBER:
        return None
    expression = as_expression(value)
    declared = declared_live(expression)
    known = known_outputs(expression, lookups)
    if known is not None:
        declared_keys = {normalise_key(item) for item in declared}
        flagged = [item for item in classify(known) if normalise_key(item) not in declared_keys]
        if not flagged:
            return None  # every value it can give is fine: no check on every row
    return problem_sql(text_sql, declared)


# ------------------------------------------------------------------------------ the advice


def status_fix(mapping: Mapping, findings: Sequence[StatusFinding]) -> str | None:
    """What to write in the mapping file for ``findings``: where, and the status member with
    the ``map`` entries to add (for numeric codes, placeholders only the PMS can fill in), in
    YAML."""
    from connector.mapping.draft import flow_yaml

    if not findings or "reservation" not in mapping.entities:
        return None
    expression = as_expression(mapping.entities["reservation"].fields.status)
    line = mapping.line_of(STATUS_MEMBER)
    file = mapping.source_file.name if mapping.source_file is not None else "the mapping file"
    where = f"{file}{f' line {line}' if line else ''} ({'.'.join(STATUS_MEMBER)})"
    cancellations = [item.value for item in findings if item.kind == CANCELLATION]
    codes = [item.value for item in findings if item.kind == CODE]
    base = expression.model_dump(by_alias=True, exclude_unset=True, exclude_defaults=True)
    fixed, lookup_keys, notes = _mapped_to_cancelled(base, expression, mapping, cancellations)
    if codes:
        # Placeholders, not a guess: pasted as they are, the codes are still caught.
        fixed = {
            **fixed,
            "map": {**(fixed.get("map") or {}), "<each code that means cancelled>": CANCELLED},
            "not_cancelled": [*declared_live(expression), "<the other codes>"],
        }
    lines = [f"map them to {CANCELLED} in {where}:"]
    if fixed != base:
        lines.append(f"  status: {flow_yaml(fixed)}")
    if lookup_keys:
        entries = flow_yaml(dict.fromkeys(lookup_keys, CANCELLED))
        lines.append(f"  lookups: {{{expression.lookup}: {entries}}}  (the entries to change)")
    lines.extend(f"  {note}" for note in notes)
    if codes:
        lines.append(
            f"numeric codes ({', '.join(codes)}): only the PMS knows which mean cancelled; map "
            "those to CANCELLED and declare the others not_cancelled"
        )
    lines.append(
        "a value that means no cancellation (say 'Cancellation requested') is declared live: "
        "not_cancelled: ['Cancellation requested']"
    )
    return "\n".join(lines)


def _mapped_to_cancelled(
    base: dict[str, Any], expression: Expression, mapping: Mapping, values: list[str]
) -> tuple[dict[str, Any], list[str], list[str]]:
    """The expression with each value sent as CANCELLED, the lookup keys to change, and notes
    on values neither can change (a ``map_default`` or ``default`` that gives them)."""
    entries: dict[str, Any] = dict(base.get("map") or {})
    lookup_keys: list[str] = []
    notes: list[str] = []
    lookup = mapping.lookups.get(expression.lookup or "", {})
    for value in values:
        from_map = [key for key, result in entries.items() if _text(result) == value]
        from_lookup = [key for key, result in lookup.items() if _text(result) == value]
        if from_map:
            entries.update(dict.fromkeys(from_map, CANCELLED))
        elif from_lookup:
            lookup_keys.extend(from_lookup)
        elif value in {
            _text(v) for v in (expression.map_default, expression.default) if v is not None
        }:
            notes.append(f"{value!r} is the member's map_default or default: change that")
        elif expression.lookup is None:
            entries[value] = CANCELLED  # it went through unchanged: the map replaces it
    fixed = {**base, "map": entries} if entries else dict(base)
    return fixed, lookup_keys, notes
