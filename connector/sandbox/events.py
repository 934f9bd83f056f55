"""Outgoing events (spec §6.2): POSTed to every enabled webhook configuration whose event and
conditions match, in the background, retried with backoff while the receiver fails.

A reservation created through the sync webhook emits ``reservationCreated``; the admin API
emits any other event for a stored reservation (``POST /_sandbox/events``) and redelivers
events already sent (``POST /_sandbox/events/redeliver``), as a service delivering at least
once would. The body is ``{"accountId", "event", "resource"}``; the resource carries the
reservation's service id (``id``), its id in the PMS (``externalId``) and its guest links.

Deliveries run as tasks of the server's event loop: emitting only schedules them, so the
sync webhook's answer never waits for a receiver. Their log lives in memory (``GET
/_sandbox/events``); a restart or a reset forgets it, pending deliveries included.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx

from connector.client import parse_retry_after
from connector.contract import OutgoingEventName
from connector.sandbox.conditions import UnsupportedCondition, conditions_hold
from connector.sandbox.config import SandboxConfig
from connector.sandbox.guest_links import guest_links
from connector.sandbox.store import SandboxStore, StoredRecord

RETRIED_STATUSES = frozenset({408, 429})
"""Answers retried besides 5xx: the receiver is busy or too slow, not refusing the event."""

MAX_PARALLEL_DELIVERIES = 16
USER_AGENT = "pms-sync-sandbox (outgoing webhooks)"

_LINK_OPENED = {
    OutgoingEventName.GUEST_LINK_OPENED_GUEST_APP: "guestAppLink",
    OutgoingEventName.GUEST_LINK_OPENED_CHECK_IN: "preCheckInLink",
    OutgoingEventName.GUEST_LINK_OPENED_CHECK_OUT: "preCheckOutLink",
}
_ORDER_EVENTS = {OutgoingEventName.ORDER_DENIED, OutgoingEventName.ORDER_EXPIRED}


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


DELIVERY_ID_HEADER = "X-Delivery-Id"
"""The sandbox's header naming an emission, kept by its redeliveries: a service that names its
deliveries lets the receiver tell a repeated event from a redelivered one (docs/loop.md)."""


@dataclass
class Delivery:
    """One POST of one event to one configuration's URL, and what became of it."""

    id: str
    webhook_id: str
    webhook_name: str
    event: str
    account_id: str
    reservation_id: str
    url: str
    headers: dict[str, str]  # configured values: secrets, never shown in the log
    body: bytes
    redelivery_of: str | None = None
    # The emission this delivery sends: the same on every redelivery, sent as DELIVERY_ID_HEADER.
    emission_id: str = ""
    status: str = "pending"  # pending | delivered | failed
    attempts: int = 0
    last_status: int | None = None
    last_error: str | None = None
    created_at: str = field(default_factory=_now)
    finished_at: str | None = None

    def as_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "webhookId": self.webhook_id,
            "webhookName": self.webhook_name,
            "event": self.event,
            "accountId": self.account_id,
            "reservationId": self.reservation_id,
            "url": self.url,
            "headerNames": sorted(self.headers),
            "body": json.loads(self.body),
            "redeliveryOf": self.redelivery_of,
            "emissionId": self.emission_id or self.id,
            "status": self.status,
            "attempts": self.attempts,
            "lastStatus": self.last_status,
            "lastError": self.last_error,
            "createdAt": self.created_at,
            "finishedAt": self.finished_at,
        }


@dataclass(frozen=True)
class StoredReservation:
    """The stored reservation an event is about."""

    account_id: str
    id: str  # in the PMS (the resource's id)
    service_id: str
    payload: str  # canonical JSON of the stored resource

    @classmethod
    def of(cls, record: StoredRecord) -> StoredReservation:
        return cls(record.account_id, record.id, record.service_id, record.payload)


@dataclass(frozen=True)
class Emitted:
    """What one emission scheduled, and the configurations of the event it passed over."""

    deliveries: list[Delivery]
    skipped: list[dict[str, str]]  # {"webhookId", "webhookName", "reason"}


class EventDispatcher:
    """Finds the configurations an event goes to and delivers it to each, in the background."""

    def __init__(self, config: SandboxConfig, store: SandboxStore) -> None:
        self.config = config
        self.store = store
        self._log: dict[str, Delivery] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._http: httpx.AsyncClient | None = None
        self._slots: asyncio.Semaphore | None = None

    # -- lifecycle (the app's lifespan) ---------------------------------------------------

    async def start(self) -> None:
        settings = self.config.event_delivery
        self._http = httpx.AsyncClient(
            timeout=settings.timeout_s,
            headers={"User-Agent": USER_AGENT},
            follow_redirects=False,
        )
        self._slots = asyncio.Semaphore(MAX_PARALLEL_DELIVERIES)

    async def stop(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    def reset(self) -> None:
        """Forget the log and drop deliveries still pending (``POST /_sandbox/reset``)."""
        for task in list(self._tasks):
            task.cancel()
        self._log.clear()

    # -- emitting -------------------------------------------------------------------------

    def emit(
        self,
        event: OutgoingEventName,
        record: StoredReservation,
        extra: dict[str, Any] | None = None,
    ) -> Emitted:
        """Schedule ``event`` of a stored reservation to every configuration it matches."""
        deliveries: list[Delivery] = []
        skipped: list[dict[str, str]] = []
        if not self.store.has_webhooks:
            return Emitted(deliveries, skipped)  # the common case of a sync: nothing to match
        reservation = json.loads(record.payload)
        for webhook_id, webhook in self._configurations(record.account_id):
            name = str(webhook.get("name", ""))
            reason = self._mismatch(webhook, event, reservation)
            if reason is not None:
                skipped.append({"webhookId": webhook_id, "webhookName": name, "reason": reason})
                continue
            body = _body(event, record, self.config.links_base_url, webhook, extra or {})
            delivery = Delivery(
                id=uuid.uuid4().hex,
                webhook_id=webhook_id,
                webhook_name=name,
                event=event.value,
                account_id=record.account_id,
                reservation_id=record.id,
                url=str(webhook["url"]),
                headers={
                    str(h["key"]): str(h["value"])
                    for h in webhook.get("headers") or []
                    if isinstance(h, dict) and "key" in h
                },
                body=json.dumps(body, separators=(",", ":")).encode(),
            )
            deliveries.append(delivery)
            self._schedule(delivery)
        return Emitted(deliveries, skipped)

    def redeliver(self, ids: list[str] | None = None) -> list[Delivery]:
        """Send events again, byte for byte, as a new delivery each: those named, else every
        delivered one (what a service delivering at least once may do)."""
        chosen = (
            [self._log[i] for i in ids if i in self._log]
            if ids is not None
            else [d for d in self._log.values() if d.status == "delivered"]
        )
        again: list[Delivery] = []
        for original in chosen:
            copy = Delivery(
                id=uuid.uuid4().hex,
                webhook_id=original.webhook_id,
                webhook_name=original.webhook_name,
                event=original.event,
                account_id=original.account_id,
                reservation_id=original.reservation_id,
                url=original.url,
                headers=dict(original.headers),
                body=original.body,
                redelivery_of=original.id,
                emission_id=original.emission_id or original.id,
            )
            again.append(copy)
            self._schedule(copy)
        return again

    def log(self) -> list[dict[str, Any]]:
        return [delivery.as_json() for delivery in self._log.values()]

    @property
    def pending(self) -> int:
        return sum(1 for d in self._log.values() if d.status == "pending")

    def _configurations(self, account_id: str) -> list[tuple[str, dict[str, Any]]]:
        # An account's own configurations and those of every client whose scope holds it
        # (the owners the Open API gives configurations, see openapi_routes._webhook_owner).
        owners = [f"account:{account_id}"] + [
            f"client:{client.client_id}"
            for client in self.config.clients
            if account_id in client.accounts
        ]
        return [item for owner in owners for item in self.store.webhooks(owner)]

    @staticmethod
    def _mismatch(
        webhook: dict[str, Any], event: OutgoingEventName, reservation: dict[str, Any]
    ) -> str | None:
        if webhook.get("event") != event.value:
            return f"configured for {webhook.get('event')}"
        if webhook.get("isEnabled") is False:
            return "disabled"
        try:
            if not conditions_hold(list(webhook.get("conditions") or []), reservation):
                return "conditions not met"
        except UnsupportedCondition as error:
            return str(error)
        return None

    # -- delivering -----------------------------------------------------------------------

    def _schedule(self, delivery: Delivery) -> None:
        self._log[delivery.id] = delivery
        task = asyncio.get_running_loop().create_task(self._deliver(delivery))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _deliver(self, delivery: Delivery) -> None:
        settings = self.config.event_delivery
        if self._http is None:
            await self.start()  # an app served without its lifespan (never by uvicorn)
        assert self._http is not None and self._slots is not None
        headers = {
            **delivery.headers,
            "Content-Type": "application/json",
            DELIVERY_ID_HEADER: delivery.emission_id or delivery.id,
        }
        backoff = settings.backoff_s
        while delivery.attempts < settings.max_attempts:
            delivery.attempts += 1
            retry_after: float | None = None
            try:
                async with self._slots:
                    response = await self._http.post(
                        delivery.url, content=delivery.body, headers=headers
                    )
            except httpx.HTTPError as error:
                delivery.last_status, delivery.last_error = None, type(error).__name__
            else:
                delivery.last_status, delivery.last_error = response.status_code, None
                if response.is_success:
                    delivery.status, delivery.finished_at = "delivered", _now()
                    return
                if response.status_code not in RETRIED_STATUSES and response.status_code < 500:
                    break  # refused: sending the same body again would be refused again
                retry_after = parse_retry_after(response.headers.get("retry-after"))
            if delivery.attempts < settings.max_attempts:
                await asyncio.sleep(min(max(backoff, retry_after or 0.0), settings.max_backoff_s))
                backoff = min(backoff * 2, settings.max_backoff_s)
        delivery.status, delivery.finished_at = "failed", _now()


def _body(
    event: OutgoingEventName,
    record: StoredReservation,
    links_base_url: str,
    webhook: dict[str, Any],
    extra: dict[str, Any],
) -> dict[str, Any]:
    links = guest_links(links_base_url, record.account_id, record.id)
    resource: dict[str, Any] = {
        "id": record.service_id,
        "externalId": record.id,
        "guestAppLink": links["guestApp"],
        "preCheckInLink": links["onlineCheckInLink"],
        "preCheckOutLink": links["onlineCheckOutLink"],
    }
    if event in _LINK_OPENED:
        resource["link"] = resource[_LINK_OPENED[event]]
    if event in _ORDER_EVENTS:
        resource["orderId"] = uuid.uuid4().hex[:24]
    reservation = json.loads(record.payload)
    points = set(webhook.get("dataPoints") or [])
    if "timestamp" in points:
        resource["timestamp"] = _now()
    if "membershipType" in points and reservation.get("membership"):
        resource["membershipType"] = reservation["membership"]
    if "membershipIndication" in points:
        resource["membershipIndication"] = bool(reservation.get("membership"))
    resource.update(extra)
    return {"accountId": record.account_id, "event": event.value, "resource": resource}
