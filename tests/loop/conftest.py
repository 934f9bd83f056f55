"""Fixtures of the loop tests: a sandbox that retries event deliveries fast."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from connector.sandbox.testing import SandboxHandle, running_sandbox
from tests.loop.loop_samples import fast_delivery_config


@pytest.fixture(scope="module")
def events_sandbox_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SandboxHandle]:
    with running_sandbox(tmp_path_factory.mktemp("events-sandbox"), fast_delivery_config()) as sb:
        yield sb


@pytest.fixture
def events_sandbox(events_sandbox_server: SandboxHandle) -> SandboxHandle:
    """A sandbox with no records, webhook configurations or deliveries, retrying fast."""
    events_sandbox_server.reset()
    return events_sandbox_server
