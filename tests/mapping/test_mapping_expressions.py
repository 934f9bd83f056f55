"""Every expression of the mapping language, mapped end to end from a CSV export."""

from __future__ import annotations

from pathlib import Path

import pytest
from mapping_helpers import field_values, map_bookings, map_units, payloads, unit_values


def rows(**columns: list[object]) -> list[dict[str, object]]:
    count = len(next(iter(columns.values())))
    units = [f"u{index}" for index in range(1, count + 1)]
    return [
        {"unit_id": units[index], **{name: values[index] for name, values in columns.items()}}
        for index in range(count)
    ]


def test_a_column_name_copies_the_column(tmp_path: Path) -> None:
    batch = map_units(tmp_path, rows(label=["Loft", "Studio"]), {"name": "label"})
    assert field_values(batch, "name") == ["Loft", "Studio"]


def test_a_constant_is_the_same_for_every_record(tmp_path: Path) -> None:
    batch = map_units(tmp_path, rows(x=["a", "b"]), {"propertyType": 14})
    assert field_values(batch, "propertyType") == [14, 14]


def test_a_template_joins_columns_and_missing_parts_become_empty(tmp_path: Path) -> None:
    data = rows(street=["Main St", "Side St", ""], no=["4", "", ""])
    batch = map_units(tmp_path, data, {"name": {"template": "{street} {no}", "default": "?"}})
    assert field_values(batch, "name") == ["Main St 4", "Side St ", "?"]


def test_coalesce_takes_the_first_present_value(tmp_path: Path) -> None:
    data = rows(nick=["", "Nest"], label=["Loft", "Ignored"])
    batch = map_units(tmp_path, data, {"name": {"coalesce": ["nick", "label"]}})
    assert field_values(batch, "name") == ["Loft", "Nest"]


def test_a_value_map_replaces_listed_values_and_uses_its_default_for_others(
    tmp_path: Path,
) -> None:
    data = rows(kind=["apt", "house", "boat"])
    spec = {"column": "kind", "map": {"apt": 14, "house": 3}, "map_default": 99}
    batch = map_units(tmp_path, data, {"propertyType": spec})
    assert field_values(batch, "propertyType") == [14, 3, 99]


def test_a_value_map_without_default_keeps_unlisted_values(tmp_path: Path) -> None:
    data = rows(kind=["a", "b"])
    batch = map_units(tmp_path, data, {"name": {"column": "kind", "map": {"a": "Alpha"}}})
    assert field_values(batch, "name") == ["Alpha", "b"]


def test_a_lookup_table_replaces_values_and_unlisted_become_missing(tmp_path: Path) -> None:
    from mapping_helpers import accommodation_mapping, write_csv, write_mapping

    from connector.contract import Entity
    from connector.mapping import load_mapping, map_records

    write_csv(tmp_path / "units.csv", rows(code=["A", "B"]))
    document = accommodation_mapping({"area": {"column": "code", "lookup": "areas"}})
    document["lookups"] = {"areas": {"A": "Altstadt"}}
    batch = map_records(load_mapping(write_mapping(tmp_path, document)))[Entity.ACCOMMODATION]
    assert field_values(batch, "area") == ["Altstadt", None]


def test_trim_and_case_clean_text(tmp_path: Path) -> None:
    data = rows(city=["  berlin ", "NEW york"])
    fields = {
        "city": {"column": "city", "trim": True, "case": "title"},
        "state": {"column": "city", "trim": True, "case": "upper"},
        "area": {"column": "city", "trim": True, "case": "lower"},
    }
    batch = map_units(tmp_path, data, fields)
    assert field_values(batch, "city") == ["Berlin", "New York"]
    assert field_values(batch, "state") == ["BERLIN", "NEW YORK"]
    assert field_values(batch, "area") == ["berlin", "new york"]


def test_split_makes_a_list_of_trimmed_items(tmp_path: Path) -> None:
    data = rows(options=["keybox, reception ,", ""])
    batch = map_units(tmp_path, data, {"checkInOptions": {"column": "options", "split": ","}})
    assert field_values(batch, "checkInOptions") == [["keybox", "reception"], None]


def test_regex_extracts_the_first_group(tmp_path: Path) -> None:
    data = rows(address=["Main Street 12a", "no number"])
    spec = {"column": "address", "regex": r"(\d+\w*)$", "default": "0"}
    batch = map_units(tmp_path, data, {"streetNumber": spec})
    assert field_values(batch, "streetNumber") == ["12a", "0"]


def test_number_text_drops_a_spreadsheet_trailing_zero(tmp_path: Path) -> None:
    data = rows(zip=["397657.0", "12.50", "D-123"])
    batch = map_units(tmp_path, data, {"postalCode": {"column": "zip", "as": "number_text"}})
    assert field_values(batch, "postalCode") == ["397657", "12.5", "D-123"]


def test_integers_accept_whole_decimals_and_decimal_commas(tmp_path: Path) -> None:
    data = rows(size=["42", "42.0", "1.042,0"])
    fields = {"sizeSqM": {"column": "size", "decimal": ","}, "bedroomsNumber": {"constant": 1}}
    batch = map_units(tmp_path, data[:2], {"sizeSqM": "size"})
    assert field_values(batch, "sizeSqM") == [42, 42]
    batch = map_units(tmp_path, data, fields)
    # With a decimal comma a point groups thousands: "42.0" is no such number (it was 420).
    assert field_values(batch, "sizeSqM") == [42, 1042]
    assert batch.quarantine["value"].tolist() == ["42.0"]


def test_numbers_become_floats(tmp_path: Path) -> None:
    data = rows(lat=["52.52", "-1"], lon=["13.4", "0.5"])
    batch = map_units(tmp_path, data, {"coordinates": {"lat": "lat", "lon": "lon"}})
    assert field_values(batch, "coordinates") == [
        {"lat": 52.52, "lon": 13.4},
        {"lat": -1.0, "lon": 0.5},
    ]


def test_an_optional_object_without_values_is_left_out(tmp_path: Path) -> None:
    data = rows(lat=["", "1"], lon=["", "2"])
    batch = map_units(tmp_path, data, {"coordinates": {"lat": "lat", "lon": "lon"}})
    assert field_values(batch, "coordinates") == [None, {"lat": 1.0, "lon": 2.0}]


@pytest.mark.parametrize(
    ("text", "expected"),
    [("t", True), ("f", False), ("yes", True), ("No", False), ("1", True), ("0", False)],
)
def test_booleans_read_t_f_yes_no_and_1_0(tmp_path: Path, text: str, expected: bool) -> None:
    batch = map_units(tmp_path, rows(late=[text]), {"lateCheckOutOverride": "late"})
    assert field_values(batch, "lateCheckOutOverride") == [expected]


def test_countries_are_read_from_names_in_several_languages_and_codes(tmp_path: Path) -> None:
    names = ["Deutschland", "Allemagne", "Alemania", "Germania", "Duitsland", "Germany"]
    others = ["Espagne", "Paesi Bassi", "Royaume-Uni", "AUT", "ch", "Holland"]
    batch = map_units(tmp_path, rows(land=names + others), {"country": "land"})
    assert field_values(batch, "country") == ["DE"] * 6 + ["ES", "NL", "GB", "AT", "CH", "NL"]


QUALIFIED_COUNTRY_NAMES = {
    # The World Bank's names.
    "Hong Kong SAR, China": "HK",
    "Macao SAR, China": "MO",
    "Macau SAR, China": "MO",
    "Taiwan, China": "TW",
    "Korea, Rep.": "KR",
    "Korea, Dem. People's Rep.": "KP",
    "Iran, Islamic Rep.": "IR",
    "Venezuela, RB": "VE",
    "Egypt, Arab Rep.": "EG",
    "Yemen, Rep.": "YE",
    "Congo, Dem. Rep.": "CD",
    "Congo, Rep.": "CG",
    "Gambia, The": "GM",
    "Bahamas, The": "BS",
    "Lao PDR": "LA",
    "Micronesia, Fed. Sts.": "FM",
    "St. Kitts and Nevis": "KN",
    "Virgin Islands (U.S.)": "VI",
    "West Bank and Gaza": "PS",
    "Turkiye": "TR",
    # ISO's own and the UN's, qualifier first or in brackets.
    "Russian Federation": "RU",
    "Viet Nam": "VN",
    "Türkiye": "TR",
    "Czechia": "CZ",
    "Côte d'Ivoire": "CI",
    "Cote d'Ivoire": "CI",
    "Korea, Republic of": "KR",
    "Republic of Korea": "KR",
    "Iran (Islamic Republic of)": "IR",
    "Bolivia (Plurinational State of)": "BO",
    "Democratic Republic of the Congo": "CD",
    "China, Hong Kong SAR": "HK",
    "China, Macao SAR": "MO",
    # CLDR's short names: typographic apostrophe, "&", "St.".
    "Côte d\u2019Ivoire": "CI",
    "Hong Kong SAR China": "HK",
    "Macao SAR China": "MO",
    "Trinidad & Tobago": "TT",
    "St. Vincent & Grenadines": "VC",
    "U.S. Virgin Islands": "VI",
    "Congo - Kinshasa": "CD",
    "Myanmar (Burma)": "MM",
}


def test_qualified_country_names_of_the_world_bank_un_and_cldr_lists_are_read(
    tmp_path: Path,
) -> None:
    names = list(QUALIFIED_COUNTRY_NAMES)
    batch = map_units(tmp_path, rows(land=names), {"country": "land"})
    assert dict(zip(names, field_values(batch, "country"), strict=True)) == QUALIFIED_COUNTRY_NAMES
    assert batch.quarantine.empty


def test_an_unlisted_qualified_name_is_quarantined_not_read_by_its_head(tmp_path: Path) -> None:
    # "Congo" and "Korea" with a qualifier name one of two countries: only a known one decides.
    names = ["Congo, Rep.", "Congo, Dem. Rep.", "Congo, Rep. of", "Korea, Dem."]
    batch = map_units(tmp_path, rows(land=names), {"country": "land"})
    assert field_values(batch, "country") == ["CG", "CD"]
    assert batch.quarantine["reason"].tolist() == [
        "unknown country, got 'Congo, Rep. of'",
        "unknown country, got 'Korea, Dem.'",
    ]


def test_currencies_are_read_from_codes_symbols_and_names(tmp_path: Path) -> None:
    data = [
        {"booking": f"b{index}", "cur": value}
        for index, value in enumerate(["€", "$", "£", "Euro", "chf", "Swiss Franc"])
    ]
    batch = map_bookings(tmp_path, data, {"currency": "cur"})
    assert unit_values(batch, "currency") == ["EUR", "USD", "GBP", "EUR", "CHF", "CHF"]


def test_languages_are_read_from_codes_locales_and_names(tmp_path: Path) -> None:
    data = [
        {"booking": f"b{index}", "lang": value}
        for index, value in enumerate(["de-DE", "German", "Deutsch", "fra", "en_GB", "Spanish"])
    ]
    fields = {
        "primaryGuest": {
            "firstName": {"constant": "Ann"},
            "language": {"column": "lang", "as": "language"},
        }
    }
    batch = map_bookings(tmp_path, data, {}, fields)
    assert [p["primaryGuest"]["language"] for p in payloads(batch)] == [
        "de",
        "de",
        "de",
        "fr",
        "en",
        "es",
    ]


def test_dates_are_parsed_with_explicit_formats(tmp_path: Path) -> None:
    data = [{"booking": "b1", "arr": "03.07.2025", "dep": "07/05/2025"}]
    unit = {
        "checkin": {"column": "arr", "format": "%d.%m.%Y"},
        "checkout": {"column": "dep", "format": ["%Y-%m-%d", "%m/%d/%Y"]},
    }
    batch = map_bookings(tmp_path, data, unit)
    assert unit_values(batch, "checkin") == ["2025-07-03"]
    assert unit_values(batch, "checkout") == ["2025-07-05"]


def test_a_date_is_composed_from_year_month_name_and_day(tmp_path: Path) -> None:
    data = [
        {"booking": "b1", "y": "2025", "m": "März", "d": "4"},
        {"booking": "b2", "y": "2025", "m": "sept.", "d": "30"},
        {"booking": "b3", "y": "2025", "m": "7", "d": "1"},
    ]
    unit = {
        "checkin": {"date_parts": {"year": "y", "month": "m", "day": "d"}},
        "checkout": {"constant": "2025-12-31"},
    }
    batch = map_bookings(tmp_path, data, unit)
    assert unit_values(batch, "checkin") == ["2025-03-04", "2025-09-30", "2025-07-01"]


def test_add_days_computes_checkout_from_nights(tmp_path: Path) -> None:
    data = [{"booking": "b1", "arr": "2025-02-27", "nights": "3"}]
    unit = {"checkin": "arr", "checkout": {"column": "arr", "add_days": "nights"}}
    batch = map_bookings(tmp_path, data, unit)
    assert unit_values(batch, "checkout") == ["2025-03-02"]


def test_timestamps_become_iso_utc(tmp_path: Path) -> None:
    data = [
        {"booking": "b1", "made": "2025-01-03 10:22:11"},
        {"booking": "b2", "made": "2025-01-03T10:22:11+02:00"},
        {"booking": "b3", "made": "03/01/2025 08:00"},
    ]
    created = {"column": "made", "format": ["%Y-%m-%d %H:%M:%S", "%d/%m/%Y %H:%M"]}
    batch = map_bookings(tmp_path, data[:1] + data[2:], {}, {"createdAt": created})
    assert [p["createdAt"] for p in payloads(batch)] == [
        "2025-01-03T10:22:11Z",
        "2025-01-03T08:00:00Z",
    ]
    batch = map_bookings(tmp_path, data[1:2], {}, {"createdAt": "made"})
    assert [p["createdAt"] for p in payloads(batch)] == ["2025-01-03T08:22:11Z"]


@pytest.mark.parametrize(
    ("text", "time", "half_hour"),
    [
        ("3pm", "15:00", "15:00"),
        ("4 p.m.", "16:00", "16:00"),
        ("15:00:00", "15:00", "15:00"),
        ("9:10 am", "09:10", "09:00"),
        ("16:45", "16:45", "17:00"),
        ("12am", "00:00", "00:00"),
        ("23:50", "23:50", "23:30"),
    ],
)
def test_times_become_hh_mm_and_estimates_round_to_the_half_hour(
    tmp_path: Path, text: str, time: str, half_hour: str
) -> None:
    units = map_units(tmp_path, rows(t=[text]), {"minimumCheckInTime": "t"})
    assert field_values(units, "minimumCheckInTime") == [time]
    bookings = map_bookings(tmp_path, [{"booking": "b1", "t": text}], {"estimatedCheckInTime": "t"})
    assert unit_values(bookings, "estimatedCheckInTime") == [half_hour]


def test_a_default_fills_a_required_field_the_export_lacks(tmp_path: Path) -> None:
    data = rows(ssid=["", "Home"])
    batch = map_units(tmp_path, data, {"wifiName": {"column": "ssid", "default": "Guest"}})
    assert field_values(batch, "wifiName") == ["Guest", "Home"]


def test_row_filters_keep_only_matching_rows(tmp_path: Path) -> None:
    data = rows(state=["live", "archived", "live", ""], kind=["a", "b", "c", "d"])
    batch = map_units(
        tmp_path,
        data,
        {},
        filter=[
            {"column": "state", "not_in": ["archived"]},
            {"column": "kind", "matches": "^[a-c]$"},
        ],
    )
    assert batch.records["record_id"].tolist() == ["u1", "u3"]


def test_an_sql_expression_computes_from_the_row(tmp_path: Path) -> None:
    data = rows(a=["2", "5"], b=["3", "4"])
    spec = {"sql": "CAST(a AS INTEGER) * CAST(b AS INTEGER)"}
    batch = map_units(tmp_path, data, {"maxNumberOfGuests": spec})
    assert field_values(batch, "maxNumberOfGuests") == [6, 20]


def test_an_sql_expression_cannot_read_files(tmp_path: Path) -> None:
    from connector.errors import MappingError

    secret = tmp_path / "secret.csv"
    secret.write_text("x\nsecret\n")
    spec = {"sql": f"(SELECT max(x) FROM read_csv('{secret}'))"}
    with pytest.raises(MappingError, match=r"(?i)disabled|permission"):
        map_units(tmp_path, rows(a=["1"]), {"name": spec})


def test_a_volatile_field_is_sent_but_left_out_of_the_hash(tmp_path: Path) -> None:
    first = map_units(tmp_path, rows(area=["x"]), {"area": {"column": "area", "volatile": True}})
    second = map_units(tmp_path, rows(area=["y"]), {"area": {"column": "area", "volatile": True}})
    assert field_values(first, "area") == ["x"] and field_values(second, "area") == ["y"]
    assert first.records["content_hash"].tolist() == second.records["content_hash"].tolist()
    third = map_units(tmp_path, rows(area=["y"]), {"area": "area"})
    assert third.records["content_hash"].tolist() != second.records["content_hash"].tolist()


def test_as_string_sends_text_untouched_and_the_contract_still_judges_it(tmp_path: Path) -> None:
    data = rows(land=["DE", "Germany"])
    batch = map_units(tmp_path, data, {"country": {"column": "land", "as": "string"}})
    assert field_values(batch, "country") == ["DE"]
    problem = batch.quarantine.iloc[0]
    assert (problem["record_id"], problem["field"]) == ("u2", "country")
    assert "two-letter ISO 3166-1 country code" in problem["reason"]


def test_number_text_turns_a_spreadsheet_float_into_a_text_field(tmp_path: Path) -> None:
    data = rows(floor=["3.0", "-1"])
    batch = map_units(tmp_path, data, {"floor": {"column": "floor", "as": "number_text"}})
    assert field_values(batch, "floor") == ["3", "-1"]
