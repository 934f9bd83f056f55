"""A sandbox of 120 hotels under one multi-account Open API client, for the session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from connector.sandbox.config import ClientConfig
from connector.sandbox.testing import SandboxHandle, many_accounts_config, running_sandbox
from tests.accounts.chain import (
    SHORT_CLIENT_ID,
    SHORT_CLIENT_SECRET,
    SHORT_LIFETIME_S,
    ChainExport,
)


@pytest.fixture(scope="session")
def chain_sandbox(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SandboxHandle]:
    """``many-client`` sees acc-001…acc-120 (external ids HOTEL-001…); its account tokens live
    an hour. ``short-client`` sees acc-001…acc-003 and hands out account tokens that expire
    after ``SHORT_LIFETIME_S`` seconds."""
    config = many_accounts_config(120)
    short = ClientConfig(
        client_id=SHORT_CLIENT_ID,
        client_secret=SHORT_CLIENT_SECRET,
        accounts=["acc-001", "acc-002", "acc-003"],
        account_token_lifetime_s=SHORT_LIFETIME_S,
    )
    config = config.model_copy(update={"clients": [*config.clients, short]})
    with running_sandbox(tmp_path_factory.mktemp("chain-sandbox"), config) as handle:
        yield handle


@pytest.fixture
def chain(chain_sandbox: SandboxHandle) -> Iterator[SandboxHandle]:
    """The chain's sandbox without records, property statuses or faults."""
    chain_sandbox.reset()
    yield chain_sandbox
    chain_sandbox.set_faults()


@pytest.fixture
def export(tmp_path: Path) -> ChainExport:
    """The chain's mapping and exports, in the test's folder."""
    return ChainExport(tmp_path / "chain")
