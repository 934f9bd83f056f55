"""What one links run did: fetched, reused, written, failed, and what is left for later."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from typing import Any

from connector.links._fetch import LinkFailure, LinkRequest
from connector.plan import URGENCY_CLASSES, BacklogRow, backlog_json
from connector.writeback import WriteResult

SAMPLE = 20
"""Failures and pending reservations listed by name in a report."""


@dataclass
class LinksReport:
    connection: str | None
    first_checkin: date
    last_checkin: date
    candidates: int = 0  # reservations in the window the service holds
    reused: int = 0  # links the snapshot holds, younger than the maximum age
    fetched: list[str] = field(default_factory=list)  # reservation ids, in the order requested
    failed: list[LinkFailure] = field(default_factory=list)
    # Failures answered 404: recorded as drift, re-sent by the next sync (docs/drift.md).
    drift_recorded: list[LinkFailure] = field(default_factory=list)
    pending: list[LinkRequest] = field(default_factory=list)  # left by the budget (or a 401)
    stopped: str | None = None  # the Open API refused the client's credentials
    writes: list[WriteResult] = field(default_factory=list)  # one per declared destination
    write_errors: list[str] = field(default_factory=list)
    requests: int = 0  # Open API requests, token requests and retries included
    token_requests: int = 0
    token_renewals: int = 0  # account tokens renewed (due, or refused) for links requests
    throttled: int = 0  # 429 answers
    backlog: list[BacklogRow] = field(default_factory=list)
    duration_s: float = 0.0

    @property
    def pending_by_urgency(self) -> dict[str, int]:
        counts = dict.fromkeys(URGENCY_CLASSES, 0)
        for item in self.pending:
            counts[item.urgency] = counts.get(item.urgency, 0) + 1
        return counts

    @property
    def written(self) -> int:
        """Rows written back (to each destination the mapping declares)."""
        return max((write.rows for write in self.writes), default=0)

    @property
    def status(self) -> str:
        """``ok``; ``incomplete`` when links failed, are left pending or were not written
        back; ``unauthorized`` when the client's credentials were refused."""
        if self.stopped is not None:
            return "unauthorized"
        if self.failed or self.pending or self.write_errors:
            return "incomplete"
        return "ok"

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "connection": self.connection,
            "checkin_from": self.first_checkin.isoformat(),
            "checkin_to": self.last_checkin.isoformat(),
            "candidates": self.candidates,
            "fetched": len(self.fetched),
            "reused": self.reused,
            "written": self.written,
            "failed": len(self.failed),
            "drift_recorded": len(self.drift_recorded),
            "pending": len(self.pending),
            "pending_by_urgency": self.pending_by_urgency,
            "backlog": backlog_json(self.backlog),
            "fetched_ids": self.fetched[:SAMPLE],
            "pending_ids": [item.reservation_id for item in self.pending[:SAMPLE]],
            "failures": [
                {
                    "account_id": f.account_id,
                    "reservation_id": f.reservation_id,
                    "http_status": f.http_status,
                    "message": f.message,
                    "request_id": f.request_id,
                }
                for f in self.failed[:SAMPLE]
            ],
            "stopped": self.stopped,
            "write_back": [write.to_json_dict() for write in self.writes],
            "write_errors": self.write_errors,
            "requests": self.requests,
            "token_requests": self.token_requests,
            "token_renewals": self.token_renewals,
            "throttled": self.throttled,
            "duration_s": round(self.duration_s, 3),
        }
