"""The rolling refresh's settings: off on loopback, on against a remote service, and every
way to say a share (docs/drift.md)."""

from __future__ import annotations

import pytest

from connector.errors import ConfigError
from connector.settings import load_settings

REMOTE = "https://guest-service.example"


def test_the_refresh_is_off_for_the_local_sandbox_and_weekly_against_a_remote_service() -> None:
    local = load_settings(env={}).refresh
    remote = load_settings(base_url=REMOTE, env={}).refresh

    assert not local.enabled
    assert (remote.share, remote.period_runs) == (pytest.approx(1 / 7), 7)
    # One hour of the documented hourly limit at most, so a nightly run stays bounded.
    assert remote.max_requests == 5000


@pytest.mark.parametrize(
    ("text", "share"),
    [("7d", 1 / 7), ("30 days", 1 / 30), ("15%", 0.15), ("0.25", 0.25), ("off", 0.0), ("1", 1.0)],
)
def test_a_share_is_days_a_percentage_a_fraction_or_off(text: str, share: float) -> None:
    assert load_settings(refresh=text, env={}).refresh.share == pytest.approx(share)


def test_the_environment_sets_the_refresh_and_its_cap_and_a_flag_wins() -> None:
    env = {"PMS_SYNC_REFRESH": "10%", "PMS_SYNC_REFRESH_MAX": "none", "PMS_SYNC_REFRESH_PAST": "1"}

    from_env = load_settings(base_url=REMOTE, env=env).refresh
    from_flags = load_settings(base_url=REMOTE, refresh="3d", refresh_max=50, env=env).refresh

    assert (from_env.share, from_env.max_requests, from_env.include_past_stays) == (
        pytest.approx(0.1),
        None,
        True,
    )
    assert (from_flags.share, from_flags.max_requests) == (pytest.approx(1 / 3), 50)


@pytest.mark.parametrize("text", ["weekly", "150%", "-0.1", "2.5"])
def test_a_share_that_is_none_of_those_is_refused_naming_the_setting(text: str) -> None:
    with pytest.raises(ConfigError, match=r"PMS_SYNC_REFRESH: expected a refresh share"):
        load_settings(env={"PMS_SYNC_REFRESH": text})
