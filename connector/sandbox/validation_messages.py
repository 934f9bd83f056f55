"""Plain-language messages for rejected bodies: the field path and the reason, one per problem.

Example: ``resource.unitReservations.0.checkin: expected a date as YYYY-MM-DD, got '01.02.2025'``.
Values of secret members (door codes, Wi-Fi codes, tokens) are never repeated in a message.
"""

from __future__ import annotations

import re

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from connector.secrets import is_sensitive

_ENUM_REPR = re.compile(r"<\w+\.\w+: ('[^']*')>")
_JSON_TYPES: dict[type, str] = {
    str: "a string",
    int: "a number",
    float: "a number",
    bool: "a boolean",
    list: "an array",
    dict: "an object",
    type(None): "null",
}


def _path(error: ErrorDetails) -> str:
    return ".".join(str(part) for part in error["loc"]) or "body"


def _reason(error: ErrorDetails) -> str:
    kind, message = error["type"], error["msg"]
    if kind == "missing":
        return "required member is missing"
    if kind == "extra_forbidden":
        return "unknown member (not part of the interface)"
    if kind == "json_invalid":
        return f"not valid JSON ({error.get('ctx', {}).get('error', message)})"
    if kind in ("value_error", "assertion_error"):
        return message.removeprefix("Value error, ").removeprefix("Assertion failed, ")
    reason = _ENUM_REPR.sub(r"\1", message)
    reason = reason[0].lower() + reason[1:] if reason else reason
    if kind.endswith("_type") or kind in ("literal_error", "enum"):
        found = _JSON_TYPES.get(type(error.get("input")), "a value")
        last = str(error["loc"][-1]) if error["loc"] else ""
        if kind in ("literal_error", "enum") and not is_sensitive(last):
            return f"{reason}, got {error.get('input')!r}"
        return f"{reason}, got {found}"
    return reason


def describe_validation_error(error: ValidationError) -> str:
    """Every problem of a rejected body as ``path: reason``, joined by ``; ``."""
    return "; ".join(
        f"{_path(detail)}: {_reason(detail)}" for detail in error.errors(include_url=False)
    )
