"""Where the mapping engine keeps the loaded inputs: in memory when they are small, in a file of
the run's private temporary folder when they are large or of unknown size; the records are the
same either way, and nothing is left behind."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from connector.mapping import engine, load_mapping, map_records
from connector.mapping.engine import engine_database, prepare
from connector.records import in_export_order

MAPPINGS = Path(__file__).resolve().parents[2] / "mappings"


def test_small_exports_stay_in_memory_and_large_or_unsized_inputs_go_to_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    hotel = prepare(load_mapping(MAPPINGS / "hotel" / "mapping.yaml"))
    database = prepare(load_mapping(MAPPINGS / "sql_pms" / "mapping.yaml"))
    size = sum(source.size_bytes() or 0 for source in hotel.sources.values())
    assert size > 0

    assert engine_database(hotel.sources, tmp_path) == ":memory:"
    # A query's size is not known before it is read.
    assert engine_database(database.sources, tmp_path) == str(tmp_path / "engine.duckdb")
    monkeypatch.setattr(engine, "IN_MEMORY_INPUT_BYTES", size - 1)
    assert engine_database(hotel.sources, tmp_path) == str(tmp_path / "engine.duckdb")


def test_the_records_are_the_same_from_a_file_and_from_memory_and_no_file_is_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mapping = MAPPINGS / "hotel" / "mapping.yaml"
    in_memory = map_records(load_mapping(mapping))

    monkeypatch.setattr(engine, "IN_MEMORY_INPUT_BYTES", 0)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    chosen: list[str] = []
    choose = engine.engine_database
    monkeypatch.setattr(
        engine, "engine_database", lambda *args: chosen.append(choose(*args)) or chosen[-1]
    )
    from_file = map_records(load_mapping(mapping))

    assert len(chosen) == 1 and chosen[0].endswith("engine.duckdb")
    assert Path(chosen[0]).parent.parent == tmp_path
    assert list(tmp_path.iterdir()) == []  # the folder and the database went with the run
    assert in_memory.keys() == from_file.keys()
    for entity, batch in in_memory.items():
        assert in_export_order(batch.records).equals(in_export_order(from_file[entity].records))
        assert batch.quarantine.equals(from_file[entity].quarantine)
