"""Field-level differences never show a secret; count anomalies against the run history."""

from __future__ import annotations

import json

import pandas as pd

from connector.plan import record_differences
from connector.safety.anomalies import AnomalyBands, CurrentCounts, Severity, count_anomalies

OLD = {
    "id": "U1",
    "name": "Flat 1",
    "doorCode": "1234",
    "wifiCode": "old-wifi",
    "wifiName": "guest",
    "bedTypes": [{"bedType": 1, "amount": 2}],
}


def test_an_update_lists_old_and_new_per_field_and_masks_a_changed_secret() -> None:
    new = {**OLD, "name": "Flat 1 (garden)", "wifiCode": "new-wifi", "bedTypes": []}

    found = record_differences(json.dumps(OLD), json.dumps(new))

    assert ("name", "Flat 1", "Flat 1 (garden)") in found
    assert ("wifiCode", "***", "***") in found
    assert ("bedTypes.0.amount", 2, None) in found
    assert "old-wifi" not in json.dumps(found) and "new-wifi" not in json.dumps(found)
    assert not any(field == "doorCode" for field, _, _ in found)  # unchanged: not listed


def test_a_create_lists_every_field_with_secrets_masked() -> None:
    found = dict((field, new) for field, _, new in record_differences(None, json.dumps(OLD)))

    assert found["doorCode"] == "***" and found["name"] == "Flat 1"


def history(*extracted: int) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "account_id": "demo",
            "started_at": pd.date_range("2031-01-01", periods=len(extracted))[::-1],
            "extracted": list(extracted),
            "changed": 2,
            "acknowledged": 2,
        }
    )


def test_extracted_rows_40_percent_below_the_median_warn_and_30_percent_do_not() -> None:
    past = history(100, 98, 102)

    lost = count_anomalies([CurrentCounts("demo", 60, 2, 2, 2)], past)
    ordinary = count_anomalies([CurrentCounts("demo", 70, 2, 2, 2)], past)

    assert [(a.metric, a.severity) for a in lost] == [("extracted", Severity.WARN)]
    assert ordinary == []


def test_a_burst_of_changes_warns_only_above_the_minimum_count() -> None:
    past = history(100, 100)
    bands = AnomalyBands(changed_rise=4.0, min_changed=20)

    burst = count_anomalies([CurrentCounts("demo", 100, 60, 60, 60)], past, bands)
    small = count_anomalies([CurrentCounts("demo", 100, 15, 15, 15)], past, bands)

    assert {a.metric for a in burst} == {"changed", "acknowledged"}
    assert small == []


def test_records_sent_and_none_acknowledged_is_an_error_even_without_history() -> None:
    (found,) = count_anomalies([CurrentCounts("demo", 5, 5, 0, 5)], history())

    assert found.severity == Severity.ERROR
    assert count_anomalies([CurrentCounts("demo", 5, 0, 0, 0)], history()) == []
