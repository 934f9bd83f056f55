"""DuckDB macros and reference tables the compiled mapping SQL calls.

Each conversion returns NULL when it cannot read its input; the compiler turns "input present,
result NULL" into a quarantine reason. Installed on every connection that runs mapping SQL.
"""

from __future__ import annotations

import duckdb
import pandas as pd

from connector.mapping.reference_data import (
    MONTH_NAMES,
    country_table,
    currency_table,
    language_table,
)

TRUE_WORDS = ("t", "true", "y", "yes", "1", "ja", "j", "oui", "si", "sí", "x", "on")
FALSE_WORDS = ("f", "false", "n", "no", "0", "nein", "non", "off")

_MONTH_MAP = (
    "MAP {"
    + ", ".join(
        "'" + name.replace("'", "''") + f"': {number}" for name, number in MONTH_NAMES.items()
    )
    + "}"
)

_MACROS = f"""
CREATE OR REPLACE MACRO pms_key(x) AS strip_accents(lower(trim(x)));
-- With a decimal comma a point only groups thousands: "1.234,50", "1.234.567". A point
-- elsewhere ("12.50", "1,234.50", "1.2345") is a number written the other way, which dropping
-- the points read as 1250 or 1.2345: no number.
CREATE OR REPLACE MACRO pms_comma_number_text(t) AS
    CASE WHEN NOT contains(t, '.')
              OR regexp_full_match(t, '[+-]?[0-9]{{1,3}}(\\.[0-9]{{3}})+(,[0-9]*)?')
         THEN replace(replace(t, '.', ''), ',', '.') END;
CREATE OR REPLACE MACRO pms_number_text(x, decimal_comma) AS
    CASE WHEN decimal_comma
         THEN pms_comma_number_text(replace(trim(x), ' ', ''))
         ELSE replace(trim(x), ' ', '') END;
-- "inf", "nan", "1e999" cast to DOUBLE, but are no JSON number: not a number here either.
CREATE OR REPLACE MACRO pms_number(x, decimal_comma) AS
    list_transform([TRY_CAST(pms_number_text(x, decimal_comma) AS DOUBLE)],
                   lambda v: CASE WHEN isfinite(v) THEN v END)[1];
CREATE OR REPLACE MACRO pms_integer(x, decimal_comma) AS
    CASE WHEN pms_number(x, decimal_comma) = trunc(pms_number(x, decimal_comma))
              AND abs(pms_number(x, decimal_comma)) < 9e15
         THEN CAST(pms_number(x, decimal_comma) AS BIGINT) END;
-- Whole numbers beyond what a double holds exactly (ids of 16 digits and more, or written as
-- floats, 9.290212028640288e+17) keep the digits the text has, through a 38-digit decimal.
CREATE OR REPLACE MACRO pms_format_number(x, decimal_comma) AS
    CASE WHEN pms_number(x, decimal_comma) IS NULL THEN x
         WHEN pms_number(x, decimal_comma) = trunc(pms_number(x, decimal_comma))
              AND abs(pms_number(x, decimal_comma)) < 9e15
         THEN CAST(CAST(pms_number(x, decimal_comma) AS BIGINT) AS VARCHAR)
         WHEN pms_number(x, decimal_comma) = trunc(pms_number(x, decimal_comma))
              AND abs(pms_number(x, decimal_comma)) < 1e37
         THEN coalesce(
             CAST(TRY_CAST(pms_number_text(x, decimal_comma) AS DECIMAL(38, 0)) AS VARCHAR),
             CAST(pms_number(x, decimal_comma) AS VARCHAR))
         ELSE CAST(pms_number(x, decimal_comma) AS VARCHAR) END;
-- A computed number as text: whole numbers without ".0"; no text for infinities or NaN.
CREATE OR REPLACE MACRO pms_number_string(x) AS
    CASE WHEN NOT isfinite(x) THEN NULL
         WHEN x = trunc(x) AND abs(x) < 9e15 THEN CAST(CAST(x AS BIGINT) AS VARCHAR)
         ELSE CAST(x AS VARCHAR) END;
-- Text made fit for an id: lower case, accents dropped, every run of other characters one "-".
CREATE OR REPLACE MACRO pms_slug(x) AS
    nullif(trim(regexp_replace(lower(strip_accents(x)), '[^a-z0-9]+', '-', 'g'), '-'), '');
CREATE OR REPLACE MACRO pms_boolean(x) AS
    CASE WHEN lower(trim(x)) IN ({", ".join(f"'{word}'" for word in TRUE_WORDS)}) THEN true
         WHEN lower(trim(x)) IN ({", ".join(f"'{word}'" for word in FALSE_WORDS)}) THEN false
    END;
-- A short year is no year of the first century: DuckDB's ISO cast reads "25-06-01" as the year
-- 25 and strptime's %Y reads "01.06.25" as 0025-06-01 (Python's %Y wants four digits), so such
-- a date was sent as read, and of a format list "%d.%m.%Y" won over a "%d.%m.%y" after it. A year
-- below 100 stays only when the text spells it with four digits ("0001-01-01", a .NET "no
-- date"). The year is compared first: dates of this era cost no second parse.
CREATE OR REPLACE MACRO pms_full_year(v, x) AS
    CASE WHEN year(v) < 100 AND NOT regexp_matches(trim(x), '^[0-9]{{4}}') THEN NULL ELSE v END;
CREATE OR REPLACE MACRO pms_iso_date(x) AS pms_full_year(
    coalesce(TRY_CAST(trim(x) AS DATE), CAST(TRY_CAST(trim(x) AS TIMESTAMP) AS DATE)), x);
CREATE OR REPLACE MACRO pms_iso_timestamp(x) AS pms_full_year(TRY_CAST(trim(x) AS TIMESTAMPTZ), x);
CREATE OR REPLACE MACRO pms_strptime(x, f) AS
    CASE WHEN year(try_strptime(trim(x), f)) < 100 AND contains(f, '%Y')
              AND try_strptime(trim(x), replace(f, '%Y', '%y')) IS NOT NULL THEN NULL
         ELSE try_strptime(trim(x), f) END;
CREATE OR REPLACE MACRO pms_time_parts(x) AS
    regexp_extract(
        lower(replace(trim(x), '.m.', 'm')),
        '^(\\d{{1,2}})(?:[:.h](\\d{{2}}))?(?::\\d{{2}}(?:\\.\\d+)?)?\\s*(am|pm|a|p|h|uhr)?$',
        ['h', 'm', 'ap']);
-- A lambda over a one-item list binds the parts once per value without a scalar subquery
-- (which DuckDB plans as a join that copies every other column of the row).
CREATE OR REPLACE MACRO pms_minutes(x) AS list_transform([pms_time_parts(x)], lambda t: CASE
        WHEN t.h = '' THEN NULL
        WHEN t.ap IN ('am', 'a', 'pm', 'p') AND (TRY_CAST(t.h AS INTEGER) NOT BETWEEN 1 AND 12)
            THEN NULL
        WHEN TRY_CAST(t.h AS INTEGER) > 23 OR (t.m <> '' AND TRY_CAST(t.m AS INTEGER) > 59) THEN NULL
        ELSE (CASE WHEN t.ap IN ('pm', 'p') AND TRY_CAST(t.h AS INTEGER) < 12
                       THEN TRY_CAST(t.h AS INTEGER) + 12
                   WHEN t.ap IN ('am', 'a') AND TRY_CAST(t.h AS INTEGER) = 12 THEN 0
                   ELSE TRY_CAST(t.h AS INTEGER) END) * 60
             + (CASE WHEN t.m = '' THEN 0 ELSE TRY_CAST(t.m AS INTEGER) END)
    END)[1];
CREATE OR REPLACE MACRO pms_hhmm(minutes) AS
    CASE WHEN minutes IS NOT NULL
         THEN lpad(CAST(minutes // 60 AS VARCHAR), 2, '0') || ':'
              || lpad(CAST(minutes % 60 AS VARCHAR), 2, '0') END;
CREATE OR REPLACE MACRO pms_time(x) AS pms_hhmm(pms_minutes(x));
CREATE OR REPLACE MACRO pms_half_hour(x) AS list_transform([pms_minutes(x)], lambda m:
    CASE WHEN m IS NOT NULL THEN pms_hhmm(least(CAST(round(m / 30.0) AS INTEGER) * 30, 23 * 60 + 30))
    END)[1];
-- Month names inline, as a constant map: a scalar subquery on pms_months would be planned as
-- a join per use, and a CASE of some 70 names repeats the key's SQL in every branch.
CREATE OR REPLACE MACRO pms_month(x) AS
    coalesce(
        CASE WHEN TRY_CAST(trim(x) AS INTEGER) BETWEEN 1 AND 12 THEN TRY_CAST(trim(x) AS INTEGER) END,
        {_MONTH_MAP}[rtrim(pms_key(x), '.')]);
CREATE OR REPLACE MACRO pms_country(x) AS (SELECT code FROM pms_countries WHERE key = pms_key(x));
CREATE OR REPLACE MACRO pms_currency(x) AS
    (SELECT code FROM pms_currencies WHERE key = pms_key(x));
CREATE OR REPLACE MACRO pms_language(x) AS coalesce(
    (SELECT code FROM pms_languages WHERE key = pms_key(x)),
    (SELECT code FROM pms_languages
        WHERE key = pms_key(regexp_extract(trim(x), '^([A-Za-z]{{2,3}})[-_][A-Za-z]{{2,4}}$', 1))));
-- The canonical JSON leaves unset members out (connector.canonical). Member names are contract
-- names ([A-Za-z0-9_]+) and an unescaped quote only ever delimits a string, so these patterns
-- cannot match inside a value. After the first pass only an object's first member can be null.
CREATE OR REPLACE MACRO pms_strip_nulls(j) AS regexp_replace(regexp_replace(regexp_replace(
    j, ',"[A-Za-z0-9_]+":null', '', 'g'),
    '[{{]"[A-Za-z0-9_]+":null,', '{{', 'g'),
    '[{{]"[A-Za-z0-9_]+":null[}}]', '{{}}', 'g');
-- An object from the members of two objects and one member text between them, in that order.
CREATE OR REPLACE MACRO pms_object(head, middle, tail) AS
    '{{' || concat_ws(',', nullif(head[2:-2], ''), middle, nullif(tail[2:-2], '')) || '}}';
"""


CURRENCY_WORDS_STRIPPED = ("kr", "kr.")
"""Currency symbols a number may carry that name no single currency ("kr": Danish, Norwegian or
Swedish crowns), so the currency table leaves them out; stripping them from a number needs no
code."""


def _currency_word_macro() -> str:
    """pms_currency_word(t): whether t is a currency code, symbol or one-word name.

    The words are inline: a scalar subquery on pms_currencies would be planned as a join per
    use, copying every other column of the row.
    """
    words = sorted(
        {key for key in currency_table() if not any(char.isspace() for char in key)}
        | set(CURRENCY_WORDS_STRIPPED)
    )
    listed = ", ".join("'" + word.replace("'", "''") + "'" for word in words)
    return f"CREATE OR REPLACE MACRO pms_currency_word(t) AS pms_key(t) IN ({listed});"


_CURRENCY_NUMBER_MACROS = """
-- A number with a sign, maybe a currency before or after it, and digits with separators:
-- "-Rp1,445,000.00", "1 234,50 €". Blanks include no-break spaces, apostrophes the typographic
-- one. The parts are checked by pms_grouped_number.
CREATE OR REPLACE MACRO pms_number_parts(x) AS regexp_extract(
    trim(translate(x, chr(160) || chr(8239) || chr(8217), '  ''')),
    '^([+-]?)\\s*([^0-9\\s+-][^0-9\\s]*)?\\s*([+-]?)([0-9](?:.*[0-9])?)\\s*([^0-9\\s]*)$',
    ['sign', 'before', 'signed', 'digits', 'after']);
-- The text pms_number reads from a number written with a declared thousands separator
-- (grouping, the pattern its digits must match) and maybe a currency (currency): NULL when
-- written any other way, so that "12,50" in a column of "1,234.50" is refused instead of read
-- as 1250. Without grouping the digits go on as written, read by pms_number with the column's
-- decimal separator.
CREATE OR REPLACE MACRO pms_grouped_number(x, grouping, separator, decimal_point, currency) AS
    list_transform([pms_number_parts(x)], lambda p: CASE
        WHEN p.digits = '' OR (p.sign <> '' AND p.signed <> '') THEN NULL
        WHEN p.before || p.after <> '' AND NOT (currency AND (p.before = '' OR p.after = '')
                                                 AND pms_currency_word(p.before || p.after))
            THEN NULL
        WHEN grouping IS NULL THEN p.sign || p.signed || p.digits
        WHEN regexp_full_match(p.digits, grouping)
            THEN p.sign || p.signed || replace(replace(p.digits, separator, ''), decimal_point, '.')
    END)[1];
"""


def _table(connection: duckdb.DuckDBPyConnection, name: str, frame: pd.DataFrame) -> None:
    connection.register("_pms_sync_reference", frame)
    try:
        connection.execute(f"CREATE OR REPLACE TABLE {name} AS SELECT * FROM _pms_sync_reference")
    finally:
        connection.unregister("_pms_sync_reference")


def install(connection: duckdb.DuckDBPyConnection) -> None:
    """Create the reference tables and macros on a connection."""
    connection.execute("SET TimeZone = 'UTC'")
    for name, table in (
        ("pms_countries", country_table()),
        ("pms_currencies", currency_table()),
        ("pms_languages", language_table()),
    ):
        frame = pd.DataFrame({"key": list(table), "code": list(table.values())}, dtype=object)
        _table(connection, name, frame)
    months = pd.DataFrame({"key": list(MONTH_NAMES), "number": list(MONTH_NAMES.values())}).astype(
        {"key": object}
    )
    _table(connection, "pms_months", months)
    connection.execute(_MACROS)
    connection.execute(_currency_word_macro())
    connection.execute(_CURRENCY_NUMBER_MACROS)
