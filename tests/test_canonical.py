"""The content hash: stable under key order and number spelling, sensitive to every real change."""

from __future__ import annotations

import copy
import json
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from connector.canonical import canonical_json, content_hash
from connector.contract import Reservation
from connector.contract.examples import EXAMPLE_RESERVATION


def _shuffled(value: Any, rng: random.Random) -> Any:
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return {key: _shuffled(item, rng) for key, item in items}
    if isinstance(value, list):
        return [_shuffled(item, rng) for item in value]
    return value


def _validated(payload: dict[str, Any]) -> dict[str, Any]:
    return Reservation.model_validate(payload).to_json_dict()


@given(st.integers(min_value=0, max_value=2**32))
def test_hash_ignores_key_order(seed: int) -> None:
    shuffled = _shuffled(EXAMPLE_RESERVATION, random.Random(seed))
    assert content_hash(_validated(shuffled)) == content_hash(_validated(EXAMPLE_RESERVATION))


@given(st.integers(min_value=0, max_value=100_000))
def test_hash_ignores_equivalent_number_spellings(whole: int) -> None:
    as_int = copy.deepcopy(EXAMPLE_RESERVATION)
    as_float = copy.deepcopy(EXAMPLE_RESERVATION)
    as_int["unitReservations"][0]["price"] = whole
    as_float["unitReservations"][0]["price"] = float(whole)
    from_json = json.loads(
        json.dumps(as_float).replace(f'"price": {float(whole)}', f'"price": {whole}e0')
    )
    hashes = {content_hash(_validated(p)) for p in (as_int, as_float, from_json)}
    assert len(hashes) == 1


_PATHS = [
    ("status",),
    ("primaryGuest", "firstName"),
    ("primaryGuest", "email"),
    ("unitReservations", 0, "unitName"),
    ("unitReservations", 0, "comments"),
    ("unitReservations", 0, "guests", 0, "lastName"),
]


@given(st.sampled_from(_PATHS), st.text(min_size=1).filter(lambda s: s.strip() != ""))
def test_hash_changes_with_any_meaningful_field(path: tuple[Any, ...], text: str) -> None:
    changed = copy.deepcopy(EXAMPLE_RESERVATION)
    target: Any = changed
    for step in path[:-1]:
        target = target[step]
    if target.get(path[-1]) == text:
        return
    target[path[-1]] = text
    assert content_hash(_validated(changed)) != content_hash(_validated(EXAMPLE_RESERVATION))


def test_volatile_members_do_not_change_the_hash() -> None:
    changed = copy.deepcopy(EXAMPLE_RESERVATION)
    changed["updatedAt"] = "2025-06-01T00:00:00Z"
    changed["unitReservations"][0]["paidAmount"] = 999.0
    volatile = ["updatedAt", "unitReservations.paidAmount"]
    assert content_hash(changed, volatile) == content_hash(EXAMPLE_RESERVATION, volatile)
    assert content_hash(changed) != content_hash(EXAMPLE_RESERVATION)


def test_canonical_json_is_compact_sorted_and_keeps_unicode() -> None:
    assert canonical_json({"b": 1, "a": {"d": "Straße", "c": [2, 1]}}) == (
        '{"a":{"c":[2,1],"d":"Straße"},"b":1}'
    )


_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=12,
)


@settings(deadline=None)  # max_examples: the profile (tests/conftest.py)
@given(_JSON_VALUES)
def test_canonical_json_is_exactly_what_json_dumps_writes(value):
    # The fast path (orjson) must never change the text: hashes and stored payloads depend on it.
    try:
        expected = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    except (TypeError, ValueError) as error:
        with pytest.raises(type(error)):
            canonical_json(value)
        return
    assert canonical_json(value) == expected


@pytest.mark.parametrize(
    "value", [1.5e-05, 1e-7, 1e16, 1e300, float("nan"), float("-inf"), -0.0, 2**70, {"a": None}]
)
def test_canonical_json_spells_numbers_as_json_does(value):
    expected = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert canonical_json(value) == expected
