"""Shared fixtures: one real sandbox server for the whole test session."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from connector.sandbox.testing import SandboxHandle, multi_account_config, running_sandbox

# Exports written by a test are complete the moment they are closed: a short settle interval
# keeps runs fast. The stability rail's own tests pass their interval explicitly.
os.environ.setdefault("PMS_SYNC_EXPORT_SETTLE_SECONDS", "0.05")
# Every record the mapping engine accepts without the contract model is checked against the
# model and the Python canonical form as well: any mapping a test runs proves the fast path.
os.environ.setdefault("PMS_SYNC_VERIFY_FAST_PATH", "1")


@pytest.fixture(scope="session")
def sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SandboxHandle]:
    """A sandbox served over loopback for the session: the demo account (``demo`` /
    ``demo-token`` / ``demo-client``) plus two hotels (see ``multi_account_config``)."""
    with running_sandbox(tmp_path_factory.mktemp("sandbox"), multi_account_config()) as handle:
        yield handle


@pytest.fixture
def clean_sandbox(sandbox: SandboxHandle) -> SandboxHandle:
    """The shared sandbox with no records, no webhook configurations, no stats and no faults."""
    sandbox.reset()
    return sandbox
