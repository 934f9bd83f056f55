"""Events stored as they arrive, in batches, each exactly once.

The receiver answers a delivery only once its event is stored (so an answered event is never
lost), and stores it idempotently (so a redelivery adds no row). Deliveries that arrive while
a write is under way are written together in the next one: one transaction per batch, not
per event. The store is opened for each batch and closed after, so another process (the
Dagster sensor) can read it in between: DuckDB lets one process hold a file for writing.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path

from connector.snapshot import IncomingEvent, Snapshot

MAX_BATCH = 500


class EventWriter:
    """``stored = await writer.submit(event)``: True for a new event, False for a redelivery."""

    def __init__(self, store_path: Path, lock_timeout_s: float = 10.0) -> None:
        self.store_path = store_path
        self.lock_timeout_s = lock_timeout_s
        self._queue: asyncio.Queue[tuple[IncomingEvent, asyncio.Future[bool]]] | None = None
        self._task: asyncio.Task[None] | None = None
        self.batches = 0

    async def start(self) -> None:
        # The store is created (and migrated) before the first delivery arrives.
        await asyncio.to_thread(self._write, [])
        self._queue = asyncio.Queue()
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def submit(self, event: IncomingEvent) -> bool:
        if self._queue is None:
            raise RuntimeError("the event writer is not started")
        done: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        await self._queue.put((event, done))
        return await done

    async def _run(self) -> None:
        assert self._queue is not None
        while True:
            batch = [await self._queue.get()]
            while not self._queue.empty() and len(batch) < MAX_BATCH:
                batch.append(self._queue.get_nowait())
            try:
                fresh = await asyncio.to_thread(self._write, [event for event, _ in batch])
            except Exception as error:  # the store is locked or broken: every caller learns it
                for _, done in batch:
                    if not done.done():
                        done.set_exception(error)
                continue
            for (_, done), new in zip(batch, fresh, strict=True):
                if not done.done():
                    done.set_result(new)

    def _write(self, events: list[IncomingEvent]) -> list[bool]:
        with Snapshot.open(self.store_path, lock_timeout=self.lock_timeout_s) as store:
            self.batches += 1
            return store.record_events(events)
