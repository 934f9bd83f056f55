"""The contract's checks compiled to SQL never vouch for a value the contract model refuses.

The predicates (``connector.mapping.contract_sql``) let most records skip every validator in
Python, so a predicate that accepted one value too many would send the service a record the
contract refuses. Each member rule of every contract model is compiled and evaluated by DuckDB
on edge and random values; whenever it says "surely valid", the model's own rule for that
member must agree. Then whole runs with and without the predicates give the same records and
the same quarantine.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel
from pydantic_core import SchemaValidator

from connector.contract import Accommodation, Entity, Reservation
from connector.contract import formats as contract_formats
from connector.mapping import contract_sql, load_mapping, map_records
from connector.mapping.engine import prepare
from connector.mapping.validation import SQL_CHECKS_ENV
from tests.mapping.test_fast_path import _export, _same

MAPPINGS = Path(__file__).resolve().parents[2] / "mappings"


def _models(model: type[BaseModel], found: dict[str, type[BaseModel]]) -> dict[str, type]:
    """Every contract model reachable from ``model`` (nested objects and list items)."""
    found[model.__name__] = model

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            cls = node.get("cls")
            if node.get("type") == "model" and isinstance(cls, type) and cls.__name__ not in found:
                _models(cls, found)
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(model.__pydantic_core_schema__)
    return found


MODELS = _models(Reservation, _models(Accommodation, {}))

_SQL_TYPES = {
    "string": "VARCHAR",
    "integer": "BIGINT",
    "number": "DOUBLE",
    "boolean": "BOOLEAN",
    "string_list": "VARCHAR[]",
}


def _compiled_members() -> list[tuple[str, str, str, str, SchemaValidator]]:
    """(model, member, kind, SQL of the predicate on ``$v``, the model's own validator of the member)
    for every member and JSON kind the predicates cover."""
    compiled = []
    for model_name, model in sorted(MODELS.items()):
        config = model.__pydantic_core_schema__.get("config") or model.__pydantic_core_schema__[
            "schema"
        ].get("config")
        try:
            members = contract_sql.model_fields(model)
        except contract_sql.Uncovered:
            continue
        for name, node in members.items():
            inner = node["schema"] if node.get("type") == "default" else node
            for kind, sql_type in _SQL_TYPES.items():
                try:
                    predicate = contract_sql.value_check(inner, "t.v", kind)
                except contract_sql.Uncovered:
                    continue
                sql = (
                    f"SELECT coalesce({predicate}, false) "
                    f"FROM (SELECT CAST($v AS {sql_type}) AS v) AS t"
                )
                compiled.append((model_name, name, kind, sql, SchemaValidator(inner, config)))
    return compiled


COMPILED = _compiled_members()

_EDGE_TEXT = [
    "",
    " ",
    "\t",
    "\u00a0",
    "\u2003",
    "\ufeff",
    "\u3000 \u00a0",
    "\u0085",
    "x",
    " x ",
    # dates
    "2024-02-29",
    "2025-02-29",
    "1900-02-29",
    "2000-02-29",
    "0000-01-01",
    "0001-01-01",
    "9999-12-31",
    "2025-1-01",
    "2025-01-32",
    "2025-04-31",
    "2025-13-01",
    " 2025-01-01",
    "2025-01-01\n",
    "20250101",
    "+2025-01-01",
    "\uff12\uff10\uff12\uff15-01-01",  # full-width digits
    # timestamps
    "2025-01-31T12:00:00Z",
    "2025-01-31T12:00:00.5Z",
    "2025-01-31T24:00:00Z",
    "2025-01-31t12:00:00z",
    "2025-01-31 12:00:00",
    "2025-01-31T12:00:00+01:00",
    "2024-02-29T23:59:59.999999Z",
    "0000-01-01T00:00:00Z",
    # times
    "09:30",
    "9:30",
    "09:30 ",
    "24:00",
    "23:59",
    "23:30",
    "16:45",
    "16:00:00",
    "4pm",
    "\uff11\uff16:00",  # full-width digits
    # codes
    "DE",
    "de",
    "De",
    "XX",
    "ZZ",
    "DEU",
    "EUR",
    "eur",
    "XXX",
    "€",
    "ACTIVE",
    "active",
    "INACTIVE ",
]
_TEXT = st.one_of(
    st.sampled_from(_EDGE_TEXT),
    st.text(alphabet=st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12),
    st.from_regex(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", fullmatch=True),
    st.from_regex(r"[0-9]{2}:[0-9]{2}", fullmatch=True),
    st.from_regex(r"[A-Za-z]{2,3}", fullmatch=True),
)
_VALUES: dict[str, st.SearchStrategy[Any]] = {
    "string": _TEXT,
    "integer": st.one_of(st.integers(-3, 3), st.integers(-(2**63), 2**63 - 1)),
    "number": st.one_of(
        st.floats(allow_nan=True, allow_infinity=True),
        st.sampled_from([-0.0, -90.0, 90.0, 90.0000001, -180.5, 180.0, 1e300]),
    ),
    "boolean": st.booleans(),
    "string_list": st.lists(_TEXT, max_size=4),
}


def _model_accepts(validator: SchemaValidator, value: Any) -> bool:
    if isinstance(value, float) and not math.isfinite(value):
        return False  # no JSON number: the document could not even carry it
    try:
        validator.validate_json(json.dumps(value, ensure_ascii=False))
    except ValueError:  # pydantic's ValidationError is a ValueError
        return False
    return True


def test_the_predicates_cover_every_rule_of_the_contract_a_mapping_reaches() -> None:
    covered = {(model, member) for model, member, *_ in COMPILED}
    for model_name, model in MODELS.items():
        for member, node in contract_sql.model_fields(model).items():
            if "'type': 'model'" in repr(node):
                continue  # an object or a list of objects: its own model's members are checked
            assert (model_name, member) in covered, f"{model_name}.{member} has no SQL check"
    for mapping in ("hotel", "vacation_rental", "sql_pms"):
        prepared = prepare(load_mapping(MAPPINGS / mapping / "mapping.yaml"))
        for query in prepared.queries.values():
            assert query.unchecked == [], (mapping, query.entity, query.unchecked)


@settings(deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_a_predicate_never_passes_a_value_the_contract_model_refuses(data: st.DataObject) -> None:
    model, member, kind, predicate, validator = data.draw(st.sampled_from(COMPILED))
    value = data.draw(_VALUES[kind])
    with duckdb.connect() as connection:
        (passed,) = connection.execute(predicate, {"v": value}).fetchone()  # type: ignore[misc]
    if passed:
        assert _model_accepts(validator, value), f"{model}.{member} ({kind}): {value!r}"


@pytest.mark.parametrize(
    ("model", "member", "kind", "value", "expected"),
    [
        # The rules the contract states, checked on both sides of each edge.
        ("UnitReservation", "checkin", "string", "2024-02-29", True),
        ("UnitReservation", "checkin", "string", "2025-02-29", False),
        ("UnitReservation", "checkin", "string", "0000-01-01", False),
        ("UnitReservation", "estimatedCheckInTime", "string", "16:30", True),
        ("UnitReservation", "estimatedCheckInTime", "string", "16:45", False),
        ("UnitReservation", "currency", "string", "EUR", True),
        ("UnitReservation", "currency", "string", "eur", False),
        ("UnitReservation", "adults", "integer", 0, True),
        ("UnitReservation", "adults", "integer", -1, False),
        ("UnitReservation", "unitName", "string", "\u00a0\t", False),
        ("UnitReservation", "unitName", "string", "Room 1", True),
        ("Accommodation", "minimumCheckInTime", "string", "9:30", False),
        ("Accommodation", "country", "string", "DE", True),
        ("Accommodation", "country", "string", "DEU", False),
        ("Accommodation", "status", "string", "ACTIVE", True),
        ("Coordinates", "lat", "number", 90.5, False),
        ("Reservation", "createdAt", "string", "2025-01-31T12:00:00Z", True),
    ],
)
def test_a_predicate_states_the_contracts_rule(
    model: str, member: str, kind: str, value: Any, expected: bool
) -> None:
    (predicate, validator) = next(
        (predicate, validator)
        for name, field, compiled_kind, predicate, validator in COMPILED
        if (name, field, compiled_kind) == (model, member, kind)
    )
    with duckdb.connect() as connection:
        (passed,) = connection.execute(predicate, {"v": value}).fetchone()  # type: ignore[misc]
    assert passed is expected
    assert _model_accepts(validator, value) is expected


def test_a_rule_without_sql_is_left_to_python() -> None:
    node = {
        "type": "function-after",
        "function": {"type": "no-info", "function": str.strip},
        "schema": {"type": "str"},
    }
    with pytest.raises(contract_sql.Uncovered):
        contract_sql.value_check(node, "v", "string")
    # A value of another JSON kind than the member's never passes either.
    with pytest.raises(contract_sql.Uncovered):
        contract_sql.value_check({"type": "int"}, "v", "number")
    translated = contract_sql.re2_pattern(contract_formats.NON_BLANK_PATTERN)
    assert "\\u" not in translated and "\\x{00a0}" in translated


def _map(mapping: Path, monkeypatch: pytest.MonkeyPatch, *, sql_checks: bool):
    with monkeypatch.context() as patch:
        patch.setenv(SQL_CHECKS_ENV, "1" if sql_checks else "0")
        return map_records(load_mapping(mapping))


@pytest.mark.parametrize("mapping", ["hotel", "vacation_rental", "sql_pms"])
def test_the_bundled_examples_map_the_same_with_and_without_the_sql_checks(
    mapping: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = MAPPINGS / mapping / "mapping.yaml"
    with_sql = _map(path, monkeypatch, sql_checks=True)
    without = _map(path, monkeypatch, sql_checks=False)
    for entity, batch in with_sql.items():
        # Every record of the examples is valid and vouched for in SQL.
        assert batch.checked_in_sql == len(batch.records) > 0
        assert without[entity].checked_in_sql == 0
        _same(batch, without[entity])


# A corrupted export: each value breaks one rule of the contract that the SQL checks cover
# (or sits right at its edge) without failing a conversion of the mapping.
_CORRUPTIONS = [
    (0, "guest_first_name", "\u00a0"),  # whitespace only (a non-breaking space)
    (1, "guest_first_name", "\u3000"),
    (2, "arrival", "2024-02-29"),  # a leap day: valid
    (3, "arrival", "2025-02-28"),
    (3, "departure", "2025-02-28"),  # check-out on the check-in day
    (4, "departure", "2020-01-01"),  # check-out before check-in
    (5, "adults", "-1"),  # a negative count
    (6, "children", "-2"),
    (7, "created_at", "2025-01-31T12:00:00.123456Z"),
    (8, "guest_country", "de"),  # lower case: the mapping converts it
    (9, "currency", "eur"),
    (10, "eta", "16:44"),  # rounded to a half hour by the mapping
    (11, "booking_no", " "),  # a blank id
]


def test_a_corrupted_export_gives_the_same_records_and_quarantine_with_and_without_sql_checks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mapping = _export(tmp_path / "hotel", _CORRUPTIONS)
    with_sql = _map(mapping, monkeypatch, sql_checks=True)
    without = _map(mapping, monkeypatch, sql_checks=False)
    reservations = with_sql[Entity.RESERVATION]
    assert len(reservations.quarantine) >= 5  # blank names, stays backwards, negative counts
    # The quarantine comes from the contract model; every valid record (the leap day
    # included) is vouched for in SQL.
    assert reservations.checked_in_sql == len(reservations.records) > 0
    for entity in (Entity.ACCOMMODATION, Entity.RESERVATION):
        _same(with_sql[entity], without[entity])


def test_grouped_numbers_give_the_same_records_and_quarantine_with_and_without_sql_checks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.mapping.test_fast_path import _GROUPED_MEMBERS

    edits = [
        (0, "price", "Rp1,445,000.00"),
        (1, "price", "-$1,234.50"),  # read, then refused by the contract: a negative price
        (2, "price", "1,44,500.00"),  # refused: not grouped by threes
        (3, "paid", "1234.50 kr"),
    ]
    mapping = _export(tmp_path / "hotel", edits, _GROUPED_MEMBERS)
    with_sql = _map(mapping, monkeypatch, sql_checks=True)
    without = _map(mapping, monkeypatch, sql_checks=False)
    _same(with_sql[Entity.RESERVATION], without[Entity.RESERVATION])
    assert len(with_sql[Entity.RESERVATION].quarantine) >= 1
