"""Documents and object lists: a scope's values written as the JSON of contract objects.

A document is every mapped member of a contract model, compiled once and written as JSON text
(:mod:`connector.mapping.json_text`); an object list is either items listed in the mapping or
rows of another input joined by key (aggregated in their own CTE by the entity query).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from connector.mapping import contract_sql
from connector.mapping.json_text import JsonList, JsonObject, JsonValue, leaf_text, value_text
from connector.mapping.model import JoinedRows, field_shape
from connector.mapping.scope_sql import MemberPath, ScopeSql


class ScopeCompiler(ScopeSql):
    """Compiles the fields of one scope into staged SELECTs."""

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
        """Every mapped member of ``contract``, compiled once and written as JSON text, with
        the contract's checks of those members as SQL predicates (:meth:`JsonObject.check`)."""
        document = JsonObject(required=required)
        try:
            schemas = contract_sql.model_fields(contract)
        except contract_sql.Uncovered as why:
            document.uncovered.append(str(why))
            schemas = {}
        for name, info in contract.model_fields.items():
            if name in skip:
                continue
            value = getattr(fields, name, None)
            if value is None:
                if info.is_required() and name not in (extra or {}):
                    document.uncovered.append(f"required member {name} not mapped")
                continue
            child_member = (*member, name)
            child_path = f"{path}.{name}" if path else name
            shape, sub = field_shape(info.annotation)
            compiled: JsonValue
            try:
                if shape == "object":
                    compiled = self.document(
                        value,
                        sub,  # type: ignore[arg-type]
                        child_member,
                        child_path,
                        required=info.is_required(),
                    )
                    document.presence.append(compiled.text())
                    self._check_object(document, compiled, schemas.get(name))
                elif shape == "object_list":
                    compiled = self.object_list(value, sub, child_member, child_path)  # type: ignore[arg-type]
                    document.presence.append(value_text(compiled))
                    self._check_list(document, compiled, schemas.get(name))
                else:
                    leaf = self.leaf(value, info, child_member, child_path)
                    compiled = leaf_text(leaf.sql)
                    document.presence.append(leaf.sql)
                    if name in schemas:
                        document.checks.append(
                            contract_sql.member_check(schemas[name], leaf.sql, leaf.kind)
                        )
            except contract_sql.Uncovered as why:
                document.uncovered.append(f"{child_path}: {why}")
            document.members[name] = compiled
        for name, sql in (extra or {}).items():
            document.members[name] = leaf_text(sql)
            try:
                # The engine's own members are literal text (the default status).
                document.checks.append(contract_sql.member_check(schemas[name], sql, "string"))
            except (contract_sql.Uncovered, KeyError) as why:
                document.uncovered.append(f"{name}: {why}")
        return document

    @staticmethod
    def _check_object(
        document: JsonObject, child: JsonObject, schema: dict[str, Any] | None
    ) -> None:
        if schema is None:
            raise contract_sql.Uncovered("no schema")
        optional, _ = contract_sql.object_node(schema)
        if not optional:
            document.checks.append(child.check())
            return
        # An optional object with no value at all is left out (JsonObject.text).
        unset = " AND ".join(f"({sql}) IS NULL" for sql in child.presence) or "false"
        document.checks.append(f"({unset}) OR ({child.check()})")

    @staticmethod
    def _check_list(document: JsonObject, listed: JsonList, schema: dict[str, Any] | None) -> None:
        if schema is None:
            raise contract_sql.Uncovered("no schema")
        optional, _ = contract_sql.list_node(schema)
        if not optional:
            # An empty list is left out, which a required list may not be.
            raise contract_sql.Uncovered("a required list of objects")
        if listed.rows_sql is not None:
            # Checked per item in the list's own CTE (Compiler.child_rows).
            document.checks.append(listed.rows_check)
            return
        for item, keep in listed.items:
            # An item is in the list only when its keep condition holds.
            document.checks.append(
                item.check() if keep is None else f"NOT coalesce({keep}, false) OR ({item.check()})"
            )

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
        assert isinstance(value, JoinedRows)  # the model allows a list or these only
        rows_sql, rows_check = self.compiler.child_rows(self, value, item, member, path)
        return JsonList(rows_sql=rows_sql, rows_check=rows_check)
