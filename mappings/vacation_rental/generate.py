"""Generate the vacation-rental PMS sample export: listings, bookings, guests and charges.

The files look like a German-language PMS export: semicolon-separated, Windows-1252 encoded,
day-first dates, decimal commas, arrival times such as "4pm", country names in several
languages, and Wi-Fi data missing for some listings. Deterministic (seeded) for a given anchor
day (default: the current month's first; ``data/sample.json`` records it): arrivals run from
three months before it to seven after, so the nightly window always holds some.

    python mappings/vacation_rental/generate.py [--bookings N] [--out DIR] [--anchor YYYY-MM-DD]
"""

from __future__ import annotations

import argparse
import csv
import json
import random
from datetime import date, datetime, timedelta
from pathlib import Path

ENCODING = "cp1252"
PLACES = [
    ("Seeblick", "Seestraße", "Konstanz", "78462", "Deutschland"),
    ("Bergnest", "Dorfplatz", "Hallstatt", "4830", "Österreich"),
    ("Casa Sol", "Calle Mayor", "Málaga", "29015", "España"),
    ("Villa Ulivo", "Via Roma", "Lucca", "55100", "Italia"),
    ("Le Mas", "Rue des Oliviers", "Arles", "13200", "France"),
    ("Duinhuis", "Strandweg", "Zandvoort", "2042", "Nederland"),
]
KINDS = ["Wohnung", "Haus", "Studio"]
FEATURES = ["Balkon", "Kamin", "Sauna", "Garten", "Meerblick", "Waschmaschine"]
FIRST = ["Jürgen", "Søren", "Zoë", "François", "José", "Chiara", "Anouk", "Lukas", "Maël"]
LAST = ["Müller", "Jørgensen", "Dupré", "Núñez", "Bianchi", "van Dijk", "Nowak", "Öztürk"]
GUEST_COUNTRIES = [
    "Deutschland",
    "Germany",
    "Allemagne",
    "Österreich",
    "Schweiz",
    "Suisse",
    "Frankreich",
    "España",
    "Spanien",
    "Italia",
    "Italien",
    "Paesi Bassi",
    "Niederlande",
    "Royaume-Uni",
    "United Kingdom",
    "Polen",
    "Polska",
    "Dänemark",
    "Belgique",
]
LANGUAGES = ["Deutsch", "English", "Français", "Español", "Italiano", "Nederlands", "Polski"]
ARRIVALS = ["", "3pm", "4pm", "4:30 pm", "17:00", "6 PM", "20:15", "11am"]
STATUSES = ["bestätigt"] * 6 + ["angefragt", "storniert"]


def anchor_date(text: str | None) -> date:
    """The day the sample is generated around: the given one, else the current month's first."""
    return date.fromisoformat(text) if text else date.today().replace(day=1)


def write_manifest(folder: Path, anchor: date, arguments: dict[str, object]) -> None:
    """``sample.json``: the anchor and arguments, so the sample can be reproduced and a demo
    can tell it is stale (its anchor month is not the current one)."""
    manifest = {"anchor": anchor.isoformat(), "arguments": arguments}
    (folder / "sample.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


def money(amount: float) -> str:
    """1234.5 → "1.234,50" as the export writes it."""
    text = f"{amount:,.2f}"
    return text.replace(",", "X").replace(".", ",").replace("X", ".")


def write_rows(path: Path, header: list[str], rows: list[list[object]]) -> None:
    with path.open("w", newline="", encoding=ENCODING) as handle:
        writer = csv.writer(handle, delimiter=";", lineterminator="\r\n")
        writer.writerow(header)
        writer.writerows(rows)


def generate(
    out: Path, listings: int, bookings: int, seed: int, anchor: date | None = None
) -> None:
    anchor = anchor or anchor_date(None)
    rng = random.Random(seed)
    out.mkdir(parents=True, exist_ok=True)
    listing_rows = []
    for number in range(1, listings + 1):
        name, street, city, postal, country = PLACES[(number - 1) % len(PLACES)]
        has_wifi = number % 4 != 0  # every fourth listing has no Wi-Fi data in the PMS
        listing_rows.append(
            [
                f"L{number:03d}",
                f"{name} {number}",
                street,
                str(rng.randint(1, 80)),
                postal,
                city,
                country,
                f"{name.replace(' ', '')}-WLAN" if has_wifi else "",
                f"{rng.randrange(10**7, 10**8)}" if has_wifi else "",
                f"Schlüsselbox {rng.randrange(1000, 9999)}",
                rng.choice(["3pm", "15:00", "4pm", "14:30"]),
                rng.choice(["10am", "11:00", "10:30"]),
                str(rng.randint(1, 4)),
                str(rng.randint(1, 2)),
                str(rng.randint(2, 8)),
                money(rng.randint(30, 140)).replace(",00", ""),
                rng.choice(KINDS),
                ", ".join(rng.sample(FEATURES, 2)),
            ]
        )
    write_rows(
        out / "listings.csv",
        [
            "ListingID",
            "Bezeichnung",
            "Straße",
            "Hausnr",
            "PLZ",
            "Ort",
            "Land",
            "WLAN_Name",
            "WLAN_Passwort",
            "Zugang",
            "CheckIn_ab",
            "CheckOut_bis",
            "Schlafzimmer",
            "Bäder",
            "MaxGäste",
            "Größe_m2",
            "Typ",
            "Ausstattung",
        ],
        listing_rows,
    )

    booking_rows, guest_rows, charge_rows = [], [], []
    start = anchor - timedelta(days=91)
    for number in range(1, bookings + 1):
        booking = f"FW-{2025000 + number}"
        listing = rng.choice(listing_rows)
        arrival = start + timedelta(days=rng.randrange(0, 300))
        nights = rng.choice([2, 3, 4, 5, 7, 7, 10, 14])
        created = datetime.combine(arrival, datetime.min.time()) - timedelta(
            days=rng.randint(3, 120), minutes=rng.randrange(0, 1440)
        )
        adults = rng.randint(1, 4)
        price = nights * rng.choice([79, 95, 120, 149, 210])
        booking_rows.append(
            [
                booking,
                listing[0],
                rng.choice(STATUSES),
                created.strftime("%d.%m.%Y %H:%M"),
                arrival.strftime("%d.%m.%Y"),
                str(nights),
                str(adults),
                str(rng.choice([0, 0, 1, 2])),
                str(rng.choice([0, 0, 0, 1])),
                rng.choice(ARRIVALS),
                money(price),
                rng.choice(["€", "EUR", "Euro"]),
                rng.choice(["Airbnb", "Booking.com", "Vrbo", "Direkt"]),
            ]
        )
        for position in range(rng.randint(1, 3)):
            first, last = rng.choice(FIRST), rng.choice(LAST)
            guest_rows.append(
                [
                    booking,
                    first,
                    last,
                    f"{first[0].lower()}.{number}.{position}@example.org" if position == 0 else "",
                    f"+49 170 {rng.randrange(10**6, 10**7)}" if position == 0 else "",
                    rng.choice(GUEST_COUNTRIES),
                    rng.choice(LANGUAGES),
                    "ja" if position == 0 else "nein",
                ]
            )
        charge_rows.append([booking, "Endreinigung", money(rng.choice([45, 60, 80])), "nein"])
        if rng.random() < 0.3:
            charge_rows.append([booking, "Kurtaxe", money(2.5), "ja"])
        if rng.random() < 0.1:
            charge_rows.append([booking, "Gutschein", money(-20), "nein"])
    write_rows(
        out / "bookings.csv",
        [
            "BuchungsNr",
            "ListingID",
            "Status",
            "Angelegt",
            "Anreise",
            "Nächte",
            "Erwachsene",
            "Kinder",
            "Babys",
            "Ankunft",
            "Preis",
            "Währung",
            "Kanal",
        ],
        booking_rows,
    )
    write_rows(
        out / "guests.csv",
        ["BuchungsNr", "Vorname", "Nachname", "E-Mail", "Telefon", "Land", "Sprache", "Hauptgast"],
        guest_rows,
    )
    write_rows(out / "charges.csv", ["BuchungsNr", "Posten", "Betrag", "ProNacht"], charge_rows)
    write_manifest(out, anchor, {"listings": listings, "bookings": bookings, "seed": seed})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--listings", type=int, default=24)
    parser.add_argument("--bookings", type=int, default=80)
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "data")
    parser.add_argument("--anchor", help="YYYY-MM-DD the dates are around (default: 1st of month)")
    arguments = parser.parse_args()
    generate(
        arguments.out,
        arguments.listings,
        arguments.bookings,
        arguments.seed,
        anchor_date(arguments.anchor),
    )


if __name__ == "__main__":
    main()
