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
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo

from connector.contract import Entity, Reservation, UnitReservation
from connector.contract import _formats as formats
from connector.errors import MappingError
from connector.mapping.expressions import Condition, Expression, as_expression
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
            raise self.compiler.error(
                f"unknown column {rest!r} in joined input {prefix!r} "
                f"(columns: {', '.join(sorted(columns))})",
                member,
            )
        raise self.compiler.error(
            f"unknown column {name!r} in input {scope.input_name!r} "
            f"(columns: {', '.join(sorted(scope.columns))})",
            member,
        )

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
            self.compiler.user_sql.append((expression.sql, (*member, "sql")))  # type: ignore[arg-type]
            sql = f"CAST(({expression.sql}) AS VARCHAR)"
        else:  # date_parts
            parts = expression.date_parts
            assert parts is not None
            year = self.converted_text(as_expression(parts.year), (*member, "date_parts", "year"))
            month = self.converted_text(
                as_expression(parts.month), (*member, "date_parts", "month")
            )
            day = self.converted_text(as_expression(parts.day), (*member, "date_parts", "day"))
            made = (
                f"TRY_CAST(make_date(TRY_CAST({year} AS BIGINT), pms_month({month}), "
                f"TRY_CAST({day} AS BIGINT)) AS VARCHAR)"
            )
            # A composed date that does not exist keeps its parts so the reason can show them.
            sql = (
                f"CASE WHEN {year} IS NULL AND {month} IS NULL AND {day} IS NULL THEN NULL "
                f"ELSE coalesce({made}, concat_ws(' ', {year}, {month}, {day})) END"
            )
        if expression.trim:
            sql = f"trim({sql})"
        if expression.regex is not None:
            group = 1 if re.compile(expression.regex).groups else 0
            sql = f"nullif(regexp_extract({sql}, {lit(expression.regex)}, {group}), '')"
        if expression.case == "upper":
            sql = f"upper({sql})"
        elif expression.case == "lower":
            sql = f"lower({sql})"
        elif expression.case == "title":
            sql = (
                f"array_to_string(list_transform(string_split(lower({sql}), ' '), "
                f"lambda w: upper(w[1]) || w[2:]), ' ')"
            )
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
            table = self.compiler.lookup_table(expression.lookup, (*member, "lookup"))
            looked_up = f"(SELECT value FROM {table} WHERE key = {sql})"
            if expression.map_default is not None:
                sql = (
                    f"CASE WHEN {sql} IS NULL THEN NULL ELSE coalesce({looked_up}, "
                    f"CAST({lit(expression.map_default)} AS VARCHAR)) END"
                )
            else:
                sql = looked_up
        if expression.default is not None:
            sql = f"coalesce({sql}, CAST({lit(expression.default)} AS VARCHAR))"
        return sql

    def _template(self, template: str, member: MemberPath) -> str:
        pieces: list[str] = []
        references: list[str] = []
        for literal_text, name, _spec, _conversion in _formatter.parse(template):
            if literal_text:
                pieces.append(lit(literal_text))
            if name is not None:
                if name == "":
                    raise self.compiler.error("a template placeholder needs a column name", member)
                reference = self.column(name, member)
                references.append(reference)
                pieces.append(f"coalesce(CAST({reference} AS VARCHAR), '')")
        if not references:
            return f"CAST({lit(template)} AS VARCHAR)"
        all_missing = " AND ".join(f"{ref} IS NULL" for ref in references)
        return f"CASE WHEN {all_missing} THEN NULL ELSE concat({', '.join(pieces)}) END"

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
        comma = "true" if expression.decimal == "," else "false"
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
        self.raw_columns.append(f"{self.text(expression, member)} AS {raw_name}")
        converted, reason = self.convert(raw_name, expression, target)
        self.value_columns.append(f"{converted} AS {converted_name}")
        rendered = self.render(converted_name, target)
        failed = f"({raw_name} IS NOT NULL AND {converted_name} IS NULL)"
        if expression.add_days is not None:
            if target not in ("date", "datetime"):
                raise self.compiler.error("add_days applies to a date", (*member, "add_days"))
            days_text = self.converted_text(
                as_expression(expression.add_days), (*member, "add_days")
            )
            days_name = f"d{index}"
            self.raw_columns.append(f"{days_text} AS {days_name}")
            self.value_columns.append(f"pms_integer({days_name}, false) AS {days_name}c")
            rendered = self.render(
                f"({converted_name} + to_days(CAST({days_name}c AS INTEGER)))", target
            )
            failed = f"({failed} OR ({days_name} IS NOT NULL AND {days_name}c IS NULL))"
            reason = (
                f"CASE WHEN {days_name} IS NOT NULL AND {days_name}c IS NULL "
                f"THEN 'expected a whole number of days to add' ELSE {reason} END"
            )
        if expression.split is not None:
            rendered = (
                f"list_filter(list_transform(string_split({rendered}, {lit(expression.split)}), "
                f"lambda s: trim(s)), lambda s: s <> '')"
            )
            rendered = f"CASE WHEN len({rendered}) > 0 THEN {rendered} END"
        elif is_list:
            rendered = f"CASE WHEN {rendered} IS NOT NULL THEN list_value({rendered}) END"
        if reason != "NULL":  # conversions that can fail
            self.failed_flags.append(failed)
            sensitive = is_sensitive(path.rsplit(".", 1)[-1])
            shown = "'***'" if sensitive else raw_name
            told = reason if sensitive else f"concat({reason}, ', got ''', {raw_name}, '''')"
            self.error_items.append(
                f"CASE WHEN {failed} THEN struct_pack(path := {lit(path)}, reason := {told}, "
                f"value := {shown}, src := {SOURCE_COLUMN}, rownum := {ROW_COLUMN}) END"
            )
        self.compiler.volatile_check(expression, path)
        leaf = Leaf(raw=raw_name, sql=rendered)
        self.leaf_log.append((leaf, expression.source == "constant"))
        return leaf

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
    ) -> str:
        """SQL of a struct with every mapped member of ``contract`` (to_json'd once per record)."""
        parts: list[str] = []
        values: list[str] = []
        for name, info in contract.model_fields.items():
            if name in skip:
                continue
            value = getattr(fields, name, None)
            if value is None:
                continue
            child_member = (*member, name)
            child_path = f"{path}.{name}" if path else name
            shape, sub = field_shape(info.annotation)
            if shape == "object":
                sql = self.document(
                    value,
                    sub,  # type: ignore[arg-type]
                    child_member,
                    child_path,
                    required=info.is_required(),
                )
            elif shape == "object_list":
                sql = self.object_list(value, sub, child_member, child_path)  # type: ignore[arg-type]
            else:
                sql = self.leaf(value, info, child_member, child_path).sql
            parts.append(f'"{name}" := {sql}')
            values.append(sql)
        for name, sql in (extra or {}).items():
            parts.append(f'"{name}" := {sql}')
        if not parts:
            return "NULL"
        obj = f"struct_pack({', '.join(parts)})"
        if required:
            return obj
        # An optional object with no value at all is left out rather than sent empty.
        none = " AND ".join(f"({sql}) IS NULL" for sql in values)
        return f"CASE WHEN {none} THEN NULL ELSE {obj} END"

    def object_list(self, value: Any, item: type[BaseModel], member: MemberPath, path: str) -> str:
        if isinstance(value, list):
            items = []
            for index, fields in enumerate(value):
                before = len(self.leaf_log)
                obj = self.document(fields, item, (*member, index), path)
                fed = [leaf for leaf, constant in self.leaf_log[before:] if not constant]
                if not fed:
                    items.append(obj)
                    continue
                # An item whose column-fed members are all missing is left out of the list.
                keep = " OR ".join(f"{leaf.raw} IS NOT NULL" for leaf in fed)
                items.append(f"CASE WHEN {keep} THEN {obj} END")
            listed = f"list_filter(list_value({', '.join(items)}), lambda x: x IS NOT NULL)"
            return f"CASE WHEN len({listed}) > 0 THEN {listed} END"
        assert isinstance(value, RowsBlock)
        if value.input is None:
            raise self.compiler.error(
                "a list from rows needs `input` and `on` here (only unitReservations may use "
                "the record's own rows)",
                member,
            )
        return self.compiler.child_rows(self, value, item, member, path)

    # ------------------------------------------------------------------ filters

    def condition(self, condition: Condition, member: MemberPath) -> str:
        if condition.sql is not None:
            self.compiler.user_sql.append((condition.sql, (*member, "sql")))
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


_formatter = __import__("string").Formatter()


# ------------------------------------------------------------------------------ the compiler


@dataclass
class EntityQuery:
    """The SQL of one entity: one row per record before validation."""

    entity: Entity
    sql: str
    input_name: str
    volatile: list[str]


class Compiler:
    """Turns a validated mapping into one SQL query per entity."""

    def __init__(self, mapping: Mapping, headers: dict[str, list[str]]) -> None:
        self.mapping = mapping
        self.headers = headers
        self.user_sql: list[tuple[str, MemberPath]] = []
        self._index = 0
        self._ctes: list[str] = []
        self.lookups_used: set[str] = set()
        self._volatile: list[str] = []

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

    def lookup_table(self, name: str, member: MemberPath) -> str:
        if name not in self.mapping.lookups:
            known = ", ".join(sorted(self.mapping.lookups)) or "none"
            raise self.error(f"unknown lookup {name!r} (lookups: {known})", member)
        self.lookups_used.add(name)
        return f"lookup_{name}"

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
            inner = ScopeCompiler(self, Scope(join.input, "jt", columns), join_member)
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
        document = child.document(block.fields, item, (*member, "fields"), path)
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
        values = ", ".join(["*", *child.value_columns])
        self._ctes.append(
            f"{name}_raw AS NOT MATERIALIZED (SELECT {stage1} FROM {quote_identifier(table_name(block.input))} "
            f"AS {scope.alias} {' '.join(child.child_joins)} WHERE {where})"
        )
        self._ctes.append(f"{name}_val AS NOT MATERIALIZED (SELECT {values} FROM {name}_raw)")
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
        self._ctes = []
        self._volatile = []
        scope, join_clauses = self._scope(spec.input, spec.joins, member)
        compiler = ScopeCompiler(self, scope, member)
        account = compiler.leaf(
            self.mapping.account_for(entity), None, self._account_member(entity), "accountId"
        )
        fields = spec.fields
        fields_member = (*member, "fields")
        record_id = compiler.leaf(fields.id, None, (*fields_member, "id"), "id")
        if entity == Entity.ACCOMMODATION:
            from connector.contract import Accommodation

            # The engine's default status: a unit present in the export is active.
            extra = {"status": "'ACTIVE'"} if fields.status is None else None
            document = compiler.document(fields, Accommodation, fields_member, "", extra=extra)
            units = "NULL"
        else:
            document = compiler.document(
                fields, Reservation, fields_member, "", skip=("unitReservations",)
            )
            block = fields.unitReservations
            units_member = (*fields_member, "unitReservations")
            if not (isinstance(block, RowsBlock) and block.input is None):
                raise self.error(
                    "unitReservations is one item per row of the reservation input: write it "
                    "as {fields: ...} without input; when units live in another table, make that "
                    "table the reservation input and join the booking table to it",
                    units_member,
                )
            units = compiler.document(
                block.fields, UnitReservation, (*units_member, "fields"), "unitReservations"
            )
        where = compiler.where(spec.filter, (*member, "filter"))
        if isinstance(getattr(fields, "unitReservations", None), RowsBlock) and (
            fields.unitReservations.input is None
        ):
            where = f"({where}) AND ({compiler.where(fields.unitReservations.filter, (*units_member, 'filter'))})"
        stage1 = ", ".join(
            [f"{scope.alias}.{SOURCE_COLUMN}", f"{scope.alias}.{ROW_COLUMN}", *compiler.raw_columns]
        )
        values = ", ".join(["*", *compiler.value_columns])
        ctes = list(self._ctes)
        ctes.append(
            f"raw AS NOT MATERIALIZED (SELECT {stage1} FROM {quote_identifier(table_name(spec.input))} AS "
            f"{scope.alias} {' '.join(join_clauses)} {' '.join(compiler.child_joins)} "
            f"WHERE {where})"
        )
        ctes.append(f"val AS NOT MATERIALIZED (SELECT {values} FROM raw)")
        ctes.append(
            f"rows AS NOT MATERIALIZED (SELECT {SOURCE_COLUMN}, {ROW_COLUMN}, "
            f"CAST({account.sql} AS VARCHAR) AS account_id, "
            f"CAST({record_id.sql} AS VARCHAR) AS record_id, "
            f"{document} AS doc, {units} AS unit, {compiler.errors()} AS errs FROM val)"
        )
        sql = "WITH " + ",\n".join(ctes) + "\n" + _GROUPING[entity]
        return EntityQuery(entity, sql, spec.input, sorted(set(self._volatile)))

    def _account_member(self, entity: Entity) -> MemberPath:
        if self.mapping.entities[entity].account is not None:
            return ("entities", entity.value, "account")
        return ("account",)


# One row per record: rows with the same account and id are one record. Rows that lack either
# cannot be grouped and stay alone (they are quarantined by the validator).
_GROUP_KEY = (
    "account_id, record_id, CASE WHEN account_id IS NULL OR record_id IS NULL "
    f"THEN {SOURCE_COLUMN} || ':' || {ROW_COLUMN} END"
)

_ERRORS = "flatten(list(errs) FILTER (WHERE errs IS NOT NULL)) AS errors"
# Aggregates without ORDER BY (ordered aggregates are slow); order is restored on the lists.
_COMMON = f"""
       min(hash(doc)) <> max(hash(doc)) AS conflicting,
       {_ERRORS},
       min({SOURCE_COLUMN}) AS sources,
       array_to_string(list_sort(list({ROW_COLUMN})), ',') AS row_numbers,
       min({SOURCE_COLUMN} || lpad(CAST({ROW_COLUMN} AS VARCHAR), 12, '0')) AS first_row"""

_GROUPING: dict[Entity, str] = {
    Entity.ACCOMMODATION: f"""
SELECT account_id, record_id, to_json(any_value(doc)) AS doc, {_COMMON},
       NULL::DATE AS checkin, NULL::DATE AS checkout
FROM rows GROUP BY {_GROUP_KEY}
ORDER BY first_row
""",
    Entity.RESERVATION: f"""
, grouped AS (
  SELECT account_id, record_id, any_value(doc) AS doc, {_COMMON},
         list_sort(list(struct_pack(
             position := {SOURCE_COLUMN} || lpad(CAST({ROW_COLUMN} AS VARCHAR), 12, '0'),
             unit := unit))) AS positioned,
         min(TRY_CAST(unit.checkin AS DATE)) AS checkin,
         max(TRY_CAST(unit.checkout AS DATE)) AS checkout
  FROM rows GROUP BY {_GROUP_KEY}
)
SELECT account_id, record_id,
       to_json(struct_insert(doc, "unitReservations" := list_transform(
           -- identical rows (an export listing a line twice) give one unit reservation
           list_filter(positioned, lambda p, i: list_position(
               list_transform(positioned, lambda q: q.unit), p.unit) = i),
           lambda p: p.unit))) AS doc,
       conflicting, errors, sources, row_numbers, first_row, checkin, checkout
FROM grouped
ORDER BY first_row
""",
}
