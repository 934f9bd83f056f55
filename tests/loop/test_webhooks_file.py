"""The webhooks file: validated like a mapping file (line and member of every problem),
header values from the environment kept secret, and a JSON Schema that stays current."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from connector.secrets import mask_text
from connector.webhooks import WebhooksFileError, load_webhooks
from connector.webhooks.schema import render

ROOT = Path(__file__).resolve().parents[2]


def webhooks_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "webhooks.yaml"
    path.write_text(text)
    return path


def problem(tmp_path: Path, text: str) -> WebhooksFileError:
    with pytest.raises(WebhooksFileError) as raised:
        load_webhooks(webhooks_file(tmp_path, text))
    return raised.value


def one(condition: str = "", event: str = "reservationCreated") -> str:
    conditions = f"    conditions:\n      - {condition}\n" if condition else ""
    return (
        "webhooks:\n"
        "  - name: arrivals\n"
        f"    event: {event}\n"
        "    url: http://127.0.0.1:8766/events/hotel\n" + conditions
    )


def test_the_renamed_guest_link_event_points_to_its_new_name(tmp_path: Path) -> None:
    error = problem(tmp_path, one(event="guestLinkOpened"))

    assert error.line == 3 and error.member == "webhooks.0.event"
    assert "renamed 'guestLinkOpenedGuestApp' on 2025-09-11" in str(error)


def test_an_unknown_event_lists_the_events_of_the_spec(tmp_path: Path) -> None:
    error = problem(tmp_path, one(event="reservationCreate"))

    assert "did you mean 'reservationCreated'?" in str(error)
    assert "guestLinkOpenedCheckOut" in str(error)


def test_an_unknown_operator_is_refused_with_a_suggestion(tmp_path: Path) -> None:
    error = problem(tmp_path, one('{filterType: 2, op: "==", value: CONFIRMED}'))

    assert error.line == 6 and error.member == "webhooks.0.conditions.0.op"
    assert "unknown operator '=='; did you mean '='?" in str(error)


def test_a_range_without_second_value_is_refused(tmp_path: Path) -> None:
    error = problem(tmp_path, one("{filterType: nights, op: range, value: 3}"))

    assert error.line == 6 and "needs `secondValue`" in str(error)


@pytest.mark.parametrize(
    ("condition", "message"),
    [
        ("{filterType: 15, op: in, value: DE}", "takes a non-empty list"),
        ("{filterType: 16, op: exists, value: x}", "takes no `value`"),
        ("{filterType: 10, op: '>', value: two}", "compares numbers"),
        ("{filterType: 6, op: range, value: 5, secondValue: 2}", "must not exceed"),
        ("{filterType: 2, op: '=', value: A, secondValue: B}", "belongs to a range"),
        ("{filterType: weather, op: '=', value: sun}", "unknown filterType 'weather'"),
    ],
)
def test_values_must_fit_the_operator(tmp_path: Path, condition: str, message: str) -> None:
    assert message in str(problem(tmp_path, one(condition)))


def test_every_problem_of_the_file_is_reported_at_once(tmp_path: Path) -> None:
    text = one(event="guestLinkOpened") + "  - name: arrivals\n    event: orderDenied\n"

    error = problem(tmp_path, text)

    assert [(p.line, p.member) for p in error.problems] == [
        (3, "webhooks.0.event"),
        (5, "webhooks.1.url"),
        (5, "webhooks.1.name"),  # the second "arrivals"
    ]


def test_filter_types_by_name_become_their_codes(tmp_path: Path) -> None:
    loaded = load_webhooks(
        webhooks_file(tmp_path, one("{filterType: reservation_status, op: '!=', value: NEW}"))
    )

    assert loaded.webhooks[0].to_config().conditions[0].filterType == 2


def test_header_values_read_from_the_environment_are_masked_everywhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOTEL_HOOK_KEY", "plain-value-from-env-8841")
    text = one() + "    headers:\n      X-Receiver-Secret: ${HOTEL_HOOK_KEY}\n"

    loaded = load_webhooks(webhooks_file(tmp_path, text))

    assert loaded.webhooks[0].headers == {"X-Receiver-Secret": "plain-value-from-env-8841"}
    assert "plain-value-from-env-8841" not in mask_text("sent plain-value-from-env-8841")


def test_names_outside_the_prefix_are_refused(tmp_path: Path) -> None:
    error = problem(tmp_path, "prefix: 'hotel/'\n" + one())

    assert "must start with the prefix 'hotel/'" in str(error)


def test_the_committed_json_schema_is_current() -> None:
    committed = (ROOT / "mappings" / "webhooks.schema.json").read_text(encoding="utf-8")
    assert committed == render(), "regenerate with: make schema"
    assert "secondValue" in json.loads(committed)["$defs"]["ConditionSpec"]["properties"]
