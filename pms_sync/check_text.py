"""What a failed check tells the person who opens it in the UI: which records, and why.

Built from the sync's report only, so whichever step evaluates a check gives the same text.
"""

from __future__ import annotations

from collections.abc import Sequence

import dagster as dg

from connector.push import Outcome, RecordProblem
from pms_sync.metadata import SAMPLE_ROWS, markdown_table, masked_text

NAMED_IN_DESCRIPTION = 3
"""Records a description names; the check's ``dead_letters`` table lists up to SAMPLE_ROWS."""


def dead_letters(problems: Sequence[RecordProblem]) -> list[RecordProblem]:
    return [problem for problem in problems if problem.outcome == Outcome.DEAD_LETTERED]


def _reason(problem: RecordProblem) -> str:
    status = f"HTTP {problem.http_status}" if problem.http_status else "refused"
    return f"{status}: {problem.message}" if problem.message else status


def dead_letter_description(count: int, problems: Sequence[RecordProblem]) -> str | None:
    """``no_new_dead_letters``'s description: how many records the service refused, the first
    ones by account and record with the service's reason and x-request-id, and what to do."""
    if count == 0:
        return None
    refused = dead_letters(problems)
    named = "; ".join(
        f"{p.account_id}/{p.record_id} ({_reason(p)}, x-request-id "
        f"{', '.join(r for r in p.request_ids if r) or '-'})"
        for p in refused[:NAMED_IN_DESCRIPTION]
    )
    more = count - min(len(refused), NAMED_IN_DESCRIPTION)
    return masked_text(
        f"{count} record(s) refused by the service"
        + (f": {named}" if named else "")
        + (f"; and {more} more (table dead_letters)" if more > 0 and named else "")
        + ". Each waits in the dead-letter table until its content changes: fix it in the PMS "
        "export or the mapping; the other records were sent."
    )


def dead_letter_metadata(problems: Sequence[RecordProblem]) -> dict[str, dg.MetadataValue]:
    """The refused records as a table (account, record, HTTP, reason, x-request-ids), when any."""
    refused = dead_letters(problems)
    if not refused:
        return {}
    table = markdown_table(
        ("account", "record", "HTTP", "reason", "x-request-ids"),
        (
            (
                p.account_id,
                p.record_id,
                p.http_status or "",
                p.message,
                ", ".join(r for r in p.request_ids if r),
            )
            for p in refused[:SAMPLE_ROWS]
        ),
    )
    return {"dead_letters": dg.MetadataValue.md(masked_text(table))}
