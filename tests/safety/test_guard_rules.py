"""Thresholds of the mass-change guard, and how its two missing-record limits combine."""

from __future__ import annotations

from connector.safety.guard import GuardRules


def test_deactivations_trip_the_guard_above_five_percent_of_known_records() -> None:
    rules = GuardRules()

    assert not rules.missing_trips(5, known=100)  # exactly 5 %: allowed
    assert rules.missing_trips(6, known=100)


def test_more_than_fifty_records_trip_the_guard_whatever_the_share() -> None:
    rules = GuardRules()

    assert not rules.missing_trips(50, known=100_000)
    assert rules.missing_trips(51, known=100_000)  # 0.05 % but more than 50


def test_in_a_small_account_a_single_deactivation_needs_approval_by_default() -> None:
    assert GuardRules().missing_trips(1, known=12)
    assert not GuardRules(max_missing_share=0.1).missing_trips(1, known=12)


def test_no_missing_record_never_trips_even_without_known_records() -> None:
    assert not GuardRules().missing_trips(0, known=0)
    assert GuardRules().missing_trips(1, known=0)


def test_row_drop_trips_above_the_share_fewer_than_the_last_successful_run() -> None:
    rules = GuardRules()

    assert not rules.row_drop_trips(70, previous=100)  # exactly 30 % fewer
    assert rules.row_drop_trips(69, previous=100)
    assert not rules.row_drop_trips(150, previous=100)
    assert not rules.row_drop_trips(0, previous=0)  # no history: nothing to compare
