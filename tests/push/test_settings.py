"""Settings from flags, environment and tokens files."""

from __future__ import annotations

from pathlib import Path

import pytest

from connector.client import AcknowledgementPolicy, TokenPlacement, Transport
from connector.errors import ConfigError
from connector.settings import DEFAULT_SNAPSHOT, load_settings


def test_defaults_point_at_the_local_sandbox_and_the_default_snapshot() -> None:
    settings = load_settings(env={})

    assert settings.client.base_url == "http://127.0.0.1:8765"
    assert settings.snapshot_path == DEFAULT_SNAPSHOT
    assert settings.client.transport == Transport.AIOHTTP
    assert settings.client.token_placement == {TokenPlacement.WISHBOX_HEADER, TokenPlacement.BEARER}
    assert settings.client.verify_tls


def test_flags_win_over_environment_variables(tmp_path: Path) -> None:
    env = {"PMS_SYNC_BASE_URL": "https://env.example", "PMS_SYNC_SNAPSHOT": "env.duckdb"}

    from_env = load_settings(env=env)
    from_flags = load_settings(base_url="https://flag.example/", snapshot=tmp_path / "s", env=env)

    assert (from_env.client.base_url, str(from_env.snapshot_path)) == (
        "https://env.example",
        "env.duckdb",
    )
    assert from_flags.client.base_url == "https://flag.example"
    assert from_flags.snapshot_path == tmp_path / "s"


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("tokens.yaml", "acc-1: token-one\nacc-2: token-two\n"),
        ("tokens.json", '{"acc-1": "token-one", "acc-2": "token-two"}'),
    ],
)
def test_a_tokens_file_gives_each_account_its_token_and_the_shared_token_the_rest(
    tmp_path: Path, name: str, text: str
) -> None:
    path = tmp_path / name
    path.write_text(text)

    tokens = load_settings(
        env={"PMS_SYNC_TOKENS_FILE": str(path), "PMS_SYNC_TOKEN": "shared"}
    ).tokens

    assert tokens.for_account("acc-2") == "token-two"
    assert tokens.for_account("acc-9") == "shared"
    assert "token-two" not in repr(tokens) and "shared" not in repr(tokens)


def test_a_malformed_tokens_file_is_named_without_quoting_its_tokens(tmp_path: Path) -> None:
    path = tmp_path / "tokens.yaml"
    path.write_text("acc-1: [secret-token-value\n")

    with pytest.raises(ConfigError, match=r"tokens\.yaml") as caught:
        load_settings(env={"PMS_SYNC_TOKENS_FILE": str(path)})

    assert "secret-token-value" not in str(caught.value)


def test_invalid_numbers_and_placements_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="PMS_SYNC_CONCURRENCY"):
        load_settings(env={"PMS_SYNC_CONCURRENCY": "many"})
    with pytest.raises(ConfigError, match="PMS_SYNC_TOKEN_PLACEMENT"):
        load_settings(env={"PMS_SYNC_TOKEN_PLACEMENT": "cookie"})
    assert load_settings(env={"PMS_SYNC_TOKEN_PLACEMENT": "apiToken"}).client.token_placement == {
        TokenPlacement.API_TOKEN_MEMBER
    }


def test_the_acknowledgement_policy_is_counts_unless_the_environment_says_documented() -> None:
    default = load_settings(env={}).client.acknowledgement
    documented = load_settings(env={"PMS_SYNC_ACKNOWLEDGEMENT": "Documented"}).client

    assert default == AcknowledgementPolicy.COUNTS
    assert documented.acknowledgement == AcknowledgementPolicy.DOCUMENTED
    with pytest.raises(ConfigError, match="PMS_SYNC_ACKNOWLEDGEMENT must be one of counts, "):
        load_settings(env={"PMS_SYNC_ACKNOWLEDGEMENT": "any-2xx"})


@pytest.mark.parametrize(
    ("flag", "env", "expected"),
    [
        (None, {}, 21600.0),  # every run has a deadline: 6 h
        (None, {"PMS_SYNC_MAX_DURATION": "90"}, 90.0),
        (None, {"PMS_SYNC_MAX_DURATION": "off"}, None),
        (None, {"PMS_SYNC_MAX_DURATION": "none"}, None),
        ("0", {"PMS_SYNC_MAX_DURATION": "90"}, None),
        ("120", {"PMS_SYNC_MAX_DURATION": "off"}, 120.0),
    ],
)
def test_the_runs_deadline_comes_from_the_flag_the_environment_or_the_6_h_default(
    flag: str | None, env: dict[str, str], expected: float | None
) -> None:
    settings = load_settings(max_duration=flag, env=env)

    assert settings.push.budget.max_duration_s == expected


def test_a_deadline_that_is_no_number_is_a_config_error_naming_its_setting() -> None:
    with pytest.raises(ConfigError, match="PMS_SYNC_MAX_DURATION"):
        load_settings(env={"PMS_SYNC_MAX_DURATION": "soon"})
    with pytest.raises(ConfigError, match="--max-duration"):
        load_settings(max_duration="-5", env={})
