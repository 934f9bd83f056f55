"""Generate the hotel PMS sample export: rooms, room types and bookings (one row per booked room).

Deterministic (seeded) for a given anchor day: arrivals run from six months before the anchor
to a year after it, so the nightly window (last month to twelve ahead) always holds some. The
anchor defaults to the current month's first day; ``data/sample.json`` records the committed
sample's, and ``make demo`` regenerates the sample when its anchor month has passed.

    python mappings/hotel/generate.py                         # the sample, around this month
    python mappings/hotel/generate.py --anchor 2026-11-01     # reproduces a sample exactly
    python mappings/hotel/generate.py --reservations 1000000 --out /tmp/hotel-1m   # benchmark size
"""

from __future__ import annotations

import argparse
import csv
import json
import random
from datetime import date, datetime, timedelta
from pathlib import Path

HOTELS = {
    "BER": ("Hotel Spree", "Friedrichstraße", "Berlin", "10117", "DEU", 52.5200, 13.4050),
    "MUC": ("Hotel Isar", "Leopoldstraße", "München", "80802", "DEU", 48.1374, 11.5755),
}
ROOM_TYPES = [
    # code, name, description, features, size, bedrooms, bed type, beds, max guests
    ("DBL", "Double", "Double room with queen bed", "WiFi|Minibar|Desk", 22, 1, 2, 1, 2),
    ("TWN", "Twin", "Two single beds", "WiFi|Desk", 20, 1, 1, 2, 2),
    ("SUI", "Suite", "Suite with living room", "WiFi|Minibar|Bathtub|Balcony", 45, 2, 2, 2, 4),
    ("FAM", "Family", "Family room with bunk beds", "WiFi|Bathtub", 32, 1, 1, 4, 4),
]
FIRST = ["Anna", "Ben", "Clara", "David", "Eva", "Felix", "Greta", "Hugo", "Ines", "Jonas", "Lea"]
LAST = ["Müller", "Schmidt", "Dubois", "García", "Rossi", "de Vries", "Smith", "Novak", "Berg"]
COUNTRIES = ["DE", "AT", "CH", "FR", "ES", "IT", "NL", "GB", "US", "PL"]
LANGUAGES = {"DE": "de", "AT": "de", "CH": "de", "FR": "fr", "ES": "es", "IT": "it", "NL": "nl"}
STATUSES = ["confirmed"] * 8 + ["modified", "cancelled"]
CHANNELS = ["Booking.com", "Expedia", "Direct", "Phone"]
ETAS = ["", "14:00:00", "15:00:00", "15:30:00", "16:45:00", "18:00:00", "20:15:00"]

ROOM_COLUMNS = [
    "hotel_code",
    "room_no",
    "room_type",
    "floor",
    "street",
    "house_no",
    "zip",
    "city",
    "country_iso3",
    "lat",
    "lon",
    "wifi_ssid",
    "wifi_password",
    "door_pin",
    "active",
]
BOOKING_COLUMNS = [
    "hotel_code",
    "booking_no",
    "line_no",
    "status",
    "created_at",
    "modified_at",
    "channel",
    "rate_plan",
    "guest_first_name",
    "guest_last_name",
    "guest_email",
    "guest_phone",
    "guest_country",
    "guest_language",
    "room_no",
    "room_type",
    "arrival",
    "departure",
    "adults",
    "children",
    "eta",
    "price",
    "paid",
    "currency",
]


def anchor_date(text: str | None) -> date:
    """The day the sample is generated around: the given one, else the current month's first."""
    return date.fromisoformat(text) if text else date.today().replace(day=1)


def write_manifest(folder: Path, anchor: date, arguments: dict[str, object]) -> None:
    """``sample.json``: the anchor and arguments, so the sample can be reproduced and a demo
    can tell it is stale (its anchor month is not the current one)."""
    manifest = {"anchor": anchor.isoformat(), "arguments": arguments}
    (folder / "sample.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


def rooms(count: int) -> list[dict[str, object]]:
    result = []
    codes = list(HOTELS)
    for index in range(count):
        hotel = codes[index % len(codes)]
        name, street, city, postal, country, lat, lon = HOTELS[hotel]
        number = 100 * (1 + (index // len(codes)) % 5) + index // (5 * len(codes)) + 1
        room_type = ROOM_TYPES[index % len(ROOM_TYPES)][0]
        result.append(
            {
                "hotel_code": hotel,
                "room_no": f"{number}",
                "room_type": room_type,
                "floor": str(number // 100),
                "street": street,
                "house_no": str(10 + len(hotel)),
                "zip": postal,
                "city": city,
                "country_iso3": country,
                "lat": f"{lat:.4f}",
                "lon": f"{lon:.4f}",
                "wifi_ssid": f"{name.replace(' ', '')}-Guest",
                "wifi_password": f"spree{index * 7919 % 10000:04d}",
                "door_pin": f"{(index * 104729) % 1000000:06d}",
                "active": "Y",
            }
        )
    return result


def bookings(
    rng: random.Random,
    count: int,
    room_rows: list[dict[str, object]],
    skew: bool = False,
    anchor: date = date(2025, 7, 2),
):
    start = anchor - timedelta(days=182)
    hotels = list(HOTELS)
    rooms_by_hotel = {
        hotel: [room for room in room_rows if room["hotel_code"] == hotel] for hotel in hotels
    }
    types_by_code = {room_type[0]: room_type for room_type in ROOM_TYPES}
    for number in range(1, count + 1):
        hotel = rng.choice(hotels)
        hotel_rooms = rooms_by_hotel[hotel]
        if skew:  # most arrivals in the first months, a long tail (like a real forward book)
            arrival = start + timedelta(days=int(540 * rng.random() ** 2.5))
        else:
            arrival = start + timedelta(days=rng.randrange(0, 540))
        nights = rng.choice([1, 1, 2, 2, 3, 4, 7])
        first_booked = datetime.combine(start - timedelta(days=31), datetime.min.time())
        created = first_booked + timedelta(minutes=rng.randrange(0, 60 * 24 * 400))
        created = min(created, datetime.combine(arrival, datetime.min.time()))
        first, last = rng.choice(FIRST), rng.choice(LAST)
        country = rng.choice(COUNTRIES)
        lines = 1 if rng.random() < 0.85 else rng.choice([2, 2, 3])
        status = rng.choice(STATUSES)
        # Booking-level values are the same on every line of a booking.
        modified = created + timedelta(hours=rng.randrange(0, 48))
        channel, rate_plan = rng.choice(CHANNELS), rng.choice(["BAR", "NRF", "BB"])
        for line, room in enumerate(rng.sample(hotel_rooms, lines), start=1):
            room_type = types_by_code[room["room_type"]]
            adults = rng.randint(1, room_type[8])
            yield {
                "hotel_code": hotel,
                "booking_no": f"{hotel}-{number:07d}",
                "line_no": str(line),
                "status": status,
                "created_at": created.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "modified_at": modified.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "channel": channel,
                "rate_plan": rate_plan,
                "guest_first_name": first,
                "guest_last_name": last,
                "guest_email": f"{first.lower()}.{number}@example.com",
                "guest_phone": f"+49 30 {number:07d}",
                "guest_country": country,
                "guest_language": LANGUAGES.get(country, "en"),
                "room_no": room["room_no"],
                "room_type": room["room_type"],
                "arrival": arrival.isoformat(),
                "departure": (arrival + timedelta(days=nights)).isoformat(),
                "adults": str(adults),
                "children": str(rng.choice([0, 0, 0, 1, 2])) if adults < room_type[8] else "0",
                "eta": rng.choice(ETAS),
                "price": f"{nights * rng.choice([89, 109, 129, 189]):.2f}",
                "paid": rng.choice(["0.00", f"{nights * 50:.2f}"]),
                "currency": "EUR",
            }


def write(
    out: Path,
    reservations: int,
    room_count: int,
    seed: int,
    skew: bool = False,
    anchor: date | None = None,
) -> None:
    anchor = anchor or anchor_date(None)
    out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    room_rows = rooms(room_count)
    with (out / "rooms.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, ROOM_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(room_rows)
    with (out / "room_types.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(
            [
                "code",
                "name",
                "description",
                "features",
                "size_sqm",
                "bedrooms",
                "bed_type",
                "beds",
                "max_guests",
            ]
        )
        writer.writerows(ROOM_TYPES)
    with (out / "bookings.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, BOOKING_COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(bookings(rng, reservations, room_rows, skew, anchor))
    write_manifest(
        out,
        anchor,
        {"reservations": reservations, "rooms": room_count, "seed": seed, "skew": skew},
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reservations", type=int, default=60)
    parser.add_argument("--rooms", type=int, default=40)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "data")
    parser.add_argument("--skew", action="store_true", help="arrival dates skewed to the near term")
    parser.add_argument("--anchor", help="YYYY-MM-DD the dates are around (default: 1st of month)")
    arguments = parser.parse_args()
    write(
        arguments.out,
        arguments.reservations,
        arguments.rooms,
        arguments.seed,
        arguments.skew,
        anchor_date(arguments.anchor),
    )


if __name__ == "__main__":
    main()
