"""The JSON Schema of mapping files and the loader and compiler agree on what a file may say.

The schema is generated from the pydantic model (connector.mapping.schema); the compiler may
still refuse what the model let through, and then an editor shows a file as valid that the
first run refuses. So every example is valid for both, and each variant below is schema-valid
exactly when ``load_mapping`` and the compiler (``prepare``) accept it.
"""

from __future__ import annotations

import copy
import json
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest
from pydantic import BaseModel

from connector.errors import MappingError
from connector.mapping import load_mapping
from connector.mapping.engine import prepare
from connector.mapping.loader import _read_yaml
from connector.mapping.model import Mapping
from connector.mapping.schema import mapping_schema
from tests.mapping.test_corpus import corpus_copy

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(
    [*ROOT.glob("mappings/*/mapping.yaml"), *ROOT.glob("tests/mapping/corpus/*/mapping.yaml")]
)
SCHEMA = jsonschema_rs.validator_for(mapping_schema())

Document = dict[str, Any]


def _refusal(path: Path) -> str | None:
    """Why the loader or the compiler refuses the file, or None when both accept it."""
    try:
        prepare(load_mapping(path))
    except MappingError as error:
        return str(error)
    return None


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda path: path.parent.name)
def test_every_example_is_valid_for_the_schema_and_the_compiler(
    example: Path, tmp_path: Path
) -> None:
    document, _lines = _read_yaml(example)
    assert SCHEMA.is_valid(document), list(SCHEMA.iter_errors(document))[:3]
    if example.parent.parent.name == "corpus":  # its data is written by the corpus's tests
        example = corpus_copy(tmp_path, example.parent.name) / "mapping.yaml"
    assert _refusal(example) is None


def _reservation(document: Document) -> Document:
    return document["entities"]["reservation"]["fields"]


def _units(document: Document) -> Document:
    return _reservation(document)["unitReservations"]


def _unit_fields(document: Document) -> Document:
    return _units(document)["fields"]


def _set(target: Callable[[Document], Document], **members: Any) -> Callable[[Document], None]:
    return lambda document: target(document).update(members)


def _guests(rows: Any) -> Callable[[Document], None]:
    return _set(_unit_fields, guests=rows)


GUEST_FIELDS = {"firstName": "guest_first_name", "lastName": "guest_last_name"}

# (name, change to the hotel example, whether the file is meant to be accepted)
VARIANTS: list[tuple[str, Callable[[Document], None], bool]] = [
    (
        "unit reservations from another input",
        _set(_units, input="rooms", on={"room_no": "room_no"}),
        False,
    ),
    ("unit reservations with on alone", _set(_units, on={"booking_no": "booking_no"}), False),
    (
        "unit reservations as a fixed list",
        lambda document: _reservation(document).update(
            unitReservations=[_units(document)["fields"]]
        ),
        False,
    ),
    (
        "unit reservations filtered",
        _set(_units, filter=[{"column": "room_no", "is_null": False}]),
        True,
    ),
    (
        "guests from another input",
        _guests({"input": "bookings", "on": {"booking_no": "booking_no"}, "fields": GUEST_FIELDS}),
        True,
    ),
    ("guests as a fixed list", _guests([GUEST_FIELDS]), True),
    ("guests from rows without input or on", _guests({"fields": GUEST_FIELDS}), False),
    ("guests with input but no on", _guests({"input": "bookings", "fields": GUEST_FIELDS}), False),
    (
        "guests with an empty on",
        _guests({"input": "bookings", "on": {}, "fields": GUEST_FIELDS}),
        False,
    ),
    (
        "a join without on",
        lambda document: document["entities"]["accommodation"]["joins"][0].pop("on"),
        False,
    ),
    (
        "a join with an empty on",
        lambda document: document["entities"]["accommodation"]["joins"][0].update(on={}),
        False,
    ),
    ("an unknown entity member", _set(lambda d: d["entities"]["reservation"], order=1), False),
    ("an unknown field", _set(_reservation, bookedVia="channel"), False),
    (
        "an unknown on_missing",
        _set(lambda d: d["entities"]["reservation"], on_missing="drop"),
        False,
    ),
    (
        "a price with thousands and a currency",
        _set(_unit_fields, price={"column": "price", "thousands": ",", "currency": "strip"}),
        True,
    ),
    (
        "an unknown thousands separator",
        _set(_unit_fields, price={"column": "price", "thousands": "_"}),
        False,
    ),
    (
        "an unknown currency option",
        _set(_unit_fields, price={"column": "price", "currency": "keep"}),
        False,
    ),
]


def _hotel(folder: Path, change: Callable[[Document], None]) -> tuple[Document, Path]:
    shutil.copytree(ROOT / "mappings" / "hotel", folder)
    document, _lines = _read_yaml(folder / "mapping.yaml")
    changed = copy.deepcopy(document)
    change(changed)
    path = folder / "variant.yaml"
    path.write_text(json.dumps(changed), encoding="utf-8")  # JSON is YAML
    return changed, path


@pytest.mark.parametrize(
    ("change", "accepted"),
    [pytest.param(change, accepted, id=name) for name, change, accepted in VARIANTS],
)
def test_a_variant_is_schema_valid_exactly_when_the_compiler_accepts_it(
    tmp_path: Path, change: Callable[[Document], None], accepted: bool
) -> None:
    document, path = _hotel(tmp_path / "hotel", change)
    refusal = _refusal(path)
    assert SCHEMA.is_valid(document) is accepted
    assert (refusal is None) is accepted, refusal
    if refusal is not None:
        assert "variant.yaml:" in refusal  # the error names the file and the line


def test_unit_reservations_from_another_input_are_refused_saying_what_to_do(
    tmp_path: Path,
) -> None:
    _document, path = _hotel(tmp_path / "hotel", VARIANTS[0][1])
    refusal = _refusal(path)
    assert refusal is not None
    assert "unitReservations is one item per row of the reservation input" in refusal
    assert "make that table the reservation input" in refusal


def _models(model: type[BaseModel]) -> Iterator[type[BaseModel]]:
    """``model`` and every model its fields reach (generated field models included)."""
    seen: set[type[BaseModel]] = set()
    pending = [model]
    while pending:
        current = pending.pop()
        if current in seen:
            continue
        seen.add(current)
        yield current
        for info in current.model_fields.values():
            pending.extend(_nested_models(info.annotation))


def _nested_models(annotation: Any) -> Iterator[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield annotation
    for argument in getattr(annotation, "__args__", ()) or ():
        yield from _nested_models(argument)
    for argument in getattr(annotation, "__metadata__", ()) or ():
        yield from _nested_models(argument)


def test_every_member_the_schema_allows_is_a_member_the_model_knows() -> None:
    definitions = mapping_schema()["$defs"]
    models = {model.__name__: model for model in _models(Mapping)}
    objects = {name: node for name, node in definitions.items() if "properties" in node}
    assert set(objects) <= set(models), set(objects) - set(models)
    for name, node in objects.items():
        known = {info.alias or field for field, info in models[name].model_fields.items()}
        assert set(node["properties"]) == known, name
        # Every part of a mapping file refuses unknown members, as the model does.
        assert node.get("additionalProperties") is False, name
