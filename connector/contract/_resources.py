"""Accommodation and reservation resources of the sync webhooks (spec §2.2-§2.12)."""

from __future__ import annotations

from datetime import date
from enum import StrEnum

from pydantic import Field, model_validator

from connector.contract._base import RequestModel
from connector.contract.formats import (
    CountryCode,
    CurrencyCode,
    DateYMD,
    HalfHourTime,
    JsonInt,
    NonEmptyStr,
    NonNegativeJsonInt,
    TimeHHmm,
    Timestamp,
)


class AccommodationStatus(StrEnum):
    ACTIVE = "ACTIVE"
    INACTIVE = "INACTIVE"


CANCELLED = "CANCELLED"
"""The reservation status that marks a cancelled reservation (spec §3)."""


class Coordinates(RequestModel):
    lat: float | None = Field(default=None, ge=-90, le=90)
    lon: float | None = Field(default=None, ge=-180, le=180)


class BedType(RequestModel):
    bedType: JsonInt
    amount: NonNegativeJsonInt


class AdditionalField(RequestModel):
    fieldName: NonEmptyStr
    content: str


class RoomTypeAdditionalField(RequestModel):
    fieldName: str | None = None
    content: str | None = None


class RoomType(RequestModel):
    id: str | None = None
    name: str | None = None
    code: str | None = None
    description: str | None = None
    features: list[str] | None = None
    sizeSqM: NonNegativeJsonInt | None = None
    numberOfToilets: NonNegativeJsonInt | None = None
    bedroomsNumber: NonNegativeJsonInt | None = None
    additionalFields: list[RoomTypeAdditionalField] | None = None


class Accommodation(RequestModel):
    """An accommodation unit as the caller's system knows it (spec §2.2)."""

    id: NonEmptyStr
    status: AccommodationStatus = Field(strict=False)
    name: NonEmptyStr
    street: NonEmptyStr
    streetNumber: NonEmptyStr
    country: CountryCode
    city: NonEmptyStr
    wifiName: NonEmptyStr
    wifiCode: NonEmptyStr
    doorCode: NonEmptyStr
    apartmentNumber: str | None = None
    floor: str | None = None
    state: str | None = None
    area: str | None = None
    postalCode: str | None = None
    buildingEntrance: str | None = None
    buildingCode: str | None = None
    minimumCheckInTime: TimeHHmm | None = None
    maximumCheckOutTime: TimeHHmm | None = None
    bedroomsNumber: NonNegativeJsonInt | None = None
    numberOfToilets: NonNegativeJsonInt | None = None
    numberOfBathrooms: NonNegativeJsonInt | None = None
    maxNumberOfGuests: NonNegativeJsonInt | None = None
    propertyType: JsonInt | None = Field(
        default=None, description="Unit type code; the service defaults to 14 (apartment)."
    )
    coordinates: Coordinates | None = None
    checkInOptions: list[str] | None = None
    lateCheckOutOverride: bool | None = None
    bedTypes: list[BedType] | None = None
    additionalFields: list[AdditionalField] | None = None
    sizeSqM: NonNegativeJsonInt | None = None
    roomType: RoomType | None = None


class PrimaryGuest(RequestModel):
    firstName: NonEmptyStr
    lastName: str | None = None
    email: str | None = None
    phone: str | None = None
    language: str | None = None
    country: CountryCode | None = None


class Guest(RequestModel):
    firstName: NonEmptyStr
    lastName: str | None = None
    country: CountryCode | None = None
    language: str | None = None
    email: str | None = None
    phone: str | None = None


class AdditionalCharge(RequestModel):
    title: NonEmptyStr
    amount: float
    amountPerDay: bool | None = None


class UnitReservation(RequestModel):
    """One booked unit of a reservation (spec §2.10). `checkout` must be after `checkin`."""

    id: NonEmptyStr
    adults: NonNegativeJsonInt
    checkin: DateYMD
    checkout: DateYMD
    unitId: NonEmptyStr
    unitName: NonEmptyStr
    children: NonNegativeJsonInt | None = None
    babies: NonNegativeJsonInt | None = None
    estimatedCheckInTime: HalfHourTime | None = None
    estimatedCheckOutTime: HalfHourTime | None = None
    unitRoomTypeId: str | None = None
    unitRoomTypeCode: str | None = None
    unitRoomTypeName: str | None = None
    price: float | None = None
    paidAmount: float | None = None
    status: str | None = None
    currency: CurrencyCode | None = None
    doorCode: str | None = None
    buildingCode: str | None = None
    codeReleased: bool | None = None
    comments: str | None = None
    guestComments: str | None = None
    checkInOutComments: str | None = None
    additionalFields: list[AdditionalField] | None = None
    guests: list[Guest] | None = None
    additionalCharges: list[AdditionalCharge] | None = None

    @model_validator(mode="after")
    def _checkout_after_checkin(self) -> UnitReservation:
        if date.fromisoformat(self.checkout) <= date.fromisoformat(self.checkin):
            raise ValueError(f"checkout {self.checkout} must be after checkin {self.checkin}")
        return self


class Reservation(RequestModel):
    """A reservation with its booked units (spec §2.8). The `id`s of its `unitReservations` are
    unique."""

    id: NonEmptyStr
    status: NonEmptyStr
    createdAt: Timestamp
    primaryGuest: PrimaryGuest
    unitReservations: list[UnitReservation] = Field(min_length=1)
    channelReservationId: str | None = None
    channelName: str | None = None
    channelId: JsonInt | None = None
    channelId2: JsonInt | None = None
    marketSegment: str | None = None
    agent: str | None = None
    membership: str | None = None
    ratePlan: str | None = None
    cancellationPolicyCode: str | None = None
    id2: str | None = None
    bookedAt: Timestamp | None = None
    updatedAt: Timestamp | None = None

    @model_validator(mode="after")
    def _unit_reservation_ids_unique(self) -> Reservation:
        ids = [unit.id for unit in self.unitReservations]
        duplicates = sorted({unit_id for unit_id in ids if ids.count(unit_id) > 1})
        if duplicates:
            raise ValueError(f"unitReservations ids must be unique, repeated: {duplicates}")
        return self
