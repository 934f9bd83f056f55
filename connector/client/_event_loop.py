"""The event loop a push runs on: uvloop where it is installed, else asyncio's own.

A push is one request per changed record, and with the sandbox on loopback the client's CPU
per request bounds it: uvloop's loop (libuv, in C) takes about a tenth less of the client's
instructions per request than asyncio's (docs/decisions.md, "The push's client work per
request"). ``PMS_SYNC_EVENT_LOOP=asyncio`` chooses asyncio's loop anyway.
"""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Coroutine
from enum import StrEnum
from typing import Any, TypeVar

ResultT = TypeVar("ResultT")


class EventLoop(StrEnum):
    UVLOOP = "uvloop"
    ASYNCIO = "asyncio"


def default_event_loop() -> EventLoop:
    """uvloop when it can be imported (not on Windows), else asyncio."""
    return EventLoop.UVLOOP if importlib.util.find_spec("uvloop") else EventLoop.ASYNCIO


def run_on(loop: EventLoop, main: Coroutine[Any, Any, ResultT]) -> ResultT:
    """``asyncio.run(main)`` on a new loop of the kind ``loop`` names."""
    if loop == EventLoop.UVLOOP:
        import uvloop  # imported here: the rest of pms-sync runs without it

        return uvloop.run(main)
    return asyncio.run(main)
