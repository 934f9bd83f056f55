"""Run control: a run stops gracefully on SIGTERM or SIGINT, and at its deadline.

A stop request lets no new request leave; the requests in flight keep up to one read timeout
for their answers, then they are cancelled (a second signal cancels them at once). The push
records what was answered and commits it before the run ends, reported ``stopped``. A signal
before the push started interrupts the run at once (nothing was sent): :class:`RunStopped`.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from types import FrameType
from typing import Any, TypeVar

from connector.config import DEFAULT_MAX_DURATION_S
from connector.errors import RunStopped

"""The deadline of a run unless configured: a nightly job must not hold the snapshot's lock
into the next night (docs/decisions.md, "Every run has a deadline")."""

STOP_SIGNALS: tuple[signal.Signals, ...] = (signal.SIGTERM, signal.SIGINT)

ResultT = TypeVar("ResultT")


def parse_max_duration(value: str | float | None) -> float | None:
    """Seconds from ``--max-duration``/``PMS_SYNC_MAX_DURATION``: ``0``, ``none``, ``off``
    disable the deadline (None); unset is the default deadline."""
    if value is None:
        return DEFAULT_MAX_DURATION_S
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("", "0", "none", "off"):
            return None
        try:
            value = float(text)
        except ValueError:
            raise ValueError(f"expected seconds, 0, none or off, got {value!r}") from None
    if value != value or value < 0:  # NaN or negative
        raise ValueError(f"expected seconds, 0, none or off, got {value!r}")
    return float(value) or None


class RunStop:
    """The stop requests of one run: signals (:meth:`signals_handled`) and the deadline."""

    def __init__(
        self, max_duration_s: float | None, *, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._clock = clock
        self.max_duration_s = max_duration_s
        self.deadline = clock() + max_duration_s if max_duration_s else None
        self.reason: str | None = None  # why the run was asked to stop
        self.forced = False  # a second signal: in-flight requests are not awaited
        self.pushing = False  # a signal now is a graceful stop, no interruption
        self._loop: asyncio.AbstractEventLoop | None = None
        self._requested: asyncio.Event | None = None
        self._forced: asyncio.Event | None = None
        self._interruption: str | None = None  # the signal raised into the run before its push

    @property
    def requested(self) -> bool:
        return self.reason is not None

    def remaining(self) -> float | None:
        """Seconds until the deadline (None: no deadline)."""
        return None if self.deadline is None else self.deadline - self._clock()

    def beyond_deadline(self, seconds: float) -> bool:
        """Would waiting ``seconds`` from now end past the deadline?"""
        left = self.remaining()
        return left is not None and seconds > left

    def request(self, reason: str, *, force: bool = False) -> None:
        """Ask the run to stop (``force``: do not await the requests in flight)."""
        if self.reason is None:
            self.reason = reason
        self.forced = self.forced or force
        if self._loop is not None and not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._wake)

    def _wake(self) -> None:
        if self._requested is not None and self.requested:
            self._requested.set()
        if self._forced is not None and self.forced:
            self._forced.set()

    def _on_signal(self, number: int, frame: FrameType | None) -> None:
        name = signal.Signals(number).name
        if not self.pushing and self._loop is None and self.reason is None:
            self.reason = name
            self._interruption = f"stopped by {name} before the push: nothing was sent"
            raise RunStopped(self._interruption)
        self.request(name, force=self.requested)

    @contextlib.contextmanager
    def signals_handled(self) -> Iterator[RunStop]:
        """SIGTERM and SIGINT stop this run while inside; the previous handlers afterwards.
        Outside the main thread (signals reach only it) the run is left to its caller."""
        if threading.current_thread() is not threading.main_thread():
            yield self
            return
        previous = {number: signal.getsignal(number) for number in STOP_SIGNALS}
        for number in STOP_SIGNALS:
            signal.signal(number, self._on_signal)
        try:
            yield self
        except RunStopped:
            raise
        except Exception as error:
            # A signal raised inside a library call comes back as that library's error
            # (DuckDB: "Query interrupted"): the run was stopped all the same.
            if self._interruption is not None:
                raise RunStopped(self._interruption) from error
            raise
        finally:
            for number, handler in previous.items():
                signal.signal(number, handler)

    @contextlib.asynccontextmanager
    async def attached(self) -> AsyncIterator[RunStop]:
        """On the push's event loop: requests wake it, and the deadline requests a stop."""
        self._loop = asyncio.get_running_loop()
        self._requested, self._forced = asyncio.Event(), asyncio.Event()
        self.pushing = True
        self._wake()
        left = self.remaining()
        timer = None
        if left is not None:
            timer = self._loop.call_later(max(left, 0.0), self.request, "deadline")
        try:
            yield self
        finally:
            if timer is not None:
                timer.cancel()
            self._loop = None

    async def unless_stopped(self, awaitable: Awaitable[ResultT]) -> tuple[bool, ResultT | None]:
        """``(True, result)`` of ``awaitable``, or ``(False, None)`` when a stop request comes
        first (the awaitable is then cancelled)."""
        if self.requested:
            if isinstance(awaitable, Coroutine):
                awaitable.close()
            return False, None
        task = asyncio.ensure_future(awaitable)
        if self._requested is None:
            return True, await task
        stopped = asyncio.ensure_future(self._requested.wait())
        try:
            await asyncio.wait({task, stopped}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopped.cancel()
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
        if task.cancelled():
            return False, None
        return True, task.result()

    async def sleep(self, seconds: float) -> bool:
        """Sleep, or less when a stop is requested; True when the whole sleep passed."""
        done, _ = await self.unless_stopped(asyncio.sleep(seconds))
        return done

    async def run_workers(self, workers: list[Coroutine[Any, Any, None]], grace_s: float) -> None:
        """Run ``workers`` to their end; after a stop request, the unfinished ones keep
        ``grace_s`` seconds (none after a second signal), then they are cancelled. A worker
        records what its cancelled request leaves open (connector/push/_push.py)."""
        tasks = [asyncio.ensure_future(worker) for worker in workers]
        everything = asyncio.ensure_future(asyncio.wait(tasks))
        try:
            if self._requested is not None:
                stopped = asyncio.ensure_future(self._requested.wait())
                await asyncio.wait({everything, stopped}, return_when=asyncio.FIRST_COMPLETED)
                stopped.cancel()
                if not everything.done() and self._forced is not None:
                    forced = asyncio.ensure_future(self._forced.wait())
                    await asyncio.wait(
                        {everything, forced}, timeout=grace_s, return_when=asyncio.FIRST_COMPLETED
                    )
                    forced.cancel()
                    for task in tasks:
                        task.cancel()
            await asyncio.shield(everything)
        finally:
            for task in tasks:
                task.cancel()
        for task in tasks:
            if not task.cancelled() and task.exception() is not None:
                raise task.exception()  # type: ignore[misc]
