"""The reference tables (countries, currencies, languages) are built once per pycountry release
and read back from a cache file by later runs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from connector.mapping import reference_data


@pytest.fixture
def fresh_tables(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "cache"
    monkeypatch.setenv(reference_data.CACHE_DIR_VARIABLE, str(folder))
    reference_data.reference_tables.cache_clear()
    yield folder
    # Later tests must not see a table this test tampered with.
    reference_data.reference_tables.cache_clear()


def _built() -> dict[str, dict[str, str]]:
    return {name: build() for name, build in reference_data._BUILDERS.items()}


def test_first_run_writes_the_tables_it_built(fresh_tables: Path) -> None:
    tables = reference_data.reference_tables()

    (file,) = fresh_tables.glob("reference-tables-*.json")
    assert json.loads(file.read_text(encoding="utf-8")) == tables == _built()
    assert reference_data.country_table()["deutschland"] == "DE"
    assert reference_data.currency_table()["€"] == "EUR"
    assert reference_data.language_table()["deutsch"] == "de"


def test_later_runs_read_the_cache_file_instead_of_building(fresh_tables: Path) -> None:
    reference_data.reference_tables()
    (file,) = fresh_tables.glob("reference-tables-*.json")
    kept = json.loads(file.read_text(encoding="utf-8"))
    kept["country"]["only-in-the-cache-file"] = "ZZ"
    file.write_text(json.dumps(kept), encoding="utf-8")
    reference_data.reference_tables.cache_clear()

    assert reference_data.country_table()["only-in-the-cache-file"] == "ZZ"


def test_another_pycountry_release_builds_its_own_file(
    fresh_tables: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reference_data.reference_tables()
    monkeypatch.setattr(reference_data, "version", lambda name: "0.0-another-release")
    reference_data.reference_tables.cache_clear()
    reference_data.reference_tables()

    assert len(list(fresh_tables.glob("reference-tables-*.json"))) == 2


def test_an_unusable_cache_builds_the_tables_in_memory(
    fresh_tables: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    blocker = tmp_path / "a-file-not-a-folder"
    blocker.write_text("", encoding="utf-8")
    monkeypatch.setenv(reference_data.CACHE_DIR_VARIABLE, str(blocker))

    assert reference_data.reference_tables() == _built()

    corrupt = fresh_tables
    corrupt.mkdir()
    monkeypatch.setenv(reference_data.CACHE_DIR_VARIABLE, str(corrupt))
    reference_data.reference_tables.cache_clear()
    reference_data.reference_tables()
    (file,) = corrupt.glob("reference-tables-*.json")
    file.write_text("{not json", encoding="utf-8")
    reference_data.reference_tables.cache_clear()

    assert reference_data.reference_tables() == _built()
