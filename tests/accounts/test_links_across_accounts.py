"""Guest links of two hotels of one connection that both use the reservation id R1: ids are
unique per account only. Each hotel's links are fetched with its own account token (the
client's token meets a 409 for an id two of its accounts hold), renewed when due, and the PMS
table holds one row per hotel."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from connector.accounts import OpenApiSettings
from connector.client import ClientCredentials
from connector.sandbox.testing import SandboxHandle
from connector.snapshot import Snapshot
from tests.accounts.chain import (
    SHORT_CLIENT_ID,
    SHORT_CLIENT_SECRET,
    SHORT_LIFETIME_S,
    ChainExport,
    booking,
    document,
    hotel,
    pms_sync,
    units_of,
)
from tests.loop.loop_samples import table_rows
from tests.servers import mariadb_database, postgres_schema

SHORT = (SHORT_CLIENT_ID, SHORT_CLIENT_SECRET)


def shared_r1(export: ChainExport) -> Path:
    """HOTEL-001 and HOTEL-002, each with reservation R1 arriving tomorrow."""
    bookings = []
    for number in (1, 2):
        row = booking(hotel(number), 1, 1)
        row["booking_id"] = "R1"
        bookings.append(row)
    return export.write(units_of(1, 2, count=1), bookings)


@contextmanager
def links_table(kind: str, folder: Path) -> Iterator[tuple[str, str | None, str]]:
    """(url, schema, the mapping's destination) of an empty database of ``kind``."""
    if kind == "postgresql":
        with postgres_schema() as (url, schema):
            yield url, schema, f'sql: {{url: "{url}", schema: {schema}, table: guest_links}}'
    elif kind == "mariadb":
        with mariadb_database() as url:
            yield url, None, f'sql: {{url: "{url}", table: guest_links}}'
    else:
        yield f"sqlite:///{folder}/pms.db", None, "sql: {url: sqlite:///pms.db, table: guest_links}"


def links_answers(service: SandboxHandle) -> dict[str, int]:
    return service.stats()["requests"].get("GET /openapi/v1/reservations/links", {})


@pytest.mark.parametrize("kind", ["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def test_one_reservation_id_of_two_hotels_is_fetched_for_each_and_written_as_two_rows(
    chain: SandboxHandle, export: ChainExport, tmp_path: Path, kind: str
) -> None:
    mapping = shared_r1(export)
    with links_table(kind, export.folder) as (url, schema, destination):
        mapping.write_text(mapping.read_text() + f"links:\n  destination: {{{destination}}}\n")
        assert pms_sync(chain, tmp_path, "sync", str(mapping)).exit_code == 0

        result = pms_sync(chain, tmp_path, "links", "--json", str(mapping))

        report = document(result)
        assert result.exit_code == 0, report
        assert (report["fetched"], report["failed"], report["written"]) == (2, 0, 2)
        assert links_answers(chain) == {"200": 2}  # no 409: each hotel's own token
        rows = table_rows(url, "guest_links", schema)
        assert len(rows) == report["written"]
        assert sorted((r["account_id"], r["reservation_id"]) for r in rows) == [
            ("acc-001", "R1"),
            ("acc-002", "R1"),
        ]
        for row in rows:  # each row holds its own hotel's links
            assert f"/{row['account_id']}/app/" in row["guest_app"]


def test_account_tokens_due_when_the_links_run_starts_are_renewed_not_replaced(
    chain: SandboxHandle, export: ChainExport, tmp_path: Path
) -> None:
    mapping = shared_r1(export)
    mapping.write_text(mapping.read_text() + "links: {}\n")
    assert pms_sync(chain, tmp_path, "sync", str(mapping), client=SHORT).exit_code == 0
    time.sleep(SHORT_LIFETIME_S)  # the tokens the sync obtained are due, or expired
    started = time.time()

    result = pms_sync(chain, tmp_path, "links", "--json", str(mapping), client=SHORT)

    report = document(result)
    assert result.exit_code == 0, report
    assert (report["fetched"], report["failed"], report["token_renewals"]) == (2, 0, 2)
    assert links_answers(chain) == {"200": 2}
    # The renewed tokens are kept for the next run.
    settings = OpenApiSettings(ClientCredentials(*SHORT), chain.base_url, renew_margin_s=0)
    with Snapshot.open(tmp_path / "snapshot.duckdb", read_only=True) as snapshot:
        kept = snapshot.discovered_accounts(settings.client_key)
    assert [account.account_id for account in kept] == ["acc-001", "acc-002"]
    assert all(account.fetched_at >= started for account in kept)


def test_the_renewals_are_printed_in_the_report(
    chain: SandboxHandle, export: ChainExport, tmp_path: Path
) -> None:
    mapping = shared_r1(export)
    mapping.write_text(mapping.read_text() + "links: {}\n")
    assert pms_sync(chain, tmp_path, "sync", str(mapping), client=SHORT).exit_code == 0
    time.sleep(SHORT_LIFETIME_S)

    result = pms_sync(chain, tmp_path, "links", str(mapping), client=SHORT)

    assert result.exit_code == 0, result.output
    assert "account tokens renewed 2," in result.stdout
