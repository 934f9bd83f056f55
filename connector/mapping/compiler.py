"""Compiling a mapping to DuckDB SQL: set-based work over whole inputs, no Python per row.

Each entity becomes one query. A scope (the rows of an input, with its joins and filter) is
compiled to three stages: raw text of every field, its converted value, and the JSON document.
Documents are DuckDB structs turned into JSON once per record. A value that cannot be converted
(a date that does not exist, an unknown country, "25pm") is reported in the row's error list
with the field path, the reason and the input row, and its record is quarantined; every other
record is then validated by the contract, which stays the final authority on validity.
"""

from __future__ import annotations

import re
import typing
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from connector.contract import Accommodation, Entity, Reservation, UnitReservation
from connector.contract import _formats as formats
from connector.errors import MappingError
from connector.mapping.expressions import (
    ARITHMETIC_KEYS,
    Condition,
    Expression,
    as_expression,
    template_placeholders,
)
from connector.mapping.json_text import (
    JsonList,
    JsonObject,
    JsonValue,
    VolatileInRows,
    leaf_text,
    value_text,
)
from connector.mapping.model import (
    Join,
    Mapping,
    RowsBlock,
    _strip_optional,
    field_shape,
)
from connector.secrets import is_sensitive
from connector.sources.base import ROW_COLUMN, SOURCE_COLUMN, quote_identifier

MemberPath = tuple[str | int, ...]


def lit(value: Any) -> str:
    """A SQL literal of a scalar (text for everything but NULL)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        value = "true" if value else "false"
    return "'" + str(value).replace("'", "''") + "'"


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
"""Largest number of days add_days/subtract_days moves a date (about 273 years)."""


def _reads_decimal_comma(expression: Expression, *, before_round: bool = False) -> bool:
    """Whether the expression's text is read with a decimal comma.

    Arithmetic and ``round`` write numbers with a decimal point, whatever ``decimal:`` says of
    the export's own numbers, so what reads their result reads a point.
    """
    if expression.decimal != ",":
        return False
    if expression.source in ARITHMETIC_KEYS or expression.source == "row_number":
        return False
    return before_round or expression.round is None


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


class ScopeCompiler:
    """Compiles the fields of one scope into staged SELECTs."""

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
                f"(columns: {', '.join(sorted(columns))})"
            )
        else:
            message = (
                f"unknown column {name!r} in input {scope.input_name!r} "
                f"(columns: {', '.join(sorted(scope.columns))})"
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
            comma = _reads_decimal_comma(expression, before_round=True)
            sql = self._numbers(
                [(sql, comma)],
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
        self, texts: list[tuple[str, bool]], combine: Callable[[list[str]], str], verb: str
    ) -> str:
        """Text of a number computed from texts read as numbers (with or without decimal
        comma); a present text that is no number is the field's problem."""
        count = range(len(texts))

        def derive(inner: str) -> dict[str, str]:
            return {
                f"n{index}": f"pms_number({inner}.a{index}, {'true' if texts[index][1] else 'false'})"
                for index in count
            }

        def bad(inner: str, derived: str) -> str:
            cases = " ".join(
                f"WHEN {inner}.a{index} IS NOT NULL AND {derived}.n{index} IS NULL "
                f"THEN {inner}.a{index}"
                for index in count
            )
            return f"CASE {cases} END"

        return self._checked(
            {f"a{index}": text for index, (text, _comma) in enumerate(texts)},
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
            texts.append(
                (self.converted_text(operand, (*member, index)), _reads_decimal_comma(operand))
            )
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
        # would stop the whole entity instead of quarantining one record.
        def derive(inner: str) -> dict[str, str]:
            made = (
                f"list_transform([struct_pack(y := pms_integer({inner}.year, false), "
                f"m := pms_month({inner}.month), d := pms_integer({inner}.day, false))], "
                "lambda p: CASE WHEN p.y BETWEEN 1 AND 9999 AND p.m IS NOT NULL AND p.d >= 1 "
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
        comma = "true" if _reads_decimal_comma(expression) else "false"
        formats_ = expression.format
        if isinstance(formats_, str):
            formats_ = [formats_]
        if target == "string":
            return raw, "NULL"
        if target == "integer":
            return f"pms_integer({raw}, {comma})", "'expected a whole number'"
        if target == "number":
            return f"pms_number({raw}, {comma})", "'expected a number'"
        if target == "number_text":
            return f"pms_format_number({raw}, {comma})", "NULL"
        if target == "boolean":
            return f"pms_boolean({raw})", "'expected yes/no, true/false, t/f or 1/0'"
        if target == "date":
            if formats_:
                listed = "[" + ", ".join(lit(item) for item in formats_) + "]"
                return (
                    f"CAST(try_strptime(trim({raw}), {listed}) AS DATE)",
                    lit(f"expected a date in the format {' or '.join(formats_)}"),
                )
            return f"pms_iso_date({raw})", "'expected a date such as 2025-07-01'"
        if target == "datetime":
            if formats_:
                listed = "[" + ", ".join(lit(item) for item in formats_) + "]"
                return (
                    f"CAST(try_strptime(trim({raw}), {listed}) AS TIMESTAMPTZ)",
                    lit(f"expected a date and time in the format {' or '.join(formats_)}"),
                )
            return (
                f"TRY_CAST(trim({raw}) AS TIMESTAMPTZ)",
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
        self.raw_columns.append(f"{self.text(expression, member)} AS {raw_name}")
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
        found = self.problems[problems_before:]
        del self.problems[problems_before:]
        if found:
            self._text_problem(found, f"p{index}", path, sensitive)
        self.compiler.volatile_check(expression, path)
        leaf = Leaf(raw=raw_name, sql=rendered)
        self.leaf_log.append((leaf, expression.source == "constant"))
        self.leaf_sql[path] = rendered
        return leaf

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

    # ------------------------------------------------------------------ objects

    def document(
        self,
        fields: BaseModel,
        contract: type[BaseModel],
        member: MemberPath,
        path: str,
        *,
        skip: tuple[str, ...] = (),
        required: bool = True,
        extra: dict[str, str] | None = None,
    ) -> JsonObject:
        """Every mapped member of ``contract``, compiled once and written as JSON text."""
        document = JsonObject(required=required)
        for name, info in contract.model_fields.items():
            if name in skip:
                continue
            value = getattr(fields, name, None)
            if value is None:
                continue
            child_member = (*member, name)
            child_path = f"{path}.{name}" if path else name
            shape, sub = field_shape(info.annotation)
            compiled: JsonValue
            if shape == "object":
                compiled = self.document(
                    value,
                    sub,  # type: ignore[arg-type]
                    child_member,
                    child_path,
                    required=info.is_required(),
                )
                document.presence.append(compiled.text())
            elif shape == "object_list":
                compiled = self.object_list(value, sub, child_member, child_path)  # type: ignore[arg-type]
                document.presence.append(value_text(compiled))
            else:
                leaf = self.leaf(value, info, child_member, child_path)
                compiled = leaf_text(leaf.sql)
                document.presence.append(leaf.sql)
            document.members[name] = compiled
        for name, sql in (extra or {}).items():
            document.members[name] = leaf_text(sql)
        return document

    def object_list(
        self, value: Any, item: type[BaseModel], member: MemberPath, path: str
    ) -> JsonList:
        if isinstance(value, list):
            listed = JsonList()
            for index, fields in enumerate(value):
                before = len(self.leaf_log)
                obj = self.document(fields, item, (*member, index), path)
                fed = [leaf for leaf, constant in self.leaf_log[before:] if not constant]
                # An item whose column-fed members are all missing is left out of the list.
                keep = " OR ".join(f"{leaf.raw} IS NOT NULL" for leaf in fed) if fed else None
                listed.items.append((obj, keep))
            return listed
        assert isinstance(value, RowsBlock)
        if value.input is None:
            raise self.compiler.error(
                "a list from rows needs `input` and `on` here (only unitReservations may use "
                "the record's own rows)",
                member,
            )
        return JsonList(rows_sql=self.compiler.child_rows(self, value, item, member, path))

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


# ------------------------------------------------------------------------------ the compiler


@dataclass
class EntityQuery:
    """The SQL of one entity: one row per record before validation."""

    entity: Entity
    sql: str
    input_name: str
    volatile: list[str]
    user_sql: list[UserSql] = field(default_factory=list)  # its sql: members, and their rows
    # True when a volatile member lies inside a list other than unitReservations: the text
    # without it cannot be cut out in SQL, so the validator hashes those records in Python.
    hash_in_python: bool = False
    # Every key of the export with its earliest check-in (account_id, record_id, checkin),
    # without building any document: what a run limited to a window needs to know of the
    # records outside it.
    keys_sql: str = ""
    # The rows of the entity's own input that make each record (_src, _row, account_id,
    # record_id), without any document: what source fingerprints are computed over.
    key_rows_sql: str = ""
    # Inputs read besides the entity's own rows (joins, lists from other inputs): their whole
    # content shapes every record, so it is part of the mapping's fingerprint.
    joined_inputs: list[str] = field(default_factory=list)
    # False when a record's document depends on rows other than its own or on their position
    # (an @occurrence or @row_number outside the key, a window function in sql:): such an
    # entity is always mapped whole (connector.mapping.fingerprints).
    fingerprintable: bool = True
    row_alias: str = ""  # the SQL alias of the entity's own input in the row filter


class Compiler:
    """Turns a validated mapping into one SQL query per entity."""

    def __init__(self, mapping: Mapping, headers: dict[str, list[str]]) -> None:
        self.mapping = mapping
        self.headers = headers
        self.user_sql: list[UserSql] = []
        self.unknown_columns: list[MappingError] = []  # raised together by check_columns
        self._index = 0
        self._ctes: list[str] = []
        self._volatile: list[str] = []
        self._joined_inputs: list[str] = []
        self._in_key = False  # compiling the account or id member: position is harmless there
        self._fingerprintable = True

    def reads_other_rows(self) -> None:
        """The member being compiled depends on other rows or on row positions."""
        if not self._in_key:
            self._fingerprintable = False

    def add_user_sql(self, item: UserSql) -> None:
        self.user_sql.append(item)
        if _READS_OTHER_ROWS.search(item.sql):
            self.reads_other_rows()

    def check_columns(self) -> None:
        """Raise every unknown column the compiled entities referred to, each with its line."""
        if self.unknown_columns:
            unique = {(error.member, error.message): error for error in self.unknown_columns}
            raise MappingError.listing(list(unique.values()), "unknown columns")

    def next_index(self) -> int:
        self._index += 1
        return self._index

    def error(self, message: str, member: MemberPath) -> MappingError:
        return MappingError(
            message,
            file=str(self.mapping.source_file) if self.mapping.source_file else None,
            line=self.mapping.line_of(member),
            member=".".join(str(part) for part in member),
        )

    def lookup(self, name: str, key: str, member: MemberPath) -> str:
        """SQL of the lookup's value for the text ``key`` (NULL when it has none)."""
        if name not in self.mapping.lookups:
            known = ", ".join(sorted(self.mapping.lookups)) or "none"
            raise self.error(f"unknown lookup {name!r} (lookups: {known})", member)
        values = self.mapping.lookups[name]
        if len(values) > INLINE_LOOKUP_LIMIT:
            return f"(SELECT value FROM lookup_{name} WHERE key = {key})"
        # A short lookup is inlined: a scalar subquery would be planned as a join that copies
        # every column of the row, which costs more than the whole conversion.
        cases = " ".join(
            f"WHEN {lit(str(item))} THEN CAST({lit(lookup_text(value))} AS VARCHAR)"
            for item, value in values.items()
        )
        return f"(CASE {key} {cases} END)" if cases else "CAST(NULL AS VARCHAR)"

    def volatile_check(self, expression: Expression, path: str) -> None:
        if expression.volatile:
            self._volatile.append(path)

    def columns_of(self, input_name: str, member: MemberPath) -> set[str]:
        if input_name not in self.headers:
            raise self.error(f"unknown input {input_name!r}", member)
        return set(self.headers[input_name])

    def _scope(
        self, input_name: str, joins: list[Join], member: MemberPath
    ) -> tuple[Scope, list[str]]:
        alias = f"t{self.next_index()}"
        scope = Scope(input_name, alias, self.columns_of(input_name, (*member, "input")))
        clauses = []
        for index, join in enumerate(joins):
            self._joined_inputs.append(join.input)
            join_member = (*member, "joins", index)
            columns = self.columns_of(join.input, (*join_member, "input"))
            sql_alias = f"j{self.next_index()}"
            scope.joins[join.alias] = (sql_alias, columns)
            for joined_column, own_column in join.on.items():
                if joined_column not in columns:
                    raise self.error(
                        f"unknown column {joined_column!r} in joined input {join.input!r}",
                        (*join_member, "on", joined_column),
                    )
                if own_column not in scope.columns:
                    raise self.error(
                        f"unknown column {own_column!r} in input {input_name!r}",
                        (*join_member, "on", joined_column),
                    )
            # Only the first matching row (in row order) joins, so a join never multiplies rows.
            keys = ", ".join(quote_identifier(column) for column in join.on)
            inner_scope = Scope(
                join.input,
                "jt",
                columns,
                from_sql=f"{quote_identifier(table_name(join.input))} AS jt",
            )
            inner = ScopeCompiler(self, inner_scope, join_member)
            condition = inner.where(getattr(join, "filter", []), (*join_member, "filter"))
            deduplicated = (
                f"(SELECT * FROM {quote_identifier(table_name(join.input))} AS jt "
                f"WHERE {condition} "
                f"QUALIFY row_number() OVER (PARTITION BY {keys} ORDER BY {SOURCE_COLUMN}, "
                f"{ROW_COLUMN}) = 1)"
            )
            on = " AND ".join(
                f"{sql_alias}.{quote_identifier(joined)} = {alias}.{quote_identifier(own)}"
                for joined, own in join.on.items()
            )
            clauses.append(f"LEFT JOIN {deduplicated} AS {sql_alias} ON {on}")
        scope.from_sql = (
            f"{quote_identifier(table_name(input_name))} AS {alias} {' '.join(clauses)}".strip()
        )
        return scope, clauses

    def child_rows(
        self,
        parent: ScopeCompiler,
        block: RowsBlock,
        item: type[BaseModel],
        member: MemberPath,
        path: str,
    ) -> str:
        """A list from rows of another input joined by key: aggregated in its own CTE."""
        assert block.input is not None and block.on is not None
        self._joined_inputs.append(block.input)
        scope, _ = self._scope(block.input, [], member)
        child = ScopeCompiler(self, scope, member)
        keys = []
        for child_column, parent_column in block.on.items():
            if child_column not in scope.columns:
                raise self.error(
                    f"unknown column {child_column!r} in input {block.input!r}",
                    (*member, "on", child_column),
                )
            parent_ref = parent.column(parent_column, (*member, "on", child_column))
            keys.append((child_column, parent_ref))
        document = child.document(block.fields, item, (*member, "fields"), path).text()
        where = child.where(block.filter, (*member, "filter"))
        key_list = ", ".join(f"k{position}" for position in range(len(keys)))
        key_select = ", ".join(
            f"{scope.alias}.{quote_identifier(column)} AS k{position}"
            for position, (column, _) in enumerate(keys)
        )
        name = f"child{self.next_index()}"
        stage1 = ", ".join(
            [
                f"{scope.alias}.{SOURCE_COLUMN}",
                f"{scope.alias}.{ROW_COLUMN}",
                key_select,
                *child.raw_columns,
            ]
        )
        values = ", ".join([f"{name}_raw.*", *child.value_columns])
        self._ctes.append(
            f"{name}_raw AS NOT MATERIALIZED (SELECT {stage1} FROM {quote_identifier(table_name(block.input))} "
            f"AS {scope.alias} {' '.join(child.child_joins)} WHERE {where})"
        )
        self._ctes.append(
            f"{name}_val AS NOT MATERIALIZED (SELECT {values} FROM {name}_raw "
            f"{' '.join(child.value_joins)})"
        )
        self._ctes.append(
            f"{name}_doc AS NOT MATERIALIZED (SELECT {key_list}, {SOURCE_COLUMN}, {ROW_COLUMN}, "
            f"{document} AS item, {child.errors()} AS errs FROM {name}_val)"
        )
        self._ctes.append(
            f"{name} AS NOT MATERIALIZED (SELECT {key_list}, list(item ORDER BY {SOURCE_COLUMN}, {ROW_COLUMN}) "
            f"AS items, flatten(list(errs) FILTER (WHERE errs IS NOT NULL)) AS errs "
            f"FROM {name}_doc GROUP BY {key_list})"
        )
        join_alias = f"{name}_j"
        on = " AND ".join(
            f"{join_alias}.k{position} = {parent_ref}"
            for position, (_, parent_ref) in enumerate(keys)
        )
        parent.child_joins.append(f"LEFT JOIN {name} AS {join_alias} ON {on}")
        parent.raw_columns.append(f"{join_alias}.items AS {name}_items")
        parent.raw_columns.append(f"nullif({join_alias}.errs, []) AS {name}_errs")
        parent.child_errors.append(f"{name}_errs")
        return f"{name}_items"

    # ------------------------------------------------------------------ entities

    def entity_query(self, entity: Entity) -> EntityQuery:
        spec = self.mapping.entities[entity]
        member: MemberPath = ("entities", entity.value)
        user_sql_before = len(self.user_sql)
        self._ctes = []
        self._volatile = []
        self._joined_inputs = []
        self._fingerprintable = True
        scope, join_clauses = self._scope(spec.input, spec.joins, member)
        compiler = ScopeCompiler(self, scope, member)
        fields = spec.fields
        fields_member = (*member, "fields")
        self._in_key = True
        account = compiler.leaf(
            self.mapping.account_for(entity), None, self._account_member(entity), "accountId"
        )
        record_id = compiler.leaf(fields.id, None, (*fields_member, "id"), "id")
        self._in_key = False
        unit_value = {"checkin": "NULL", "checkout": "NULL", "id": "NULL"}
        if entity == Entity.ACCOMMODATION:
            # The engine's default status: a unit present in the export is active.
            extra = {"status": "'ACTIVE'"} if fields.status is None else None
            document = compiler.document(fields, Accommodation, fields_member, "", extra=extra)
            tail = units = JsonObject()
        else:
            # The units are spliced in as text between the members sorting before
            # "unitReservations" and those sorting after it (canonical key order).
            document = compiler.document(
                fields,
                Reservation,
                fields_member,
                "",
                skip=tuple(name for name in Reservation.model_fields if name >= UNITS),
            )
            tail = compiler.document(
                fields,
                Reservation,
                fields_member,
                "",
                skip=tuple(name for name in Reservation.model_fields if name <= UNITS),
            )
            block = fields.unitReservations
            units_member = (*fields_member, UNITS)
            if not (isinstance(block, RowsBlock) and block.input is None):
                raise self.error(
                    "unitReservations is one item per row of the reservation input: write it "
                    "as {fields: ...} without input; when units live in another table, make that "
                    "table the reservation input and join the booking table to it",
                    units_member,
                )
            units = compiler.document(
                block.fields, UnitReservation, (*units_member, "fields"), UNITS
            )
            for name in unit_value:
                unit_value[name] = compiler.leaf_sql.get(f"{UNITS}.{name}", "NULL")
        where = compiler.where(spec.filter, (*member, "filter"))
        if isinstance(getattr(fields, UNITS, None), RowsBlock) and (
            fields.unitReservations.input is None
        ):
            where = f"({where}) AND ({compiler.where(fields.unitReservations.filter, (*units_member, 'filter'))})"
        stage1 = ", ".join(
            [
                f"{scope.alias}.{SOURCE_COLUMN}",
                f"{scope.alias}.{ROW_COLUMN}",
                # Only the source fingerprints read it; every other query leaves it uncomputed.
                f"{row_hash_sql(scope.alias, self.headers[spec.input])} AS {ROW_HASH}",
                *compiler.raw_columns,
            ]
        )
        values = ", ".join(["raw.*", *compiler.value_columns])
        volatile = sorted(set(self._volatile))
        record_volatile, unit_volatile = _split_volatile(entity, volatile)
        parts = {"doc": document, "tail": tail, "unit": units}
        texts = [
            f"{part.text() if part.members else 'NULL'} AS {name}" for name, part in parts.items()
        ]
        hash_in_python = False
        if volatile:
            try:
                for name, part in parts.items():
                    without = unit_volatile if name == "unit" else record_volatile
                    hashed = part.text(without) if part.members else "NULL"
                    # A part without volatile members is its own hashed form: name it instead
                    # of having DuckDB write the same text twice.
                    same = hashed == (part.text() if part.members else "NULL")
                    texts.append(f"{name if same else hashed} AS h{name}")
            except VolatileInRows:
                hash_in_python = True
                texts = texts[:3]
        if not volatile or hash_in_python:
            texts += ["NULL::VARCHAR AS hdoc", "NULL::VARCHAR AS htail", "NULL::VARCHAR AS hunit"]
        ctes = list(self._ctes)
        ctes.append(
            f"raw AS NOT MATERIALIZED (SELECT {stage1} FROM {quote_identifier(table_name(spec.input))} AS "
            f"{scope.alias} {' '.join(join_clauses)} {' '.join(compiler.child_joins)} "
            f"WHERE {where} AND {ROWS_TO_MAP})"
        )
        row_columns = (
            f"{SOURCE_COLUMN}, {ROW_COLUMN}, {ROW_HASH}, "
            f"CAST({account.sql} AS VARCHAR) AS account_id, "
            f"CAST({record_id.sql} AS VARCHAR) AS record_id, {compiler.errors()} AS errs, "
            f"{', '.join(texts)}, "
            f"CAST({unit_value['checkin']} AS VARCHAR) AS unit_checkin, "
            f"CAST({unit_value['checkout']} AS VARCHAR) AS unit_checkout, "
            f"CAST({unit_value['id']} AS VARCHAR) AS unit_id"
        )
        value_joins = " ".join(compiler.value_joins)
        # Most records are one row. Only rows of records with several (a booking of three
        # rooms) go through the GROUP BY: aggregating wide text costs DuckDB far more than
        # finding those rows by their key alone and sending each other row straight through.
        for suffix, rows_from in (
            ("", "raw"),
            ("_one", f"raw ANTI JOIN multi_rows USING ({SOURCE_COLUMN}, {ROW_COLUMN})"),
            ("_many", f"raw SEMI JOIN multi_rows USING ({SOURCE_COLUMN}, {ROW_COLUMN})"),
        ):
            source = f"source{suffix}"
            ctes.append(f"{source} AS NOT MATERIALIZED (SELECT raw.* FROM {rows_from})")
            ctes.append(
                f"val{suffix} AS NOT MATERIALIZED (SELECT "
                f"{values.replace('raw.*', f'{source}.*', 1)} FROM {source} {value_joins})"
            )
            # Aggregating JSON text is much cheaper for DuckDB than aggregating wide structs.
            ctes.append(f"rows{suffix} AS NOT MATERIALIZED (SELECT {row_columns} FROM val{suffix})")
            if not suffix:
                keys_sql = (
                    "WITH " + ",\n".join(ctes) + "\nSELECT account_id, record_id, "
                    "min(TRY_CAST(unit_checkin AS DATE)) AS checkin FROM rows GROUP BY ALL"
                )
                key_rows_sql = (
                    "WITH " + ",\n".join(ctes) + f"\nSELECT {SOURCE_COLUMN}, {ROW_COLUMN}, "
                    f"{ROW_HASH}, account_id, record_id FROM rows"
                )
                ctes.append(
                    f"multi_rows AS MATERIALIZED (SELECT {SOURCE_COLUMN}, {ROW_COLUMN} FROM rows "
                    "WHERE account_id IS NOT NULL AND record_id IS NOT NULL "
                    "QUALIFY count(*) OVER (PARTITION BY account_id, record_id) > 1)"
                )
        hash_text = "NULL::VARCHAR" if not volatile or hash_in_python else _HASH_TEXT[entity]
        single_hash = (
            "NULL::VARCHAR" if not volatile or hash_in_python else _SINGLE_HASH_TEXT[entity]
        )
        sql = (
            "WITH "
            + ",\n".join(ctes)
            + "\n"
            + _GROUPING[entity]
            .replace("{hash_text}", hash_text)
            .replace("{single_hash_text}", single_hash)
        )
        return EntityQuery(
            entity,
            sql,
            spec.input,
            volatile,
            self.user_sql[user_sql_before:],
            hash_in_python=hash_in_python,
            keys_sql=keys_sql,
            key_rows_sql=key_rows_sql,
            joined_inputs=sorted(set(self._joined_inputs)),
            fingerprintable=self._fingerprintable,
            row_alias=scope.alias,
        )

    def _account_member(self, entity: Entity) -> MemberPath:
        if self.mapping.entities[entity].account is not None:
            return ("entities", entity.value, "account")
        return ("account",)


UNITS = "unitReservations"

POSITIONAL_PLACEHOLDERS = frozenset({"@occurrence", "@row_number", "@file"})
"""Template placeholders whose value depends on where a row is, not on what it holds."""

# User SQL that may read other rows (a window function) or change without the data (clocks,
# randomness): the entity's records cannot be told unchanged from their own rows alone.
_READS_OTHER_ROWS = re.compile(
    r"\bover\b|\b(now|today|random|uuid|gen_random_uuid|nextval|setseed)\s*\(|"
    r"\bcurrent_(date|time|timestamp|localtime|localtimestamp)\b",
    re.IGNORECASE,
)

ROW_HASH = "_row_hash"
"""Column of an entity's raw stage: the hash of the source row's loaded text."""


def row_hash_sql(alias: str, columns: list[str]) -> str:
    """SQL of one source row's hash over every loaded column, not where the row was."""
    values = ", ".join(f"{alias}.{quote_identifier(name)}" for name in columns) or "NULL"
    return f"hash({values})"


ROWS_TO_MAP = "(/* rows to map */ true)"
"""Placeholder in an entity's row filter: the engine replaces it to leave out the rows of
records whose source fingerprint is unchanged (connector.mapping.fingerprints)."""


def _split_volatile(entity: Entity, volatile: list[str]) -> tuple[list[str], list[str]]:
    """The volatile paths of the record itself, and those inside each unit reservation."""
    if entity != Entity.RESERVATION:
        return volatile, []
    units = [path.removeprefix(f"{UNITS}.") for path in volatile if path.startswith(f"{UNITS}.")]
    return [path for path in volatile if not path.startswith(f"{UNITS}.")], units


_HASH_TEXT: dict[Entity, str] = {
    Entity.ACCOMMODATION: "hdoc",
    Entity.RESERVATION: (
        f"""pms_object(hdoc, '"{UNITS}":[' || array_to_string("""
        "list_transform(units, lambda o: o.hunit), ',') || ']', htail)"
    ),
}
"""SQL of the hashed form (the payload without volatile members) from the grouped texts."""

_SINGLE_HASH_TEXT: dict[Entity, str] = {
    Entity.ACCOMMODATION: "hdoc",
    Entity.RESERVATION: f"""pms_object(hdoc, '"{UNITS}":[' || hunit || ']', htail)""",
}
"""The same for a record of one row."""


# One row per record: rows with the same account and id are one record. Rows that lack either
# cannot be grouped and stay alone (they are quarantined by the validator).
_GROUP_KEY = (
    "account_id, record_id, CASE WHEN account_id IS NULL OR record_id IS NULL "
    f"THEN {SOURCE_COLUMN} || ':' || {ROW_COLUMN} END"
)

_FIRST_ROW = f"{SOURCE_COLUMN} || lpad(CAST({ROW_COLUMN} AS VARCHAR), 12, '0')"
_ERRORS = "flatten(list(errs) FILTER (WHERE errs IS NOT NULL)) AS errors"
# Aggregates without ORDER BY (ordered aggregates are slow); order is restored on the lists.
_COMMON = f"""
       min(hash(doc || coalesce(tail, ''))) <> max(hash(doc || coalesce(tail, '')))
           AS conflicting,
       {_ERRORS},
       min({SOURCE_COLUMN}) AS sources,
       array_to_string(list_sort(list({ROW_COLUMN})), ',') AS row_numbers,
       min({_FIRST_ROW}) AS first_row"""
# The same columns for a record of one row.
_SINGLE_COMMON = f"""
       false AS conflicting, errs AS errors, {SOURCE_COLUMN} AS sources,
       CAST({ROW_COLUMN} AS VARCHAR) AS row_numbers, {_FIRST_ROW} AS first_row"""

# Where DuckDB's JSON text could differ from Python's json.dumps (connector.canonical): \u
# escapes (DuckDB writes upper-case hex), exponents, and floats beyond 1e16 or below 1e-4.
# Such records take the validator's Python path; the pattern may also match inside strings,
# which only costs that record the slower path.
_EXOTIC_TEXT = r"\\u|[:,\[]-?[0-9]+(\.[0-9]+)?[eE]|[:,\[]-?[0-9]{17}|[:,\[]-?0\.0000"

# A record the twin validator may accept: everything that is not a contract check.
_FAST = f"""
       account_id IS NOT NULL AND account_id <> '' AND record_id IS NOT NULL
       AND length(trim(record_id)) > 0 AND NOT conflicting AND errors IS NULL
       AND (checkin IS NULL OR checkin BETWEEN DATE '1677-09-22' AND DATE '2262-04-11')
       AND (checkout IS NULL OR checkout BETWEEN DATE '1677-09-22' AND DATE '2262-04-11')
       AND NOT regexp_matches(payload, '{_EXOTIC_TEXT}')"""

VALIDATED_BEFORE = "(/* payloads validated before */ false)"
"""Placeholder the engine replaces by a lookup in the snapshot's validated payloads."""

_OUTPUT = """account_id, record_id, payload, hash_text, conflicting, errors, sources, row_numbers,
       first_row, checkin, checkout"""

_GROUPING: dict[Entity, str] = {
    Entity.ACCOMMODATION: f"""
, grouped AS (
  SELECT account_id, record_id, any_value(doc) AS payload, any_value(hdoc) AS hdoc, {_COMMON},
         NULL::DATE AS checkin, NULL::DATE AS checkout
  FROM rows_many GROUP BY {_GROUP_KEY}
), records AS (
  SELECT account_id, record_id, doc AS payload, {{single_hash_text}} AS hash_text,
         {_SINGLE_COMMON}, NULL::DATE AS checkin, NULL::DATE AS checkout
  FROM rows_one
  UNION ALL
  SELECT account_id, record_id, payload, {{hash_text}} AS hash_text, conflicting, errors,
         sources, row_numbers, first_row, checkin, checkout
  FROM grouped
)
SELECT {_OUTPUT}, {_FAST} AS fast, {VALIDATED_BEFORE} AS validated
FROM records
ORDER BY first_row
""",
    Entity.RESERVATION: f"""
, grouped AS (
  SELECT account_id, record_id, any_value(doc) AS doc, any_value(tail) AS tail,
         any_value(hdoc) AS hdoc, any_value(htail) AS htail, {_COMMON},
         -- Units in check-in order, then by id: the payload does not change when an
         -- export (or a database without ORDER BY) lists the same rows in another order.
         list_sort(list(struct_pack(checkin := unit_checkin, id := unit_id, unit := unit,
                                    hunit := hunit))) AS ordered,
         min(TRY_CAST(unit_checkin AS DATE)) AS checkin,
         max(TRY_CAST(unit_checkout AS DATE)) AS checkout,
         -- The contract's own rule, checked here so the twin validator needs no Python.
         bool_and(coalesce(unit_checkout > unit_checkin, false)) AS stays_forward
  FROM rows_many GROUP BY {_GROUP_KEY}
), kept AS (
  -- Identical rows (an export listing a line twice) give one unit reservation.
  SELECT * EXCLUDE (ordered),
         list_filter(ordered, lambda o, i: list_position(
             list_transform(ordered, lambda p: p.unit), o.unit) = i) AS units
  FROM grouped
), records AS (
  SELECT account_id, record_id,
         pms_object(doc, '"{UNITS}":[' || unit || ']', tail) AS payload,
         {{single_hash_text}} AS hash_text, {_SINGLE_COMMON},
         TRY_CAST(unit_checkin AS DATE) AS checkin, TRY_CAST(unit_checkout AS DATE) AS checkout,
         coalesce(unit_checkout > unit_checkin, false) AND unit_id IS NOT NULL AS units_sure
  FROM rows_one
  UNION ALL
  SELECT account_id, record_id,
         pms_object(doc, '"{UNITS}":[' || array_to_string(
             list_transform(units, lambda o: o.unit), ',') || ']', tail) AS payload,
         {{hash_text}} AS hash_text, conflicting, errors, sources, row_numbers, first_row,
         checkin, checkout,
         stays_forward
             AND len(list_distinct(list_transform(units, lambda o: o.id))) = len(units)
             AS units_sure
  FROM kept
)
SELECT {_OUTPUT}, units_sure AND {_FAST} AS fast, {VALIDATED_BEFORE} AS validated
FROM records
ORDER BY first_row
""",
}
