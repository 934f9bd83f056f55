"""The objects a push starts with are left out of the garbage collector's full passes while it
sends (connector/push/_frozen_heap.py), and handed back when it ends, however it ends."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path

import pytest
from push_samples import batches_of, reservation, settings_for, unit

from connector.contract import Entity
from connector.pipeline import sync_batches
from connector.sandbox.testing import SandboxHandle

SOURCE = {
    Entity.ACCOMMODATION: [("demo", unit("U1"))],
    Entity.RESERVATION: [("demo", reservation(f"R{n}", "U1", n)) for n in range(1, 6)],
}


class _Cycle:
    """An object only a full collection frees: it refers to itself."""

    def __init__(self) -> None:
        self.me = self


def test_a_push_freezes_what_it_starts_with_and_hands_it_back_for_collection(
    service: SandboxHandle, snapshot_file: Path
) -> None:
    assert gc.get_freeze_count() == 0
    garbage = _Cycle()
    freed = weakref.ref(garbage)
    del garbage  # unreachable, but a cycle: it waits for a full collection
    frozen_while_sending: list[int] = []

    def progress(done: int, total: int) -> None:
        frozen_while_sending.append(gc.get_freeze_count())

    report = sync_batches(
        batches_of(SOURCE), settings_for(service.base_url, snapshot_file), on_progress=progress
    )

    assert report.outcomes["acknowledged"] == 6
    assert frozen_while_sending and min(frozen_while_sending) > 0
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert freed() is None  # handed back: nothing is kept that a collection would free


def test_a_push_that_fails_hands_the_objects_back_too(
    service: SandboxHandle, snapshot_file: Path
) -> None:
    assert gc.get_freeze_count() == 0

    def progress(done: int, total: int) -> None:
        raise RuntimeError("the caller's callback failed")

    with pytest.raises(RuntimeError, match="callback failed"):
        sync_batches(
            batches_of(SOURCE), settings_for(service.base_url, snapshot_file), on_progress=progress
        )

    assert gc.get_freeze_count() == 0


def test_objects_someone_else_froze_stay_frozen_after_a_push(
    service: SandboxHandle, snapshot_file: Path
) -> None:
    # A server that freezes its objects before it forks workers keeps them frozen.
    theirs = _Cycle()
    gc.freeze()
    try:
        report = sync_batches(batches_of(SOURCE), settings_for(service.base_url, snapshot_file))

        assert report.outcomes["acknowledged"] == 6
        assert all(tracked is not theirs for tracked in gc.get_objects())  # still frozen
    finally:
        gc.unfreeze()
