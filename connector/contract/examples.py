"""Example resources, valid against the contract: used in docs, the OpenAPI document and tests."""

from __future__ import annotations

from typing import Any

EXAMPLE_ACCOMMODATION: dict[str, Any] = {
    "id": "unit-101",
    "status": "ACTIVE",
    "name": "Harbour View 101",
    "street": "Hafenstraße",
    "streetNumber": "12",
    "country": "DE",
    "city": "Hamburg",
    "wifiName": "HarbourGuest",
    "wifiCode": "wifi-secret-101",
    "doorCode": "4711#",
    "postalCode": "20459",
    "floor": "1",
    "minimumCheckInTime": "15:00",
    "maximumCheckOutTime": "11:00",
    "bedroomsNumber": 2,
    "maxNumberOfGuests": 4,
    "propertyType": 14,
    "coordinates": {"lat": 53.5438, "lon": 9.9661},
    "bedTypes": [{"bedType": 1, "amount": 2}],
    "roomType": {"id": "rt-dbl", "name": "Double", "code": "DBL"},
}

EXAMPLE_RESERVATION: dict[str, Any] = {
    "id": "res-5001",
    "status": "CONFIRMED",
    "createdAt": "2025-05-02T09:30:00Z",
    "primaryGuest": {
        "firstName": "Ada",
        "lastName": "Lovelace",
        "email": "ada@example.org",
        "phone": "+44 20 7946 0000",
        "language": "en",
        "country": "GB",
    },
    "unitReservations": [
        {
            "id": "stay-1",
            "adults": 2,
            "children": 1,
            "checkin": "2025-07-01",
            "checkout": "2025-07-05",
            "unitId": "unit-101",
            "unitName": "Harbour View 101",
            "estimatedCheckInTime": "16:30",
            "price": 480.0,
            "paidAmount": 120.5,
            "currency": "EUR",
            "guests": [{"firstName": "Charles", "lastName": "Babbage", "country": "GB"}],
            "additionalCharges": [{"title": "Cleaning", "amount": 40.0}],
        }
    ],
    "channelName": "Booking.com",
    "channelReservationId": "BDC-998877",
    "bookedAt": "2025-05-02T09:30:00Z",
}
