"""Fetching guest links for a list of reservations, soonest arrival first, within a budget.

Requests start in the order given (the caller sorts by check-in) and go through the Open API
client, whose limiter keeps them under the client's rate limits. Each carries its account's
own token where the client discovered one (renewed when due): reservation ids are unique per
account only. The budget is asked before each request; what it refuses stays pending for the
next run. A 401 with the client's own token stops the fetch (every other request would be
refused too).
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime

from pydantic import ValidationError

from connector.client import OpenApiClient, TokenSource
from connector.contract import GuestLinks
from connector.errors import AuthenticationError, ServiceError
from connector.links._policy import LinksPolicy
from connector.plan import BudgetGate
from connector.secrets import mask_text
from connector.snapshot import GuestLinkRecord


@dataclass(frozen=True)
class LinkRequest:
    """A reservation whose links are to be fetched, and its urgency class."""

    account_id: str
    reservation_id: str
    checkin: date | None
    urgency: str  # connector.plan._urgency class: upcoming or future


@dataclass(frozen=True)
class LinkFailure:
    account_id: str
    reservation_id: str
    message: str
    http_status: int | None = None
    request_id: str | None = None


@dataclass
class FetchResult:
    fetched: list[GuestLinkRecord] = field(default_factory=list)  # in the order requested
    failed: list[LinkFailure] = field(default_factory=list)
    pending: list[LinkRequest] = field(default_factory=list)  # left by the budget (or a 401)
    stopped: str | None = None  # why the fetch stopped early (the client's token refused)


async def fetch_links(
    api: OpenApiClient,
    wanted: Sequence[LinkRequest],
    *,
    policy: LinksPolicy,
    connection: str | None,
    gate: BudgetGate,
    concurrency: int = 4,
    tokens: TokenSource | None = None,
) -> FetchResult:
    """Fetch the links of ``wanted`` in order while ``gate`` allows; ``tokens``: the
    account-level tokens used for each account's reservations."""
    queue = deque(enumerate(wanted))
    done: dict[int, GuestLinkRecord] = {}
    result = FetchResult()
    # The first request goes alone: its answer announces the limits (X-RateLimit-*) and what
    # earlier runs used of them, before requests run in parallel.
    first_answer = asyncio.Event()

    async def worker(number: int) -> None:
        if number:
            await first_answer.wait()
        try:
            await work()
        finally:
            first_answer.set()

    async def work() -> None:
        while queue and result.stopped is None:
            if not gate.take():
                return
            index, item = queue.popleft()
            try:
                links, request_id = await api.fetch_guest_links(
                    item.reservation_id,
                    last_message=policy.last_message,
                    account_id=item.account_id,
                    tokens=tokens,
                )
            except AuthenticationError as error:
                if result.stopped is None:
                    result.stopped = mask_text(str(error))
                queue.appendleft((index, item))
                return
            except ServiceError as error:
                result.failed.append(
                    LinkFailure(
                        item.account_id,
                        item.reservation_id,
                        mask_text(error.message),
                        error.status,
                        error.request_id,
                    )
                )
                continue
            except ValidationError as error:
                result.failed.append(
                    LinkFailure(
                        item.account_id,
                        item.reservation_id,
                        f"the answer is not the documented guest links object: "
                        f"{error.error_count()} problem(s), first at "
                        f"{'.'.join(str(p) for p in error.errors()[0]['loc'])}",
                        200,
                        api.last_request_id,
                    )
                )
                continue
            finally:
                first_answer.set()
            done[index] = _record(item, links, request_id, connection, policy)

    await asyncio.gather(*(worker(number) for number in range(max(concurrency, 1))))
    result.fetched = [done[index] for index in sorted(done)]
    result.pending = [item for _, item in sorted(queue, key=lambda pair: pair[0])]
    return result


def _record(
    item: LinkRequest,
    links: GuestLinks,
    request_id: str | None,
    connection: str | None,
    policy: LinksPolicy,
) -> GuestLinkRecord:
    message = links.chatLastMessage
    return GuestLinkRecord(
        account_id=item.account_id,
        reservation_id=item.reservation_id,
        connection=connection,
        checkin=item.checkin,
        guest_app=links.guestApp,
        chat_link=links.chatLink,
        online_check_in_link=links.onlineCheckInLink,
        fetched_at=datetime.now(UTC).replace(tzinfo=None),
        message_author=message.author if message else None,
        message_author_type=str(message.authorType) if message else None,
        message_time=message.time if message else None,
        message_sent_via=message.sentVia if message else None,
        message_has_attachment=message.hasAttachment if message else None,
        message_seen=message.seen if message else None,
        message_body=message.body if message and policy.last_message_body else None,
        request_id=request_id,
    )
