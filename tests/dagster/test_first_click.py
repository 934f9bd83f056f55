"""The first click works: ``make dev`` starts the local sandbox when the configured service is
a loopback address nobody answers on, and ``make demo`` reports a failed check once."""

from __future__ import annotations

import socket
from pathlib import Path

import dagster as dg
import httpx
import pytest

from assets import dev, local_sandbox
from assets.demo import failed_check_lines


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_dev_starts_the_sandbox_where_nothing_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    base_url = f"http://127.0.0.1:{_free_port()}"
    assert not local_sandbox.answers(base_url)
    monkeypatch.setenv("PMS_SYNC_BASE_URL", base_url)
    monkeypatch.setattr(local_sandbox, "SANDBOX_DATA", tmp_path / "sandbox")
    seen: dict[str, object] = {}

    def ui(port: int, host: str) -> int:
        # In place of `dg dev`: what the UI's first Materialize would reach.
        answer = httpx.get(
            f"{base_url}/_sandbox/health", headers={"Authorization": "Bearer demo-token"}
        )
        seen["status"] = answer.status_code
        seen["port"] = port
        return 0

    monkeypatch.setattr(dev, "_run_ui", ui)
    assert dev.main(["--port", "3999"]) == 0
    assert seen == {"status": 200, "port": 3999}
    assert (tmp_path / "sandbox" / "sandbox.log").exists()
    assert f"nothing answers on {base_url}: starting the local sandbox" in capsys.readouterr().out
    # Stopped with the UI: the port is free again.
    assert not local_sandbox.answers(base_url)


def test_dev_leaves_an_answering_service_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    port = _free_port()
    base_url = f"http://127.0.0.1:{port}"
    with local_sandbox.sandbox_if_needed(base_url, tmp_path / "first") as started:
        assert started
        with local_sandbox.sandbox_if_needed(base_url, tmp_path / "second") as again:
            assert not again
        assert not (tmp_path / "second").exists()


def test_a_remote_service_is_never_replaced(capsys: pytest.CaptureFixture[str]) -> None:
    # A reserved documentation address (RFC 5737): nothing answers, and it is not loopback.
    with local_sandbox.sandbox_if_needed("http://192.0.2.1:9") as started:
        assert not started
    assert "nothing answers on http://192.0.2.1:9" in capsys.readouterr().out
    assert local_sandbox.start_command("http://127.0.0.1:8765") == (
        ".venv/bin/pms-sync sandbox --port 8765"
    )


def test_demo_reports_a_failed_check_once_with_its_reason() -> None:
    key = dg.AssetKey(["hotel", "synced_reservations"])

    def evaluation(month: str, passed: bool) -> dg.AssetCheckEvaluation:
        return dg.AssetCheckEvaluation(
            asset_key=key,
            check_name="no_new_dead_letters",
            passed=passed,
            partition=month,
            description=None if passed else f"1 record refused in {month}",
        )

    months = ["2026-05", "2026-06", "2026-07"]
    lines = failed_check_lines(
        [evaluation(m, False) for m in months] + [evaluation("2026-08", True)]
    )
    assert lines == [
        "  ! check no_new_dead_letters on hotel/synced_reservations did not pass in 3 months "
        "(2026-05 … 2026-07): 1 record refused in 2026-05"
    ]
    assert failed_check_lines([evaluation("2026-08", True)]) == []
