"""The allocator a run's Arrow buffers come from: jemalloc, where pyarrow is built with it.

pyarrow allocates from mimalloc by default. A run allocates and frees large Arrow buffers in
waves (the mapping's batches, their compressed copies, the documents expanded after the
engine's database closes), and mimalloc hands freed pages back to the system soon enough that
the next wave faults them in again; jemalloc keeps them (docs/decisions.md, "Arrow's
allocator"). ``ARROW_DEFAULT_MEMORY_POOL``,
pyarrow's own variable, is the operator's choice when set and is left alone.
"""

from __future__ import annotations

import contextlib
import os

import pyarrow as pa

POOL_VARIABLE = "ARROW_DEFAULT_MEMORY_POOL"


def use_run_allocator() -> str:
    """Make jemalloc Arrow's default pool unless ``ARROW_DEFAULT_MEMORY_POOL`` chose one or
    pyarrow lacks it; returns the default pool's backend name."""
    if not os.environ.get(POOL_VARIABLE):
        # A pyarrow built without jemalloc (Windows wheels) keeps its default.
        with contextlib.suppress(NotImplementedError):
            pa.set_memory_pool(pa.jemalloc_memory_pool())
    return pa.default_memory_pool().backend_name
