"""The verdict table is one: docs/cli.md shows ``connector.pipeline.VERDICTS`` row for row, and
the CLI's exit code constants are its codes."""

from __future__ import annotations

import re
from dataclasses import fields
from pathlib import Path

from connector.cli import sync_commands
from connector.pipeline import VERDICTS, ExitCode, RunConditions, RunOutcome, verdict_of

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "cli.md"
TABLE_MARKER = (
    "<!-- the verdict table: tests/test_verdict.py compares it with connector.pipeline.VERDICTS -->"
)


def documented_rows() -> list[tuple[str, str, int, str]]:
    """(outcome, status, exit code, Dagster) of each row of the page's table, in order."""
    lines = PAGE.read_text().splitlines()
    start = lines.index(TABLE_MARKER) + 3  # the marker, the header, the separator
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        outcome, _when, status, code, dagster = (
            cell.strip() for cell in line.strip("|").split("|")
        )
        rows.append((outcome.strip("`"), status.strip("`"), int(code), dagster))
    return rows


def test_the_docs_table_is_the_code_table_in_the_same_order() -> None:
    in_code = [(str(v.outcome), v.status, int(v.exit_code), v.dagster) for v in VERDICTS]

    assert documented_rows() == in_code


def test_every_condition_of_a_report_has_its_row_and_each_wins_over_the_rows_below() -> None:
    conditions = [f.name for f in fields(RunConditions)]
    report_rows = [str(v.outcome) for v in VERDICTS if str(v.outcome) in conditions]
    assert report_rows == conditions  # the dataclass lists them in the table's order

    for i, name in enumerate(conditions):
        # This condition together with every less serious one: this row decides.
        together = RunConditions(**{other: True for other in conditions[i:]})
        assert verdict_of(together).outcome == RunOutcome(name)
    assert verdict_of(RunConditions()).outcome == RunOutcome.SUCCEEDED


def test_the_cli_exit_code_constants_are_the_verdict_codes() -> None:
    constants = {
        name.removeprefix("EXIT_"): value
        for name, value in vars(sync_commands).items()
        if re.fullmatch(r"EXIT_[A-Z]+", name)
    }
    expected = {code.name: int(code) for code in ExitCode}

    assert constants == expected
