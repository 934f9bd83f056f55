"""`pms-sync webhooks plan|apply`: the service's outgoing-webhook configurations made those
of the file, matched by name, with field-level differences and header values masked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from connector.cli import main
from connector.contract import WebhookConfig
from connector.sandbox.testing import SandboxHandle
from connector.webhooks import apply_webhooks_file, plan_webhooks_file
from tests.loop.loop_samples import settings_for

HOOK_SECRET = "header-secret-value-5521"

TWO = f"""\
webhooks:
  - name: arrivals
    event: reservationCreated
    url: http://127.0.0.1:8766/events/hotel
    headers:
      X-Receiver-Secret: {HOOK_SECRET}
  - name: german-guests
    event: reservationCreated
    url: http://127.0.0.1:8766/events/hotel
    conditions:
      - {{filterType: country, op: in, value: [DE, AT]}}
      - {{filterType: nights, op: range, value: 2, secondValue: 5}}
"""


def written(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "webhooks.yaml"
    path.write_text(text)
    return path


def service_configs(sandbox: SandboxHandle) -> dict[str, dict]:
    token = sandbox.http.post(
        "/openapi/v1/oauth2/token",
        data={
            "grant_type": "client_credentials",
            "client_id": "demo-client",
            "client_secret": "demo-secret",
        },
    ).json()["access_token"]
    listed = sandbox.http.get(
        "/api/openapi/v1/webhooks", headers={"Authorization": f"Bearer {token}"}
    ).json()["data"]
    return {item["name"]: item for item in listed}


def test_a_new_file_plans_two_creates_and_after_apply_an_empty_plan(
    clean_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    path = written(tmp_path, TWO)
    settings = settings_for(clean_sandbox.base_url, tmp_path)

    first = plan_webhooks_file(path, settings)
    applied = apply_webhooks_file(path, settings)
    second = plan_webhooks_file(path, settings)

    assert first.plan.counts == {"create": 2, "update": 0, "delete": 0, "unchanged": 0}
    assert [item.outcome for item in applied.applied or []] == ["applied", "applied"]
    assert second.plan.empty and second.plan.unchanged == ["arrivals", "german-guests"]
    stored = service_configs(clean_sandbox)
    assert stored["german-guests"]["conditions"][1] == {
        "filterType": 6,
        "op": "range",
        "value": 2,
        "secondValue": 5,
    }
    assert stored["arrivals"]["headers"] == [{"key": "X-Receiver-Secret", "value": HOOK_SECRET}]


def test_a_changed_member_is_an_update_showing_that_field_with_headers_masked(
    clean_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    settings = settings_for(clean_sandbox.base_url, tmp_path)
    apply_webhooks_file(written(tmp_path, TWO), settings)
    changed = TWO.replace(HOOK_SECRET, "rotated-secret-value-0007").replace(
        "value: 2, secondValue: 5", "value: 3, secondValue: 5"
    )

    plan = plan_webhooks_file(written(tmp_path, changed), settings).plan

    updates = {change.name: change for change in plan.changes}
    assert [str(c.action) for c in plan.changes] == ["update", "update"]
    assert [(f.field, f.old, f.new) for f in updates["arrivals"].fields] == [
        ("headers.X-Receiver-Secret", "***", "*** (changed)")
    ]
    assert [f.field for f in updates["german-guests"].fields] == ["conditions"]
    assert "rotated-secret" not in json.dumps(plan.to_json_dict())


def test_a_configuration_the_file_no_longer_names_is_deleted(
    clean_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    settings = settings_for(clean_sandbox.base_url, tmp_path)
    apply_webhooks_file(written(tmp_path, TWO), settings)
    only_arrivals = TWO[: TWO.index("  - name: german-guests")]

    applied = apply_webhooks_file(written(tmp_path, only_arrivals), settings)

    assert [(str(i.change.action), i.change.name) for i in applied.applied or []] == [
        ("delete", "german-guests")
    ]
    assert set(service_configs(clean_sandbox)) == {"arrivals"}


def test_with_a_prefix_other_configurations_of_the_client_are_left_alone(
    clean_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    settings = settings_for(clean_sandbox.base_url, tmp_path)
    apply_webhooks_file(written(tmp_path, TWO), settings)
    prefixed = (
        "prefix: 'hotel/'\nwebhooks:\n  - name: hotel/checkins\n    event: preCheckInStarted\n"
        "    url: http://127.0.0.1:8766/events/hotel\n"
    )

    plan = plan_webhooks_file(written(tmp_path, prefixed), settings).plan

    assert plan.counts == {"create": 1, "update": 0, "delete": 0, "unchanged": 0}
    assert plan.unmanaged == ["arrivals", "german-guests"]


def test_a_second_configuration_of_one_name_is_deleted(
    clean_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    settings = settings_for(clean_sandbox.base_url, tmp_path)
    path = written(tmp_path, TWO)
    apply_webhooks_file(path, settings)
    token = clean_sandbox.http.post(
        "/openapi/v1/oauth2/token",
        data={
            "grant_type": "client_credentials",
            "client_id": "demo-client",
            "client_secret": "demo-secret",
        },
    ).json()["access_token"]
    copy = WebhookConfig(name="arrivals", event="reservationCreated", url="http://x.invalid/e")
    clean_sandbox.http.post(
        "/api/openapi/v1/webhooks",
        json=copy.to_json_dict(),
        headers={"Authorization": f"Bearer {token}"},
    )

    plan = plan_webhooks_file(path, settings).plan

    assert [(str(c.action), c.name, c.reason) for c in plan.changes] == [
        ("delete", "arrivals", "a second configuration of this name (plans match by name)")
    ]


@pytest.mark.parametrize("command", ["plan", "apply"])
def test_the_commands_print_one_json_document_without_header_values(
    clean_sandbox: SandboxHandle, tmp_path: Path, command: str
) -> None:
    env = {
        "PMS_SYNC_CLIENT_ID": "demo-client",
        "PMS_SYNC_CLIENT_SECRET": "demo-secret",
        "PMS_SYNC_SNAPSHOT": str(tmp_path / "snapshot.duckdb"),
    }

    result = CliRunner().invoke(
        main,
        [
            "webhooks",
            command,
            str(written(tmp_path, TWO)),
            "--json",
            "--base-url",
            clean_sandbox.base_url,
        ],
        env=env,
    )

    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["plan"]["counts"]["create"] == 2
    assert HOOK_SECRET not in result.output
    assert ("applied" in document) is (command == "apply")


def test_an_invalid_file_exits_1_naming_line_and_member(
    clean_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    path = written(tmp_path, TWO.replace("reservationCreated", "guestLinkOpened", 1))

    result = CliRunner().invoke(
        main,
        ["webhooks", "plan", str(path), "--json", "--base-url", clean_sandbox.base_url],
        env={"PMS_SYNC_CLIENT_ID": "demo-client", "PMS_SYNC_CLIENT_SECRET": "demo-secret"},
    )

    assert result.exit_code == 1
    error = json.loads(result.stdout)["error"]
    assert "webhooks.yaml:3:" in error and "guestLinkOpenedGuestApp" in error
