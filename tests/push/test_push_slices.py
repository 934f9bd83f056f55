"""The push makes its changes from the plan a slice at a time, as its workers take them: a first
run's documents are not all Python strings at once, and nothing about what is sent changes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from push_samples import batches_of, reservation, settings_for, unit, with_unchecked_record

import connector.push._push as push_module
from connector.contract import Entity
from connector.pipeline import sync_batches
from connector.sandbox.testing import SandboxHandle


def test_changes_are_made_a_slice_at_a_time_while_earlier_ones_are_sent(
    service: SandboxHandle, snapshot_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(push_module, "_CHANGES_AT_ONCE", 3)
    slices: list[tuple[int, int]] = []  # (rows made into changes, requests started before)
    sent: list[str] = []
    make_changes = push_module._changes_of
    send = push_module._send

    def changes_of(frame: Any, *args: Any) -> list[Any]:
        slices.append((len(frame), len(sent)))
        return make_changes(frame, *args)

    async def counted_send(change: Any, *args: Any) -> None:
        sent.append(change.record_id)
        await send(change, *args)

    monkeypatch.setattr(push_module, "_changes_of", changes_of)
    monkeypatch.setattr(push_module, "_send", counted_send)
    source = {
        Entity.ACCOMMODATION: [("demo", unit("U1")), ("demo", unit("U2"))],
        Entity.RESERVATION: [
            ("demo", reservation(f"R{n:02}", "U1" if n % 2 else "U2", n)) for n in range(1, 11)
        ]
        + [("demo", reservation("R11", "U3", 11))],
    }
    batches = batches_of(source)
    # U3 is refused (400), so R11 is held back by the generator between the slices and sends.
    batches[Entity.ACCOMMODATION] = with_unchecked_record(
        batches[Entity.ACCOMMODATION], "demo", unit("U3", country="Germany")
    )

    report = sync_batches(batches, settings_for(service.base_url, snapshot_file, concurrency=2))

    assert report.outcomes == {"acknowledged": 12, "dead_lettered": 1, "failed": 0, "pending": 0}
    assert [held.record_id for held in report.push.held_back] == ["R11"]
    # Slices of at most 3 rows: units (3) and reservations (11) in 1 + 4 slices.
    assert [rows for rows, _ in slices] == [3, 3, 3, 3, 2]
    # Each reservation slice is made only once the workers have taken the one before it.
    reservation_slices = slices[1:]
    assert [before for _, before in reservation_slices] == sorted(
        before for _, before in reservation_slices
    )
    assert reservation_slices[-1][1] >= 3 + 8  # the units and two slices' worth went first
    # Every record sent once, units before reservations.
    assert len(sent) == len(set(sent)) == 13
    assert set(sent[:3]) == {"U1", "U2", "U3"}
    assert sorted(sent[3:]) == [f"R{n:02}" for n in range(1, 11)]
    stored = {r["id"]: r for r in service.records("demo", "reservation")}
    assert sorted(stored) == [f"R{n:02}" for n in range(1, 11)]
    assert all(record["writes"] == 1 for record in stored.values())
