"""What survives a restart, the sandbox as a process, its config file and its start-up banner."""

from __future__ import annotations

import signal
import threading
import time
from pathlib import Path

import pytest

from connector.errors import ConfigError
from connector.sandbox import SandboxConfig, load_config
from connector.sandbox.testing import (
    SandboxHandle,
    multi_account_config,
    running_sandbox,
    sandbox_process,
    write_config,
)
from tests.sandbox import payloads

SYNC = "/api/v1/hooks/reservation/connect"
DEMO_TOKEN = {"X-Wishbox-Auth-Token": "demo-token"}


def _send(sandbox: SandboxHandle, reservation_id: str, status: str = "CONFIRMED") -> dict:
    body = payloads.envelope("reservation", payloads.reservation(reservation_id, status=status))
    response = sandbox.http.post(SYNC, json=body, headers=DEMO_TOKEN)
    assert response.status_code == 200, response.text
    return response.json()


def test_a_restart_keeps_records_tokens_and_webhook_configurations(tmp_path: Path) -> None:
    with running_sandbox(tmp_path, multi_account_config()) as first:
        _send(first, "res-1")
        _send(first, "res-2")
        token = first.http.post(
            "/openapi/v1/oauth2/token",
            data={
                "grant_type": "client_credentials",
                "client_id": "multi-client",
                "client_secret": "multi-secret",
            },
        ).json()["access_token"]
        headers = {"Authorization": f"Bearer {token}"}
        webhook = first.http.post(
            "/api/openapi/v1/webhooks",
            json={"name": "n", "event": "reservationCreated", "url": "https://example.com"},
            headers=headers,
        ).json()
        before = first.records()

    with running_sandbox(tmp_path, multi_account_config()) as second:
        assert second.records() == before
        assert _send(second, "res-1")["skippedReservations"] == 1
        assert _send(second, "res-2", status="CANCELLED")["updatedReservations"] == 1
        listed = second.http.get("/api/openapi/v1/webhooks", headers=headers)
        assert listed.json() == {"data": [webhook]}
        after = {record["id"]: record for record in second.records()}
        assert after["res-2"]["lastSeq"] > max(record["lastSeq"] for record in before)
        assert after["res-2"]["writes"] == 2


def test_records_survive_a_killed_sandbox_process(tmp_path: Path) -> None:
    with sandbox_process(tmp_path) as first:
        _send(first, "res-1")
        first.process.send_signal(signal.SIGKILL)
        first.process.wait(10)

    with sandbox_process(tmp_path) as second:
        [record] = second.records("demo", "reservation")
        assert record["id"] == "res-1"


def test_the_demo_sandbox_prints_its_public_credentials(tmp_path: Path) -> None:
    with sandbox_process(tmp_path) as sandbox:
        log = sandbox.log()

    assert f"listening on {sandbox.base_url}" in log
    assert "demo-token" in log
    assert "demo-client" in log
    assert "demo-secret" in log


def test_configured_secrets_are_masked_in_the_banner(tmp_path: Path) -> None:
    config = SandboxConfig.model_validate(
        {
            "accounts": [{"id": "h1", "name": "Hotel One", "sync_tokens": ["tok-very-secret"]}],
            "clients": [
                {"client_id": "c1", "client_secret": "sec-very-secret", "accounts": ["h1"]}
            ],
        }
    )
    with sandbox_process(tmp_path, config) as sandbox:
        log = sandbox.log()
        response = sandbox.http.post(
            "/api/v1/hooks/accommodation/connect",
            json=payloads.envelope("accommodation", payloads.accommodation(), account_id="h1"),
            headers={"Authorization": "Bearer tok-very-secret"},
        )

    assert response.status_code == 200
    assert "h1" in log and "c1" in log
    assert "very-secret" not in log


def test_fault_flags_of_the_command_line_apply_from_the_start(tmp_path: Path) -> None:
    with sandbox_process(tmp_path, extra_args=("--fail-next", "1")) as sandbox:
        body = payloads.envelope("reservation", payloads.reservation())
        statuses = [
            sandbox.http.post(SYNC, json=body, headers=DEMO_TOKEN).status_code for _ in range(2)
        ]

    assert statuses == [500, 200]


def test_a_config_file_round_trips(tmp_path: Path) -> None:
    path = write_config(multi_account_config(), tmp_path / "sandbox.yaml")

    assert load_config(path) == multi_account_config()


def test_running_sandbox_reads_a_config_file(tmp_path: Path) -> None:
    path = write_config(multi_account_config(), tmp_path / "sandbox.yaml")

    with running_sandbox(tmp_path / "data", path) as sandbox:
        accounts = sandbox.health()["accounts"]

    assert accounts == ["demo", "hotel-a", "hotel-b"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("accounts: [", "not valid YAML"),
        ("accounts: []", "accounts"),
        (
            "accounts: [{id: a, name: A}]\nclients: [{client_id: c, client_secret: s, accounts: [b]}]",
            "unknown accounts ['b']",
        ),
        ("accounts: [{id: a, name: A, colour: red}]", "accounts.0.colour"),
        ("accounts: [{id: a, name: A}]\nfaults: {error_rate: 3}", "faults.error_rate"),
    ],
    ids=["bad-yaml", "no-accounts", "unknown-account", "unknown-member", "bad-fault"],
)
def test_a_bad_config_file_is_reported_with_its_path(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "sandbox.yaml"
    path.write_text(text)

    with pytest.raises(ConfigError, match=r"sandbox\.yaml") as raised:
        load_config(path)

    assert message in str(raised.value)


def test_a_missing_config_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "absent.yaml")


def test_stopping_the_sandbox_releases_a_request_hung_by_a_timeout_fault(tmp_path: Path) -> None:
    outcome: dict[str, object] = {}

    def send_and_wait(sandbox: SandboxHandle) -> None:
        body = payloads.envelope("reservation", payloads.reservation())
        outcome["status"] = sandbox.http.post(
            SYNC, json=body, headers=DEMO_TOKEN, timeout=30
        ).status_code

    with running_sandbox(tmp_path) as sandbox:
        sandbox.set_faults(timeout_rate=1.0, timeout_s=60)
        waiting = threading.Thread(target=send_and_wait, args=(sandbox,))
        waiting.start()
        time.sleep(0.2)
        stopping_started = time.monotonic()

    assert time.monotonic() - stopping_started < 1.5
    waiting.join(5)
    assert outcome["status"] == 504
