"""Reference tables that turn the many spellings of a country, currency, language or month into
the code the service expects.

Country and language names come from pycountry, in English and in the translations pycountry
ships (German, French, Spanish, Italian, Dutch, Portuguese, …). A short committed alias table
adds the colloquial names exports actually carry ("Holland", "USA", "England") and the qualified
names of the World Bank's, the UN's and CLDR's lists ("Hong Kong SAR, China"), and a symbol
table maps "€", "$", "£" to ISO 4217. Keys are normalised the same way the SQL side normalises a
value: lower case, accents stripped, surrounding blanks removed.
"""

from __future__ import annotations

import contextlib
import gettext
import hashlib
import json
import os
import re
import unicodedata
from functools import cache
from importlib.metadata import version
from pathlib import Path

import pycountry

from connector.config import InputSection
from connector.private_files import write_private

TRANSLATED_LANGUAGES: tuple[str, ...] = ("de", "fr", "es", "it", "nl", "pt", "pl", "da", "sv")
"""Locales whose country and language names are accepted besides English."""

COUNTRY_ALIASES: dict[str, str] = {
    "usa": "US",
    "u.s.a.": "US",
    "u.s.": "US",
    "united states": "US",
    "america": "US",
    "uk": "GB",
    "u.k.": "GB",
    "great britain": "GB",
    "britain": "GB",
    "england": "GB",
    "scotland": "GB",
    "wales": "GB",
    "northern ireland": "GB",
    "grossbritannien": "GB",
    "großbritannien": "GB",
    "england (uk)": "GB",
    "holland": "NL",
    "the netherlands": "NL",
    "nederland": "NL",
    "deutschland": "DE",
    "brd": "DE",
    "osterreich": "AT",
    "schweiz": "CH",
    "suisse": "CH",
    "svizzera": "CH",
    "russia": "RU",
    "south korea": "KR",
    "korea": "KR",
    "north korea": "KP",
    "czech republic": "CZ",
    "tschechien": "CZ",
    "czechia": "CZ",
    "turkey": "TR",
    "turkiye": "TR",
    "turkei": "TR",
    "iran": "IR",
    "vietnam": "VN",
    "taiwan": "TW",
    "bolivia": "BO",
    "venezuela": "VE",
    "tanzania": "TZ",
    "syria": "SY",
    "laos": "LA",
    "moldova": "MD",
    "vatican": "VA",
    "ivory coast": "CI",
    "cote d'ivoire": "CI",
    "uae": "AE",
    "emirates": "AE",
    "espana": "ES",
    "italia": "IT",
    "belgique": "BE",
    "belgie": "BE",
    "danmark": "DK",
    "sverige": "SE",
    "norge": "NO",
    "polska": "PL",
    "eire": "IE",
    "hellas": "GR",
    # The World Bank's and UN's qualified names, CLDR's short names and other lists' spellings
    # that ISO's names do not give, even with the variants of _name_variants.
    "bahamas, the": "BS",
    "gambia, the": "GM",
    "congo, dem. rep.": "CD",
    "democratic republic of the congo": "CD",
    "dr congo": "CD",
    "drc": "CD",
    "congo-kinshasa": "CD",
    "congo - kinshasa": "CD",
    "congo, rep.": "CG",
    "congo-brazzaville": "CG",
    "congo - brazzaville": "CG",
    "egypt, arab rep.": "EG",
    "hong kong sar, china": "HK",
    "hong kong sar": "HK",
    "hong kong s.a.r.": "HK",
    "hong kong, china": "HK",
    "china, hong kong sar": "HK",
    "china, hong kong special administrative region": "HK",
    "macao sar, china": "MO",
    "macau sar, china": "MO",
    "macao sar": "MO",
    "macau sar": "MO",
    "macao s.a.r.": "MO",
    "macau s.a.r.": "MO",
    "macao, china": "MO",
    "macau, china": "MO",
    "china, macao sar": "MO",
    "china, macao special administrative region": "MO",
    "taiwan, china": "TW",
    "chinese taipei": "TW",
    "iran, islamic rep.": "IR",
    "korea, rep.": "KR",
    "korea, south": "KR",
    "korea, dem. people's rep.": "KP",
    "korea, dem. rep.": "KP",
    "korea, north": "KP",
    "lao pdr": "LA",
    "micronesia, fed. sts.": "FM",
    "venezuela, rb": "VE",
    "west bank and gaza": "PS",
    "palestinian territories": "PS",
    "palestine": "PS",
    "yemen, rep.": "YE",
    "somalia, fed. rep.": "SO",
    "macedonia, fyr": "MK",
    "macedonia": "MK",
    "myanmar (burma)": "MM",
    "cape verde": "CV",
    "east timor": "TL",
    "holy see": "VA",
    "vatican city": "VA",
    "falkland islands": "FK",
    "saint helena": "SH",
    "heard and mcdonald islands": "HM",
    "saint vincent and grenadines": "VC",
    "u.s. outlying islands": "UM",
    "caribbean netherlands": "BQ",
    "netherlands antilles": "BQ",
}
"""Colloquial and qualified country names that neither pycountry nor its translations list."""

CURRENCY_SYMBOLS: dict[str, str] = {
    "€": "EUR",
    "eur": "EUR",
    "euro": "EUR",
    "euros": "EUR",
    "$": "USD",
    "us$": "USD",
    "usd$": "USD",
    "dollar": "USD",
    "dollars": "USD",
    "£": "GBP",
    "pound": "GBP",
    "pounds": "GBP",
    "pound sterling": "GBP",
    "¥": "JPY",
    "yen": "JPY",
    "₹": "INR",
    "₽": "RUB",
    "₺": "TRY",
    "₩": "KRW",
    "₪": "ILS",
    "zł": "PLN",
    "zl": "PLN",
    "kč": "CZK",
    "kc": "CZK",
    "fr.": "CHF",
    "sfr": "CHF",
    "chf": "CHF",
    "r$": "BRL",
    "a$": "AUD",
    "au$": "AUD",
    "c$": "CAD",
    "ca$": "CAD",
    "nz$": "NZD",
    "ft": "HUF",
    "rp": "IDR",
    "rm": "MYR",
    "฿": "THB",
    "₫": "VND",
    "₱": "PHP",
    "s$": "SGD",
    "hk$": "HKD",
}
"""Currency symbols and everyday names; "$" is taken as US dollars, "kr" is left ambiguous."""

MONTH_NAMES: dict[str, int] = {}
"""Month names and abbreviations in English, German, French, Spanish, Italian and Dutch."""

_MONTHS_BY_LANGUAGE: dict[str, list[str]] = {
    "en": [
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
    ],
    "de": [
        "januar",
        "februar",
        "marz",
        "april",
        "mai",
        "juni",
        "juli",
        "august",
        "september",
        "oktober",
        "november",
        "dezember",
    ],
    "fr": [
        "janvier",
        "fevrier",
        "mars",
        "avril",
        "mai",
        "juin",
        "juillet",
        "aout",
        "septembre",
        "octobre",
        "novembre",
        "decembre",
    ],
    "es": [
        "enero",
        "febrero",
        "marzo",
        "abril",
        "mayo",
        "junio",
        "julio",
        "agosto",
        "septiembre",
        "octubre",
        "noviembre",
        "diciembre",
    ],
    "it": [
        "gennaio",
        "febbraio",
        "marzo",
        "aprile",
        "maggio",
        "giugno",
        "luglio",
        "agosto",
        "settembre",
        "ottobre",
        "novembre",
        "dicembre",
    ],
    "nl": [
        "januari",
        "februari",
        "maart",
        "april",
        "mei",
        "juni",
        "juli",
        "augustus",
        "september",
        "oktober",
        "november",
        "december",
    ],
}
for _names in _MONTHS_BY_LANGUAGE.values():
    for _number, _name in enumerate(_names, start=1):
        MONTH_NAMES.setdefault(_name, _number)
for _number, _name in enumerate(_MONTHS_BY_LANGUAGE["en"], start=1):
    MONTH_NAMES.setdefault(_name[:3], _number)
MONTH_NAMES.update({"sept": 9, "maerz": 3, "mrz": 3, "okt": 10, "dez": 12, "mei": 5, "mär": 3})


def normalise_key(text: str) -> str:
    """Lower case, accents stripped, blanks trimmed: the SQL side applies the same steps."""
    decomposed = unicodedata.normalize("NFKD", text.strip().lower())
    return "".join(char for char in decomposed if not unicodedata.combining(char))


def _translations(domain: str) -> list[gettext.NullTranslations]:
    return [
        gettext.translation(domain, pycountry.LOCALES_DIR, languages=[language], fallback=True)
        for language in TRANSLATED_LANGUAGES
    ]


CACHE_DIR_VARIABLE = InputSection.variable("cache_dir")
"""Where the built reference tables are kept between runs; by default ``$XDG_CACHE_HOME/pms-sync``
(``~/.cache/pms-sync``)."""


def country_table() -> dict[str, str]:
    """Every accepted spelling (normalised) → ISO 3166-1 alpha-2."""
    return reference_tables()["country"]


def currency_table() -> dict[str, str]:
    """Every accepted spelling (normalised) → ISO 4217 code."""
    return reference_tables()["currency"]


def language_table() -> dict[str, str]:
    """Every accepted spelling (normalised) → ISO 639-1 code (ISO 639-3 where there is none)."""
    return reference_tables()["language"]


@cache
def reference_tables() -> dict[str, dict[str, str]]:
    """The country, currency and language tables, built once per pycountry release.

    Building them walks pycountry's databases and nine translations (a fixed cost of
    every run); the result depends only on pycountry's version and on this module's own alias
    tables, so it is kept in a JSON file named after both and read back by later runs. A cache
    that cannot be read or written is only slower: the tables are then built in memory.
    """
    file = _cache_file()
    if file is not None:
        try:
            found = json.loads(file.read_text(encoding="utf-8"))
            if isinstance(found, dict) and set(found) == set(_BUILDERS):
                return found
        except (OSError, ValueError):
            pass
    tables = {name: build() for name, build in _BUILDERS.items()}
    if file is not None:
        text = json.dumps(tables, ensure_ascii=False, sort_keys=True)
        # Atomic, so another run reads the old name or the whole new file.
        with contextlib.suppress(OSError):
            write_private(file, text.encode("utf-8"))
    return tables


def _cache_file() -> Path | None:
    """The cache file for this pycountry release and this module's source, or None."""
    configured = InputSection.read().cache_dir
    if configured is not None:
        if not configured.strip():
            return None  # an empty value turns the cache off
        folder = Path(configured).expanduser()
    else:
        base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
        folder = Path(base).expanduser() / "pms-sync"
    try:
        source = Path(__file__).read_bytes()
    except OSError:
        return None
    key = hashlib.sha256(version("pycountry").encode() + b"\0" + source).hexdigest()[:16]
    return folder / f"reference-tables-{key}.json"


def _build_country_table() -> dict[str, str]:
    table: dict[str, str] = {}
    translations = _translations("iso3166-1")
    for country in pycountry.countries:
        names = {country.alpha_2, country.alpha_3, country.name}
        for attribute in ("official_name", "common_name"):
            if hasattr(country, attribute):
                names.add(getattr(country, attribute))
        for translation in translations:
            names.add(translation.gettext(country.name))
            if hasattr(country, "official_name"):
                names.add(translation.gettext(country.official_name))
        for name in names:
            table.setdefault(normalise_key(name), country.alpha_2)
    for alias, code in COUNTRY_ALIASES.items():
        table[normalise_key(alias)] = code
    # Variants never displace a name: "Congo" qualified one way must not become the other Congo.
    for key, code in list(table.items()):
        for variant in _name_variants(key):
            table.setdefault(variant, code)
    # Codes win over names that happen to spell the same.
    for country in pycountry.countries:
        table[normalise_key(country.alpha_3)] = country.alpha_2
    for country in pycountry.countries:
        table[normalise_key(country.alpha_2)] = country.alpha_2
    return table


_QUALIFIER = re.compile(
    r"^(?P<head>[^,()]+), (?P<tail>[^,()]+)$|^(?P<name>[^,()]+) \((?P<note>[^()]+)\)$"
)


def _name_variants(key: str) -> set[str]:
    """The other spellings of a normalised country name that lists other than ISO's use.

    A qualifier after a comma is also written in brackets, without the comma, or first
    ("korea, republic of": "korea (republic of)", "republic of korea"; "hong kong sar, china":
    "hong kong sar china"); "and" is also "&", "saint" also "st." or "st", and an apostrophe
    also the typographic one (U+2019) CLDR writes.
    """
    variants = {key}
    found = _QUALIFIER.match(key)
    if found and found["head"]:
        head, tail = found["head"], found["tail"]
        variants |= {f"{head} ({tail})", f"{head} {tail}", f"{tail} {head}"}
    elif found:
        variants |= {f"{found['name']}, {found['note']}", f"{found['name']} {found['note']}"}
    for old, new in ((" and ", " & "), ("saint ", "st. "), ("saint ", "st "), ("'", "\u2019")):
        variants |= {variant.replace(old, new) for variant in variants if old in variant}
    variants.discard(key)
    return variants


def _build_currency_table() -> dict[str, str]:
    table: dict[str, str] = {}
    for currency in pycountry.currencies:
        table.setdefault(normalise_key(currency.alpha_3), currency.alpha_3)
        table.setdefault(normalise_key(currency.name), currency.alpha_3)
    for symbol, code in CURRENCY_SYMBOLS.items():
        table[normalise_key(symbol)] = code
    return table


def _build_language_table() -> dict[str, str]:
    table: dict[str, str] = {}
    translations = _translations("iso639-3")
    for language in pycountry.languages:
        code = getattr(language, "alpha_2", None) or language.alpha_3
        names = {language.alpha_3, language.name}
        if hasattr(language, "alpha_2"):
            names.add(language.alpha_2)
        if hasattr(language, "bibliographic"):
            names.add(language.bibliographic)
        # Only languages with a two-letter code are translated: the others are rare in exports
        # and their translated names collide with common ones.
        if hasattr(language, "alpha_2"):
            for translation in translations:
                names.add(translation.gettext(language.name))
        for name in names:
            table.setdefault(normalise_key(name), code)
    # Native names of the languages guests most often state.
    for native, code in {
        "deutsch": "de",
        "english": "en",
        "francais": "fr",
        "espanol": "es",
        "italiano": "it",
        "nederlands": "nl",
        "portugues": "pt",
        "polski": "pl",
        "dansk": "da",
        "svenska": "sv",
        "norsk": "no",
    }.items():
        table[native] = code
    # Codes win over names that happen to spell the same ("En" is a language of Vietnam).
    for language in pycountry.languages:
        if hasattr(language, "alpha_2"):
            table[normalise_key(language.alpha_3)] = language.alpha_2
    for language in pycountry.languages:
        if hasattr(language, "alpha_2"):
            table[normalise_key(language.alpha_2)] = language.alpha_2
    return table


_BUILDERS = {
    "country": _build_country_table,
    "currency": _build_currency_table,
    "language": _build_language_table,
}
