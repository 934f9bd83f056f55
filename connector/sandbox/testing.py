"""Running a real sandbox from tests, demos and benchmarks.

``running_sandbox`` serves it from a thread of the current process; ``sandbox_process`` runs it
as a separate process (``python -m connector.sandbox``), which outlives anything the test
kills. Both yield a :class:`SandboxHandle` that talks to the admin API over HTTP, with the
sandbox's admin token when it has one.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import yaml

from connector.config import SandboxSection
from connector.sandbox.config import (
    DEMO_CLIENT_ID,
    DEMO_CLIENT_SECRET,
    DEMO_SYNC_TOKEN,
    AccountConfig,
    ClientConfig,
    GeneratedAccounts,
    SandboxConfig,
    load_config,
)
from connector.sandbox.server import BackgroundServer, SandboxStartError

LOOPBACK = "127.0.0.1"
MULTI_CLIENT_ID = "multi-client"
MULTI_CLIENT_SECRET = "multi-secret"
SHARED_SYNC_TOKEN = "group-token"
MANY_CLIENT_ID = "many-client"
MANY_CLIENT_SECRET = "many-secret"
_LISTENING = re.compile(r"listening on (http://\S+)")


class SandboxHandle:
    """A running sandbox: its address, an HTTP client bound to it, the admin API as methods."""

    def __init__(self, base_url: str, admin_token: str | None = None) -> None:
        self.base_url = base_url
        # One client per sandbox, shared by the tests that use it: creating an httpx.Client
        # costs tens of milliseconds (its TLS context), more than a request to the sandbox.
        self.http = httpx.Client(base_url=base_url, timeout=30.0)
        # Sent on admin calls only: requests a test makes with ``http`` stay as it writes them.
        self.admin_headers = admin_headers(admin_token)

    def close(self) -> None:
        self.http.close()

    def _call(self, method: str, path: str, **kwargs: Any) -> Any:
        response = self.http.request(method, path, headers=self.admin_headers, **kwargs)
        response.raise_for_status()
        return response.json()

    def records(
        self,
        account_id: str | None = None,
        entity: str | None = None,
        *,
        limit: int | None = None,
        offset: int = 0,
    ) -> list[dict]:
        """Stored records with their bookkeeping, oldest first (see docs/sandbox.md)."""
        return self._records_page(account_id, entity, limit, offset)["records"]

    def count(self, account_id: str | None = None, entity: str | None = None) -> int:
        """How many records are stored, without fetching them."""
        return self._records_page(account_id, entity, 0, 0)["total"]

    def _records_page(
        self, account_id: str | None, entity: str | None, limit: int | None, offset: int
    ) -> dict[str, Any]:
        params: dict[str, str | int] = {
            key: value
            for key, value in (("accountId", account_id), ("entity", entity), ("limit", limit))
            if value is not None
        }
        if offset:
            params["offset"] = offset
        return self._call("GET", "/_sandbox/records", params=params)

    def stats(self) -> dict[str, Any]:
        return self._call("GET", "/_sandbox/stats")

    def set_faults(self, **faults: Any) -> dict[str, Any]:
        """Replace the fault settings (no arguments: no faults)."""
        return self._call("POST", "/_sandbox/faults", json=faults)["faults"]

    def reset(self) -> None:
        """Forget records, webhook configurations and stats; faults back to the start-up ones."""
        self._call("POST", "/_sandbox/reset", json={})

    # Drift (docs/sandbox.md, "Drift"): the service's state changed behind the connector.

    def edit_records(
        self, account_id: str, entity: str, ids: list[str], changes: dict[str, Any]
    ) -> list[str]:
        """Merge ``changes`` into the stored resources (as staff would); the ids edited."""
        return self._drift("edit", account_id, entity, ids=ids, changes=changes)["records"]

    def delete_records(self, account_id: str, entity: str, ids: list[str]) -> list[str]:
        """Delete stored records (as staff would); the ids deleted."""
        return self._drift("delete", account_id, entity, ids=ids)["records"]

    def revert_records(
        self,
        account_id: str,
        entity: str,
        ids: list[str] | None = None,
        *,
        since_seq: int | None = None,
    ) -> list[str]:
        """Undo the last saving sync write of these records, or of every record written after
        ``since_seq`` (as a restore from an older backup would); the ids reverted."""
        return self._drift("revert", account_id, entity, ids=ids, sinceSeq=since_seq)["records"]

    def _drift(self, action: str, account_id: str, entity: str, **members: Any) -> dict[str, Any]:
        body = {"action": action, "accountId": account_id, "entity": entity}
        body |= {name: value for name, value in members.items() if value is not None}
        return self._call("POST", "/_sandbox/drift", json=body)

    def health(self) -> dict[str, Any]:
        return self._call("GET", "/_sandbox/health")

    # Outgoing events (docs/sandbox.md, "Outgoing events").

    def emit_event(
        self, event: str, account_id: str, reservation_id: str, **resource: Any
    ) -> dict[str, Any]:
        """Emit ``event`` of a stored reservation to the configurations it matches."""
        body = {"event": event, "accountId": account_id, "reservationId": reservation_id}
        return self._call("POST", "/_sandbox/events", json=body | {"resource": resource})

    def deliveries(self) -> list[dict[str, Any]]:
        """The delivery log: each POST of an event to a configuration's URL, oldest first."""
        return self._call("GET", "/_sandbox/events")["deliveries"]

    def redeliver(self, ids: list[str] | None = None) -> list[str]:
        """Send deliveries again (default: every delivered one); the new deliveries' ids."""
        body = {} if ids is None else {"ids": ids}
        return self._call("POST", "/_sandbox/events/redeliver", json=body)["deliveries"]

    def wait_for_deliveries(self, timeout_s: float = 10.0) -> list[dict[str, Any]]:
        """The delivery log once no delivery is pending (delivered or given up)."""
        deadline = time.monotonic() + timeout_s
        while True:
            found = self._call("GET", "/_sandbox/events")
            if not found["pending"] or time.monotonic() >= deadline:
                return found["deliveries"]
            time.sleep(0.02)


def admin_headers(admin_token: str | None) -> dict[str, str]:
    """The headers that carry ``admin_token`` to the admin API (none without a token)."""
    return {} if admin_token is None else {"Authorization": f"Bearer {admin_token}"}


class SandboxProcessHandle(SandboxHandle):
    """A sandbox running as a child process: the process can be signalled, its log read."""

    def __init__(
        self,
        base_url: str,
        process: subprocess.Popen[bytes],
        log_path: Path,
        admin_token: str | None = None,
    ) -> None:
        super().__init__(base_url, admin_token)
        self.process = process
        self.log_path = log_path

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")


def multi_account_config() -> SandboxConfig:
    """The demo account plus two hotels under one multi-account Open API client.

    ``demo-token`` writes to ``demo`` only; ``hotel-a-token`` to ``hotel-a``; ``group-token``
    to both hotels. ``demo-client`` sees only ``demo`` (a single-account scope);
    ``multi-client`` sees all three accounts.
    """
    return SandboxConfig(
        accounts=[
            AccountConfig(
                id="demo", name="Demo Hotel", externalId="demo", sync_tokens=[DEMO_SYNC_TOKEN]
            ),
            AccountConfig(
                id="hotel-a",
                name="Hotel A",
                externalId="ext-a",
                sync_tokens=["hotel-a-token", SHARED_SYNC_TOKEN],
            ),
            AccountConfig(
                id="hotel-b", name="Hotel B", externalId="ext-b", sync_tokens=[SHARED_SYNC_TOKEN]
            ),
        ],
        clients=[
            ClientConfig(
                client_id=DEMO_CLIENT_ID, client_secret=DEMO_CLIENT_SECRET, accounts=["demo"]
            ),
            ClientConfig(
                client_id=MULTI_CLIENT_ID,
                client_secret=MULTI_CLIENT_SECRET,
                accounts=["demo", "hotel-a", "hotel-b"],
            ),
        ],
    )


def many_accounts_config(
    count: int = 120,
    *,
    account_token_lifetime_s: int | None = None,
    token_lifetime_s: int = 3600,
) -> SandboxConfig:
    """``multi_account_config`` plus ``count`` generated hotels (``acc-001``…, external ids
    ``HOTEL-001``…, names ``Hotel 001``…) under one multi-account client, ``many-client`` /
    ``many-secret``, whose account-level tokens live ``account_token_lifetime_s``. The hotels
    have no sync token: only the tokens the accounts lookup hands out write to them."""
    generated = GeneratedAccounts(
        count=count,
        client_id=MANY_CLIENT_ID,
        client_secret=MANY_CLIENT_SECRET,
        token_lifetime_s=token_lifetime_s,
        account_token_lifetime_s=account_token_lifetime_s,
    )
    return multi_account_config().with_generated_accounts(generated)


@contextlib.contextmanager
def running_sandbox(
    data_path: Path, config: SandboxConfig | Path | None = None, port: int = 0
) -> Iterator[SandboxHandle]:
    """Serve a sandbox on loopback from a background thread for the duration of the block.

    ``config`` is a config object, a YAML config file, or None for the demo setup.
    """
    if isinstance(config, str | Path):
        config = load_config(Path(config))
    config = config or SandboxConfig.demo()
    server = BackgroundServer(config, Path(data_path), LOOPBACK, port)
    server.start()
    handle = SandboxHandle(server.base_url, config.admin_token)
    try:
        yield handle
    finally:
        # The server first: a request still in flight on the handle's client gets its answer.
        server.stop()
        handle.close()


def write_config(config: SandboxConfig, path: Path) -> Path:
    """Write ``config`` as a YAML file the CLI reads."""
    path.write_text(yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False))
    return path


@contextlib.contextmanager
def sandbox_process(
    data_path: Path,
    config: SandboxConfig | Path | None = None,
    port: int = 0,
    extra_args: tuple[str, ...] = (),
    start_timeout_s: float = 20.0,
    env: dict[str, str] | None = None,
) -> Iterator[SandboxProcessHandle]:
    """Run ``python -m connector.sandbox`` as a child process for the duration of the block,
    with ``env`` added to this process's environment.

    Its output goes to ``<data_path>/sandbox.log`` (a pipe left unread could block the server).
    """
    child_env = {**os.environ, **(env or {}), "PYTHONUNBUFFERED": "1"}
    data_path = Path(data_path)
    data_path.mkdir(parents=True, exist_ok=True)
    command = [sys.executable, "-m", "connector.sandbox", "--host", LOOPBACK]
    command += ["--port", str(port), "--data", str(data_path), *extra_args]
    admin_token = _admin_token_of_process(config, extra_args, child_env)
    if isinstance(config, SandboxConfig):
        config = write_config(config, data_path / "sandbox-config.yaml")
    if config is not None:
        command += ["--config", str(config)]
    log_path = data_path / "sandbox.log"
    with log_path.open("w") as log:
        process = subprocess.Popen(
            command,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=child_env,
        )
    try:
        base_url = _wait_until_listening(process, log_path, start_timeout_s, admin_token)
        process_handle = SandboxProcessHandle(base_url, process, log_path, admin_token)
        try:
            yield process_handle
        finally:
            process_handle.close()
    finally:
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _admin_token_of_process(
    config: SandboxConfig | Path | None, extra_args: tuple[str, ...], env: dict[str, str]
) -> str | None:
    """The admin token the child process will require: its ``--admin-token`` argument, else
    the environment it inherits, else its config file's member (the CLI's precedence)."""
    for index, argument in enumerate(extra_args):
        if argument == "--admin-token" and index + 1 < len(extra_args):
            return extra_args[index + 1]
        if argument.startswith("--admin-token="):
            return argument.partition("=")[2]
    from_env = SandboxSection.read(env).admin_token
    if from_env is not None:
        return from_env.get_secret_value()
    if isinstance(config, str | Path):
        config = load_config(Path(config))
    return config.admin_token if config is not None else None


def _wait_until_listening(
    process: subprocess.Popen[bytes], log_path: Path, timeout_s: float, admin_token: str | None
) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = _LISTENING.search(log_path.read_text(errors="replace"))
        if found:
            base_url = found.group(1)
            with contextlib.suppress(httpx.HTTPError):
                health = httpx.get(
                    f"{base_url}/_sandbox/health", headers=admin_headers(admin_token), timeout=1.0
                )
                if health.status_code == 200:
                    return base_url
        if process.poll() is not None:
            raise SandboxStartError(
                f"the sandbox process exited with {process.returncode}: "
                f"{log_path.read_text(errors='replace')[-2000:]}"
            )
        time.sleep(0.05)
    raise SandboxStartError(f"the sandbox process did not start within {timeout_s} s")
