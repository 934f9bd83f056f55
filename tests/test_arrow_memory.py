"""A run's Arrow buffers come from jemalloc unless ``ARROW_DEFAULT_MEMORY_POOL`` says otherwise
(connector.arrow_memory). The pool is the process's, chosen when the pipeline is imported: each
case runs in a fresh interpreter."""

from __future__ import annotations

import os
import subprocess
import sys

import pyarrow as pa
import pytest

from connector.arrow_memory import POOL_VARIABLE

_POOL_AFTER_IMPORT = (
    "import pyarrow as pa; import connector.pipeline; print(pa.default_memory_pool().backend_name)"
)


def _pool_of_a_run(**variables: str) -> str:
    env = {key: value for key, value in os.environ.items() if key != POOL_VARIABLE}
    completed = subprocess.run(
        [sys.executable, "-c", _POOL_AFTER_IMPORT],
        env=env | variables,
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return completed.stdout.strip()


def _has_jemalloc() -> bool:
    try:
        pa.jemalloc_memory_pool()
    except NotImplementedError:
        return False
    return True


@pytest.mark.skipif(not _has_jemalloc(), reason="this pyarrow is built without jemalloc")
def test_a_run_allocates_from_jemalloc_rather_than_pyarrows_default() -> None:
    assert _pool_of_a_run() == "jemalloc"


def test_the_operators_choice_of_pool_is_kept() -> None:
    assert _pool_of_a_run(**{POOL_VARIABLE: "system"}) == "system"
