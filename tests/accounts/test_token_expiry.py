"""Account tokens that expire while a push runs: renewed, and no request ends as a failure.

The sandbox's ``short-client`` hands out account tokens that live ``SHORT_LIFETIME_S`` seconds
(a real service's are longer; the lifetime is configurable so the test stays short), and each
request takes 150 ms, so a push of 60 units to one hotel outlives several tokens.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from connector.sandbox.testing import SandboxHandle
from tests.accounts.chain import (
    SHORT_CLIENT_ID,
    SHORT_CLIENT_SECRET,
    SHORT_LIFETIME_S,
    ChainExport,
    document,
    hotel,
    pms_sync,
    unit,
)

UNITS = [unit(hotel(1), k) for k in range(1, 61)]
SHORT = (SHORT_CLIENT_ID, SHORT_CLIENT_SECRET)

pytestmark = pytest.mark.slow


def test_tokens_that_expire_during_a_longer_push_are_renewed_and_nothing_fails(
    chain: SandboxHandle, tmp_path: Path
) -> None:
    mapping = ChainExport(tmp_path / "chain").write(UNITS)
    chain.set_faults(latency_ms=150)

    result = pms_sync(
        chain, tmp_path, "sync", "--json", str(mapping), client=SHORT, PMS_SYNC_CONCURRENCY="4"
    )

    report = document(result)
    assert report["push_duration_s"] > SHORT_LIFETIME_S  # the push outlived a token
    assert result.exit_code == 0
    assert report["outcomes"] == {
        "acknowledged": 60,
        "dead_lettered": 0,
        "failed": 0,
        "pending": 0,
    }
    assert report["token_renewals"] >= 1
    assert report["accounts_discovery"]["token_renewals"] == report["token_renewals"]
    assert chain.count("acc-001", "accommodation") == 60


def test_a_401_for_an_expired_token_renews_it_once_and_sends_the_request_again(
    chain: SandboxHandle, tmp_path: Path
) -> None:
    mapping = ChainExport(tmp_path / "chain").write(UNITS)
    chain.set_faults(latency_ms=150)

    # No margin: tokens are used until they expire, so requests on the way meet a 401.
    result = pms_sync(
        chain,
        tmp_path,
        "sync",
        "--json",
        str(mapping),
        client=SHORT,
        PMS_SYNC_CONCURRENCY="4",
        PMS_SYNC_RENEW_MARGIN="0",
    )

    report = document(result)
    assert result.exit_code == 0
    assert report["outcomes"]["acknowledged"] == 60
    assert report["stopped_accounts"] == {}
    # The requests on the way when the token expired met a 401 and were sent again after
    # one renewal. Whether that renewal counts as after a 401 or as due is a race: a request
    # leaving after the expiry renews it too, and whichever comes first renews it for both.
    assert report["retried_after_renewal"] >= 1
    assert 1 <= report["token_renewals"] <= report["push_duration_s"] / SHORT_LIFETIME_S + 1
    discovery = report["accounts_discovery"]
    assert discovery["renewed_after_401"] <= discovery["token_renewals"]
    answered_401 = chain.stats()["requests"]["POST /api/v1/hooks/accommodation/connect"]["401"]
    assert answered_401 == report["retried_after_renewal"]
    assert chain.count("acc-001", "accommodation") == 60


def test_the_renewals_are_printed_in_the_report(chain: SandboxHandle, tmp_path: Path) -> None:
    mapping = ChainExport(tmp_path / "chain").write(UNITS[:20])
    chain.set_faults(latency_ms=150)

    result = pms_sync(
        chain,
        tmp_path,
        "sync",
        str(mapping),
        client=SHORT,
        PMS_SYNC_CONCURRENCY="1",
    )

    assert result.exit_code == 0
    assert "account tokens renewed: " in result.stdout


def test_an_account_token_refused_after_its_renewal_names_the_open_api_client(
    chain: SandboxHandle, tmp_path: Path
) -> None:
    # Every request outlives the account token it carries (2 s): refused on arrival, renewed,
    # refused again. The advice is about the client that obtained the token, not the
    # operator's own tokens, which this run has none of.
    mapping = ChainExport(tmp_path / "chain").write(UNITS[:2])
    chain.set_faults(latency_ms=2500)

    result = pms_sync(
        chain, tmp_path, "sync", "--json", str(mapping), client=SHORT, PMS_SYNC_RENEW_MARGIN="0"
    )

    report = document(result)
    assert result.exit_code == 4, report
    message = report["stopped_accounts"]["acc-001"]
    # The client's id may be masked: another test of the worker may have used it as a secret.
    assert "the token the Open API client " in message
    assert "obtained for this account was refused, renewed or not" in message
    assert "PMS_SYNC_TOKEN or" not in message
