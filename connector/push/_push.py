"""Executing a plan: send each change once, record what the service said, stop on bad tokens.

Accommodations go first and all of them are answered before any reservation is sent, because
reservations reference their units. Within a phase, ``concurrency`` workers take changes in
plan order. Every acknowledgement is committed to the snapshot in small batches (every
``commit_every`` answers or ``commit_interval`` seconds), so a crash loses at most the
requests in flight and the last fraction of a second of answers; the next run re-sends them
as the same idempotent upsert. The commits run on one writer thread, not on the event loop:
a DuckDB commit takes milliseconds during which no answer could otherwise be read.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime
from enum import StrEnum
from typing import Any, NamedTuple

import numpy as np
import orjson
import pandas as pd
import pyarrow as pa

from connector.client import (
    Delivery,
    RunStop,
    ServiceClient,
    SyncAnswer,
    SyncAttempts,
    load_shared_state,
    nothing_stored,
    present_counts,
    run_on,
    save_shared_state,
)
from connector.config import DEFAULT_CONCURRENCY
from connector.contract import Entity, SyncEvent
from connector.errors import AuthenticationError
from connector.plan import OPTIONAL_REASONS, RESEND_REASONS, Budget, BudgetGate, Plan, drift_of
from connector.push._frozen_heap import older_objects_frozen
from connector.push._holdback import HeldRecord, UnitTrouble, held_record
from connector.push._recorder import RecordedColumns, _Recorder, recorded_columns
from connector.snapshot import (
    DriftEvent,
    RecordStatus,
    Refusal,
    SnapshotStore,
)


class Outcome(StrEnum):
    ACKNOWLEDGED = "acknowledged"  # a documented 2xx answer: recorded in the snapshot
    DEAD_LETTERED = "dead_lettered"  # 400/403: in the dead-letter table until its content changes
    FAILED = "failed"  # 401 or an unexpected answer: fix the configuration, then re-run
    # Not delivered or not confirmed (transient faults, a 2xx that was no documented answer,
    # a stopped account): never recorded, so the next run sends it again.
    PENDING = "pending"


OUTCOMES: tuple[Outcome, ...] = tuple(Outcome)

CheckinKey = tuple[str, str, date | None, str]
"""(entity, account_id, check-in day, urgency class) of :attr:`PushResult.by_checkin`."""

ProgressCallback = Callable[[int, int], None]
"""Called with (changes answered or settled, changes in the plan)."""


@dataclass(frozen=True)
class PushOptions:
    concurrency: int = DEFAULT_CONCURRENCY
    # The interval is the durability bound; the count only caps a batch. Each commit has a
    # fixed CPU cost on the writer thread, on the cores the service and the event loop need,
    # so a fast push commits large batches rather than many small ones.
    commit_every: int = 1000
    commit_interval: float = 0.25  # seconds
    budget: Budget = field(default_factory=Budget)  # what is not sent stays for the next run

    def __post_init__(self) -> None:
        if self.concurrency < 1 or self.commit_every < 1 or self.commit_interval <= 0:
            raise ValueError("concurrency, commit_every and commit_interval must be positive")


@dataclass(frozen=True)
class RecordProblem:
    """A change that was not acknowledged, with what support needs to trace it."""

    entity: str
    account_id: str
    record_id: str
    action: str
    outcome: Outcome
    http_status: int | None
    message: str  # masked
    request_ids: tuple[str | None, ...]
    attempts: int


@dataclass(frozen=True)
class Disagreement:
    """A documented answer whose counts contradict the one record sent (docs/decisions.md,
    "Acknowledgements and disagreements"). The record is acknowledged unless the counts say
    nothing was stored; then it is left pending as well."""

    entity: str
    account_id: str
    record_id: str
    action: str
    detail: str
    request_id: str | None


@dataclass(frozen=True)
class DriftFound:
    """Drift an answer revealed (docs/drift.md): healed by that answer, or left open for the
    next run to re-send the record."""

    entity: str
    account_id: str
    record_id: str
    action: str
    reason: str
    kind: str  # connector.plan._drift.DriftKind
    detail: str
    healed: bool
    request_id: str | None


@dataclass
class PushResult:
    dry_run: bool = False
    outcomes: dict[str, int] = field(default_factory=lambda: {str(o): 0 for o in OUTCOMES})
    requests: int = 0
    problems: list[RecordProblem] = field(default_factory=list)
    disagreements: list[Disagreement] = field(default_factory=list)
    stopped_accounts: dict[str, AuthenticationError] = field(default_factory=dict)
    # Why the push stopped before its end (SIGTERM, SIGINT, deadline; connector/client/_stop.py),
    # and the accounts a Retry-After past the deadline left for the next run, with why.
    stopped: str | None = None
    postponed_accounts: dict[str, str] = field(default_factory=dict)
    by_account: dict[tuple[str, str], Counter[str]] = field(default_factory=dict)
    duration_s: float = 0.0
    held_back: list[HeldRecord] = field(default_factory=list)  # unit not at the service
    # Changes the budget left for the next run (not sent, so still planned), per urgency class.
    deferred: Counter[str] = field(default_factory=Counter)
    throttled: int = 0  # 429 answers: rare under the client's limiter, each one counted
    foreign_requests: int = 0  # requests another user of the token made, seen in the headers
    waited_s: float = 0.0  # time spent waiting for rate-limit windows
    pending_by_urgency: Counter[str] = field(default_factory=Counter)
    unconfirmed: int = 0  # changes left pending because their last answer was unconfirmed
    unconfirmed_answers: int = 0  # 2xx answers that were no acknowledgement, retries included
    # Acknowledged answers of "skipped" or "already known" explained by an earlier attempt of
    # the same record in this run whose answer was lost: not disagreements.
    resent_after_lost_answer: int = 0
    # Account tokens discovered through the Open API that were renewed during the push (near
    # expiry, or after a 401), and requests sent once more after a 401 renewed their token.
    token_renewals: int = 0
    retried_after_renewal: int = 0
    # Re-sends of unchanged records (connector.plan._resend): acknowledged per (entity, reason); and
    # the optional ones (refresh, reconcile) a budget left out, per reason: not deferred, the
    # next run selects them again.
    resent: Counter[tuple[str, str]] = field(default_factory=Counter)
    resend_dropped: Counter[str] = field(default_factory=Counter)
    drift: list[DriftFound] = field(default_factory=list)  # revealed by this run's answers
    drift_healed: int = 0  # healed by this run: at once, or open drift now acknowledged

    @property
    def resent_by_reason(self) -> Counter[str]:
        found: Counter[str] = Counter()
        for (_, reason), n in self.resent.items():
            found[reason] += n
        return found

    # Per (entity, account, check-in day, urgency class): every outcome, "requests", "held"
    # (held back), "deferred" and "unconfirmed", so a run over several months can report each
    # month's own figures (connector.pipeline._windowed_report). A few hundred keys for a year of stays.
    by_checkin: dict[CheckinKey, Counter[str]] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        """Every change of the plan was acknowledged."""
        if self.held_back or sum(self.deferred.values()):
            return False
        return all(self.outcomes[str(o)] == 0 for o in OUTCOMES if o != Outcome.ACKNOWLEDGED)

    @property
    def interrupted(self) -> bool:
        """A stop request or a postponed account left changes for the next run."""
        return (self.stopped is not None or bool(self.postponed_accounts)) and not self.complete

    @property
    def unsent(self) -> Counter[str]:
        """Per urgency class: changes not acknowledged by this run (deferred or pending)."""
        return self.deferred + self.pending_by_urgency

    def checkin_tally(self, change: _Change) -> Counter[str]:
        key = (change.entity, change.account_id, change.checkin, change.urgency)
        counter = self.by_checkin.get(key)
        if counter is None:
            counter = self.by_checkin[key] = Counter()
        return counter

    def tally(self, entity: str, account_id: str) -> Counter[str]:
        # Called several times per change: no new Counter unless the key is new.
        counter = self.by_account.get((entity, account_id))
        if counter is None:
            counter = self.by_account[(entity, account_id)] = Counter()
        return counter

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "outcomes": dict(self.outcomes),
            "requests": self.requests,
            "dry_run": self.dry_run,
            "duration_s": round(self.duration_s, 3),
            "stopped_accounts": {a: str(e) for a, e in sorted(self.stopped_accounts.items())},
            "stopped": self.stopped,
            "postponed_accounts": dict(sorted(self.postponed_accounts.items())),
            "disagreements": len(self.disagreements),
            "unconfirmed": self.unconfirmed,
            "unconfirmed_answers": self.unconfirmed_answers,
            "resent_after_lost_answer": self.resent_after_lost_answer,
            "resent": dict(self.resent_by_reason),
            "resend_dropped": sum(self.resend_dropped.values()),
            "drift_found": len(self.drift),
            "drift_healed": self.drift_healed,
            "held_back": len(self.held_back),
            "deferred": sum(self.deferred.values()),
            "deferred_by_urgency": dict(self.deferred),
            "throttled": self.throttled,
            "foreign_requests": self.foreign_requests,
            "waited_s": round(self.waited_s, 3),
            "token_renewals": self.token_renewals,
            "retried_after_renewal": self.retried_after_renewal,
        }


class _Change(NamedTuple):
    entity: Entity
    account_id: str
    record_id: str
    action: str
    reason: str
    event: SyncEvent
    payload: str
    content_hash: str
    status_after: RecordStatus
    urgency: str
    checkin: date | None
    checkout: date | None
    row: int  # its position in the plan, whose columns the recorder records it from
    # The days are read from the recorder's columns (converted once for the plan), the row is
    # the position; every other member is the plan frame's column of its name.


def push_plan(
    plan: Plan,
    client: ServiceClient,
    snapshot: SnapshotStore,
    *,
    dry_run: bool = False,
    options: PushOptions | None = None,
    on_progress: ProgressCallback | None = None,
    stop: RunStop | None = None,
) -> PushResult:
    """Send the plan's changes and record every answer; returns what happened.

    ``stop``: the run's stop requests and deadline (default: a deadline of the budget's
    ``max_duration_s`` from now); a stopped push commits what was answered and returns.
    """
    return run_on(
        client.config.event_loop,
        push_plan_async(
            plan,
            client,
            snapshot,
            dry_run=dry_run,
            options=options,
            on_progress=on_progress,
            stop=stop,
        ),
    )


async def push_plan_async(
    plan: Plan,
    client: ServiceClient,
    snapshot: SnapshotStore,
    *,
    dry_run: bool = False,
    options: PushOptions | None = None,
    on_progress: ProgressCallback | None = None,
    stop: RunStop | None = None,
) -> PushResult:
    options = options or PushOptions(concurrency=client.config.concurrency)
    stop = stop or RunStop(options.budget.max_duration_s)
    stop.pushing = True  # a signal from here on stops gracefully, it no longer interrupts
    result = PushResult(dry_run=dry_run)
    started = time.monotonic()
    if dry_run or not len(plan.changes):
        result.duration_s = time.monotonic() - started
        return result
    progress = _Progress(len(plan.changes), on_progress)
    # The budget's duration is the run's deadline, which the stop enforces (a stopped push).
    gate = BudgetGate(replace(options.budget, max_duration_s=None))
    trouble = UnitTrouble.from_snapshot(snapshot)
    # No full collection walks the plan's objects while requests are in flight (docs: the module).
    with older_objects_frozen():
        async with client, stop.attached():
            client.stop = stop
            shared = load_shared_state(snapshot, client)
            # From here until close() the writer thread is the only user of the snapshot (a
            # DuckDB connection is not safe to share between threads): nothing below reads it.
            recorded = recorded_columns(plan.changes)
            recorder = _Recorder(snapshot, options, recorded, plan.connection)
            try:
                for entity, rows in _phase_rows(plan.changes):
                    phase: Iterable[_Change] = _changes_at(
                        plan.changes, recorded, rows, recorder.mark_in_flight
                    )
                    # The units whole: their answers decide which reservations are held.
                    units = list(phase) if entity == Entity.ACCOMMODATION else None
                    if units is None:
                        phase = _hold_back(phase, trouble, result, progress)
                    await _push_phase(
                        units if units is not None else phase,
                        len(rows),
                        client,
                        recorder,
                        result,
                        progress,
                        options,
                        gate,
                        stop,
                    )
                    if units is not None:
                        _note_unit_answers(units, result, trouble)
            finally:
                # Waits until every answer is committed (nothing is in flight any more, so
                # blocking the loop here delays no request).
                recorder.close()
                save_shared_state(snapshot, client, shared)
                client.stop = None
    if stop.requested:
        result.stopped = stop.reason
    _limiter_report(client, result)
    result.duration_s = time.monotonic() - started
    return result


_PHASES: tuple[tuple[bool, Entity], ...] = (
    (False, Entity.ACCOMMODATION),
    (False, Entity.RESERVATION),
    # The refresh and the reconciliation after every real change (docs/drift.md).
    (True, Entity.ACCOMMODATION),
    (True, Entity.RESERVATION),
)
"""(optional re-sends?, entity) in the order they are pushed."""


_ENUM_COLUMNS: dict[str, type[StrEnum]] = {
    "entity": Entity,
    "event": SyncEvent,
    "status_after": RecordStatus,
}


_CHANGES_AT_ONCE = 5_000
"""Plan rows turned into Python objects at a time: a first run's plan holds every document,
and a list of them all as Python strings would double what the plan's Arrow columns hold."""


def _phase_rows(frame: pd.DataFrame) -> list[tuple[Entity, np.ndarray]]:
    """Each phase's entity and the positions of its plan rows, in the plan's (delivery) order."""
    resend = frame["reason"].isin(OPTIONAL_REASONS).to_numpy(dtype=bool)
    entities = frame["entity"].to_numpy(dtype=object)
    return [
        (entity, np.flatnonzero((entities == entity) & (resend == optional)))
        for optional, entity in _PHASES
    ]


def _changes_at(
    frame: pd.DataFrame,
    recorded: RecordedColumns,
    rows: np.ndarray,
    before_slice: Callable[[list[_Change]], None],
) -> Iterator[_Change]:
    """The changes of the plan rows at ``rows``, made a slice at a time as they are taken
    (``recorded``: the plan's :func:`recorded_columns`); ``before_slice`` sees each slice
    before its first change is sent (the recorder's write-ahead mark)."""
    for start in range(0, len(rows), _CHANGES_AT_ONCE):
        taken = rows[start : start + _CHANGES_AT_ONCE]
        changes = _changes_of(frame.iloc[taken], recorded, taken)
        before_slice(changes)
        yield from changes


def _changes_of(frame: pd.DataFrame, recorded: RecordedColumns, rows: np.ndarray) -> list[_Change]:
    """The rows as changes, each column's dates and enums converted at once for all of them."""
    # Whole columns to lists, then zipped: iterating rows of Arrow-backed columns one value
    # at a time costs more than the conversion.
    days = recorded.table.select(["checkin", "checkout"]).take(pa.array(rows, pa.int64()))
    columns = {name: days.column(name).to_pylist() for name in days.column_names}
    columns["row"] = rows.tolist()
    members = [
        columns[name] if name in columns else _column(frame[name], name) for name in _Change._fields
    ]
    return [_Change(*row) for row in zip(*members, strict=True)]


def _column(column: pd.Series, name: str) -> list[Any]:
    values = column.tolist()
    kind = _ENUM_COLUMNS.get(name)
    if kind is None:
        return values
    # A few distinct values, each converted once rather than once per request of the push.
    members = {value: kind(value) for value in set(values)}
    return [members[value] for value in values]


def _note_unit_answers(units: list[_Change], result: PushResult, trouble: UnitTrouble) -> None:
    failed = {(p.account_id, p.record_id): p for p in result.problems}
    for change in units:
        problem = failed.get((change.account_id, change.record_id))
        if problem is None:
            trouble.resolve(change.account_id, change.record_id)  # acknowledged just now
        elif problem.account_id not in result.stopped_accounts:
            # A stopped account's reservations stay pending (401), they are not held.
            trouble.add(problem.account_id, problem.record_id, problem.outcome, problem.http_status)


def _hold_back(
    phase: Iterable[_Change], trouble: UnitTrouble, result: PushResult, progress: _Progress
) -> Iterator[_Change]:
    """The reservations to send, as they are taken; those whose unit is not at the service
    are held (docs: connector/push/_holdback.py) and never sent to fail."""
    for change in phase:
        found = trouble.reason_for(change.account_id, change.payload)
        if found is None:
            yield change
            continue
        result.held_back.append(
            held_record(change.entity, change.account_id, change.record_id, change.action, found)
        )
        result.tally(change.entity, change.account_id)["held"] += 1
        result.checkin_tally(change)["held"] += 1
        progress.advance()


def _limiter_report(client: ServiceClient, result: PushResult) -> None:
    result.throttled = client.throttled
    result.token_renewals = int(getattr(client.tokens, "renewals", 0))
    result.retried_after_renewal = client.retried_after_renewal
    for limiter in client.window_limiters().values():
        result.foreign_requests += limiter.foreign
        result.waited_s += limiter.waited_s


async def _push_phase(
    phase: Iterable[_Change],
    count: int,
    client: ServiceClient,
    recorder: _Recorder,
    result: PushResult,
    progress: _Progress,
    options: PushOptions,
    gate: BudgetGate,
    stop: RunStop,
) -> None:
    """Send ``phase`` (at most ``count`` changes) with ``options.concurrency`` workers; after
    a stop request, what is not sent is left pending (connector/client/_stop.py)."""
    # One iterator for all the workers: each takes the next change when it is free, and the
    # changes are made from the plan only as they are taken.
    changes = iter(phase)
    # An account's first request goes alone: a refused token then costs one request, not
    # one per worker, and the account's other changes wait to see whether to stay pending.
    first_answer: dict[str, asyncio.Event] = {}

    async def worker() -> None:
        for change in changes:
            if stop.requested:
                _left_unsent(result, change)
                progress.advance()
                return
            if not gate.take():
                # Out of budget: left unsent, so the next run plans it again (urgency order);
                # a refresh or reconciliation re-send is dropped, not owed.
                if change.reason in OPTIONAL_REASONS:
                    result.resend_dropped[change.reason] += 1
                else:
                    result.deferred[change.urgency] += 1
                    result.checkin_tally(change)["deferred"] += 1
                progress.advance()
                continue
            sending = False
            try:
                answered = first_answer.get(change.account_id)
                if answered is None:
                    answered = first_answer[change.account_id] = asyncio.Event()
                    try:
                        sending = True
                        await _send(change, client, recorder, result)
                    finally:
                        answered.set()
                else:
                    await answered.wait()
                    sending = True
                    await _send(change, client, recorder, result)
            except asyncio.CancelledError:
                if not stop.requested:
                    raise
                # Cancelled by the stop after its grace: the answer may never come.
                result.stopped = stop.reason
                _unanswered(change, recorder, result, possibly_stored=sending)
                progress.advance()
                return
            progress.advance()

    workers = [worker() for _ in range(min(options.concurrency, count) or 1)]
    await stop.run_workers(workers, grace_s=client.config.read_timeout)
    for change in changes:  # left by a stop
        _left_unsent(result, change)
        progress.advance()


def _left_unsent(result: PushResult, change: _Change) -> None:
    """A change a stop, the deadline or its account's postponement left unsent: pending, or
    dropped if only an optional re-send (as a budget drops it: not owed, the next run selects
    it again)."""
    if change.reason in OPTIONAL_REASONS:
        result.resend_dropped[change.reason] += 1
    else:
        _settle(result, change, Outcome.PENDING)


def _unanswered(
    change: _Change, recorder: _Recorder, result: PushResult, *, possibly_stored: bool
) -> None:
    """A change whose request the stop cancelled: pending, and possibly stored once sent."""
    if possibly_stored:
        recorder.possibly_stored(
            recorder.possibly_stored_of(change, None, datetime.now(UTC).replace(tzinfo=None))
        )
    _settle(result, change, Outcome.PENDING)
    result.problems.append(
        RecordProblem(
            entity=change.entity,
            account_id=change.account_id,
            record_id=change.record_id,
            action=change.action,
            outcome=Outcome.PENDING,
            http_status=None,
            message=f"the run stopped ({result.stopped or 'stop requested'}) before its answer came",
            request_ids=(),
            attempts=0,
        )
    )


async def _send(
    change: _Change, client: ServiceClient, recorder: _Recorder, result: PushResult
) -> None:
    if change.account_id in result.stopped_accounts or change.account_id in (
        result.postponed_accounts
    ):
        _left_unsent(result, change)
        return
    recorder.sending(change)
    attempts = await client.send_record(
        change.entity, change.account_id, change.event, change.payload
    )
    _record(change, attempts, recorder, result, client.tokens.refused_hint)


def _record(
    change: _Change,
    attempts: SyncAttempts,
    recorder: _Recorder,
    result: PushResult,
    refused_hint: Callable[[str], str],
) -> None:
    result.requests += attempts.attempts
    result.unconfirmed_answers += attempts.unconfirmed_answers
    result.tally(change.entity, change.account_id)["requests"] += attempts.attempts
    result.checkin_tally(change)["requests"] += attempts.attempts
    now = datetime.now(UTC).replace(tzinfo=None)
    recorder.answered(change)
    found: list[Contradiction] = []
    if attempts.delivery in (Delivery.ACKNOWLEDGED, Delivery.UNCONFIRMED):
        found = _check_answer(change, attempts, result, recorder.may_hold(change))
    if attempts.delivery == Delivery.ACKNOWLEDGED:
        _settle(result, change, Outcome.ACKNOWLEDGED)
        recorder.acknowledge(change, now, attempts.request_id)
        _note_drift(change, attempts, found, recorder, result, now)
        return
    if attempts.delivery == Delivery.REFUSED:
        outcome = Outcome.DEAD_LETTERED
        recorder.refuse(
            Refusal(
                account_id=change.account_id,
                entity=change.entity,
                record_id=change.record_id,
                content_hash=change.content_hash,
                http_status=attempts.status or 0,
                message=attempts.message,
                seen_at=now,
                request_id=attempts.request_id,
            )
        )
    elif attempts.delivery in (Delivery.UNDELIVERED, Delivery.UNCONFIRMED):
        if attempts.postponed is not None:
            result.postponed_accounts.setdefault(change.account_id, attempts.postponed)
        if attempts.answer_lost_before:
            recorder.possibly_stored(recorder.possibly_stored_of(change, attempts.request_id, now))
        if attempts.delivery == Delivery.UNDELIVERED and change.reason in OPTIONAL_REASONS:
            _left_unsent(result, change)  # cut short by the deadline or a stop: not owed
            return
        outcome = Outcome.PENDING
        if attempts.delivery == Delivery.UNCONFIRMED:
            result.unconfirmed += 1
            result.checkin_tally(change)["unconfirmed"] += 1
    else:
        outcome = Outcome.FAILED
        if attempts.delivery == Delivery.UNAUTHORIZED:
            _stop_account(change.account_id, attempts, result, refused_hint(change.account_id))
    _settle(result, change, outcome)
    result.problems.append(
        RecordProblem(
            entity=change.entity,
            account_id=change.account_id,
            record_id=change.record_id,
            action=change.action,
            outcome=outcome,
            http_status=attempts.status,
            message=attempts.message,
            request_ids=tuple(attempts.request_ids),
            attempts=attempts.attempts,
        )
    )


def _check_answer(
    change: _Change, attempts: SyncAttempts, result: PushResult, held_before: bool
) -> list[Contradiction]:
    """List the last answer's contradictions; count the answers a lost one explains; return
    every contradiction found (explained or not).

    ``held_before``: the service may already hold exactly this content (an earlier run's
    answer to it was lost, or the change re-sends acknowledged content on request), so
    "skipped" and "already known" are what it should say.
    """
    found = answer_contradictions(change.entity, change.action, change.payload, attempts.answer)
    left = _unexplained(found, attempts.answer_lost_before or held_before)
    if change.reason in RESEND_REASONS:
        # A re-send answered "did not know it" found drift and healed it (docs/drift.md).
        left = [c for c in left if not c.not_held]
    if found and not left:
        result.resent_after_lost_answer += 1
    elif left:
        result.disagreements.append(
            Disagreement(
                change.entity,
                change.account_id,
                change.record_id,
                change.action,
                "; ".join(c.detail for c in left),
                attempts.request_id,
            )
        )
    return found


def _note_drift(
    change: _Change,
    attempts: SyncAttempts,
    found: list[Contradiction],
    recorder: _Recorder,
    result: PushResult,
    now: datetime,
) -> None:
    """Record the drift an acknowledged answer reveals, or heal the record's open drift."""
    finding = drift_of(
        change.entity,
        change.action,
        change.reason,
        attempts.answer,
        found,
        explained=attempts.answer_lost_before or recorder.may_hold(change),
        other_content_may_be_stored=recorder.may_hold_other(change),
    )
    counter = result.tally(change.entity, change.account_id)
    healed = finding.healed if finding is not None else recorder.drift_open(change)
    if finding is not None:
        result.drift.append(
            DriftFound(
                change.entity,
                change.account_id,
                change.record_id,
                change.action,
                change.reason,
                str(finding.kind),
                finding.detail,
                finding.healed,
                attempts.request_id,
            )
        )
        counter["drift_found"] += 1
        result.checkin_tally(change)["drift_found"] += 1
    if healed:
        counter["drift_healed"] += 1
        result.checkin_tally(change)["drift_healed"] += 1
        result.drift_healed += 1
    if finding is not None or healed:
        recorder.drift(
            DriftEvent(
                account_id=change.account_id,
                entity=change.entity,
                record_id=change.record_id,
                kind=str(finding.kind) if finding is not None else None,
                detail=finding.detail if finding is not None else "",
                request_id=attempts.request_id,
                at=now,
                healed=healed,
            )
        )
    if change.reason in RESEND_REASONS:
        result.resent[(change.entity, change.reason)] += 1


def _stop_account(account_id: str, attempts: SyncAttempts, result: PushResult, hint: str) -> None:
    if account_id in result.stopped_accounts:
        return
    reason = attempts.message or "invalid or missing authorization token"
    result.stopped_accounts[account_id] = AuthenticationError(
        f"the service refused the credentials of account {account_id!r} ({reason}); its push "
        f"stopped and its remaining changes stay pending: {hint}",
        status=attempts.status,
        request_id=attempts.request_id,
    )


def _settle(result: PushResult, change: _Change, outcome: Outcome) -> None:
    result.outcomes[str(outcome)] += 1
    if outcome == Outcome.PENDING:
        result.pending_by_urgency[change.urgency] += 1
    result.tally(change.entity, change.account_id)[str(outcome)] += 1
    result.checkin_tally(change)[str(outcome)] += 1


@dataclass(frozen=True, slots=True)
class Contradiction:
    """One way a documented answer's counts differ from one record saved as sent."""

    detail: str
    # "skipped" or "already known": what the service says when it already held the record,
    # as it does after an earlier attempt whose answer was lost.
    already_stored: bool = False
    # Counts or ids that do not account for the one record sent: drift left open.
    unaccounted: bool = False
    # "did not know it": the service did not hold a record acknowledged before (drift, lost).
    not_held: bool = False


def answer_contradictions(
    entity: str, action: str, payload: str, answer: SyncAnswer | None
) -> list[Contradiction]:
    """How the answer's counts differ from the one record sent as ``action``; [] when they
    agree. Every member is optional in the spec: only the members present are compared."""
    if answer is None:
        return []
    counts = present_counts(Entity(entity), answer)
    found: list[Contradiction] = []
    nothing = nothing_stored(counts)
    total = sum(counts.values())
    if nothing is not None:
        what = (
            "nothing saved and nothing skipped"
            if entity == Entity.ACCOMMODATION
            else "no new, no updated and no skipped reservation"
        )
        found.append(Contradiction(f"service reported {what} ({nothing}): not stored"))
    elif total > 1:
        listed = ", ".join(f"{member}={value}" for member, value in counts.items())
        found.append(
            Contradiction(
                f"counts of {total} records for the one sent ({listed})", unaccounted=True
            )
        )
    elif entity == Entity.ACCOMMODATION:
        skipped = counts.get("skippedProperties", 0)
        if skipped and not counts.get("savedProperties"):
            found.append(
                Contradiction(
                    f"service skipped the accommodation (skippedProperties={skipped})",
                    already_stored=True,
                )
            )
    elif counts.get("skippedReservations"):
        found.append(
            Contradiction(
                "service skipped the reservation (skippedReservations=1)", already_stored=True
            )
        )
    elif action == "create" and counts.get("updatedReservations"):
        found.append(
            Contradiction(
                "sent as create, service already knew it (updatedReservations=1)",
                already_stored=True,
            )
        )
    elif action != "create" and counts.get("newReservations"):
        found.append(
            Contradiction(
                f"sent as {action}, service did not know it (newReservations=1)", not_held=True
            )
        )
    ids = getattr(answer, "reservationIds", None)
    if ids is not None:
        resource = orjson.loads(payload)
        expected = {f"{resource['id']}-{unit['id']}" for unit in resource["unitReservations"]}
        if set(ids) != expected:
            found.append(
                Contradiction(
                    f"reservationIds {sorted(ids)} differ from the sent {sorted(expected)}",
                    unaccounted=True,
                )
            )
    return found


def response_disagreement(
    entity: str,
    action: str,
    payload: str,
    answer: SyncAnswer | None,
    *,
    answer_lost_before: bool = False,
) -> str | None:
    """Why the service's answer contradicts one record saved as sent, or None when it agrees.

    With ``answer_lost_before`` (an earlier attempt of this record in this run may have been
    stored without its answer arriving), "skipped" and "already known" are explained, not
    contradictions. Pure: the answer and what was sent decide.
    """
    left = _unexplained(answer_contradictions(entity, action, payload, answer), answer_lost_before)
    return "; ".join(c.detail for c in left) or None


def _unexplained(found: list[Contradiction], answer_lost_before: bool) -> list[Contradiction]:
    return [c for c in found if not (answer_lost_before and c.already_stored)]


class _Progress:
    def __init__(self, total: int, callback: ProgressCallback | None) -> None:
        self.total = total
        self.done = 0
        self.callback = callback

    def advance(self) -> None:
        self.done += 1
        if self.callback is not None:
            self.callback(self.done, self.total)
