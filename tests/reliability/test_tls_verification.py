"""TLS certificates are verified by default; only a base URL named on purpose skips the check.

A real sandbox served over HTTPS with a self-signed certificate (made with the openssl command):
the default client refuses it, the client that names exactly this base URL talks to it, and
naming another URL does not help. There is no blanket switch.
"""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from connector.client import _client
from connector.contract import Entity
from connector.errors import ConfigError
from connector.mapping.batches import mapped_records_from_resources
from connector.pipeline import sync_batches
from connector.sandbox.config import SandboxConfig
from connector.sandbox.server import bind_socket, build_server
from connector.settings import load_settings

UNIT = {
    "id": "tls-1",
    "status": "ACTIVE",
    "name": "Room 1",
    "street": "Hauptstraße",
    "streetNumber": "7",
    "country": "DE",
    "city": "Berlin",
    "wifiName": "guest",
    "wifiCode": "wifi-secret-99",
    "doorCode": "door-4711",
}


class HttpsSandbox(NamedTuple):
    base_url: str
    certificate: Path  # self-signed: trusted only by a client told to trust this file


@pytest.fixture(scope="module")
def https_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpsSandbox]:
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make a self-signed certificate")
    folder = tmp_path_factory.mktemp("tls")
    key, cert = folder / "key.pem", folder / "cert.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-keyout", str(key), "-out", str(cert), "-subj", "/CN=127.0.0.1"),
            *("-addext", "subjectAltName=IP:127.0.0.1"),
        ],
        check=True,
        capture_output=True,
    )
    server = build_server(SandboxConfig.demo(), folder / "data", access_log=False)
    server.config.ssl_keyfile = str(key)
    server.config.ssl_certfile = str(cert)
    sock = bind_socket("127.0.0.1", 0)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.started, "the HTTPS sandbox did not start"
    try:
        yield HttpsSandbox(f"https://127.0.0.1:{sock.getsockname()[1]}", cert)
    finally:
        server.sandbox_state.shutting_down = True
        server.should_exit = True
        thread.join(10)
        sock.close()


@pytest.fixture
def https_sandbox(https_server: HttpsSandbox) -> str:
    return https_server.base_url


def _sync_one_unit(base_url: str, tmp_path: Path, env: dict[str, str]):
    settings = load_settings(
        base_url=base_url,
        snapshot=tmp_path / "snapshot.duckdb",
        token="demo-token",
        max_attempts=1,
        env=env,
    )
    batch = mapped_records_from_resources(Entity.ACCOMMODATION, [("demo", UNIT)])
    return settings, sync_batches({Entity.ACCOMMODATION: batch}, settings)


def test_a_self_signed_certificate_is_refused_by_default(https_sandbox: str, tmp_path: Path):
    settings, report = _sync_one_unit(https_sandbox, tmp_path, env={})

    assert settings.client.verify_tls
    assert report.outcomes["acknowledged"] == 0
    assert report.outcomes["pending"] == 1
    assert "certificate" in report.push.problems[0].message.lower()


def test_naming_the_base_url_skips_verification_for_that_url_only(
    https_sandbox: str, tmp_path: Path
):
    named, report = _sync_one_unit(
        https_sandbox, tmp_path, env={"PMS_SYNC_INSECURE_TLS_FOR": https_sandbox + "/"}
    )
    other, _ = _sync_one_unit(
        https_sandbox,
        tmp_path / "other",
        env={"PMS_SYNC_INSECURE_TLS_FOR": "https://pms.internal:8443"},
    )

    assert not named.client.verify_tls
    assert report.outcomes["acknowledged"] == 1
    assert other.client.verify_tls


def test_a_ca_bundle_named_in_the_environment_is_trusted(
    https_server: HttpsSandbox, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # Named after aiohttp made its own context at import: the client makes one that reads
    # the bundle, once for both runs.
    monkeypatch.setenv("SSL_CERT_FILE", str(https_server.certificate))
    monkeypatch.delenv("SSL_CERT_DIR", raising=False)
    _client._verifying_context.cache_clear()

    _, first = _sync_one_unit(https_server.base_url, tmp_path / "first", env={})
    _, second = _sync_one_unit(https_server.base_url, tmp_path / "second", env={})

    assert first.outcomes["acknowledged"] == 1
    assert second.outcomes["acknowledged"] == 1
    made = _client._verifying_context.cache_info()
    assert (made.misses, made.hits) == (1, 1)


@pytest.mark.parametrize("value", ["0", "false", "no"])
def test_a_blanket_switch_to_turn_verification_off_is_refused(value: str):
    with pytest.raises(ConfigError, match="PMS_SYNC_INSECURE_TLS_FOR"):
        load_settings(env={"PMS_SYNC_VERIFY_TLS": value})


def test_insecure_hosts_must_be_https_base_urls():
    with pytest.raises(ConfigError, match="base URLs"):
        load_settings(env={"PMS_SYNC_INSECURE_TLS_FOR": "*"})


def test_no_verify_false_exists_in_the_library():
    # The one place verification is decided is ClientConfig.verify_tls; a literal False would
    # be a blanket switch someone could reach without naming a host.
    library = Path(__file__).resolve().parents[2] / "connector"
    offenders = [
        str(path)
        for path in library.rglob("*.py")
        if "verify=False" in path.read_text() or "verify_tls=False" in path.read_text()
    ]
    assert offenders == []
