"""The objects a push starts with, left out of the garbage collector's full passes.

A push makes a few short-lived objects per request; the objects that exist when it starts
(the mapping's and the plan's frames, pydantic models, pandas' and pyarrow's modules) live on
through it. CPython's full collection walks all of them nonetheless, on the event loop's
thread. While it runs no answer is read and no request leaves, and the service, its queue
drained, waits. ``gc.freeze`` sets the objects that exist aside until the push
ends; cycles among them are collected once they are handed back (``gc.unfreeze``), so nothing
is kept that a collection would have freed, only later.
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator


@contextlib.contextmanager
def older_objects_frozen() -> Iterator[None]:
    """Freeze the objects tracked now for the block, unfreeze them after it.

    When something else froze objects first (a server that freezes before it forks, another
    push of this process on another thread), that is left as it is: unfreezing would hand its
    objects back too.
    """
    if gc.get_freeze_count():
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
