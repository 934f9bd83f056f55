"""A real sandbox over a real loopback socket, shared by the push tests and reset per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from connector.sandbox.testing import SandboxHandle, multi_account_config, running_sandbox


@pytest.fixture(scope="session")
def push_service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SandboxHandle]:
    # Three accounts: demo (demo-token), hotel-a (hotel-a-token, group-token), hotel-b
    # (group-token), so tests can refuse a token (401) or an account (403).
    with running_sandbox(tmp_path_factory.mktemp("push-sandbox"), multi_account_config()) as handle:
        yield handle


@pytest.fixture
def service(push_service: SandboxHandle) -> Iterator[SandboxHandle]:
    push_service.reset()
    push_service.set_faults()
    yield push_service
    push_service.set_faults()


@pytest.fixture
def snapshot_file(tmp_path: Path) -> Path:
    return tmp_path / "pms-sync" / "snapshot.duckdb"
