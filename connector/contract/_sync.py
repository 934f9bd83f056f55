"""Envelopes and responses of the inbound sync webhooks (spec §2.1, §2.7, §4.1, §4.2)."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import Field

from connector.contract._base import RequestModel, ResponseModel
from connector.contract._formats import NonEmptyStr
from connector.contract._resources import Accommodation, Reservation


class SyncEvent(StrEnum):
    CREATE = "create"
    UPDATE = "update"


class Entity(StrEnum):
    ACCOMMODATION = "accommodation"
    RESERVATION = "reservation"


_API_TOKEN_DOC = (
    "Present in the spec's request sample but not in its field list; the sandbox accepts it as "
    "an alternative to the token headers. pms-sync never sends it unless configured to."
)


class AccommodationEnvelope(RequestModel):
    accountId: NonEmptyStr
    event: SyncEvent = Field(strict=False)
    entity: Literal[Entity.ACCOMMODATION]
    resource: Accommodation
    apiToken: str | None = Field(default=None, description=_API_TOKEN_DOC)


class ReservationEnvelope(RequestModel):
    accountId: NonEmptyStr
    event: SyncEvent = Field(strict=False)
    entity: Literal[Entity.RESERVATION]
    resource: Reservation
    apiToken: str | None = Field(default=None, description=_API_TOKEN_DOC)


class AccommodationSyncResponse(ResponseModel):
    savedProperties: int | None = None
    skippedProperties: int | None = None
    summary: str | None = None


class ReservationSyncResponse(ResponseModel):
    newReservations: int | None = None
    updatedReservations: int | None = None
    skippedReservations: int | None = None
    summary: str | None = None
    reservationIds: list[str] | None = Field(
        default=None, description='Each entry is "<reservation id>-<unit reservation id>".'
    )


ENVELOPES: dict[Entity, type[AccommodationEnvelope] | type[ReservationEnvelope]] = {
    Entity.ACCOMMODATION: AccommodationEnvelope,
    Entity.RESERVATION: ReservationEnvelope,
}
RESOURCES: dict[Entity, type[Accommodation] | type[Reservation]] = {
    Entity.ACCOMMODATION: Accommodation,
    Entity.RESERVATION: Reservation,
}
SYNC_PATHS: dict[Entity, str] = {
    Entity.ACCOMMODATION: "/api/v1/hooks/accommodation/connect",
    Entity.RESERVATION: "/api/v1/hooks/reservation/connect",
}
