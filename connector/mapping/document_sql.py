"""Documents and object lists: a scope's values written as the JSON of contract objects.

A document is every mapped member of a contract model, compiled once and written as JSON text
(:mod:`connector.mapping.json_text`); an object list is either items listed in the mapping or
rows of another input joined by key (aggregated in their own CTE by the entity query).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from connector.mapping.json_text import JsonList, JsonObject, JsonValue, leaf_text, value_text
from connector.mapping.model import RowsBlock, field_shape
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
