"""Conditions of outgoing-webhook configurations, evaluated against a stored reservation.

The filter types the sandbox implements are the publicly documented ones (DESIGN.md,
"Outgoing-webhook configuration"); each reads one value of the reservation resource:

| filterType | meaning | value read |
|---|---|---|
| 1 | booking source | ``channelName`` (else ``channelId``) |
| 2 | reservation status | ``status`` |
| 6 | nights | latest unit check-out minus earliest unit check-in, in days |
| 10 | adults | sum of the unit reservations' ``adults`` |
| 11 | children | sum of the unit reservations' ``children`` (absent when none gives it) |
| 15 | country | ``primaryGuest.country`` |
| 16 | agent | ``agent`` |
| 30 | membership | ``membership`` |

Any other code is not implemented: a condition using it does not hold, so the configuration
sends nothing (the delivery log says why). Text compares exactly (case included); numbers
compare as numbers.
"""

from __future__ import annotations

from datetime import date
from typing import Any

SUPPORTED_FILTER_TYPES = frozenset({1, 2, 6, 10, 11, 15, 16, 30})


class UnsupportedCondition(Exception):
    """A condition whose filterType the sandbox does not implement."""


def condition_value(filter_type: int, reservation: dict[str, Any]) -> Any:
    """The reservation's value a condition of ``filter_type`` compares (None: absent)."""
    units = [u for u in reservation.get("unitReservations") or [] if isinstance(u, dict)]
    if filter_type == 1:
        return reservation.get("channelName") or reservation.get("channelId")
    if filter_type == 2:
        return reservation.get("status")
    if filter_type == 6:
        try:
            checkin = min(date.fromisoformat(u["checkin"]) for u in units)
            checkout = max(date.fromisoformat(u["checkout"]) for u in units)
        except (KeyError, TypeError, ValueError):
            return None
        return (checkout - checkin).days
    if filter_type in (10, 11):
        member = "adults" if filter_type == 10 else "children"
        given = [u[member] for u in units if isinstance(u.get(member), int)]
        return sum(given) if given else None
    if filter_type == 15:
        guest = reservation.get("primaryGuest") or {}
        return guest.get("country") if isinstance(guest, dict) else None
    if filter_type == 16:
        return reservation.get("agent")
    if filter_type == 30:
        return reservation.get("membership")
    raise UnsupportedCondition(f"filterType {filter_type} is not implemented by the sandbox")


def _number(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _equal(actual: Any, expected: Any) -> bool:
    left, right = _number(actual), _number(expected)
    if left is not None and right is not None:
        return left == right
    return str(actual) == str(expected)


def condition_holds(condition: dict[str, Any], reservation: dict[str, Any]) -> bool:
    """Whether one condition (``filterType``, ``op``, ``value``, ``secondValue``) holds."""
    actual = condition_value(int(condition["filterType"]), reservation)
    op, expected = condition["op"], condition.get("value")
    present = actual is not None and actual != ""
    if op == "exists":
        return present
    if op == "not exists":
        return not present
    if not present:
        return op in ("!=", "!in")
    if op == "=":
        return _equal(actual, expected)
    if op == "!=":
        return not _equal(actual, expected)
    if op in ("in", "!in"):
        options = expected if isinstance(expected, list) else [expected]
        found = any(_equal(actual, option) for option in options)
        return found if op == "in" else not found
    number = _number(actual)
    if number is None:
        return False
    if op == "range":
        low, high = _number(expected), _number(condition.get("secondValue"))
        return low is not None and high is not None and low <= number <= high
    bound = _number(expected)
    if bound is None:
        return False
    return {
        ">": number > bound,
        "<": number < bound,
        ">=": number >= bound,
        "<=": number <= bound,
    }.get(op, False)


def conditions_hold(conditions: list[dict[str, Any]], reservation: dict[str, Any]) -> bool:
    """Every condition holds (no condition: always); UnsupportedCondition for a filter type
    the sandbox does not implement."""
    return all(condition_holds(condition, reservation) for condition in conditions)
