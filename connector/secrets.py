"""Masking of secrets and guest contact data before anything is logged, stored or displayed.

Door, building and Wi-Fi codes open real doors and networks; tokens open the service. They
must never reach logs, Dagster metadata, quarantine or dead-letter tables, or error messages.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SECRET_MEMBERS: frozenset[str] = frozenset(
    {
        "wifiCode",
        "doorCode",
        "buildingCode",
        "apiToken",
        "token",
        "access_token",
        "client_secret",
        "authorization",
        "x-wishbox-auth-token",
    }
)
"""Members whose value is a credential: always fully masked."""

CONTACT_MEMBERS: frozenset[str] = frozenset({"email", "phone"})
"""Guest contact data: masked in previews and metadata, kept in the payload sent."""

MASK = "***"


def is_sensitive(member: str) -> bool:
    """Whether a member (JSON key, column or header name) holds a secret or contact data."""
    lowered = member.lower()
    return any(lowered == name.lower() for name in SECRET_MEMBERS | CONTACT_MEMBERS)


def mask_value(value: object) -> str:
    """A masked stand-in that keeps only whether a value was present."""
    return MASK if value not in (None, "") else ""


def mask_payload(payload: Any) -> Any:
    """A copy of a JSON-like value with every sensitive member masked, at any depth."""
    if isinstance(payload, Mapping):
        return {
            key: mask_value(value)
            if is_sensitive(str(key)) and not isinstance(value, (dict, list))
            else mask_payload(value)
            for key, value in payload.items()
        }
    if isinstance(payload, list):
        return [mask_payload(item) for item in payload]
    return payload
