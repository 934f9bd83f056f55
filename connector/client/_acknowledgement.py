"""Whether a 2xx answer of a sync webhook is the service's acknowledgement.

Only a documented answer acknowledges a record: the JSON object of spec §4.1 (accommodation)
or §4.2 (reservation), every documented member that is present of its documented type (a
count is an integer ≥ 0, never a boolean, a float or a string), no error shape, and — under
the default policy — at least one count. Anything else (a proxy's or captive portal's HTML
page, an empty body, ``{"error": …}``, counts as strings) is *unconfirmed*: the client cannot
tell whether the service holds the record, so it is retried and never recorded as
acknowledged. A documented answer whose counts say nothing was stored is unconfirmed too.

The shape is checked by the contract's response models in strict mode, so the rules live in
one place (connector/contract/_sync.py); the functions here only name what was wrong.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import orjson
from pydantic import ConfigDict, ValidationError

from connector.client._config import AcknowledgementPolicy
from connector.contract import (
    AccommodationSyncResponse,
    Entity,
    ReservationSyncResponse,
    validate_json_body,
)

SyncAnswer = AccommodationSyncResponse | ReservationSyncResponse
"""A documented answer of a sync webhook (spec §4.1 or §4.2)."""

SPEC_SECTIONS: dict[Entity, str] = {Entity.ACCOMMODATION: "§4.1", Entity.RESERVATION: "§4.2"}
COUNT_MEMBERS: dict[Entity, tuple[str, ...]] = {
    Entity.ACCOMMODATION: ("savedProperties", "skippedProperties"),
    Entity.RESERVATION: ("newReservations", "updatedReservations", "skippedReservations"),
}
_DOCUMENTED_TYPES = {
    "summary": "a string",
    "reservationIds": "an array of strings",
    **{member: "an integer" for members in COUNT_MEMBERS.values() for member in members},
}
_NOT_THE_OBJECT = {
    entity: f"not the JSON object of spec {s}" for entity, s in SPEC_SECTIONS.items()
}
# Members whose presence makes an object with a "message" an answer rather than an error.
_DOCUMENTED_MEMBERS = {
    entity: (*counts, "summary", "reservationIds") for entity, counts in COUNT_MEMBERS.items()
}
_ERROR_MEMBERS = ("error", "errors")
_QUOTED = 200  # characters of a service's error text quoted in a message


class _StrictAccommodationAnswer(AccommodationSyncResponse):
    # Strict: a count of True, 1.0 or "1" is no integer; unknown members stay allowed.
    model_config = ConfigDict(strict=True)


class _StrictReservationAnswer(ReservationSyncResponse):
    model_config = ConfigDict(strict=True)


_STRICT_MODELS: dict[Entity, type[_StrictAccommodationAnswer] | type[_StrictReservationAnswer]] = {
    Entity.ACCOMMODATION: _StrictAccommodationAnswer,
    Entity.RESERVATION: _StrictReservationAnswer,
}


class AnswerReading(NamedTuple):
    """What a 2xx body says: the documented answer (when it is one) and why it does not
    acknowledge the record (None when it does). A tuple: one is made per request of a push."""

    answer: SyncAnswer | None
    problem: str | None

    @property
    def acknowledged(self) -> bool:
        return self.problem is None


def read_answer(
    entity: Entity,
    status: int,
    content_type: str | None,
    body: bytes,
    policy: AcknowledgementPolicy = AcknowledgementPolicy.COUNTS,
) -> AnswerReading:
    """Read a 2xx answer to one record sent to ``entity``'s sync webhook.

    The problem, when there is one, says what was expected and what came, without quoting
    more of the body than an error member's text (the caller masks secrets in it).
    """
    section = SPEC_SECTIONS[entity]
    expected = _NOT_THE_OBJECT[entity]
    if not body.strip():
        return AnswerReading(None, f"HTTP {status} with an empty body, {expected}")
    try:
        parsed = orjson.loads(body)
    except orjson.JSONDecodeError:
        media = _media_type(content_type)
        article = "an" if media[:1] in ("a", "e", "i", "o", "u") else "a"
        if "json" in media:
            found = f"{article} {media} body that does not parse as JSON"
        else:
            found = f"{article} {media} body" if media else "a body that is not JSON"
        return AnswerReading(None, f"HTTP {status} with {found}, {expected}")
    if not isinstance(parsed, dict):
        return AnswerReading(None, f"HTTP {status} with a JSON {_json_type(parsed)}, {expected}")
    error_shape = _error_shape(entity, parsed)
    if error_shape is not None:
        return AnswerReading(None, f"HTTP {status} with {error_shape}, {expected}")
    try:
        answer: SyncAnswer = validate_json_body(_STRICT_MODELS[entity], body, parsed)
    except ValidationError as error:
        return AnswerReading(None, f"HTTP {status} {_type_problems(error, parsed, section)}")
    counts = present_counts(entity, answer)
    negative = ", ".join(f"{m}={v}" for m, v in counts.items() if v < 0)
    if negative:
        return AnswerReading(None, f"HTTP {status} with a negative count ({negative}), {expected}")
    if not counts:
        problem = _without_counts(entity, parsed, policy)
        if problem is not None:
            return AnswerReading(None, f"HTTP {status} with {problem}")
    nothing = nothing_stored(counts)
    if nothing is not None:
        return AnswerReading(
            answer, f"HTTP {status} whose counts say nothing was stored ({nothing})"
        )
    return AnswerReading(answer, None)


def present_counts(entity: Entity, answer: SyncAnswer) -> dict[str, int]:
    """The count members the answer carries (a null count is read as absent)."""
    counts: dict[str, int] = {}
    for member in COUNT_MEMBERS[entity]:
        value = getattr(answer, member, None)
        if value is not None:
            counts[member] = value
    return counts


def nothing_stored(counts: dict[str, int]) -> str | None:
    """The counts (``savedProperties=0, skippedProperties=0``: an answer's
    :func:`present_counts`) when they say the record was neither stored nor skipped, else
    None. An answer without counts says nothing either way."""
    if not counts or sum(counts.values()) != 0:
        return None
    return ", ".join(f"{member}={value}" for member, value in counts.items())


def _without_counts(
    entity: Entity, parsed: dict[str, Any], policy: AcknowledgementPolicy
) -> str | None:
    """Why an object without counts is no acknowledgement under ``policy``, or None.

    ``documented`` accepts ``{}`` and objects with a documented member (a summary); an object
    of unknown members only (``{"status": "error"}``) is documented by nobody.
    """
    section = SPEC_SECTIONS[entity]
    names = ", ".join(COUNT_MEMBERS[entity])
    if policy == AcknowledgementPolicy.COUNTS:
        return (
            f"a JSON object without any count of spec {section} ({names}); "
            f"PMS_SYNC_ACKNOWLEDGEMENT=documented accepts such an answer"
        )
    documented = ("summary", "reservationIds") if entity == Entity.RESERVATION else ("summary",)
    if not parsed or any(parsed.get(member) is not None for member in documented):
        return None
    unknown = ", ".join(sorted(parsed)[:5])
    return (
        f"a JSON object of undocumented members only ({unknown}), not the object of spec {section}"
    )


def _media_type(content_type: str | None) -> str:
    return (content_type or "").split(";", 1)[0].strip().lower()


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _error_shape(entity: Entity, parsed: dict[str, Any]) -> str | None:
    """An error object answered with a 2xx: ``{"error": …}``, ``{"errors": […]}``, or a
    ``message`` without any documented member. An ``"error": null`` is no error."""
    for member in _ERROR_MEMBERS:
        value = parsed.get(member)
        if value not in (None, False, "", [], {}):
            return f"an error object ({member}: {_quote(value)})"
    message = parsed.get("message")
    if message is not None and not any(
        parsed.get(m) is not None for m in _DOCUMENTED_MEMBERS[entity]
    ):
        return f"an error object (message: {_quote(message)} and no documented member)"
    return None


def _quote(value: Any) -> str:
    text = value if isinstance(value, str) else orjson.dumps(value).decode()
    return repr(text[:_QUOTED] + ("…" if len(text) > _QUOTED else ""))


def _type_problems(error: ValidationError, parsed: dict[str, Any], section: str) -> str:
    """``whose member newReservations is a string, not an integer as spec §4.2 documents``.

    Names members and JSON types only: the values may be anything a broken service sends.
    """
    problems: list[str] = []
    for item in error.errors():
        location = [str(part) for part in item["loc"]]
        if not location:
            problems.append(item["msg"])
            continue
        member = location[0]
        if item["type"] == "duplicate_member":
            problems.append(f"member {member} appears more than once")
            continue
        value: Any = parsed.get(member)
        for part in item["loc"][1:]:
            value = value[part] if isinstance(value, list) and isinstance(part, int) else None
        where = member + "".join(f"[{part}]" for part in location[1:])
        wanted = _DOCUMENTED_TYPES.get(member, "its documented type")
        if len(location) > 1:
            wanted = "a string"
        problems.append(f"member {where} is a JSON {_json_type(value)}, not {wanted}")
    return f"whose {'; '.join(problems)} as spec {section} documents"
