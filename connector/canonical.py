"""The canonical form of a record and its content hash, shared by the mapping engine and the diff.

The canonical form is compact JSON with sorted keys of the validated resource (optional members
that are unset are absent, never null). The hash leaves out members a mapping marks as volatile,
so a value that changes on every export (a "last exported at" column) does not cause an update.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from typing import Any

import orjson

# orjson writes what json.dumps writes below (same escapes, UTF-8, keys sorted by code point,
# shortest round-trip floats) much faster, except: floats below 1e-4 (json: 1e-05,
# orjson: 0.00001 or 1e-7), non-finite floats (orjson: null), and what json refuses or spells
# differently (lone surrogates, integers beyond 64 bits, non-string keys: orjson raises). An
# output that could hold one of the first two goes the json way, so the text is always json's.
_ORJSON_OPTIONS = (
    orjson.OPT_SORT_KEYS | orjson.OPT_PASSTHROUGH_DATETIME | orjson.OPT_PASSTHROUGH_DATACLASS
)
_DIGITS = frozenset(b"0123456789")


def _may_differ(text: bytes) -> bool:
    if b"null" in text or b"0.0000" in text:
        return True
    position = text.find(b"e-")
    while position > 0:  # an exponent such as 1e-7 (or text that looks like one)
        if text[position - 1] in _DIGITS:
            return True
        position = text.find(b"e-", position + 2)
    return False


def canonical_json(resource: Any) -> str:
    """Compact, key-sorted JSON: equal resources give equal strings whatever their key order."""
    try:
        text = orjson.dumps(resource, option=_ORJSON_OPTIONS)
    except TypeError:  # orjson.JSONEncodeError is a TypeError
        text = None
    if text is None or _may_differ(text):
        return json.dumps(resource, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return text.decode()


def _without(resource: Any, path: tuple[str, ...]) -> Any:
    # A volatile path such as ("unitReservations", "price") applies to every item of a list.
    if not path:
        return resource
    if isinstance(resource, list):
        return [_without(item, path) for item in resource]
    if isinstance(resource, dict):
        head, rest = path[0], path[1:]
        if head not in resource:
            return resource
        copy = dict(resource)
        if rest:
            copy[head] = _without(copy[head], rest)
        else:
            del copy[head]
        return copy
    return resource


def hashable_form(resource: dict[str, Any], volatile: Iterable[str] = ()) -> str:
    """The canonical JSON with volatile members (dotted paths) removed."""
    stripped: Any = resource
    for dotted in volatile:
        stripped = _without(stripped, tuple(dotted.split(".")))
    return canonical_json(stripped)


def content_hash(resource: dict[str, Any], volatile: Iterable[str] = ()) -> str:
    """A 128-bit hex digest of the record's meaningful content."""
    return hashlib.blake2b(hashable_form(resource, volatile).encode(), digest_size=16).hexdigest()
