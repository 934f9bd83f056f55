"""Compiling a mapping to DuckDB SQL: set-based work over whole inputs, no Python per row.

Each entity becomes one query. A scope (the rows of an input, with its joins and filter) is
compiled to three stages: raw text of every field, its converted value, and the JSON document.
Documents are DuckDB structs turned into JSON once per record. A value that cannot be converted
(a date that does not exist, an unknown country, "25pm") is reported in the row's error list
with the field path, the reason and the input row, and its record is quarantined; every other
record is then validated by the contract, which stays the final authority on validity.

This module is the entity query (:class:`Compiler`, :class:`EntityQuery` and the SQL that
groups rows into records); scopes and expressions are :mod:`connector.mapping.scope_sql`,
documents and object lists :mod:`connector.mapping.document_sql`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from pydantic import BaseModel

from connector.contract import Accommodation, Entity, Reservation, UnitReservation
from connector.errors import MappingError
from connector.mapping import contract_sql
from connector.mapping.document_sql import ScopeCompiler
from connector.mapping.expressions import Expression
from connector.mapping.json_text import JsonList, JsonObject, VolatileInRows
from connector.mapping.model import Join, JoinedRows, Mapping, OwnRows
from connector.mapping.scope_sql import (
    INLINE_LOOKUP_LIMIT,
    MemberPath,
    Scope,
    UserSql,
    lit,
    lookup_text,
    table_name,
)
from connector.sources.base import ROW_COLUMN, SOURCE_COLUMN, quote_identifier

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
    # Each row of the entity's own input, whole, as the struct INPUT_ROW, with the account_id
    # and record_id it gives: the rows of the records to map are kept from it in one read.
    narrow_rows_sql: str = ""
    # Inputs read besides the entity's own rows (joins, lists from other inputs): their whole
    # content shapes every record, so it is part of the mapping's fingerprint.
    joined_inputs: list[str] = field(default_factory=list)
    # False when a record's document depends on rows other than its own or on their position
    # (an @occurrence or @row_number outside the key, a window function in sql:): such an
    # entity is always mapped whole (connector.mapping.fingerprints).
    fingerprintable: bool = True
    row_alias: str = ""  # the SQL alias of the entity's own input in the row filter
    # The contract rules the SQL predicates cannot express for this mapping (then every
    # record of the entity is validated in Python): empty when they cover the whole contract.
    unchecked: list[str] = field(default_factory=list)
    # Reservations whose rows pass the entity's filter but none the unitReservations filter
    # (account_id, record_id, sources, row_numbers, first_row): quarantined, never dropped.
    # Empty when every row of the entity is a unit row.
    unitless_sql: str = ""


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
        self._child_unchecked: list[str] = []  # rules without SQL in lists from other inputs

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
            matched: list[str] = []
            for joined_column, own_column in join.on.items():
                if joined_column not in columns:
                    raise self.error(
                        f"unknown column {joined_column!r} in joined input {join.input!r}",
                        (*join_member, "on", joined_column),
                    )
                matched.append(
                    self._join_key(scope, alias, own_column, (*join_member, "on", joined_column))
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
                f"{sql_alias}.{quote_identifier(joined)} = {own}"
                for joined, own in zip(join.on, matched, strict=True)
            )
            # Registered after its own keys: a join matches on the input's columns or on
            # those of a join before it (room -> room type -> property), never its own.
            scope.joins[join.alias] = (sql_alias, columns)
            clauses.append(f"LEFT JOIN {deduplicated} AS {sql_alias} ON {on}")
        scope.from_sql = (
            f"{quote_identifier(table_name(input_name))} AS {alias} {' '.join(clauses)}".strip()
        )
        return scope, clauses

    def _join_key(self, scope: Scope, alias: str, own: str, member: MemberPath) -> str:
        """The SQL of a join's key on this side: a column of the input, else ``alias.column``
        of an earlier join."""
        if own in scope.columns:
            return f"{alias}.{quote_identifier(own)}"
        prefix, dot, column = own.partition(".")
        if dot and prefix in scope.joins:
            sql_alias, columns = scope.joins[prefix]
            if column not in columns:
                raise self.error(f"unknown column {column!r} in the join {prefix!r}", member)
            return f"{sql_alias}.{quote_identifier(column)}"
        earlier = ", ".join(f"{name}.<column>" for name in scope.joins) or "none before this one"
        raise self.error(
            f"unknown column {own!r} in input {scope.input_name!r} (columns of earlier joins: "
            f"{earlier})",
            member,
        )

    def child_rows(
        self,
        parent: ScopeCompiler,
        block: JoinedRows,
        item: type[BaseModel],
        member: MemberPath,
        path: str,
    ) -> tuple[str, str]:
        """A list from rows of another input joined by key: aggregated in its own CTE.

        Returns the SQL of the list's item texts and of the contract checks of its items
        (true when every item surely passes, or when there is none)."""
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
        compiled = child.document(block.fields, item, (*member, "fields"), path)
        document = compiled.text()
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
            f"{document} AS item, {compiled.check()} AS ok, {child.errors()} AS errs "
            f"FROM {name}_val)"
        )
        self._ctes.append(
            f"{name} AS NOT MATERIALIZED (SELECT {key_list}, list(item ORDER BY {SOURCE_COLUMN}, {ROW_COLUMN}) "
            f"AS items, flatten(list(errs) FILTER (WHERE errs IS NOT NULL)) AS errs, "
            f"bool_and(coalesce(ok, false)) AS ok FROM {name}_doc GROUP BY {key_list})"
        )
        join_alias = f"{name}_j"
        on = " AND ".join(
            f"{join_alias}.k{position} = {parent_ref}"
            for position, (_, parent_ref) in enumerate(keys)
        )
        parent.child_joins.append(f"LEFT JOIN {name} AS {join_alias} ON {on}")
        parent.raw_columns.append(f"{join_alias}.items AS {name}_items")
        parent.raw_columns.append(f"nullif({join_alias}.errs, []) AS {name}_errs")
        parent.raw_columns.append(f"coalesce({join_alias}.ok, true) AS {name}_ok")
        parent.child_errors.append(f"{name}_errs")
        self._child_unchecked.extend(compiled.uncovered)
        return f"{name}_items", f"{name}_ok"

    # ------------------------------------------------------------------ entities

    def entity_query(self, entity: Entity) -> EntityQuery:
        spec = self.mapping.entities[entity]
        member: MemberPath = ("entities", entity.value)
        user_sql_before = len(self.user_sql)
        self._ctes = []
        self._volatile = []
        self._joined_inputs = []
        self._fingerprintable = True
        self._child_unchecked = []
        # Aliases are numbered per query, so an entity's SQL (and its mapping fingerprint) is
        # the same whether it is compiled alone (a Dagster step) or after another entity.
        self._index = 0
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
        # What the key alone reads (compiled first, so the head of each list): a query of the
        # keys joins neither the lists nor the reference tables the document's other members
        # need, which DuckDB would join even though no column of theirs is read.
        key_raw_columns = list(compiler.raw_columns)
        key_value_columns = list(compiler.value_columns)
        key_value_joins = list(compiler.value_joins)
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
            assert isinstance(block, OwnRows)  # the model allows nothing else
            units = compiler.document(
                block.fields, UnitReservation, (*units_member, "fields"), UNITS
            )
            for name in unit_value:
                unit_value[name] = compiler.leaf_sql.get(f"{UNITS}.{name}", "NULL")
        where = entity_where = compiler.where(spec.filter, (*member, "filter"))
        unit_where = ""
        if isinstance(getattr(fields, UNITS, None), OwnRows) and fields.unitReservations.filter:
            unit_where = compiler.where(fields.unitReservations.filter, (*units_member, "filter"))
            where = f"({entity_where}) AND ({unit_where})"
        row_head = [
            f"{scope.alias}.{SOURCE_COLUMN}",
            f"{scope.alias}.{ROW_COLUMN}",
            # Only the source fingerprints read it; every other query leaves it uncomputed.
            f"{row_hash_sql(scope.alias, self.headers[spec.input])} AS {ROW_HASH}",
        ]
        stage1 = ", ".join([*row_head, *compiler.raw_columns])
        values = ", ".join(["raw.*", *compiler.value_columns])
        volatile = sorted(set(self._volatile))
        record_volatile, unit_volatile = _split_volatile(entity, volatile)
        parts = {"doc": document, "tail": tail, "unit": units}
        texts = [
            f"{part.text() if part.members else 'NULL'} AS {name}" for name, part in parts.items()
        ]
        checks = contract_sql.all_of([part.check() for part in parts.values()])
        unchecked = sorted(
            {reason for part in parts.values() for reason in _uncovered(part)}
            | set(self._child_unchecked)
        )
        if entity == Entity.RESERVATION and not _units_spliced_as_contract_wants():
            unchecked.append(f"{UNITS}: not the list the entity query writes")
        if unchecked:
            checks = "false"
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
        rows_of_input = (
            f"FROM {quote_identifier(table_name(spec.input))} AS {scope.alias} "
            f"{' '.join(join_clauses)}"
        )
        ctes.append(
            f"raw AS NOT MATERIALIZED (SELECT {stage1} {rows_of_input} "
            f"{' '.join(compiler.child_joins)} WHERE {where} AND {ROWS_TO_MAP} "
            f"AND {RECORDS_IN_SLICE})"
        )
        record_key = (
            f"CAST({account.sql} AS VARCHAR) AS account_id, "
            f"CAST({record_id.sql} AS VARCHAR) AS record_id"
        )
        # The whole input row as one struct, named column by column (a bare table alias
        # would bind to a column of that name). Every row appears once: a join keeps one
        # matching row, and reference keys are unique.
        input_row = "struct_pack({})".format(
            ", ".join(
                f"{quote_identifier(name)} := {scope.alias}.{quote_identifier(name)}"
                for name in [*self.headers[spec.input], SOURCE_COLUMN, ROW_COLUMN]
            )
        )

        def key_rows(with_input_row: bool) -> str:
            """SQL of each row's key, and of the whole input row ``with_input_row``."""
            kept = [f"{input_row} AS {INPUT_ROW}"] if with_input_row else []
            stage = ", ".join([*row_head, *key_raw_columns, *kept])
            values = ", ".join(["key_raw.*", *key_value_columns])
            selected = INPUT_ROW if with_input_row else f"{SOURCE_COLUMN}, {ROW_COLUMN}, {ROW_HASH}"
            return (
                f"WITH key_raw AS NOT MATERIALIZED (SELECT {stage} {rows_of_input} "
                f"WHERE {where}),\nkey_val AS NOT MATERIALIZED (SELECT {values} FROM key_raw "
                f"{' '.join(key_value_joins)})\nSELECT {selected}, {record_key} FROM key_val"
            )

        key_rows_sql, narrow_rows_sql = key_rows(False), key_rows(True)
        unitless_sql = ""
        if unit_where:
            stage = ", ".join([*row_head, *key_raw_columns, f"({unit_where}) AS is_unit"])
            key_values = ", ".join(["key_raw.*", *key_value_columns])
            unitless_sql = (
                f"WITH key_raw AS NOT MATERIALIZED (SELECT {stage} {rows_of_input} "
                f"WHERE {entity_where}),\nkey_val AS NOT MATERIALIZED (SELECT {key_values} "
                f"FROM key_raw {' '.join(key_value_joins)}),\nkeys AS (SELECT {SOURCE_COLUMN}, "
                f"{ROW_COLUMN}, is_unit, {record_key} FROM key_val)\n"
                f"SELECT account_id, record_id, min({SOURCE_COLUMN}) AS sources, "
                f"{_ROW_NUMBERS} AS row_numbers, "
                f"min({_FIRST_ROW}) AS first_row FROM keys "
                "WHERE account_id IS NOT NULL AND record_id IS NOT NULL "
                "GROUP BY account_id, record_id HAVING NOT bool_or(coalesce(is_unit, false)) "
                "ORDER BY first_row"
            )

        row_columns = (
            f"{SOURCE_COLUMN}, {ROW_COLUMN}, {ROW_HASH}, {record_key}, "
            f"{compiler.errors()} AS errs, "
            f"{', '.join(texts)}, {checks} AS checks, "
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
            narrow_rows_sql=narrow_rows_sql,
            joined_inputs=sorted(set(self._joined_inputs)),
            fingerprintable=self._fingerprintable,
            row_alias=scope.alias,
            unchecked=unchecked,
            unitless_sql=unitless_sql,
        )

    def _account_member(self, entity: Entity) -> MemberPath:
        if self.mapping.entities[entity].account is not None:
            return ("entities", entity.value, "account")
        return ("account",)


UNITS = "unitReservations"


def _uncovered(document: JsonObject) -> list[str]:
    """Rules without SQL predicate in ``document`` and in the objects nested in it."""
    found = list(document.uncovered)
    for value in document.members.values():
        if isinstance(value, JsonObject):
            found.extend(_uncovered(value))
        elif isinstance(value, JsonList):
            for item, _keep in value.items:
                found.extend(_uncovered(item))
    return found


def _units_spliced_as_contract_wants() -> bool:
    """Whether the contract's unitReservations is what the entity query writes: a list of
    one item per row (so never empty), with no other constraint; the items' own rules and
    the two model validators are checked by the query itself."""
    try:
        node = contract_sql.model_fields(Reservation)[UNITS]
    except contract_sql.Uncovered:
        return False
    allowed = {"type", "items_schema", "min_length", "metadata", "ref", "serialization"}
    return node.get("type") == "list" and set(node) <= allowed and node.get("min_length", 0) <= 1


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


INPUT_ROW = "_input_row"
"""Column of ``EntityQuery.narrow_rows_sql``: the input row, every column, as one struct."""

ROWS_TO_MAP = "(/* rows to map */ true)"
"""Placeholder in an entity's row filter: the engine replaces it to leave out the rows of
records whose source fingerprint is unchanged (connector.mapping.fingerprints)."""


RECORDS_IN_SLICE = "(/* records in slice */ true)"
"""Placeholder in an entity's row filter: the engine replaces it to map one slice of the
records at a time (connector.mapping.engine, ``sliced_queries``)."""


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
# The rows of a record, after its first file (``sources``): "12,13", and when a glob's files
# share the record, each further file by name: "14; all_2023.csv:51" (a booking in two yearly
# exports), so that ``sources:row_numbers`` names every row's own file.
_ROW_NUMBERS = f"""CASE WHEN min({SOURCE_COLUMN}) = max({SOURCE_COLUMN})
       THEN array_to_string(list_sort(list({ROW_COLUMN})), ',')
       ELSE list_transform(
           [list_sort(list(struct_pack(s := {SOURCE_COLUMN}, r := {ROW_COLUMN})))],
           lambda rows: array_to_string(list_transform(rows, lambda row, i: CASE
               WHEN i = 1 THEN '' WHEN row.s <> rows[i - 1].s THEN '; ' || row.s || ':' ELSE ','
               END || CAST(row.r AS VARCHAR)), ''))[1] END"""
_ERRORS = "flatten(list(errs) FILTER (WHERE errs IS NOT NULL)) AS errors"
# Aggregates without ORDER BY (ordered aggregates are slow); order is restored on the lists.
# "checked": the contract's checks compiled to SQL hold for every row of the record.
_COMMON = f"""
       min(hash(doc || coalesce(tail, ''))) <> max(hash(doc || coalesce(tail, '')))
           AS conflicting, bool_and(coalesce(checks, false)) AS checked,
       {_ERRORS},
       min({SOURCE_COLUMN}) AS sources,
       {_ROW_NUMBERS} AS row_numbers,
       min({_FIRST_ROW}) AS first_row"""
# The same columns for a record of one row.
_SINGLE_COMMON = f"""
       false AS conflicting, coalesce(checks, false) AS checked, errs AS errors, {SOURCE_COLUMN} AS sources,
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

_OUTPUT = """account_id, record_id, payload, hash_text, conflicting, checked, errors, sources,
       row_numbers, first_row, checkin, checkout"""

# Records of several rows come out first: their GROUP BY is the query's one blocking step, and
# run while the validator holds no documents yet, its memory is not added to theirs.
_GROUPING: dict[Entity, str] = {
    Entity.ACCOMMODATION: f"""
, grouped AS (
  SELECT account_id, record_id, any_value(doc) AS payload, any_value(hdoc) AS hdoc, {_COMMON},
         NULL::DATE AS checkin, NULL::DATE AS checkout
  FROM rows_many GROUP BY {_GROUP_KEY}
), records AS (
  SELECT account_id, record_id, payload, {{hash_text}} AS hash_text, conflicting, checked,
         errors, sources, row_numbers, first_row, checkin, checkout
  FROM grouped
  UNION ALL
  SELECT account_id, record_id, doc AS payload, {{single_hash_text}} AS hash_text,
         {_SINGLE_COMMON}, NULL::DATE AS checkin, NULL::DATE AS checkout
  FROM rows_one
)
SELECT {_OUTPUT}, {_FAST} AS fast, {VALIDATED_BEFORE} AS validated
FROM records
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
         pms_object(doc, '"{UNITS}":[' || array_to_string(
             list_transform(units, lambda o: o.unit), ',') || ']', tail) AS payload,
         {{hash_text}} AS hash_text, conflicting, checked, errors, sources, row_numbers,
         first_row, checkin, checkout,
         stays_forward
             AND len(list_distinct(list_transform(units, lambda o: o.id))) = len(units)
             AS units_sure
  FROM kept
  UNION ALL
  SELECT account_id, record_id,
         pms_object(doc, '"{UNITS}":[' || unit || ']', tail) AS payload,
         {{single_hash_text}} AS hash_text, {_SINGLE_COMMON},
         TRY_CAST(unit_checkin AS DATE) AS checkin, TRY_CAST(unit_checkout AS DATE) AS checkout,
         coalesce(unit_checkout > unit_checkin, false) AND unit_id IS NOT NULL AS units_sure
  FROM rows_one
)
SELECT {_OUTPUT}, units_sure AND {_FAST} AS fast, {VALIDATED_BEFORE} AS validated
FROM records
""",
}
