"""The push runs on the event loop its settings name: uvloop by default where it is installed,
asyncio's own on request; both deliver the same over real sockets."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest
from push_samples import batches_of, reservation, settings_for, unit

from connector.client import EventLoop, default_event_loop
from connector.contract import Entity
from connector.errors import ConfigError
from connector.pipeline import sync_batches
from connector.sandbox.testing import SandboxHandle
from connector.settings import load_settings


@pytest.mark.parametrize("loop", list(EventLoop))
def test_the_push_runs_on_the_loop_its_settings_name(
    loop: EventLoop, service: SandboxHandle, snapshot_file: Path
) -> None:
    settings = settings_for(service.base_url, snapshot_file)
    settings = dataclasses.replace(
        settings, client=dataclasses.replace(settings.client, event_loop=loop)
    )
    loops: set[str] = set()
    source = {
        Entity.ACCOMMODATION: [("demo", unit("U1"))],
        Entity.RESERVATION: [("demo", reservation(f"R{n}", "U1", n)) for n in range(1, 6)],
    }

    # The progress callback runs on the push's loop, once per change.
    def progress(done: int, total: int) -> None:
        loops.add(type(asyncio.get_running_loop()).__module__.partition(".")[0])

    report = sync_batches(batches_of(source), settings, on_progress=progress)

    assert report.outcomes == {"acknowledged": 6, "dead_lettered": 0, "failed": 0, "pending": 0}
    assert loops == {str(loop)}


def test_uvloop_is_the_default_where_it_is_installed() -> None:
    pytest.importorskip("uvloop")

    assert default_event_loop() == EventLoop.UVLOOP
    assert load_settings(env={}).client.event_loop == EventLoop.UVLOOP
    chosen = load_settings(env={"PMS_SYNC_EVENT_LOOP": " AsyncIO "})
    assert chosen.client.event_loop == EventLoop.ASYNCIO


def test_an_unknown_event_loop_is_refused_with_the_choices() -> None:
    with pytest.raises(ConfigError, match="PMS_SYNC_EVENT_LOOP must be one of uvloop, asyncio"):
        load_settings(env={"PMS_SYNC_EVENT_LOOP": "trio"})
