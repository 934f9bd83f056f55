"""The admin API under /_sandbox/ is for local use: guarded by an admin token when one is set,
required beyond loopback, and strict about its integer parameters. Over real sockets."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from connector.cli import main as pms_sync
from connector.sandbox.config import SandboxConfig, load_config
from connector.sandbox.server import (
    BackgroundServer,
    SandboxExposedError,
    exposure_warning,
    is_loopback,
)
from connector.sandbox.testing import (
    SandboxHandle,
    running_sandbox,
    sandbox_process,
    write_config,
)
from tests.sandbox import payloads

ADMIN_TOKEN = "local-admin-token-0123456789"
SYNC = "/api/v1/hooks/reservation/connect"
DEMO_TOKEN = {"X-Wishbox-Auth-Token": "demo-token"}

ADMIN_REQUESTS = [
    ("GET", "/_sandbox/records"),
    ("GET", "/_sandbox/stats"),
    ("GET", "/_sandbox/faults"),
    ("POST", "/_sandbox/faults"),
    ("POST", "/_sandbox/reset"),
    ("POST", "/_sandbox/drift"),
    ("GET", "/_sandbox/health"),
    ("GET", "/_sandbox/no-such-endpoint"),
    ("DELETE", "/_sandbox/records"),
]


def guarded_config() -> SandboxConfig:
    return SandboxConfig.demo().with_admin_token(ADMIN_TOKEN)


@pytest.fixture(scope="module")
def guarded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SandboxHandle]:
    """A sandbox with an admin token, holding one reservation."""
    with running_sandbox(tmp_path_factory.mktemp("guarded"), guarded_config()) as handle:
        stored = handle.http.post(
            SYNC,
            json=payloads.envelope("reservation", payloads.reservation("res-1")),
            headers=DEMO_TOKEN,
        )
        assert stored.status_code == 200, stored.text
        yield handle


# -- the token -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "path"), ADMIN_REQUESTS)
@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "Bearer wrong-token-0123456789"}, {"X-Sandbox-Admin-Token": "x"}],
    ids=["none", "wrong bearer", "wrong header"],
)
def test_every_admin_request_without_the_token_is_refused_401(
    guarded: SandboxHandle, method: str, path: str, headers: dict[str, str]
) -> None:
    response = guarded.http.request(method, path, headers=headers)

    assert response.status_code == 401
    assert response.json()["error"] == "unauthorized"
    assert "Authorization: Bearer <token>" in response.json()["message"]
    assert response.headers["WWW-Authenticate"].startswith("Bearer")
    assert "wrong-token" not in response.text
    assert guarded.count() == 1  # a refused reset forgot nothing


@pytest.mark.parametrize(
    "headers",
    [{"Authorization": f"Bearer {ADMIN_TOKEN}"}, {"X-Sandbox-Admin-Token": ADMIN_TOKEN}],
    ids=["bearer", "header"],
)
def test_the_token_is_accepted_in_either_header(
    guarded: SandboxHandle, headers: dict[str, str]
) -> None:
    response = guarded.http.get("/_sandbox/records", headers=headers)

    assert response.status_code == 200
    (record,) = response.json()["records"]
    assert record["id"] == "res-1"


def test_with_the_token_unknown_paths_and_methods_answer_404_and_405(
    guarded: SandboxHandle,
) -> None:
    headers = {"X-Sandbox-Admin-Token": ADMIN_TOKEN}

    unknown = guarded.http.get("/_sandbox/no-such-endpoint", headers=headers)
    wrong_method = guarded.http.delete("/_sandbox/records", headers=headers)

    assert unknown.status_code == 404 and unknown.json()["error"] == "not_found"
    assert wrong_method.status_code == 405 and wrong_method.headers["Allow"] == "GET"


def test_the_service_endpoints_do_not_need_the_admin_token(guarded: SandboxHandle) -> None:
    response = guarded.http.post(
        SYNC,
        json=payloads.envelope("reservation", payloads.reservation("res-1")),
        headers=DEMO_TOKEN,
    )

    assert response.status_code == 200


def test_the_testing_handle_sends_the_configured_token(guarded: SandboxHandle) -> None:
    assert [record["id"] for record in guarded.records("demo", "reservation")] == ["res-1"]
    assert guarded.health()["records"]
    assert guarded.stats() is not None


def test_an_admin_token_in_the_config_file_guards_the_admin_api(tmp_path: Path) -> None:
    config_file = write_config(guarded_config(), tmp_path / "sandbox.yaml")
    assert load_config(config_file).admin_token == ADMIN_TOKEN

    with running_sandbox(tmp_path / "data", config_file) as handle:
        refused = handle.http.get("/_sandbox/health")
        health = handle.health()

    assert refused.status_code == 401
    assert health["status"] == "ok"


def test_the_cli_token_guards_a_sandbox_process_and_its_handle_sends_it(tmp_path: Path) -> None:
    with sandbox_process(tmp_path, extra_args=("--admin-token", ADMIN_TOKEN)) as handle:
        refused = httpx.get(f"{handle.base_url}/_sandbox/records")
        records = handle.records()

    assert refused.status_code == 401
    assert records == []
    assert ADMIN_TOKEN not in handle.log()  # the banner says a token is required, not which
    assert "admin token required" in handle.log()


# -- loopback or not -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("host", "loopback"),
    [
        ("127.0.0.1", True),
        ("127.8.9.10", True),
        ("::1", True),
        ("[::1]", True),
        ("localhost", True),
        ("LOCALHOST", True),
        ("0.0.0.0", False),
        ("::", False),
        ("", False),
        ("192.168.1.20", False),
        ("sandbox.example.org", False),
    ],
)
def test_only_loopback_hosts_count_as_local(host: str, loopback: bool) -> None:
    assert is_loopback(host) is loopback


def test_a_non_loopback_host_without_a_token_is_refused_before_anything_is_bound(
    tmp_path: Path,
) -> None:
    with pytest.raises(SandboxExposedError, match=r"refusing to listen on 0\.0\.0\.0"):
        BackgroundServer(SandboxConfig.demo(), tmp_path / "data", "0.0.0.0", 0)

    assert not (tmp_path / "data").exists()  # nothing was opened either
    assert exposure_warning("127.0.0.1", SandboxConfig.demo()) is None


def test_the_cli_refuses_a_non_loopback_host_without_a_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PMS_SYNC_SANDBOX_ADMIN_TOKEN", raising=False)

    result = CliRunner().invoke(
        pms_sync, ["sandbox", "--host", "0.0.0.0", "--port", "0", "--data", str(tmp_path)]
    )

    assert result.exit_code == 1
    assert "refusing to listen on 0.0.0.0" in result.output
    assert "door codes" in result.output and "--admin-token" in result.output


def test_an_unfit_admin_token_is_refused_without_being_quoted(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        pms_sync,
        ["sandbox", "--host", "0.0.0.0", "--port", "0", "--data", str(tmp_path)],
        env={"PMS_SYNC_SANDBOX_ADMIN_TOKEN": "short secret"},
    )

    assert result.exit_code == 1
    assert "admin token must be at least 16 visible ASCII characters" in result.output
    assert "short secret" not in result.output


def test_with_a_token_a_non_loopback_host_starts_with_a_warning_and_guards_the_admin_api(
    tmp_path: Path,
) -> None:
    with sandbox_process(
        tmp_path,
        extra_args=("--host", "0.0.0.0"),  # the last --host wins over the helper's loopback
        env={"PMS_SYNC_SANDBOX_ADMIN_TOKEN": ADMIN_TOKEN},
    ) as handle:
        port = handle.base_url.rsplit(":", 1)[1]
        refused = httpx.get(f"http://127.0.0.1:{port}/_sandbox/records")
        health = handle.health()
        log = handle.log()

    assert "listening on http://0.0.0.0:" in log
    assert "warning: the sandbox listens on 0.0.0.0 and is reachable from the network" in log
    assert refused.status_code == 401
    assert health["status"] == "ok"


# -- DNS rebinding: the Host names the sandbox -------------------------------------------------


def _port(handle: SandboxHandle) -> int:
    return int(handle.base_url.rsplit(":", 1)[1])


@pytest.mark.parametrize(
    "host", ["evil.example", "evil.example:{port}", "127.0.0.1.evil.example:{port}", "127.0.0.1:1"]
)
def test_a_host_that_does_not_name_the_sandbox_is_refused_421(
    guarded: SandboxHandle, host: str
) -> None:
    headers = {"Host": host.format(port=_port(guarded)), "X-Sandbox-Admin-Token": ADMIN_TOKEN}

    records = guarded.http.get("/_sandbox/records", headers=headers)
    sync = guarded.http.post(
        SYNC,
        json=payloads.envelope("reservation", payloads.reservation("res-2")),
        headers={**headers, **DEMO_TOKEN},
    )

    for refused in (records, sync):
        assert refused.status_code == 421
        assert refused.json()["error"] == "misdirected_request"
        assert "--allowed-host" in refused.json()["message"]
    assert "res-1" not in records.text
    assert [record["id"] for record in guarded.records()] == ["res-1"]  # nothing stored


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "LOCALHOST.:{port}"])
def test_a_host_naming_the_sandbox_s_loopback_address_is_answered(
    guarded: SandboxHandle, host: str
) -> None:
    headers = {"Host": host.format(port=_port(guarded)), "X-Sandbox-Admin-Token": ADMIN_TOKEN}

    response = guarded.http.get("/_sandbox/records", headers=headers)

    assert response.status_code == 200
    assert [record["id"] for record in response.json()["records"]] == ["res-1"]


def test_an_allowed_host_name_is_answered_on_any_port(tmp_path: Path) -> None:
    config = SandboxConfig.demo().with_allowed_hosts(["sandbox.internal", "proxy.internal:443"])

    with running_sandbox(tmp_path, config) as handle:
        named = handle.http.get("/_sandbox/health", headers={"Host": "sandbox.internal:8080"})
        proxied = handle.http.get("/_sandbox/health", headers={"Host": "proxy.internal:443"})
        other_port = handle.http.get("/_sandbox/health", headers={"Host": "proxy.internal:80"})

    assert (named.status_code, proxied.status_code, other_port.status_code) == (200, 200, 421)


def test_the_cli_allows_a_host_name_and_refuses_an_unfit_one(tmp_path: Path) -> None:
    with sandbox_process(tmp_path, extra_args=("--allowed-host", "sandbox.internal")) as handle:
        named = httpx.get(
            f"{handle.base_url}/_sandbox/health", headers={"Host": "sandbox.internal"}
        )
        other = httpx.get(f"{handle.base_url}/_sandbox/health", headers={"Host": "evil.example"})
    unfit = CliRunner().invoke(
        pms_sync, ["sandbox", "--port", "0", "--data", str(tmp_path), "--allowed-host", "a b"]
    )

    assert (named.status_code, other.status_code) == (200, 421)
    assert unfit.exit_code == 1 and "--allowed-host: expected a host name" in unfit.output


# -- cross-site "simple" requests: state changes are JSON or carry the token ---------------------


@pytest.mark.parametrize(
    ("path", "body", "media"),
    [
        ("/_sandbox/reset", "", None),
        ("/_sandbox/reset", "{}", "text/plain"),
        ("/_sandbox/faults", "error_rate=1", "application/x-www-form-urlencoded"),
        ("/_sandbox/drift", '{"action": "delete"}', "text/plain;charset=UTF-8"),
        ("/_sandbox/events/redeliver", "{}", "multipart/form-data; boundary=x"),
    ],
)
def test_a_state_change_a_web_page_could_send_cross_site_is_refused_415(
    clean_sandbox: SandboxHandle, path: str, body: str, media: str | None
) -> None:
    stored = clean_sandbox.http.post(
        SYNC,
        json=payloads.envelope("reservation", payloads.reservation("res-1")),
        headers=DEMO_TOKEN,
    )
    assert stored.status_code == 200
    headers = {} if media is None else {"Content-Type": media}

    refused = clean_sandbox.http.post(path, content=body, headers=headers)

    assert refused.status_code == 415
    assert refused.json()["error"] == "unsupported_media_type"
    assert "Content-Type: application/json" in refused.json()["message"]
    assert clean_sandbox.count() == 1  # not reset
    assert clean_sandbox.set_faults() == clean_sandbox.http.get("/_sandbox/faults").json()["faults"]


def test_a_json_state_change_is_accepted_and_reads_need_no_content_type(
    clean_sandbox: SandboxHandle,
) -> None:
    clean_sandbox.http.post(
        SYNC,
        json=payloads.envelope("reservation", payloads.reservation("res-1")),
        headers=DEMO_TOKEN,
    )

    records = clean_sandbox.http.get("/_sandbox/records")
    reset = clean_sandbox.http.post(
        "/_sandbox/reset", content="{}", headers={"Content-Type": "application/json; charset=utf-8"}
    )

    assert records.status_code == 200 and records.json()["total"] == 1
    assert reset.status_code == 200
    assert clean_sandbox.count() == 0


def test_with_the_admin_token_a_state_change_needs_no_json(guarded: SandboxHandle) -> None:
    response = guarded.http.post(
        "/_sandbox/faults",
        content="{}",
        headers={"Content-Type": "text/plain", "X-Sandbox-Admin-Token": ADMIN_TOKEN},
    )

    assert response.status_code == 200


def test_an_admin_token_read_with_a_windows_line_ending_is_stripped(tmp_path: Path) -> None:
    with sandbox_process(
        tmp_path, env={"PMS_SYNC_SANDBOX_ADMIN_TOKEN": f"{ADMIN_TOKEN}\r\n"}
    ) as handle:
        refused = httpx.get(f"{handle.base_url}/_sandbox/records")
        accepted = httpx.get(
            f"{handle.base_url}/_sandbox/records", headers={"X-Sandbox-Admin-Token": ADMIN_TOKEN}
        )

    assert (refused.status_code, accepted.status_code) == (401, 200)


# -- integer parameters --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("parameter", "value"),
    [
        ("limit", str(10**30)),
        ("limit", "1000000001"),
        ("limit", "-1"),
        ("limit", "²"),
        ("offset", "-1"),
        ("offset", str(10**30)),
        ("offset", "1e3"),
    ],
)
def test_an_out_of_range_page_parameter_is_a_400_naming_it_and_the_range(
    clean_sandbox: SandboxHandle, parameter: str, value: str
) -> None:
    response = clean_sandbox.http.get("/_sandbox/records", params={parameter: value})

    assert response.status_code == 400
    assert response.json()["message"].startswith(
        f"{parameter}: expected an integer from 0 to 1000000000, got "
    )


def test_the_largest_page_parameters_are_accepted(clean_sandbox: SandboxHandle) -> None:
    response = clean_sandbox.http.get(
        "/_sandbox/records", params={"limit": "1000000000", "offset": "1000000000"}
    )

    assert response.status_code == 200
    assert response.json() == {"records": [], "total": 0}
