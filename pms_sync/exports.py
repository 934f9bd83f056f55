"""The PMS exports as external assets: each input of a mapping, upstream of the mapped assets.

A file input (a path or a glob) or an SQL input (a table or a query) is written by the PMS, not
by Dagster: it is an ``AssetSpec`` Dagster cannot materialize, named ``<connection>/pms/<input>``,
so the lineage reads PMS export → mapped → synced. Its metadata says where the export is read
(URLs with their credentials redacted).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import dagster as dg
from pydantic import BaseModel

from connector.contract import Entity
from connector.secrets import redact_url
from pms_sync.connections import Connection

EXPORT_GROUP_SEGMENT = "pms"


def export_key(connection: Connection, input_name: str) -> dg.AssetKey:
    return connection.asset_key(EXPORT_GROUP_SEGMENT, input_name)


def entity_inputs(connection: Connection, entity: Entity) -> list[str]:
    """The inputs an entity reads: its own, its joins', and those of nested row lists."""
    spec = connection.mapping.entities[entity]
    names = set(_inputs_in(spec)) & set(connection.mapping.inputs)
    return sorted(names)


def _inputs_in(value: Any) -> Iterator[str]:
    if isinstance(value, BaseModel):
        for name in type(value).model_fields:
            member = getattr(value, name, None)
            if name == "input" and isinstance(member, str):
                yield member
            else:
                yield from _inputs_in(member)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _inputs_in(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _inputs_in(item)


def export_specs(connection: Connection) -> list[dg.AssetSpec]:
    """One external asset per input of the connection's mapping."""
    return [_spec(connection, name, source) for name, source in connection.mapping.inputs.items()]


def _spec(connection: Connection, name: str, source: Any) -> dg.AssetSpec:
    kind = str(getattr(source, "type", "csv"))
    metadata: dict[str, Any] = {"input": dg.MetadataValue.text(name)}
    if kind == "sql":
        metadata["url"] = dg.MetadataValue.text(redact_url(str(source.url)))
        if source.table:
            metadata["table"] = dg.MetadataValue.text(str(source.table))
        else:
            metadata["query"] = dg.MetadataValue.md(f"```sql\n{source.query}\n```")
        what = f"the {'table ' + source.table if source.table else 'query'} {name!r}"
    else:
        metadata["path"] = dg.MetadataValue.text(str(source.path))
        metadata["folder"] = dg.MetadataValue.path(str(connection.path.parent))
        what = f"the file(s) {source.path!r}"
    drop = connection.drop_folder()
    if drop is not None and kind != "sql":
        metadata["drop_folder"] = dg.MetadataValue.path(str(drop))
    return dg.AssetSpec(
        key=export_key(connection, name),
        group_name=connection.name,
        kinds={"excel" if kind == "xlsx" else kind},
        metadata=metadata,
        description=(
            f"The PMS export {what} of {connection.mapping.name}, read by "
            f"`{connection.path.name}`; written by the PMS, not by Dagster."
        ),
    )
