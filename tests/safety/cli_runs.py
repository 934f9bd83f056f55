"""Running `pms-sync` commands of a test connection against the session's sandbox."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner, Result

from connector.cli import main
from connector.sandbox.testing import SandboxHandle


def pms_sync(service: SandboxHandle, state: Path, *args: str) -> Result:
    """``pms-sync ARGS`` with the snapshot under ``state``; a ``state/tokens.yaml`` there is
    the tokens file (the demo token serves every other account)."""
    tokens = state / "tokens.yaml"
    env = {
        "PMS_SYNC_BASE_URL": service.base_url,
        "PMS_SYNC_SNAPSHOT": str(state / "snapshot.duckdb"),
        "PMS_SYNC_TOKEN": "demo-token",
        "PMS_SYNC_TOKENS_FILE": str(tokens) if tokens.exists() else "",
        "PMS_SYNC_MAX_ATTEMPTS": "2",
    }
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def document(result: Result) -> dict[str, Any]:
    return json.loads(result.stdout)


def sync_requests(service: SandboxHandle) -> int:
    return sum(
        sum(by_status.values())
        for endpoint, by_status in service.stats()["requests"].items()
        if "/api/v1/hooks/" in endpoint
    )
