"""`pms-sync validate` checks the webhooks file the mapping names, every problem at once and in
words; a file with no webhooks and no prefix (which would delete every configuration of the
Open API client) is refused there and at run time, before any request, unless confirmed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from connector.cli import main
from connector.sandbox.testing import SandboxHandle
from connector.webhooks import WebhooksFileError, apply_webhooks_file, plan_webhooks_file
from tests.loop.loop_samples import arrivals, settings_for, write_connection
from tests.loop.test_webhooks_plan import TWO, service_configs, written

THREE_PROBLEMS = """\
webhooks:
  - name: arrivals
    event: reservationCreated
    url: ftp://pms.example.com/events/hotel
  - name: arrivals
    event: guestLinkOpened
    url: https://pms.example.com/events/hotel
"""


def validate(tmp_path: Path, webhooks: str | None) -> Result:
    """``pms-sync validate`` of a connection whose mapping names ``webhooks.yaml``, written
    with ``webhooks`` unless None (then the file is missing)."""
    mapping = write_connection(tmp_path / "hotel", arrivals([1]), "webhooks: webhooks.yaml\n")
    if webhooks is not None:
        (mapping.parent / "webhooks.yaml").write_text(webhooks)
    return CliRunner().invoke(main, ["validate", str(mapping)])


def test_validate_reports_a_missing_webhooks_file_naming_the_mapping_line(
    tmp_path: Path,
) -> None:
    result = validate(tmp_path, None)

    assert result.exit_code == 1
    assert "mapping.yaml" in result.stderr and "the webhooks file 'webhooks.yaml' is not there" in (
        result.stderr
    )
    assert "(at webhooks)" in result.stderr
    # The records are still checked, and the run ends with the count of problems.
    assert "reservation: 1 valid" in result.stdout
    assert "1 problem(s) found" in result.stderr


def test_validate_reports_three_different_problems_of_the_webhooks_file_at_once(
    tmp_path: Path,
) -> None:
    result = validate(tmp_path, THREE_PROBLEMS)

    assert result.exit_code == 1
    lines = [line.strip() for line in result.stderr.splitlines() if line.startswith("  line ")]
    assert [line.split(":")[0] for line in lines] == ["line 4", "line 5", "line 6"]
    assert "webhook 'arrivals': url must be" in lines[0] and "(at webhooks.0.url)" in lines[0]
    assert "name 'arrivals' is also the name of entry 0" in lines[1]
    assert "renamed 'guestLinkOpenedGuestApp'" in lines[2] and "webhooks.1.event" in lines[2]
    assert "3 problem(s) found" in result.stderr


def test_a_bad_url_is_reported_in_words_not_as_a_pattern(tmp_path: Path) -> None:
    text = TWO.replace("http://127.0.0.1:8766/events/hotel", "pms.example.com/events", 1)

    result = validate(tmp_path, text)

    assert result.exit_code == 1
    assert (
        "webhooks.yaml:4: webhook 'arrivals': url must be an https:// or http:// address without "
        "spaces, got 'pms.example.com/events' (at webhooks.0.url)"
    ) in result.stderr
    assert "https?" not in result.stderr and "pattern" not in result.stderr


def test_validate_passes_a_valid_webhooks_file(tmp_path: Path) -> None:
    result = validate(tmp_path, TWO)

    assert result.exit_code == 0, result.output
    assert "webhooks file webhooks.yaml: 2 configuration(s) ok" in result.stdout


@pytest.mark.parametrize("text", ["webhooks: []\n", "connection: hotel\n"])
def test_validate_refuses_a_file_without_webhooks_or_prefix(tmp_path: Path, text: str) -> None:
    result = validate(tmp_path, text)

    assert result.exit_code == 1
    assert "apply would delete every webhook configuration of the Open API client" in (
        result.stderr
    )
    assert "delete_all: true" in result.stderr


def deletes(sandbox: SandboxHandle) -> dict[str, int]:
    return sandbox.stats()["requests"].get("DELETE /api/openapi/v1/webhooks/{id}", {})


def open_api_requests(sandbox: SandboxHandle) -> int:
    """Requests of the Open API (tokens, webhooks), the admin API's own calls left out."""
    requests = sandbox.stats()["requests"]
    return sum(sum(by_status.values()) for key, by_status in requests.items() if "openapi" in key)


def test_an_empty_file_without_prefix_sends_nothing_and_deletes_once_confirmed(
    clean_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    settings = settings_for(clean_sandbox.base_url, tmp_path)
    apply_webhooks_file(written(tmp_path, TWO), settings)
    before = open_api_requests(clean_sandbox)
    empty = written(tmp_path, "webhooks: []\n")

    for step in (plan_webhooks_file, apply_webhooks_file):
        with pytest.raises(WebhooksFileError, match="write `delete_all: true` to confirm"):
            step(empty, settings)

    assert open_api_requests(clean_sandbox) == before  # refused before any request
    assert deletes(clean_sandbox) == {}
    assert set(service_configs(clean_sandbox)) == {"arrivals", "german-guests"}

    confirmed = apply_webhooks_file(written(tmp_path, "webhooks: []\ndelete_all: true\n"), settings)

    assert [(str(i.change.action), i.outcome) for i in confirmed.applied or []] == [
        ("delete", "applied"),
        ("delete", "applied"),
    ]
    assert sum(deletes(clean_sandbox).values()) == 2
    assert service_configs(clean_sandbox) == {}


def test_the_cli_refuses_the_empty_file_with_exit_1_and_no_request(
    clean_sandbox: SandboxHandle, tmp_path: Path
) -> None:
    result = CliRunner().invoke(
        main,
        [
            "webhooks",
            "apply",
            str(written(tmp_path, "webhooks: []\n")),
            "--json",
            "--base-url",
            clean_sandbox.base_url,
        ],
        env={"PMS_SYNC_CLIENT_ID": "demo-client", "PMS_SYNC_CLIENT_SECRET": "demo-secret"},
    )

    assert result.exit_code == 1
    assert "delete_all: true" in json.loads(result.stdout)["error"]
    assert open_api_requests(clean_sandbox) == 0


def test_delete_all_is_refused_in_a_file_that_lists_webhooks(tmp_path: Path) -> None:
    result = validate(tmp_path, TWO + "delete_all: true\n")

    assert result.exit_code == 1
    assert "this one has webhooks: remove `delete_all`" in result.stderr
