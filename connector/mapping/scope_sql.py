"""A scope's SQL: the rows of one input with its joins, and every expression over them.

Column references, expressions turned into text, conversions to the contract's types (with the
problems they find, reported per field and row), reference-table lookups and filters. The
documents built from these values are :mod:`connector.mapping.document_sql`; the query of a
whole entity is :mod:`connector.mapping.compiler`.
"""

from __future__ import annotations

import json
import re
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from pydantic.fields import FieldInfo

from connector.contract import formats
from connector.mapping.contract_sql import ValueKind
from connector.mapping.expressions import (
    ARITHMETIC_KEYS,
    Condition,
    Expression,
    as_expression,
    template_placeholders,
)
from connector.mapping.model import _strip_optional
from connector.mapping.status_vocabulary import status_check_sql
from connector.secrets import is_sensitive
from connector.sources.base import ROW_COLUMN, SOURCE_COLUMN, quote_identifier, sql_literal

if TYPE_CHECKING:
    from connector.mapping.compiler import Compiler

MemberPath = tuple[str | int, ...]


def lit(value: Any) -> str:
    """A SQL literal of a scalar (text for everything but NULL)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        value = "true" if value else "false"
    return sql_literal(str(value))


REFERENCE_JOINS: dict[str, tuple[str, tuple[str, ...]]] = {
    # target → (reference table, key expressions over the raw column, tried in order)
    "country": ("pms_countries", ("pms_key({})",)),
    "currency": ("pms_currencies", ("pms_key({})",)),
    "language": (
        "pms_languages",
        (
            "pms_key({})",
            "pms_key(regexp_extract(trim({}), '^([A-Za-z]{{2,3}})[-_][A-Za-z]{{2,4}}$', 1))",
        ),
    ),
}
"""Conversions that read a reference table (sql_functions), and how a value is looked up."""

INLINE_LOOKUP_LIMIT = 500
"""Lookups up to this many entries are compiled inline (CASE); longer ones stay tables."""

MAX_DAYS = 100_000

CONTROL_CHARACTERS = lit(r"[\x{00}-\x{08}\x{0B}\x{0C}\x{0E}-\x{1F}\x{7F}-\x{9F}]")
"""RE2 class of the control characters text may not carry to the service: C0 but tab, LF and
CR, DEL and C1 (a NUL is refused by a service that stores text in PostgreSQL)."""
"""Largest number of days add_days/subtract_days moves a date (about 273 years)."""


def _spelt_otherwise(name: str, columns: typing.Iterable[str]) -> str:
    """A hint for an unknown column ``name``: the header's column it became as a repeat of an
    earlier name (``NAME.1``), or that differs from it only in case or surrounding spaces (in
    the column list " Name " reads like "name"), or a header read as one column that holds it
    between another delimiter."""
    renamed = sorted(
        column for column in columns if re.fullmatch(re.escape(name) + r"\.\d+", column)
    )
    if renamed:
        # connector.sources.base.distinct_columns renamed it: its name repeats an earlier one.
        return (
            f"; the header names an earlier column alike (DuckDB matches names without case), "
            f"so this one is called {renamed[0]!r}"
        )
    wanted = name.strip().casefold()
    near = sorted(column for column in columns if column.strip().casefold() == wanted)
    if near:
        return f"; the header has {near[0]!r}: names must match exactly, case and spaces included"
    # A header read as one column that holds the name between other separators: the input's
    # delimiter is not the file's (a ;-separated export read with the default ",").
    for column in columns:
        for separator in (";", "\t", "|", ","):
            parts = [part.strip().casefold() for part in column.split(separator)]
            if len(parts) > 1 and wanted in parts:
                return (
                    f"; the header's column {column!r} holds it between {separator!r}: set the "
                    f"input's `delimiter:` to {json.dumps(separator)}"
                )
    return ""


def _strptime(raw: str, formats_: list[str]) -> str:
    """SQL of the first of ``formats_`` that reads ``raw``, each tried on its own: a format
    with %Y refuses a two-digit year (``pms_strptime``), so the next format may read it."""
    tries = [f"pms_strptime({raw}, {lit(item)})" for item in formats_]
    return tries[0] if len(tries) == 1 else f"coalesce({', '.join(tries)})"


@dataclass(frozen=True)
class NumberReading:
    """How an expression's text is read as a number (see :func:`number_reading`)."""

    comma: bool = False  # pms_number reads a decimal comma
    written: str = ""  # how a reason describes the writing expected ("" for plain numbers)
    grouped: str | None = None  # pms_grouped_number's arguments after the text, if it applies

    def text(self, sql: str) -> str:
        """The text pms_number is given for the text ``sql``."""
        return sql if self.grouped is None else f"pms_grouped_number({sql}, {self.grouped})"


def number_reading(expression: Expression, *, before_round: bool = False) -> NumberReading:
    """How the text of an expression is read as a number: its ``decimal:``, ``thousands:`` and
    ``currency:``.

    Arithmetic, row numbers and ``round`` write numbers with a decimal point, whatever the
    members say of the export's own numbers, so what reads their result reads a plain number.
    """
    if expression.source in ARITHMETIC_KEYS or expression.source == "row_number":
        return NumberReading()
    if not before_round and expression.round is not None:
        return NumberReading()
    comma = expression.decimal == ","
    # The reason names the decimal comma: "12.50" is a number, only not written that way.
    written = " written with a decimal comma (1.234,5)" if comma else ""
    separator = expression.thousands
    if separator is None and expression.currency is None:
        return NumberReading(comma, written)
    grouping = "NULL"
    if separator is not None:
        # Every group of three digits, or none: "1,44,500.00" and "12,50" are refused.
        point = expression.decimal
        grouping = lit(f"([0-9]{{1,3}}([{separator}][0-9]{{3}})+|[0-9]+)([{point}][0-9]+)?")
        written = f" written 1{separator}234{separator}567{point}89"
        comma = False  # pms_grouped_number gives it with a decimal point
    currency = expression.currency == "strip"
    if currency:
        written += ", a currency code or symbol before or after it allowed"
    grouped = (
        f"{grouping}, {lit(separator or '')}, {lit(expression.decimal)}, "
        f"{'true' if currency else 'false'}"
    )
    return NumberReading(comma, written, grouped)


def _text_case(sql: str, case: str) -> str:
    if case == "upper":
        return f"upper({sql})"
    if case == "lower":
        return f"lower({sql})"
    return (
        f"array_to_string(list_transform(string_split(lower({sql}), ' '), "
        f"lambda w: upper(w[1]) || w[2:]), ' ')"
    )


def _placeholder_transform(sql: str, transform: str) -> str:
    """A template placeholder's transform (``{hotel|slug}``) applied to its text."""
    if transform == "trim":
        return f"trim({sql})"
    if transform == "slug":
        return f"pms_slug({sql})"
    if transform == "number_text":
        return f"pms_format_number({sql}, false)"
    return _text_case(sql, transform)


def lookup_text(value: Any) -> str | None:
    """A lookup value as text, as the lookup tables and inlined lookups hold it."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def table_name(input_name: str) -> str:
    return f"input_{input_name}"


# ------------------------------------------------------------------ what a contract field wants

_VALIDATOR_FORMATS = {
    formats._check_country: "country",
    formats._check_currency: "currency",
    formats._check_date: "date",
    formats._check_timestamp: "datetime",
    formats._check_hh_mm: "time",
    formats._check_half_hour: "half_hour",
}


POSITIONAL_PLACEHOLDERS = frozenset({"@occurrence", "@row_number", "@file"})
"""Template placeholders whose value depends on where a row is, not on what it holds."""


def target_conversion(info: FieldInfo) -> tuple[str, bool]:
    """The conversion a contract member implies, and whether it is a list of such values."""
    annotation = _strip_optional(info.annotation)
    is_list = typing.get_origin(annotation) is list
    if is_list:
        (annotation,) = typing.get_args(annotation)
    metadata = list(info.metadata)
    if typing.get_origin(annotation) is typing.Annotated:
        base, *extra = typing.get_args(annotation)
        metadata.extend(extra)
        annotation = base
    for item in metadata:
        function = getattr(item, "func", None)
        if function in _VALIDATOR_FORMATS:
            return _VALIDATOR_FORMATS[function], is_list
    if annotation is bool:
        return "boolean", is_list
    if annotation is int:
        return "integer", is_list
    if annotation is float:
        return "number", is_list
    return "string", is_list


# ------------------------------------------------------------------------------ the scope


@dataclass
class Scope:
    """Rows of one input (with joins) that expressions are evaluated over."""

    input_name: str
    alias: str
    columns: set[str]
    joins: dict[str, tuple[str, set[str]]] = field(
        default_factory=dict
    )  # alias → (sql alias, cols)
    from_sql: str = ""  # the FROM clause its expressions are evaluated over (input and joins)


class UserSql(NamedTuple):
    """One ``sql:`` expression or condition of the mapping, and where it runs."""

    sql: str
    member: MemberPath
    from_sql: str  # the scope's FROM clause: evaluating the SQL alone over it finds a failure


@dataclass
class Leaf:
    raw: str  # stage-1 column: the text before conversion
    sql: str  # the final value, an expression over the stage columns
    kind: ValueKind = "other"  # what the value is written as in JSON (for the contract checks)


_TEXT_TARGETS = frozenset(
    {"string", "number_text", "date", "datetime", "time", "half_hour"} | set(REFERENCE_JOINS)
)
"""Conversions whose rendered value is text (VARCHAR)."""


def value_kind(target: str, implied: str, listed: bool, split: bool) -> ValueKind:
    """The JSON kind of a leaf's rendered value (see :meth:`ScopeSql.leaf`)."""
    if split:
        return "string_list"  # string_split always gives VARCHAR[]
    if target in _TEXT_TARGETS:
        kind: ValueKind = "string"
    elif target == "integer":
        kind = "number" if implied == "number" else "integer"
    elif target == "number":
        kind = "number"
    elif target == "boolean":
        kind = "boolean"
    else:
        return "other"
    if listed:
        return "string_list" if kind == "string" else "other"
    return kind


class ScopeSql:
    """A scope's columns, expressions, conversions and filters as SQL (stages 1 and 2)."""

    def __init__(self, compiler: Compiler, scope: Scope, member_base: MemberPath) -> None:
        self.compiler = compiler
        self.scope = scope
        self.member_base = member_base
        self.raw_columns: list[str] = []  # "expr AS name" for stage 1
        self.value_columns: list[str] = []  # stage 2
        self.child_joins: list[str] = []  # LEFT JOIN clauses of child aggregates
        self.failed_flags: list[str] = []  # conditions: a conversion failed
        self.error_items: list[str] = []  # error structs, one per fallible leaf
        self.child_errors: list[str] = []  # error lists of child aggregates
        self.leaf_log: list[tuple[Leaf, bool]] = []  # every leaf, and whether it is a constant
        self.leaf_sql: dict[str, str] = {}  # contract path → SQL of its value
        self.value_joins: list[str] = []  # reference tables joined to the value stage
        # Stage-1 SQL of problems found while computing a text (an operand that is no number,
        # a date that does not exist): a struct (reason, value) or NULL. The leaf being
        # compiled takes them over, so its record is quarantined naming its field.
        self.problems: list[str] = []

    # ----------------------------------------------------------------- column references

    def column(self, name: str, member: MemberPath) -> str:
        scope = self.scope
        if name in scope.columns:
            return f"{scope.alias}.{quote_identifier(name)}"
        prefix, dot, rest = name.partition(".")
        if dot and prefix in scope.joins:
            sql_alias, columns = scope.joins[prefix]
            if rest in columns:
                return f"{sql_alias}.{quote_identifier(rest)}"
            message = (
                f"unknown column {rest!r} in joined input {prefix!r} "
                f"(columns: {', '.join(sorted(columns))}){_spelt_otherwise(rest, columns)}"
            )
        else:
            message = (
                f"unknown column {name!r} in input {scope.input_name!r} "
                f"(columns: {', '.join(sorted(scope.columns))})"
                f"{_spelt_otherwise(name, scope.columns)}"
            )
        # Noted, not raised: every unknown column of the file is reported at once (a new
        # export's headers differ in several places), once the whole mapping is compiled.
        self.compiler.unknown_columns.append(self.compiler.error(message, member))
        return "CAST(NULL AS VARCHAR)"

    # ------------------------------------------------------------------ expressions → text

    def text(self, expression: Expression, member: MemberPath) -> str:
        """SQL of the expression's text before conversion (source and text transforms)."""
        source = expression.source
        if source == "column":
            sql = self.column(expression.column, (*member, "column"))  # type: ignore[arg-type]
        elif source == "constant":
            sql = f"CAST({lit(expression.constant)} AS VARCHAR)"
        elif source == "template":
            sql = self._template(expression.template, (*member, "template"))  # type: ignore[arg-type]
        elif source == "coalesce":
            items = [
                self.converted_text(as_expression(item), (*member, "coalesce", index))
                for index, item in enumerate(expression.coalesce or [])
            ]
            sql = f"coalesce({', '.join(items)})" if items else "NULL"
        elif source == "sql":
            self.compiler.add_user_sql(
                UserSql(expression.sql, (*member, "sql"), self.scope.from_sql)  # type: ignore[arg-type]
            )
            sql = f"CAST(({expression.sql}) AS VARCHAR)"
        elif source == "row_number":
            sql = f"CAST({self.scope.alias}.{ROW_COLUMN} AS VARCHAR)"
        elif source in ARITHMETIC_KEYS:
            sql = self._arithmetic(expression, (*member, source))
        elif source == "fill_in":
            raise self.compiler.error(
                f"to fill in: {expression.fill_in} (replace the fill_in placeholder)",
                (*member, "fill_in"),
            )
        else:  # date_parts
            sql = self._date_parts(expression, (*member, "date_parts"))
        if expression.trim:
            sql = f"trim({sql})"
        if expression.regex is not None:
            group = 1 if re.compile(expression.regex).groups else 0
            sql = f"nullif(regexp_extract({sql}, {lit(expression.regex)}, {group}), '')"
        if expression.case is not None:
            sql = _text_case(sql, expression.case)
        if expression.map is not None:
            cases = " ".join(
                f"WHEN {lit(key)} THEN CAST({lit(value)} AS VARCHAR)"
                for key, value in expression.map.items()
            )
            otherwise = (
                f"CAST({lit(expression.map_default)} AS VARCHAR)"
                if expression.map_default is not None
                else sql
            )
            sql = f"CASE WHEN {sql} IS NULL THEN NULL ELSE (CASE {sql} {cases} ELSE {otherwise} END) END"
        if expression.lookup is not None:
            looked_up = self.compiler.lookup(expression.lookup, sql, (*member, "lookup"))
            if expression.map_default is not None:
                sql = (
                    f"CASE WHEN {sql} IS NULL THEN NULL ELSE coalesce({looked_up}, "
                    f"CAST({lit(expression.map_default)} AS VARCHAR)) END"
                )
            else:
                sql = looked_up
        if expression.default is not None:
            sql = f"coalesce({sql}, CAST({lit(expression.default)} AS VARCHAR))"
        if expression.round is not None:
            digits = expression.round
            sql = self._numbers(
                [(sql, number_reading(expression, before_round=True))],
                lambda numbers: f"pms_number_string(round({numbers[0]}, {digits}))",
                "round",
            )
        return sql

    def _checked(
        self,
        inputs: dict[str, str],
        derive: Callable[[str], dict[str, str]],
        value: Callable[[str, str], str],
        bad: Callable[[str, str], str],
        reason: str,
    ) -> str:
        """SQL of a value computed from ``inputs``; ``bad`` gives the offending text (or NULL),
        registered as this field's problem.

        Lambdas over one-item lists bind the inputs, then what ``derive`` computes from them,
        once per row (DuckDB computes a list once): nested arithmetic or a date's parts would
        otherwise repeat their SQL at every use, and planning time grows with it.
        """
        inner, derived = f"b{self.compiler.next_index()}", f"d{self.compiler.next_index()}"
        packed = ", ".join(f"{key} := {sql}" for key, sql in inputs.items())
        computed = ", ".join(f"{key} := {sql}" for key, sql in derive(inner).items())
        bound = (
            f"list_transform([struct_pack({packed})], lambda {inner}: "
            f"list_transform([struct_pack({computed})], lambda {derived}: struct_pack("
            f"v := {value(inner, derived)}, bad := {bad(inner, derived)}))[1])[1]"
        )
        problem = f"q{self.compiler.next_index()}"
        self.problems.append(
            f"list_transform([{bound}], lambda {problem}: CASE WHEN {problem}.bad IS NOT NULL "
            f"THEN struct_pack(reason := {lit(reason)}, value := {problem}.bad) END)[1]"
        )
        return f"struct_extract({bound}, 'v')"

    def _numbers(
        self,
        texts: list[tuple[str, NumberReading]],
        combine: Callable[[list[str]], str],
        verb: str,
    ) -> str:
        """Text of a number computed from texts read as numbers (as each says); a present text
        that is no number is the field's problem."""
        count = range(len(texts))

        def derive(inner: str) -> dict[str, str]:
            numbers = {}
            for index in count:
                reading = texts[index][1]
                comma = "true" if reading.comma else "false"
                numbers[f"n{index}"] = f"pms_number({reading.text(f'{inner}.a{index}')}, {comma})"
            return numbers

        def bad(inner: str, derived: str) -> str:
            cases = " ".join(
                f"WHEN {inner}.a{index} IS NOT NULL AND {derived}.n{index} IS NULL "
                f"THEN {inner}.a{index}"
                for index in count
            )
            return f"CASE {cases} END"

        return self._checked(
            {f"a{index}": text for index, (text, _reading) in enumerate(texts)},
            derive,
            lambda _inner, derived: combine([f"{derived}.n{index}" for index in count]),
            bad,
            f"expected a number to {verb}",
        )

    def _arithmetic(self, expression: Expression, member: MemberPath) -> str:
        """Text of a sum, difference or product of numeric operands (missing if one is).

        The result is rounded to 10 decimals: binary floating point would otherwise send
        89.9 * 3 as 269.70000000000005.
        """
        source = expression.source
        operator = {"sum": " + ", "difference": " - ", "product": " * "}[source]
        verb = {"sum": "add", "difference": "subtract", "product": "multiply"}[source]
        texts = []
        for index, item in enumerate(getattr(expression, source) or []):
            operand = as_expression(item)
            text = self.converted_text(operand, (*member, index))
            # An operand with as: is already a plain number; otherwise its own text is read.
            converted = operand.as_ not in (None, "string")
            texts.append((text, NumberReading() if converted else number_reading(operand)))
        return self._numbers(
            texts, lambda numbers: f"pms_number_string(round({operator.join(numbers)}, 10))", verb
        )

    def _date_parts(self, expression: Expression, member: MemberPath) -> str:
        """ISO text of a date from its parts; parts that make no date are a problem."""
        parts = expression.date_parts
        assert parts is not None
        inputs = {
            name: self.converted_text(as_expression(getattr(parts, name)), (*member, name))
            for name in ("year", "month", "day")
        }

        # Checked before make_date, which raises on a day that does not exist (June 31) and
        # would stop the whole entity instead of quarantining one record. A year below 100 is a
        # two-digit year ("25"), not the year 25: refused, as a %Y format refuses it.
        def derive(inner: str) -> dict[str, str]:
            made = (
                f"list_transform([struct_pack(y := pms_integer({inner}.year, false), "
                f"m := pms_month({inner}.month), d := pms_integer({inner}.day, false))], "
                "lambda p: CASE WHEN p.y BETWEEN 100 AND 9999 AND p.m IS NOT NULL AND p.d >= 1 "
                "AND p.d <= day(last_day(make_date(p.y, p.m, 1))) "
                "THEN CAST(make_date(p.y, p.m, p.d) AS VARCHAR) END)[1]"
            )
            return {"made": made}

        def bad(inner: str, derived: str) -> str:
            shown = ", ".join(f"coalesce({inner}.{part}, '?')" for part in inputs)
            present = " OR ".join(f"{inner}.{part} IS NOT NULL" for part in inputs)
            return (
                f"CASE WHEN ({present}) AND {derived}.made IS NULL THEN concat_ws(' ', {shown}) END"
            )

        return self._checked(
            inputs,
            derive,
            lambda _inner, derived: f"{derived}.made",
            bad,
            "no such date (year month day)",
        )

    def _template(self, template: str, member: MemberPath) -> str:
        pieces: list[str] = []  # the text's parts, an @occurrence as None
        references: list[str] = []
        occurrence = False
        for literal_text, name, transforms in template_placeholders(template):
            if literal_text:
                pieces.append(lit(literal_text))
            if not name:
                continue
            if name in POSITIONAL_PLACEHOLDERS:
                self.compiler.reads_other_rows()
            if name == "@occurrence":
                occurrence = True
                pieces.append("{occurrence}")
                continue
            if name == "@row_number":
                reference = f"CAST({self.scope.alias}.{ROW_COLUMN} AS VARCHAR)"
            elif name == "@file":
                reference = f"{self.scope.alias}.{SOURCE_COLUMN}"
            else:
                reference = f"CAST({self.column(name, member)} AS VARCHAR)"
            references.append(reference)
            for transform in transforms:
                reference = _placeholder_transform(reference, transform)
            pieces.append(f"coalesce({reference}, '')")
        if not references and not occurrence:
            return f"CAST(concat({', '.join(pieces) or lit('')}, '') AS VARCHAR)"
        all_missing = " AND ".join(f"{ref} IS NULL" for ref in references) or "false"
        base = f"concat({', '.join(piece for piece in pieces if piece != '{occurrence}')}, '')"
        if occurrence:
            # The how-many-th row with this same text, in read order: identical rows get
            # 1, 2, 3 and keep their number when unrelated rows are added or deleted.
            number = (
                f"CAST(row_number() OVER (PARTITION BY {base} ORDER BY "
                f"{self.scope.alias}.{SOURCE_COLUMN}, {self.scope.alias}.{ROW_COLUMN}) AS VARCHAR)"
            )
            pieces = [number if piece == "{occurrence}" else piece for piece in pieces]
        text = f"concat({', '.join(pieces)}, '')"
        return f"CASE WHEN {all_missing} THEN NULL ELSE {text} END"

    def converted_text(self, expression: Expression, member: MemberPath) -> str:
        """An operand's text, converted when it says ``as:`` (unreadable → NULL)."""
        raw = self.text(expression, member)
        if expression.as_ in (None, "string"):
            return raw
        value, _reason = self.convert(raw, expression, expression.as_)
        return f"CAST({self.render(value, expression.as_)} AS VARCHAR)"

    # ------------------------------------------------------------------ conversions

    def convert(self, raw: str, expression: Expression, target: str) -> tuple[str, str]:
        """SQL of the converted value (NULL when unreadable) and the SQL of the reason text."""
        formats_ = expression.format
        if isinstance(formats_, str):
            formats_ = [formats_]
        if target == "string":
            return raw, "NULL"
        reading = number_reading(expression)
        number, written = reading.text(raw), reading.written
        comma = "true" if reading.comma else "false"
        if target == "integer":
            return f"pms_integer({number}, {comma})", lit(f"expected a whole number{written}")
        if target == "number":
            return f"pms_number({number}, {comma})", lit(f"expected a number{written}")
        if target == "number_text":
            if number != raw:  # a text not written as declared stays as it is, as non-numbers do
                return f"coalesce(pms_format_number({number}, {comma}), {raw})", "NULL"
            return f"pms_format_number({raw}, {comma})", "NULL"
        if target == "boolean":
            return f"pms_boolean({raw})", "'expected yes/no, true/false, t/f or 1/0'"
        if target == "date":
            if formats_:
                return (
                    f"CAST({_strptime(raw, formats_)} AS DATE)",
                    lit(f"expected a date in the format {' or '.join(formats_)}"),
                )
            return f"pms_iso_date({raw})", "'expected a date such as 2025-07-01'"
        if target == "datetime":
            if formats_:
                return (
                    f"CAST({_strptime(raw, formats_)} AS TIMESTAMPTZ)",
                    lit(f"expected a date and time in the format {' or '.join(formats_)}"),
                )
            return (
                f"pms_iso_timestamp({raw})",
                "'expected an ISO 8601 date or timestamp'",
            )
        if target == "time":
            return f"pms_time({raw})", "'expected a time of day such as 15:00 or 3pm'"
        if target == "half_hour":
            return f"pms_half_hour({raw})", "'expected a time of day such as 15:00 or 3pm'"
        if target == "country":
            return f"pms_country({raw})", "'unknown country'"
        if target == "currency":
            return f"pms_currency({raw})", "'unknown currency'"
        if target == "language":
            return f"pms_language({raw})", "'unknown language'"
        raise AssertionError(target)

    @staticmethod
    def render(value: str, target: str) -> str:
        """The converted value as it appears in the document."""
        if target == "date":
            return f"strftime({value}, '%Y-%m-%d')"
        if target == "datetime":
            return f"strftime({value}, '%Y-%m-%dT%H:%M:%SZ')"
        return value

    # ------------------------------------------------------------------ leaves

    def leaf(self, value: Any, info: FieldInfo | None, member: MemberPath, path: str) -> Leaf:
        expression = as_expression(value)
        implied, is_list = target_conversion(info) if info is not None else ("string", False)
        target = expression.as_ or implied
        index = self.compiler.next_index()
        raw_name, converted_name = f"r{index}", f"c{index}"
        problems_before = len(self.problems)
        text = self.text(expression, member)
        control = self.compiler.mapping.control_characters if target == "string" else None
        if control == "strip":
            text = f"regexp_replace({text}, {CONTROL_CHARACTERS}, '', 'g')"
        self.raw_columns.append(f"{text} AS {raw_name}")
        converted, reason = self.convert(raw_name, expression, target)
        if target in REFERENCE_JOINS:
            converted = self.reference_join(raw_name, target)
        self.value_columns.append(f"{converted} AS {converted_name}")
        rendered = self.render(converted_name, target)
        if implied == "number" and target == "integer":
            # A float member fed a whole number is sent as the float the contract makes of it.
            rendered = f"CAST({rendered} AS DOUBLE)"
        failed = f"({raw_name} IS NOT NULL AND {converted_name} IS NULL)"
        if expression.add_days is not None or expression.subtract_days is not None:
            rendered, failed, reason = self._move_days(
                expression, member, target, index, (rendered, failed, reason)
            )
        if expression.split is not None:
            rendered = (
                f"list_filter(list_transform(string_split({rendered}, {lit(expression.split)}), "
                f"lambda s: trim(s)), lambda s: s <> '')"
            )
            rendered = f"CASE WHEN len({rendered}) > 0 THEN {rendered} END"
        elif is_list:
            rendered = f"CASE WHEN {rendered} IS NOT NULL THEN list_value({rendered}) END"
        sensitive = is_sensitive(path.rsplit(".", 1)[-1])
        if reason != "NULL":  # conversions that can fail
            self.failed_flags.append(failed)
            shown = "'***'" if sensitive else raw_name
            told = reason if sensitive else f"concat({reason}, ', got ''', {raw_name}, '''')"
            self.error_items.append(
                f"CASE WHEN {failed} THEN struct_pack(path := {lit(path)}, reason := {told}, "
                f"value := {shown}, src := {SOURCE_COLUMN}, rownum := {ROW_COLUMN}) END"
            )
        if control == "refuse":
            self._control_character(raw_name, index, path, sensitive)
        found = self.problems[problems_before:]
        del self.problems[problems_before:]
        if found:
            self._text_problem(found, f"p{index}", path, sensitive)
        # A reservation status that may mean cancelled is never sent as a live stay.
        status_problem = status_check_sql(
            value, member, self.compiler.mapping.lookups, f"CAST({converted} AS VARCHAR)"
        )
        if status_problem is not None:
            self.value_columns.append(f"{status_problem} AS s{index}")
            self.failed_flags.append(f"(s{index} IS NOT NULL)")
            self.error_items.append(
                f"CASE WHEN s{index} IS NOT NULL THEN struct_pack(path := {lit(path)}, "
                f"reason := concat(s{index}, ', got ''', {raw_name}, ''''), value := {raw_name}, "
                f"src := {SOURCE_COLUMN}, rownum := {ROW_COLUMN}) END"
            )
        self.compiler.volatile_check(expression, path)
        kind = value_kind(target, implied, is_list, expression.split is not None)
        leaf = Leaf(raw=raw_name, sql=rendered, kind=kind)
        self.leaf_log.append((leaf, expression.source == "constant"))
        self.leaf_sql[path] = rendered
        return leaf

    def _control_character(self, raw_name: str, index: int, path: str, sensitive: bool) -> None:
        """Quarantine a record whose text holds a control character, naming its code point;
        the value is shown with U+FFFD in its place, or masked for a secret."""
        found = f"x{index}"
        self.value_columns.append(
            f"nullif(regexp_extract({raw_name}, {CONTROL_CHARACTERS}), '') AS {found}"
        )
        self.failed_flags.append(f"({found} IS NOT NULL)")
        shown = (
            "'***'"
            if sensitive
            else f"regexp_replace({raw_name}, {CONTROL_CHARACTERS}, '\ufffd', 'g')"
        )
        reason = (
            f"concat('control character ', printf('U+%04X', unicode({found})), "
            "' in the text (refused by the service; control_characters: strip removes them)')"
        )
        self.error_items.append(
            f"CASE WHEN {found} IS NOT NULL THEN struct_pack(path := {lit(path)}, "
            f"reason := {reason}, value := {shown}, src := {SOURCE_COLUMN}, "
            f"rownum := {ROW_COLUMN}) END"
        )

    def _move_days(
        self,
        expression: Expression,
        member: MemberPath,
        target: str,
        index: int,
        compiled: tuple[str, str, str],
    ) -> tuple[str, str, str]:
        """A date moved by add_days/subtract_days: (rendered, failed, reason) of the leaf."""
        converted_name, (_rendered, failed, reason) = f"c{index}", compiled
        adding = expression.add_days is not None
        days = expression.add_days if adding else expression.subtract_days
        days_member = (*member, "add_days" if adding else "subtract_days")
        if target not in ("date", "datetime"):
            raise self.compiler.error(f"{days_member[-1]} applies to a date", days_member)
        days_text = self.converted_text(as_expression(days), days_member)
        days_name = f"d{index}"
        self.raw_columns.append(f"{days_text} AS {days_name}")
        # Bounded so that no value can overflow the date arithmetic, which would stop the
        # whole entity instead of quarantining one record.
        self.value_columns.append(
            f"CASE WHEN abs(pms_integer({days_name}, false)) <= {MAX_DAYS} "
            f"THEN CAST(pms_integer({days_name}, false) AS INTEGER) END AS {days_name}c"
        )
        sign = "" if adding else "-"
        rendered = self.render(f"({converted_name} + to_days({sign}{days_name}c))", target)
        failed = f"({failed} OR ({days_name} IS NOT NULL AND {days_name}c IS NULL))"
        reason = (
            f"CASE WHEN {days_name} IS NOT NULL AND {days_name}c IS NULL "
            f"THEN 'expected a whole number of days (at most {MAX_DAYS:,})' ELSE {reason} END"
        )
        return rendered, failed, reason

    def _text_problem(self, found: list[str], name: str, path: str, sensitive: bool) -> None:
        """Problems of the text itself (an operand that is no number, a date that does not
        exist) quarantine the record naming this field; the first one found is the reason."""
        problem = found[0] if len(found) == 1 else f"coalesce({', '.join(found)})"
        self.raw_columns.append(f"{problem} AS {name}")
        self.failed_flags.append(f"({name} IS NOT NULL)")
        shown = "'***'" if sensitive else f"{name}.value"
        told = (
            f"{name}.reason"
            if sensitive
            else f"concat({name}.reason, ', got ''', {name}.value, '''')"
        )
        self.error_items.append(
            f"CASE WHEN {name} IS NOT NULL THEN struct_pack(path := {lit(path)}, "
            f"reason := {told}, value := {shown}, src := {SOURCE_COLUMN}, "
            f"rownum := {ROW_COLUMN}) END"
        )

    def reference_join(self, raw_name: str, target: str) -> str:
        """The code of a reference table (countries, currencies, languages) by LEFT JOIN.

        Same result as the pms_country/pms_currency/pms_language macros, whose scalar subqueries
        DuckDB plans as joins that copy every column of the row; a plain join streams it.
        """
        table, keys = REFERENCE_JOINS[target]
        codes = []
        for key in keys:
            alias = f"ref{self.compiler.next_index()}"
            self.value_joins.append(
                f"LEFT JOIN {table} AS {alias} ON {alias}.key = {key.format(raw_name)}"
            )
            codes.append(f"{alias}.code")
        return codes[0] if len(codes) == 1 else f"coalesce({', '.join(codes)})"

    def errors(self) -> str:
        """SQL of this scope's row-level error list (NULL when the row converted cleanly)."""
        lists = []
        if self.error_items:
            any_failed = " OR ".join(self.failed_flags)
            items = (
                f"list_filter(list_value({', '.join(self.error_items)}), lambda e: e IS NOT NULL)"
            )
            lists.append(f"CASE WHEN {any_failed} THEN {items} END")
        lists.extend(self.child_errors)
        if not lists:
            return "NULL"
        if len(lists) == 1:
            return lists[0]
        combined = f"list_concat({', '.join(f'coalesce({item}, [])' for item in lists)})"
        return f"nullif({combined}, [])"

    # ------------------------------------------------------------------ filters

    def condition(self, condition: Condition, member: MemberPath) -> str:
        if condition.sql is not None:
            self.compiler.add_user_sql(
                UserSql(condition.sql, (*member, "sql"), self.scope.from_sql)
            )
            return f"coalesce(CAST(({condition.sql}) AS BOOLEAN), false)"
        ref = f"CAST({self.column(condition.column, (*member, 'column'))} AS VARCHAR)"  # type: ignore[arg-type]
        if condition.equals is not None:
            return f"coalesce({ref} = {lit(condition.equals)}, false)"
        if condition.not_equals is not None:
            return f"({ref} IS DISTINCT FROM {lit(condition.not_equals)})"
        if condition.in_ is not None:
            return f"coalesce({ref} IN ({', '.join(lit(v) for v in condition.in_)}), false)"
        if condition.not_in is not None:
            values = ", ".join(lit(v) for v in condition.not_in)
            return f"({ref} IS NULL OR {ref} NOT IN ({values}))"
        if condition.is_null is not None:
            return f"({ref} IS {'' if condition.is_null else 'NOT '}NULL)"
        return f"coalesce(regexp_matches({ref}, {lit(condition.matches)}), false)"

    def where(self, conditions: list[Condition], member: MemberPath) -> str:
        if not conditions:
            return "true"
        return " AND ".join(
            self.condition(item, (*member, index)) for index, item in enumerate(conditions)
        )
