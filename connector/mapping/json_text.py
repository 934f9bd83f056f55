"""Documents compiled to SQL that writes their canonical JSON text directly.

The canonical form (``connector.canonical``) is compact JSON with keys in code point order and
unset members left out. DuckDB writes it without any Python: every member is the text
``"name":value`` (NULL when the value is), joined by ``concat_ws``, which skips NULLs, so unset
members never appear and no text is re-parsed. Values are written by ``to_json``, whose
escaping and number spelling match Python's ``json.dumps`` except where the mapping engine
sends a record down the record-by-record path instead (``_EXOTIC_TEXT`` in the compiler).

The same tree renders the *hashed form* too: the text without the mapping's volatile members.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TypeAlias


class VolatileInRows(Exception):
    """A volatile member inside a list built from another input's rows: SQL cannot cut it."""


@dataclass
class JsonList:
    """A list of objects: literal items of the mapping, or item texts aggregated from rows."""

    items: list[tuple[JsonObject, str | None]] = field(default_factory=list)  # (item, keep)
    rows_sql: str | None = None  # SQL of a VARCHAR[] of item texts (child rows)
    rows_check: str = "false"  # SQL: the child rows' items surely pass the contract


@dataclass
class JsonObject:
    """An object's members, each compiled once; rendered as text any number of times."""

    members: dict[str, JsonValue] = field(default_factory=dict)
    presence: list[str] = field(default_factory=list)  # SQL that is NULL when a member is unset
    required: bool = True
    # SQL predicates that together hold only when the members surely pass the contract
    # (connector.mapping.contract_sql), and the rules no predicate could express.
    checks: list[str] = field(default_factory=list)
    uncovered: list[str] = field(default_factory=list)

    def check(self) -> str:
        """SQL true when the object's members surely pass the contract (``false`` when some
        rule has no SQL predicate: the validators in Python decide)."""
        if self.uncovered:
            return "false"
        return " AND ".join(f"({check})" for check in self.checks) if self.checks else "true"

    def text(self, without: Iterable[str] = ()) -> str:
        """SQL of the object's canonical JSON text, leaving out the dotted paths ``without``."""
        dropped = list(without)
        parts = []
        for name in sorted(self.members):
            if name in dropped:
                continue
            inner = [path.split(".", 1)[1] for path in dropped if path.startswith(f"{name}.")]
            parts.append(f"{_key(name)} || {value_text(self.members[name], inner)}")
        body = f"'{{' || concat_ws(',', {', '.join(parts)}) || '}}'" if parts else "'{}'"
        if self.required or not self.presence:
            return body
        # An optional object with no value at all is left out rather than sent empty.
        unset = " AND ".join(f"({sql}) IS NULL" for sql in self.presence)
        return f"CASE WHEN {unset} THEN NULL ELSE {body} END"


JsonValue: TypeAlias = "str | JsonObject | JsonList"
"""A member's value: SQL of its JSON text (a leaf), a nested object, or a list of objects."""


def _key(name: str) -> str:
    return "'\"" + name + "\":'"


def value_text(value: JsonValue, without: list[str] | None = None) -> str:
    """SQL of a member value's JSON text (NULL when unset), without the dotted paths given."""
    without = without or []
    if isinstance(value, JsonObject):
        return value.text(without)
    if isinstance(value, JsonList):
        if value.rows_sql is not None:
            if without:
                raise VolatileInRows(without[0])
            listed = value.rows_sql
        else:
            texts = [
                item.text(without)
                if keep is None
                else f"CASE WHEN {keep} THEN {item.text(without)} END"
                for item, keep in value.items
            ]
            listed = f"list_value({', '.join(texts)})"
        return f"'[' || nullif(array_to_string({listed}, ','), '') || ']'"
    if without:
        raise ValueError(f"volatile path {without[0]!r} runs into a value that is no object")
    return value


def leaf_text(sql: str) -> str:
    """SQL of a leaf value's JSON text (NULL when the value is)."""
    return f"to_json({sql})"
