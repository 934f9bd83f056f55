"""`pms-sync receive`: the service's events accepted over HTTP, the secret header checked, the
body bounded, each event stored once in the receiver's DuckDB file, answered at once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from connector.cli import main
from connector.errors import ConfigError
from connector.events import (
    BackgroundReceiver,
    ReceiverExposedError,
    ReceiverSettings,
    exposure_warning,
    new_events,
    receiver_settings,
)
from tests.loop.loop_samples import RECEIVER_SECRET, default_stop_signals, running_receiver

EVENT = {"accountId": "demo", "event": "reservationCreated", "resource": {"externalId": "B1"}}
HEADERS = {"X-Receiver-Secret": RECEIVER_SECRET}


def test_an_event_is_stored_once_however_often_it_is_delivered(tmp_path: Path) -> None:
    store = tmp_path / "events.duckdb"
    with running_receiver(store) as receiver:
        url = f"{receiver.base_url}/events/hotel"
        first = httpx.post(url, json=EVENT, headers=HEADERS)
        again = httpx.post(url, content=json.dumps(EVENT, indent=2), headers=HEADERS)

    assert (first.status_code, first.json()["status"]) == (200, "stored")
    assert (again.status_code, again.json()["status"]) == (200, "duplicate")
    stored = new_events(store, "hotel").events
    assert stored[["event", "account_id", "deliveries"]].values.tolist() == [
        ["reservationCreated", "demo", 2]
    ]
    assert json.loads(stored.iloc[0]["resource"]) == {"externalId": "B1"}


@pytest.mark.parametrize("presented", [None, "wrong-secret-of-some-length"])
def test_without_the_right_secret_header_nothing_is_stored(
    tmp_path: Path, presented: str | None
) -> None:
    store = tmp_path / "events.duckdb"
    headers = {} if presented is None else {"X-Receiver-Secret": presented}
    with running_receiver(store) as receiver:
        answer = httpx.post(f"{receiver.base_url}/events/hotel", json=EVENT, headers=headers)

    assert answer.status_code == 401
    assert RECEIVER_SECRET not in answer.text
    assert new_events(store, "hotel").events.empty


def test_a_body_over_the_bound_is_refused_before_it_is_stored(tmp_path: Path) -> None:
    store = tmp_path / "events.duckdb"
    big = {**EVENT, "resource": {"note": "x" * 5000}}
    with running_receiver(store, max_body_bytes=4096) as receiver:
        answer = httpx.post(f"{receiver.base_url}/events/hotel", json=big, headers=HEADERS)

    assert answer.status_code == 413
    assert new_events(store, "hotel").events.empty


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b"not json", "not JSON"),
        (b"[1, 2]", "expected a JSON object"),
        (b'{"accountId": "demo", "resource": {}}', "event:"),
        (b'{"event": "orderDenied", "resource": "B1"}', "resource:"),
        (
            b'{"event": "reservationCreated", "resource": {"x": NaN}}',
            "not strict JSON: NaN is not a JSON value",
        ),
        (b'{"event": "x", "resource": {"n": -Infinity}}', "-Infinity is not a JSON value"),
        (
            b'{"event": "orderDenied", "event": "orderExpired", "resource": {}}',
            "member 'event' appears twice in one object",
        ),
        (b'{"event": "x", "resource": {"a": {"b": 1, "b": 2}}}', "member 'b' appears twice"),
    ],
)
def test_a_body_that_is_no_event_is_refused(tmp_path: Path, body: bytes, problem: str) -> None:
    store = tmp_path / "events.duckdb"
    with running_receiver(store) as receiver:
        answer = httpx.post(f"{receiver.base_url}/events/hotel", content=body, headers=HEADERS)

    assert answer.status_code == 400 and problem in answer.json()["message"]
    assert new_events(store, "hotel").events.empty


def test_events_are_kept_per_connection_of_the_path(tmp_path: Path) -> None:
    store = tmp_path / "events.duckdb"
    with running_receiver(store) as receiver:
        httpx.post(f"{receiver.base_url}/events/hotel", json=EVENT, headers=HEADERS)
        httpx.post(f"{receiver.base_url}/events/apartments", json=EVENT, headers=HEADERS)
        odd = httpx.post(f"{receiver.base_url}/events/a%20b", json=EVENT, headers=HEADERS)

        # Read while the receiver runs: it holds the file only while writing a batch.
        during = len(new_events(store, "hotel").events)

    assert odd.status_code == 404
    assert during == 1 and len(new_events(store, "apartments").events) == 1


def test_without_a_secret_the_receiver_listens_on_loopback_only() -> None:
    with pytest.raises(ReceiverExposedError, match="PMS_SYNC_RECEIVER_SECRET"):
        exposure_warning(ReceiverSettings(store_path=Path("e.duckdb"), host="0.0.0.0"))

    assert "no receiver secret" in (exposure_warning(ReceiverSettings(Path("e.duckdb"))) or "")
    exposed = ReceiverSettings(Path("e.duckdb"), host="0.0.0.0", secret=RECEIVER_SECRET)
    assert exposure_warning(exposed) is None


def test_the_command_refuses_a_public_address_without_a_secret(tmp_path: Path) -> None:
    result = CliRunner().invoke(
        main,
        ["receive", "--host", "0.0.0.0", "--port", "0", "--events", str(tmp_path / "e.duckdb")],
        env={"PMS_SYNC_RECEIVER_SECRET": ""},
    )

    assert result.exit_code == 1
    assert "refusing to listen on 0.0.0.0 without a secret" in result.output


def test_a_short_secret_is_refused() -> None:
    with pytest.raises(ConfigError, match="at least 16 characters"):
        ReceiverSettings(Path("e.duckdb"), secret="short")


def test_while_another_process_holds_the_store_the_service_is_asked_to_retry(
    tmp_path: Path,
) -> None:
    store = tmp_path / "events.duckdb"
    with running_receiver(store, lock_timeout_s=0.3) as receiver:
        holder = subprocess.Popen(
            [
                sys.executable,
                "-c",
                f"import duckdb, sys, time; c = duckdb.connect({str(store)!r}); "
                "print('held', flush=True); time.sleep(30)",
            ],
            stdout=subprocess.PIPE,
        )
        try:
            assert holder.stdout is not None and holder.stdout.readline().strip() == b"held"
            answer = httpx.post(f"{receiver.base_url}/events/hotel", json=EVENT, headers=HEADERS)
        finally:
            holder.kill()
            holder.wait()
        retried = httpx.post(f"{receiver.base_url}/events/hotel", json=EVENT, headers=HEADERS)

    assert (answer.status_code, answer.headers["retry-after"]) == (503, "5")
    assert retried.json()["status"] == "stored"


def test_settings_come_from_options_then_the_environment_then_defaults(tmp_path: Path) -> None:
    env = {"PMS_SYNC_RECEIVER_PORT": "9000", "PMS_SYNC_RECEIVER_SECRET": RECEIVER_SECRET}

    given = receiver_settings(snapshot_path=tmp_path / "snapshot.duckdb", port=0, env=env)
    default = receiver_settings(
        snapshot_path=tmp_path / "snapshot.duckdb",
        env={"PMS_SYNC_EVENTS": str(tmp_path / "elsewhere.duckdb")},
    )

    assert (given.port, given.secret, given.store_path) == (
        0,
        RECEIVER_SECRET,
        tmp_path / "events.duckdb",
    )
    assert (default.port, default.secret, default.secret_header, default.max_body_bytes) == (
        8766,
        None,
        "X-Receiver-Secret",
        65536,
    )
    assert default.store_path == tmp_path / "elsewhere.duckdb"


# -- what a web page in the operator's browser cannot do -----------------------------------------


def test_a_host_that_does_not_name_the_receiver_is_refused_421(tmp_path: Path) -> None:
    store = tmp_path / "events.duckdb"
    with running_receiver(store) as receiver:
        url = f"{receiver.base_url}/events/hotel"
        port = receiver.base_url.rsplit(":", 1)[1]
        rebound = httpx.post(url, json=EVENT, headers={**HEADERS, "Host": f"evil.example:{port}"})
        named = httpx.post(url, json=EVENT, headers={**HEADERS, "Host": f"localhost:{port}"})

    assert rebound.status_code == 421
    assert "PMS_SYNC_RECEIVER_ALLOWED_HOSTS" in rebound.json()["message"]
    assert named.status_code == 200
    assert len(new_events(store, "hotel").events) == 1


def test_an_allowed_host_name_reaches_the_receiver(tmp_path: Path) -> None:
    settings = receiver_settings(
        snapshot_path=tmp_path / "snapshot.duckdb",
        port=0,
        env={
            "PMS_SYNC_RECEIVER_SECRET": RECEIVER_SECRET,
            "PMS_SYNC_RECEIVER_ALLOWED_HOSTS": "events.example.org, proxy.internal:8443",
        },
    )
    receiver = BackgroundReceiver(settings)
    receiver.start()
    try:
        url = f"{receiver.base_url}/events/hotel"
        public = httpx.post(url, json=EVENT, headers={**HEADERS, "Host": "events.example.org"})
        other = httpx.post(url, json=EVENT, headers={**HEADERS, "Host": "proxy.internal:80"})
    finally:
        receiver.stop()

    assert (public.status_code, other.status_code) == (200, 421)


def test_without_a_secret_only_a_json_event_is_stored(tmp_path: Path) -> None:
    store = tmp_path / "events.duckdb"
    body = json.dumps(EVENT)
    with running_receiver(store, secret=None) as receiver:
        url = f"{receiver.base_url}/events/hotel"
        plain = httpx.post(url, content=body, headers={"Content-Type": "text/plain"})
        form = httpx.post(url, data={"event": "reservationCreated"})
        sent = httpx.post(url, json=EVENT)

    assert (plain.status_code, form.status_code, sent.status_code) == (415, 415, 200)
    assert len(new_events(store, "hotel").events) == 1


def test_a_receiver_secret_read_with_a_line_ending_is_stripped(tmp_path: Path) -> None:
    settings = receiver_settings(
        snapshot_path=tmp_path / "snapshot.duckdb",
        port=0,
        env={"PMS_SYNC_RECEIVER_SECRET": f"{RECEIVER_SECRET}\r\n"},
    )
    receiver = BackgroundReceiver(settings)
    receiver.start()
    try:
        answer = httpx.post(f"{receiver.base_url}/events/hotel", json=EVENT, headers=HEADERS)
    finally:
        receiver.stop()

    assert settings.secret == RECEIVER_SECRET
    assert answer.status_code == 200
    with pytest.raises(ConfigError) as refused:
        receiver_settings(
            snapshot_path=tmp_path / "snapshot.duckdb",
            env={"PMS_SYNC_RECEIVER_SECRET": "receiver-secret\x1b[2J-0123456789"},
        )
    assert str(refused.value).startswith("PMS_SYNC_RECEIVER_SECRET: the value holds U+001B")
    assert "0123456789" not in str(refused.value)


@pytest.mark.slow
def test_the_command_receives_until_it_is_terminated(tmp_path: Path) -> None:
    store = tmp_path / "events.duckdb"
    process = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "pms-sync"),
            "receive",
            "--port",
            "0",
            "--events",
            str(store),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        env={**os.environ, "PMS_SYNC_RECEIVER_SECRET": RECEIVER_SECRET},
        # As a service manager starts it: an ignored SIGTERM would be inherited through exec,
        # and uvicorn, after its graceful stop, re-raises the signal under that disposition.
        preexec_fn=default_stop_signals,
    )
    inherited = signal.getsignal(signal.SIGTERM)
    try:
        assert process.stdout is not None
        banner = process.stdout.readline().decode()  # printed once the port is bound
        assert "listening on " in banner, banner
        base_url = banner.split("listening on ")[1].split("/events")[0]
        answer = httpx.post(f"{base_url}/events/hotel", json=EVENT, headers=HEADERS)
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(10)

    assert answer.json()["status"] == "stored"
    # A graceful shutdown, then the signal's own status.
    assert code == -signal.SIGTERM, f"exit {code}; the test's SIGTERM handler {inherited!r}"
    assert len(new_events(store, "hotel").events) == 1
