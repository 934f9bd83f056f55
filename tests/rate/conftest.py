"""A sandbox with small, short rate-limit windows, so the limiter's behaviour shows in seconds.

Every sync token gets the limits of ``rate_samples.LIMITS``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from connector.sandbox.config import SandboxConfig
from connector.sandbox.testing import SandboxHandle, running_sandbox
from tests.rate.rate_samples import LIMITS


@pytest.fixture(scope="module")
def limited_sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SandboxHandle]:
    # The demo setup: demo-token writes to the accounts demo and demo-2.
    config = SandboxConfig.demo().model_copy(update={"rate_limits": {"*": LIMITS}})
    with running_sandbox(tmp_path_factory.mktemp("limited"), config) as handle:
        yield handle


@pytest.fixture
def service(limited_sandbox: SandboxHandle) -> SandboxHandle:
    limited_sandbox.reset()
    return limited_sandbox


@pytest.fixture
def snapshot_file(tmp_path: Path) -> Path:
    return tmp_path / "pms-sync" / "snapshot.duckdb"
