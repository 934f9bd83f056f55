"""The account member of a mapping file may name external ids; the run turns them into
account ids, and sets apart the rows of an external id no account has."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from connector.accounts import resolve_batch
from connector.contract import Entity
from connector.errors import MappingError
from connector.mapping import load_mapping
from connector.records import QUARANTINE_COLUMNS, MappedRecords, empty_records
from tests.accounts.chain import MAPPING, ChainExport, unit

ROOT = Path(__file__).resolve().parents[2]


def test_the_account_member_takes_external_id_and_the_schema_documents_it(
    tmp_path: Path,
) -> None:
    mapping = load_mapping(ChainExport(tmp_path).write([unit("HOTEL-001", 1)]))

    assert mapping.account_is_external_id(Entity.ACCOMMODATION)
    schema = json.loads((ROOT / "mappings" / "schema.json").read_text())
    assert "external_id" in schema["$defs"]["AccountExpression"]["properties"]


def test_external_id_is_refused_in_a_field(tmp_path: Path) -> None:
    path = tmp_path / "mapping.yaml"
    path.write_text(
        MAPPING.replace("      name: name\n", "      name: {column: name, external_id: true}\n")
    )

    with pytest.raises(MappingError) as refused:
        load_mapping(path)

    assert "external_id" in str(refused.value)


def test_invalid_rows_of_an_unknown_external_id_are_set_apart_once_for_the_account() -> None:
    records = empty_records()
    quarantine = pd.DataFrame(
        [
            ("accommodation", "H-9", "U1", "units", "4", "name", "missing required value", "", ""),
            ("accommodation", "H-9", "U1", "units", "4", "city", "missing required value", "", ""),
            ("accommodation", "H-1", "U2", "units", "5", "city", "missing required value", "", ""),
        ],
        columns=list(QUARANTINE_COLUMNS),
    )
    batch = MappedRecords(Entity.ACCOMMODATION, records, quarantine, account_is_external_id=True)

    resolved = resolve_batch(batch, {"H-1": "acc-1"}, lambda value: f"no account for {value}")

    assert resolved.quarantine[["account_id", "record_id"]].values.tolist() == [["acc-1", "U2"]]
    assert resolved.unresolved[["account_id", "record_id", "field", "reason"]].values.tolist() == [
        ["H-9", "U1", "account", "no account for H-9"]
    ]
    assert not resolved.account_is_external_id
