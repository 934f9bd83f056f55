"""The contract's checks compiled to SQL predicates over a document's typed values.

The mapping engine builds every document in DuckDB; before it is written as JSON text, each
member's value is a typed SQL expression. This module walks a contract model's own core schema
(``Model.__pydantic_core_schema__``: the types, constraints, format validators and model
validators pydantic runs) and compiles, for each member, a predicate that is true only when the
value *certainly* passes: a subset of what the model accepts, never more. A record whose
predicates all hold needs no Python at all; any other record (a predicate false, or a rule this
module cannot express, which compiles to ``false``) goes to the validators in Python, and the
contract model decides and writes every quarantine message. So accepted records and quarantine
are the same with or without these predicates (``PMS_SYNC_SQL_CHECKS=0`` turns them off).

What stays with Python: strings whose rule is no pattern or length, integers sent as floats
(``2.0``), timestamps in any spelling but ``YYYY-MM-DD`` and ``YYYY-MM-DDTHH:MM:SS[.ffffff]Z``,
years before 0001, and model validators other than the two the entity query checks itself
(:data:`connector.mapping.fast_validation.CHECKED_IN_SQL`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from enum import Enum
from typing import Any, Literal

from pydantic import BaseModel

from connector.contract import formats
from connector.mapping.fast_validation import (
    CHECKED_IN_SQL,
    SURE_DATE,
    SURE_TIMESTAMP_PATTERN,
    YEAR_PATTERN,
)
from connector.sources.base import sql_literal

ValueKind = Literal["string", "integer", "number", "boolean", "string_list", "other"]
"""What a member's SQL value is written as in the document's JSON: a string, an integer, a
(double) number, a boolean, a list of strings, or something these checks do not know."""


class Uncovered(Exception):
    """A contract rule with no SQL predicate here: the record goes to the Python validators."""


def re2_pattern(pattern: str) -> str:
    """A pattern of the contract (Python/ECMA/Rust syntax) in RE2's (DuckDB's regexp) syntax.

    The contract's patterns only use ASCII classes, anchors and ``\\uXXXX`` escapes
    (``connector.contract.formats``); anything else is left to Python rather than guessed.
    """
    translated = re.sub(r"\\u([0-9a-fA-F]{4})", r"\\x{\1}", pattern)
    # After translation the only escapes RE2 must read like Python are control characters,
    # \x{...} and escaped punctuation.
    for escape in re.findall(r"\\(.)", translated):
        if escape not in "tnvfrx-.^$*+?()[]{}|\\/":
            raise Uncovered(f"pattern escape \\{escape} in {pattern!r}")
    return translated


def _codes(values: frozenset[str]) -> str:
    if not all(value.isalnum() and value.isascii() for value in values):
        raise Uncovered("reference codes that are not plain letters and digits")
    return sql_literal("|".join(sorted(values)))


def _leap_day(value: str) -> str:
    # 29 February of a leap year (the sure-date pattern leaves every 29 February out).
    year = f"TRY_CAST({value}[1:4] AS INTEGER)"
    return (
        f"(regexp_full_match({value}, {sql_literal(YEAR_PATTERN + '-02-29')}) AND {year} % 4 = 0 "
        f"AND ({year} % 100 <> 0 OR {year} % 400 = 0))"
    )


# Each format validator of the contract and the SQL that accepts a subset of what it accepts.
_FORMAT_CHECKS: dict[Callable[[str], str], Callable[[str], str]] = {
    formats._check_date: lambda v: (
        f"(regexp_full_match({v}, {sql_literal(SURE_DATE)}) OR {_leap_day(v)})"
    ),
    formats._check_timestamp: lambda v: (
        f"regexp_full_match({v}, {sql_literal(re2_pattern(SURE_TIMESTAMP_PATTERN))})"
    ),
    formats._check_hh_mm: lambda v: (
        f"regexp_full_match({v}, {sql_literal(re2_pattern(formats.HH_MM_PATTERN))})"
    ),
    formats._check_half_hour: lambda v: (
        f"regexp_full_match({v}, {sql_literal(re2_pattern(formats.HALF_HOUR_PATTERN))})"
    ),
    # A regular expression of every code: RE2 matches it in one pass over the value.
    formats._check_country: lambda v: f"regexp_full_match({v}, {_codes(formats.iso_countries())})",
    formats._check_currency: lambda v: (
        f"regexp_full_match({v}, {_codes(formats.iso_currencies())})"
    ),
}

_BOUNDS = {"ge": ">=", "gt": ">", "le": "<=", "lt": "<"}
# Keys of a core schema node that do not change what it accepts.
_NEUTRAL = frozenset({"type", "ref", "metadata", "serialization", "strict"})


def _only(node: Mapping[str, Any], allowed: set[str]) -> None:
    unknown = set(node) - _NEUTRAL - allowed
    if unknown:
        raise Uncovered(f"{node['type']} with {sorted(unknown)}")


def _bounds(node: Mapping[str, Any], value: str) -> list[str]:
    return [f"{value} {_BOUNDS[key]} {node[key]!r}" for key in _BOUNDS if key in node]


def value_check(node: Mapping[str, Any], value: str, kind: ValueKind) -> str:
    """SQL true when the non-NULL ``value`` (written as JSON of ``kind``) surely passes ``node``.

    Raises :class:`Uncovered` for a rule it cannot express (or a value of another JSON kind).
    """
    node_type = node.get("type")
    if node_type == "nullable":  # a NULL member is left out of the document, never null
        return value_check(node["schema"], value, kind)
    if node_type == "str":
        _only(node, {"min_length", "max_length", "pattern"})
        if kind != "string":
            raise Uncovered(f"a {kind} value for a string")
        checks = []
        # DuckDB's length() counts code points, as Python's len() does.
        if "min_length" in node:
            checks.append(f"length({value}) >= {int(node['min_length'])}")
        if "max_length" in node:
            checks.append(f"length({value}) <= {int(node['max_length'])}")
        if "pattern" in node:  # pydantic searches (it does not anchor)
            checks.append(f"regexp_matches({value}, {sql_literal(re2_pattern(node['pattern']))})")
        return " AND ".join(checks) or "true"
    if node_type == "int":
        _only(node, set(_BOUNDS))
        if kind != "integer":
            raise Uncovered(f"a {kind} value for an integer")
        return " AND ".join(_bounds(node, value)) or "true"
    if node_type == "float":
        _only(node, set(_BOUNDS))
        if kind not in ("number", "integer"):
            raise Uncovered(f"a {kind} value for a number")
        return " AND ".join([f"isfinite({value})", *_bounds(node, value)])
    if node_type == "bool":
        _only(node, set())
        if kind != "boolean":
            raise Uncovered(f"a {kind} value for a boolean")
        return "true"
    if node_type in ("enum", "literal"):
        _only(node, {"members", "sub_type", "cls", "expected", "missing"})
        if kind != "string" or node.get("missing") is not None:
            raise Uncovered(f"a {kind} value for an enumeration")
        listed = node.get("members", node.get("expected", []))
        texts = [item.value if isinstance(item, Enum) else item for item in listed]
        if not texts or not all(isinstance(text, str) for text in texts):
            raise Uncovered("an enumeration of other values than strings")
        return f"{value} IN ({', '.join(sql_literal(text) for text in texts)})"
    if node_type == "list":
        _only(node, {"items_schema", "min_length", "max_length"})
        if kind != "string_list":
            raise Uncovered(f"a {kind} value for a list")
        item = value_check(node["items_schema"], "x", "string")
        checks = [f"coalesce(list_bool_and(list_transform({value}, lambda x: {item})), true)"]
        if "min_length" in node:
            checks.append(f"len({value}) >= {int(node['min_length'])}")
        if "max_length" in node:
            checks.append(f"len({value}) <= {int(node['max_length'])}")
        return " AND ".join(checks)
    if node_type == "function-before":
        if node["function"]["function"] is not formats._whole_number:
            raise Uncovered(f"validator {node['function']['function'].__qualname__}")
        # An integer value is left as it is by _whole_number (only floats are changed).
        if kind != "integer":
            raise Uncovered(f"a {kind} value for a whole number")
        return value_check(node["schema"], value, kind)
    if node_type == "function-after":
        check = _FORMAT_CHECKS.get(node["function"]["function"])
        if check is None:
            raise Uncovered(f"validator {node['function']['function'].__qualname__}")
        return f"({value_check(node['schema'], value, kind)}) AND {check(value)}"
    raise Uncovered(f"core schema {node_type!r}")


def member_check(node: Mapping[str, Any], value: str, kind: ValueKind) -> str:
    """SQL true when a member of SQL value ``value`` (NULL: left out) surely passes ``node``."""
    if node.get("type") == "default":
        if node.get("default") is not None or "default_factory" in node:
            raise Uncovered("a member whose default is not None")
        return f"({value} IS NULL OR ({value_check(node['schema'], value, kind)}))"
    return f"({value} IS NOT NULL AND ({value_check(node, value, kind)}))"


def model_fields(model: type[BaseModel]) -> dict[str, dict[str, Any]]:
    """The core schema of each member of ``model``, as pydantic validates it."""
    return _model_node_fields(model.__pydantic_core_schema__)


def _model_node_fields(node: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    while node.get("type") in ("function-after", "default", "nullable"):
        if node["type"] == "function-after":
            name = node["function"]["function"].__qualname__
            if name not in CHECKED_IN_SQL:
                raise Uncovered(f"model validator {name}")
        node = node["schema"]
    if node.get("type") != "model" or node["schema"].get("type") != "model-fields":
        raise Uncovered(f"core schema {node.get('type')!r} for an object")
    config = node.get("config", {})
    if config.get("extra_fields_behavior") != "forbid" or not config.get("strict"):
        # Lax models coerce values (the document's text would then differ from the model's).
        raise Uncovered("a model that is not strict and closed")
    fields = node["schema"]["fields"]
    if any(spec.get("validation_alias") for spec in fields.values()):
        raise Uncovered("members with aliases")
    return {name: spec["schema"] for name, spec in fields.items()}


def object_node(node: Mapping[str, Any]) -> tuple[bool, dict[str, dict[str, Any]]]:
    """Whether a member holding an object is optional, and that object's members."""
    optional = node.get("type") == "default"
    if optional and node.get("default") is not None:
        raise Uncovered("an object member whose default is not None")
    return optional, _model_node_fields(node)


def list_node(node: Mapping[str, Any]) -> tuple[bool, dict[str, dict[str, Any]]]:
    """Whether a member holding a list of objects is optional, and the items' members."""
    optional = node.get("type") == "default"
    if optional:
        if node.get("default") is not None:
            raise Uncovered("a list member whose default is not None")
        node = node["schema"]
    if node.get("type") == "nullable":
        node = node["schema"]
    if node.get("type") != "list" or set(node) - _NEUTRAL - {"items_schema"}:
        raise Uncovered("a list of objects with constraints")
    return optional, _model_node_fields(node["items_schema"])


def all_of(checks: list[str]) -> str:
    return " AND ".join(f"({check})" for check in checks) if checks else "true"
