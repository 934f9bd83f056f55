"""A faster first pass of contract validation for the mapping engine's bulk of valid records.

The contract's format types (``connector.contract.formats``) check values in Python
``AfterValidator``s, which cost a call out of pydantic-core per value (about 3 to 4 µs each, most of
the validation time of a reservation). This module compiles a twin of a contract model's core
schema in which each of those checks is a native pydantic-core constraint (a pattern or a
literal) accepting a *subset* of what the Python check accepts: only values that certainly
pass. The mapping engine validates with the twin first; a document the twin refuses is
validated again with the contract model itself, whose answer (and error messages) then count.
So the accepted records, their payloads and every quarantine message are exactly the
contract's; only the common case is faster.

What the twin leaves to the slow path: 29 February (leap years need arithmetic), the year 0000,
timestamps in any spelling but ``YYYY-MM-DD`` and ``YYYY-MM-DDTHH:MM:SS[.fff]Z``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from pydantic import BaseModel
from pydantic_core import SchemaValidator

from connector.contract import formats

_YEAR = "([1-9][0-9]{3}|0[1-9][0-9]{2}|00[1-9][0-9]|000[1-9])"
_MONTH_DAY = (
    "((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])"
    "|(0[469]|11)-(0[1-9]|[12][0-9]|30)"
    "|02-(0[1-9]|1[0-9]|2[0-8]))"
)
YEAR_PATTERN = _YEAR
"""Years 0001 to 9999, as four digits."""
SURE_DATE = f"{_YEAR}-{_MONTH_DAY}"
SURE_DATE_PATTERN = f"^{SURE_DATE}$"
SURE_TIMESTAMP_PATTERN = (
    f"^{SURE_DATE}(T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{{1,6}})?Z)?$"
)


def _native(check: Callable[[str], str]) -> dict[str, Any] | None:
    """The native schema accepting a subset of what ``check`` accepts, or None."""
    if check is formats._check_date:
        return {"type": "str", "pattern": SURE_DATE_PATTERN}
    if check is formats._check_timestamp:
        return {"type": "str", "pattern": SURE_TIMESTAMP_PATTERN}
    if check is formats._check_hh_mm:
        return {"type": "str", "pattern": formats.HH_MM_PATTERN}
    if check is formats._check_half_hour:
        return {"type": "str", "pattern": formats.HALF_HOUR_PATTERN}
    if check is formats._check_country:
        return {"type": "literal", "expected": sorted(formats.iso_countries())}
    if check is formats._check_currency:
        return {"type": "literal", "expected": sorted(formats.iso_currencies())}
    return None


def _rewrite(node: Any) -> Any:
    if isinstance(node, list):
        return [_rewrite(item) for item in node]
    if not isinstance(node, Mapping):  # (a model's schema may still be a lazy Mapping)
        return node
    if node.get("type") == "function-after" and node.get("schema") == {"type": "str"}:
        native = _native(node["function"]["function"])
        if native is not None:
            if "ref" in node:
                native["ref"] = node["ref"]
            return native
    return {key: _rewrite(value) for key, value in node.items()}


def _model_classes(node: Any, found: set[type]) -> set[type]:
    if isinstance(node, list):
        for item in node:
            _model_classes(item, found)
    elif isinstance(node, Mapping):
        if node.get("type") == "model" and isinstance(node.get("cls"), type):
            found.add(node["cls"])
        for value in node.values():
            _model_classes(value, found)
    return found


def sure_validator(model: type[BaseModel]) -> SchemaValidator:
    """A validator returning ``model`` instances for documents the contract surely accepts."""
    schema = _rewrite(model.__pydantic_core_schema__)
    # pydantic-core reuses a complete model class's own validator for a "model" schema naming
    # it (its prebuilt validator), which would ignore the rewritten fields: build while the
    # classes do not say they are complete.
    classes = _model_classes(schema, set())
    for cls in classes:
        cls.__pydantic_complete__ = False  # type: ignore[attr-defined]
    try:
        return SchemaValidator(schema, schema.get("config"))
    finally:
        for cls in classes:
            cls.__pydantic_complete__ = True  # type: ignore[attr-defined]


CHECKED_IN_SQL: frozenset[str] = frozenset(
    {
        # The mapping engine's SQL (connector.mapping.compiler, "units_sure") sends a record
        # to the contract model whenever one of these could fail.
        "UnitReservation._checkout_after_checkin",
        "Reservation._unit_reservation_ids_unique",
    }
)
"""Model validators the bulk twin leaves out because the engine checks them in SQL."""


def _as_typed_dicts(node: Any) -> Any:
    """The same schema with models as typed dicts: no model instance is built per document."""
    if isinstance(node, list):
        return [_as_typed_dicts(item) for item in node]
    if not isinstance(node, Mapping):
        return node
    kind = node.get("type")
    inner = node.get("schema")
    if kind == "function-after" and isinstance(inner, Mapping) and inner.get("type") == "model":
        name = node["function"]["function"].__qualname__
        if name not in CHECKED_IN_SQL:
            raise TypeError(f"model validator {name} has no SQL twin in the mapping engine")
        return _as_typed_dicts(inner)
    if kind == "function-before" and node["function"]["function"] is formats._whole_number:
        # Subset: 2.0 for an integer goes to the contract model, which makes it 2.
        return _as_typed_dicts(inner)
    if kind == "model" and isinstance(inner, Mapping):
        fields = inner["fields"]
        return {
            "type": "typed-dict",
            "strict": True,
            "extra_behavior": "forbid",
            "fields": {
                name: {
                    "type": "typed-dict-field",
                    "schema": _as_typed_dicts(spec["schema"]),
                    "required": spec["schema"].get("type") != "default",
                }
                for name, spec in fields.items()
            },
        }
    if kind in ("function-after", "function-before", "function-wrap", "function-plain"):
        raise TypeError(f"no native twin for {node['function']['function'].__qualname__}")
    return {key: _as_typed_dicts(value) for key, value in node.items() if key != "ref"}


def bulk_validator(model: type[BaseModel]) -> SchemaValidator:
    """A validator of a JSON array of canonical documents that builds no model instances.

    It accepts a subset of what the contract accepts, with no Python call per value: formats
    as native patterns (as :func:`sure_validator`), whole numbers only as JSON integers, and
    the model validators listed in :data:`CHECKED_IN_SQL` left to the engine's SQL. Documents
    it refuses are validated again by the contract model, which decides.
    """
    items = _as_typed_dicts(_rewrite(model.__pydantic_core_schema__))
    return SchemaValidator({"type": "list", "items_schema": items})
