"""A run's verdict: one ordered table from what a report shows to its status word, the CLI's
exit code and what Dagster makes of it.

The status the run history keeps, ``sync``/``apply``'s exit code and the Dagster step's
failure and check severities all come from ``VERDICTS``; docs/cli.md shows the same table
(tests/test_verdict.py compares them). When several conditions hold, the first row
wins: the status and the exit code always come from the same row.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, fields
from enum import IntEnum, StrEnum
from typing import TYPE_CHECKING

from connector.errors import AuthenticationError, RunStopped
from connector.push import Outcome as PushOutcome

if TYPE_CHECKING:
    from connector.pipeline._run import SyncReport


class RunStatus:
    """The one word for a run (``status`` in ``--json``, in the run history, in Dagster)."""

    SUCCEEDED = "succeeded"  # every change acknowledged (or nothing to send)
    # Some changes dead-lettered, failed, pending or held back, or reservations whose status
    # may mean cancelled quarantined (the service does not know they are cancelled).
    INCOMPLETE = "incomplete"
    DISAGREED = "disagreed"  # every change acknowledged, but some answers contradicted it
    # Completed, work held awaiting an approval: kinds of change the mass-change guard held,
    # or units and properties kept active for their guests' stays (docs/safety-rails.md).
    BLOCKED = "blocked"
    UNUSABLE = "unusable"  # an entity's export gave nothing: no rows, or every one quarantined
    # SIGTERM, SIGINT or the deadline stopped the push, or a Retry-After past the deadline
    # postponed an account: what was answered is committed, the rest is pending.
    STOPPED = "stopped"
    DRY_RUN = "dry_run"
    ERROR = "error"  # the run could not start or broke off: no report


class ExitCode(IntEnum):
    """The process exit codes of ``plan``, ``sync`` and ``apply`` (public: docs/cli.md)."""

    OK = 0
    ERROR = 1
    USAGE = 2  # click's own, before anything runs
    INCOMPLETE = 3
    AUTHENTICATION = 4
    HELD = 5
    UNUSABLE = 6
    STOPPED = 7


class Severity(StrEnum):
    """The severity of the Dagster asset check that reports an outcome."""

    ERROR = "ERROR"
    WARN = "WARN"


class RunOutcome(StrEnum):
    """What a run's report can show; a value of ``RunConditions`` names its field."""

    ERROR = "error"  # no report: the run could not start or broke off
    CREDENTIALS_REFUSED = "credentials_refused"  # no report: the Open API refused the client
    UNUSABLE = "unusable"
    STOPPED = "stopped"
    HELD = "held"
    DRY_RUN = "dry_run"
    AUTHENTICATION = "authentication"
    PENDING = "pending"
    FAILED = "failed"
    DEAD_LETTERED = "dead_lettered"
    NOT_ACKNOWLEDGED = "not_acknowledged"
    STATUS_FINDINGS = "status_findings"
    DISAGREED = "disagreed"
    SUCCEEDED = "succeeded"


@dataclass(frozen=True)
class Verdict:
    """One row of the table: the status word, the exit code, and in Dagster whether the sync
    step fails and which asset check reports the outcome with which severity."""

    outcome: RunOutcome
    status: str
    exit_code: ExitCode
    step_fails: bool
    check: str | None = None
    severity: Severity | None = None

    @property
    def dagster(self) -> str:
        """The Dagster consequence in words (the docs table's column)."""
        parts = ["step fails"] if self.step_fails else []
        if self.check is not None:
            parts.append(f"`{self.check}` {self.severity}")
        return "; ".join(parts) or "passes"


@dataclass(frozen=True)
class RunConditions:
    """What a finished run's report shows, each condition yes or no, in the table's order."""

    unusable: bool = False
    stopped: bool = False
    held: bool = False
    dry_run: bool = False
    authentication: bool = False
    pending: bool = False
    failed: bool = False
    dead_lettered: bool = False
    not_acknowledged: bool = False
    status_findings: bool = False
    disagreed: bool = False

    @classmethod
    def of(
        cls,
        report: SyncReport,
        *,
        held: bool | None = None,
        refused: Collection[str] | None = None,
    ) -> RunConditions:
        """The report's conditions. ``held``: instead of the report's work awaiting an
        approval; ``refused``: accounts whose credentials were refused, instead of the
        report's (their pending and failed changes count as the refusal, not as faults)."""
        push = report.push
        refused = push.stopped_accounts.keys() if refused is None else refused
        pending = sum(
            counts.get(str(PushOutcome.PENDING), 0)
            for (_, account), counts in push.by_account.items()
            if account not in refused
        )
        return cls(
            unusable=bool(report.plan.unusable),
            stopped=push.interrupted,
            held=(bool(report.awaiting_approval) or report.guard.blocked) if held is None else held,
            dry_run=push.dry_run,
            authentication=bool(refused),
            pending=pending > 0,
            failed=any(
                p.outcome == PushOutcome.FAILED and p.account_id not in refused
                for p in push.problems
            ),
            dead_lettered=push.outcomes[str(PushOutcome.DEAD_LETTERED)] > 0,
            not_acknowledged=not push.complete or report.accounts.properties.incomplete,
            status_findings=bool(report.plan.status_findings),
            disagreed=bool(push.disagreements),
        )


_ERROR = Verdict(RunOutcome.ERROR, RunStatus.ERROR, ExitCode.ERROR, step_fails=True)
_CREDENTIALS_REFUSED = Verdict(
    RunOutcome.CREDENTIALS_REFUSED, RunStatus.ERROR, ExitCode.AUTHENTICATION, step_fails=True
)
_SUCCEEDED = Verdict(RunOutcome.SUCCEEDED, RunStatus.SUCCEEDED, ExitCode.OK, step_fails=False)

VERDICTS: tuple[Verdict, ...] = (
    _ERROR,
    _CREDENTIALS_REFUSED,
    # Nothing of the entity was sent or reconciled: nothing else of the run means much.
    Verdict(RunOutcome.UNUSABLE, RunStatus.UNUSABLE, ExitCode.UNUSABLE, step_fails=True),
    Verdict(RunOutcome.STOPPED, RunStatus.STOPPED, ExitCode.STOPPED, step_fails=True),
    # Before any lesser condition: the history keeps the run ``blocked``, so the guard never
    # takes an export it held back as the baseline of the next run.
    Verdict(RunOutcome.HELD, RunStatus.BLOCKED, ExitCode.HELD, step_fails=True),
    # After what a dry run previews (unusable, held); nothing is sent, nothing else can hold.
    Verdict(RunOutcome.DRY_RUN, RunStatus.DRY_RUN, ExitCode.OK, step_fails=False),
    Verdict(
        RunOutcome.AUTHENTICATION,
        RunStatus.INCOMPLETE,
        ExitCode.AUTHENTICATION,
        step_fails=True,
        check="accounts_authenticated",
        severity=Severity.ERROR,
    ),
    Verdict(RunOutcome.PENDING, RunStatus.INCOMPLETE, ExitCode.INCOMPLETE, step_fails=True),
    Verdict(RunOutcome.FAILED, RunStatus.INCOMPLETE, ExitCode.INCOMPLETE, step_fails=True),
    # One record's problem, sent again when its content changes: a warning in Dagster.
    Verdict(
        RunOutcome.DEAD_LETTERED,
        RunStatus.INCOMPLETE,
        ExitCode.INCOMPLETE,
        step_fails=False,
        check="no_new_dead_letters",
        severity=Severity.WARN,
    ),
    Verdict(
        RunOutcome.NOT_ACKNOWLEDGED, RunStatus.INCOMPLETE, ExitCode.INCOMPLETE, step_fails=False
    ),
    Verdict(
        RunOutcome.STATUS_FINDINGS,
        RunStatus.INCOMPLETE,
        ExitCode.INCOMPLETE,
        step_fails=False,
        check="cancellations_sent_as_cancelled",
        severity=Severity.ERROR,
    ),
    Verdict(
        RunOutcome.DISAGREED,
        RunStatus.DISAGREED,
        ExitCode.INCOMPLETE,
        step_fails=False,
        check="service_answers_agree",
        severity=Severity.ERROR,
    ),
    _SUCCEEDED,
)
"""Most serious first. The first two have no report (``verdict_of_error``)."""

_BY_OUTCOME = {row.outcome: row for row in VERDICTS}
_CONDITIONS = frozenset(f.name for f in fields(RunConditions))


def verdict_for(outcome: RunOutcome) -> Verdict:
    """The row of one outcome."""
    return _BY_OUTCOME[outcome]


def verdict_of(conditions: RunConditions) -> Verdict:
    """The first row of the table whose condition holds; ``succeeded`` when none does."""
    for row in VERDICTS:
        if row.outcome in _CONDITIONS and getattr(conditions, row.outcome):
            return row
    return _SUCCEEDED


def verdict_of_error(error: Exception) -> Verdict:
    """The verdict of a run that ended in an error before it had a report."""
    if isinstance(error, RunStopped):
        return _BY_OUTCOME[RunOutcome.STOPPED]
    if isinstance(error, AuthenticationError):
        # The Open API refused the client's credentials (account discovery).
        return _CREDENTIALS_REFUSED
    return _ERROR
