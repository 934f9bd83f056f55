"""The Dagster snapshot resource takes a PostgreSQL URL as its path, like the CLI."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from connector.contract import Entity
from connector.snapshot import Refusal
from pms_sync.resources import OpenApiResource, ServiceResource, SnapshotResource


def test_a_postgresql_url_is_the_snapshot_of_the_resource_and_of_the_sync_settings(
    postgres_snapshot_url: str,
) -> None:
    snapshot = SnapshotResource(path=postgres_snapshot_url, lock_timeout=5)
    service = ServiceResource(
        base_url="https://service.example",
        open_api=OpenApiResource(client_id="client", client_secret="secret-value-1"),
    )

    with snapshot.open() as store:
        store.record_refusals(
            [
                Refusal(
                    "acc", Entity.RESERVATION, "R1", "h", 400, "refused", datetime(2026, 1, 1), None
                )
            ]
        )
    settings = service.settings(snapshot)
    with snapshot.open() as store:
        refused = store.dead_letters()["record_id"].tolist()

    assert refused == ["R1"]
    assert settings.snapshot_path == postgres_snapshot_url
    assert settings.open_api is not None
    # Files kept beside a snapshot file live in the state folder for a database.
    assert settings.open_api.token_cache == Path(".pms-sync") / "openapi-tokens.json"
