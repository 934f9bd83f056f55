"""Plain-language messages for rejected bodies: the field path and the reason, one per problem.

Example: ``resource.unitReservations.0.checkin: expected a date as YYYY-MM-DD, got '01.02.2025'``.
Values of secret members (door codes, Wi-Fi codes, tokens) are never repeated in a message.
"""

from __future__ import annotations

import re

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from connector.contract.formats import NON_BLANK_PATTERN
from connector.secrets import is_sensitive

MAX_REASON_CHARS = 300
"""A reason quoting a megabyte-long value is cut here: the path and the start say enough."""

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


def _shorten(reason: str) -> str:
    if len(reason) <= MAX_REASON_CHARS:
        return reason
    return f"{reason[:MAX_REASON_CHARS]}… ({len(reason)} characters)"


def _reason(error: ErrorDetails) -> str:
    kind, message = error["type"], error["msg"]
    if kind == "string_pattern_mismatch" and error.get("ctx", {}).get("pattern") == (
        NON_BLANK_PATTERN
    ):
        return "string should match pattern of a non-blank value: got only whitespace"
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
        f"{_path(detail)}: {_shorten(_reason(detail))}"
        for detail in error.errors(include_url=False)
    )
