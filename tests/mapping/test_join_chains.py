"""Joins in a chain, without SQL: a join matching on a column of a join before it (room →
room type → property → country), as relational PMS schemas need; and the errors naming the
member when a chain names a join that does not come before it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mapping_helpers import accommodation_mapping, payloads, write_csv, write_mapping

from connector.contract import Entity
from connector.errors import MappingError
from connector.mapping import load_mapping, map_records

CHAIN = [
    {"input": "room_types", "as": "rt", "on": {"id": "room_type_id"}},
    {"input": "properties", "as": "p", "on": {"id": "rt.property_id"}},
    {"input": "countries", "as": "c", "on": {"id": "p.country_id"}},
]


def _write_tables(folder: Path) -> None:
    write_csv(
        folder / "units.csv",
        [
            {"unit_id": "R1", "room_type_id": "1"},
            {"unit_id": "R2", "room_type_id": "2"},
            {"unit_id": "R3", "room_type_id": "9"},  # a room type the table lacks
        ],
    )
    write_csv(
        folder / "room_types.csv",
        [{"id": "1", "property_id": "10"}, {"id": "2", "property_id": "20"}],
    )
    write_csv(
        folder / "properties.csv",
        [
            {"id": "10", "city": "Ubud", "country_id": "ID"},
            {"id": "20", "city": "Wien", "country_id": "AT"},
        ],
    )
    write_csv(
        folder / "countries.csv",
        [{"id": "ID", "name": "Indonesia"}, {"id": "AT", "name": "Austria"}],
    )


def _mapping(folder: Path, joins: list[dict[str, Any]], fields: dict[str, Any]) -> Path:
    document = accommodation_mapping(fields, joins=joins)
    document["inputs"] |= {
        name: {"type": "csv", "path": f"{name}.csv"}
        for name in ("room_types", "properties", "countries")
    }
    return write_mapping(folder, document)


def test_a_join_matches_on_the_columns_of_the_join_before_it(tmp_path: Path) -> None:
    _write_tables(tmp_path)
    mapping = _mapping(
        tmp_path, CHAIN, {"city": {"column": "p.city"}, "country": {"column": "c.name"}}
    )

    batch = map_records(load_mapping(mapping))[Entity.ACCOMMODATION]

    by_id = {payload["id"]: payload for payload in payloads(batch)}
    assert (by_id["R1"]["city"], by_id["R1"]["country"]) == ("Ubud", "ID")
    assert (by_id["R2"]["city"], by_id["R2"]["country"]) == ("Wien", "AT")
    # No room type, so no property or country: the required members are missing, quarantined.
    assert "R3" not in by_id
    assert set(batch.quarantine["record_id"]) == {"R3"}


@pytest.mark.parametrize(
    ("joins", "problem"),
    [
        # The country joined before the property it hangs on: not yet a join of the scope.
        (
            [CHAIN[0], CHAIN[2], CHAIN[1]],
            "unknown column 'p.country_id' in input 'units' (columns of earlier joins: rt.<column>)",
        ),
        (
            [CHAIN[0], {"input": "properties", "as": "p", "on": {"id": "rt.owner"}}],
            "unknown column 'owner' in the join 'rt'",
        ),
        (
            [{"input": "room_types", "as": "rt", "on": {"id": "rt.id"}}],
            "unknown column 'rt.id' in input 'units' (columns of earlier joins: none before this one)",
        ),
    ],
)
def test_a_chain_naming_no_earlier_join_is_refused_naming_the_member(
    tmp_path: Path, joins: list[dict[str, Any]], problem: str
) -> None:
    _write_tables(tmp_path)
    mapping = _mapping(tmp_path, joins, {"city": {"column": "p.city"}})

    with pytest.raises(MappingError) as raised:
        map_records(load_mapping(mapping))

    assert problem in str(raised.value)
    assert "mapping.yaml:" in str(raised.value) and ".joins." in str(raised.value)
