"""The Open API client's settings: both credentials or neither, where its token is cached,
and a secret that never shows."""

from __future__ import annotations

from pathlib import Path

import pytest

from connector.errors import ConfigError
from connector.secrets import mask_text
from connector.settings import load_settings


def test_a_client_id_without_its_secret_is_refused_naming_both_variables() -> None:
    with pytest.raises(ConfigError) as refused:
        load_settings(env={"PMS_SYNC_CLIENT_ID": "many-client"})

    assert "PMS_SYNC_CLIENT_SECRET" in str(refused.value)
    assert "PMS_SYNC_CLIENT_ID is set" in str(refused.value)


def test_the_open_api_defaults_to_the_service_and_caches_its_token_next_to_the_snapshot(
    tmp_path: Path,
) -> None:
    settings = load_settings(
        base_url="https://service.example/",
        snapshot=tmp_path / "state" / "snapshot.duckdb",
        env={"PMS_SYNC_CLIENT_ID": "c-1", "PMS_SYNC_CLIENT_SECRET": "s3cr3t-value-1"},
    )

    assert settings.open_api is not None
    assert settings.open_api.base_url == "https://service.example"
    assert settings.open_api.token_cache == tmp_path / "state" / "openapi-tokens.json"
    assert settings.properties.update_sub_units is True


def test_options_win_over_variables_and_the_secret_is_masked_everywhere() -> None:
    settings = load_settings(
        client_id="from-option",
        client_secret="option-secret-42",
        openapi_url="https://openapi.example",
        update_sub_units=False,
        env={
            "PMS_SYNC_CLIENT_ID": "from-env",
            "PMS_SYNC_CLIENT_SECRET": "env-secret-42",
            "PMS_SYNC_OPENAPI_URL": "https://other.example",
        },
    )

    assert settings.open_api is not None
    assert (settings.open_api.client_id, settings.open_api.base_url) == (
        "from-option",
        "https://openapi.example",
    )
    assert settings.properties.update_sub_units is False
    assert "option-secret-42" not in repr(settings)
    assert mask_text("secret=option-secret-42") == "secret=***"


def test_property_offboarding_can_be_turned_off() -> None:
    settings = load_settings(env={"PMS_SYNC_OFFBOARD_PROPERTIES": "off"})

    assert settings.properties.offboard is False
    with pytest.raises(ConfigError, match="PMS_SYNC_UPDATE_SUB_UNITS must be true or false"):
        load_settings(env={"PMS_SYNC_UPDATE_SUB_UNITS": "sometimes"})
