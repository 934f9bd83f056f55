"""The connections Dagster knows: one per mapping file in the mappings folder.

A mapping file is any ``*.yaml``/``*.yml`` directly in the folder, or a ``mapping.yaml`` one
folder down (``mappings/hotel/mapping.yaml``), so a connection's folder can keep other YAML
files (value lists, samples) next to its mapping without them being taken for connections.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import dagster as dg

from connector.config import InputSection
from connector.errors import ConfigError

if TYPE_CHECKING:
    from pms_sync.connection_resources import ConnectionResources

MAPPINGS_DIR_VARIABLE = InputSection.variable("mappings_dir")


def _the_projects() -> ConnectionResources:
    # Imported when called: the resources' module imports this one's dependents in turn.
    from pms_sync.connection_resources import ConnectionResources

    return ConnectionResources()


@dataclass(frozen=True)
class Connection:
    """One PMS connection: its mapping file, the parsed mapping, and its Dagster-safe name."""

    name: str
    path: Path
    mapping: Any  # connector.mapping.Mapping
    # The component's ``partition_by_account``, which wins over the mapping's when set.
    by_account: bool | None = None
    # The component's ``key_prefix``: segments before the name in every asset key.
    key_prefix: tuple[str, ...] = ()
    # The component's own service and snapshot, if its defs.yaml sets them.
    resources: ConnectionResources = field(default_factory=_the_projects)

    def asset_key(self, *parts: str) -> dg.AssetKey:
        """An asset key of this connection: ``[*key_prefix, name, *parts]``."""
        return dg.AssetKey([*self.key_prefix, self.name, *parts])

    @property
    def partitioned_by_account(self) -> bool:
        """Whether reservations are partitioned by account as well as by month."""
        if self.by_account is not None:
            return self.by_account
        return bool(getattr(self.dagster, "partition_by_account", False))

    @property
    def dagster(self) -> Any:
        """The mapping's ``dagster`` section: schedule, timezone, drop_folder, partitions_start."""
        return self.mapping.dagster

    def drop_folder(self) -> Path | None:
        """The drop folder (the loader makes it absolute; relative to the mapping file)."""
        folder = self.dagster.drop_folder
        if not folder:
            return None
        path = Path(folder).expanduser()
        return path if path.is_absolute() else (self.path.parent / path).resolve()


def mappings_dir(default: Path) -> Path:
    """The folder of mapping files: ``$PMS_SYNC_MAPPINGS_DIR``, else ``default``."""
    configured = InputSection.read().mappings_dir
    return configured.expanduser().resolve() if configured else default


def mapping_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        raise ConfigError(
            f"the mappings folder {folder} does not exist (set {MAPPINGS_DIR_VARIABLE})"
        )
    direct = [p for p in folder.iterdir() if p.is_file() and p.suffix in (".yaml", ".yml")]
    nested = [p for pattern in ("*/mapping.yaml", "*/mapping.yml") for p in folder.glob(pattern)]
    return sorted(direct + nested)


def dagster_name(name: str) -> str:
    """A mapping's name as a Dagster name (letters, digits and underscores)."""
    safe = re.sub(r"[^A-Za-z0-9_]", "_", name.strip()).strip("_") or "connection"
    return f"c_{safe}" if safe[0].isdigit() else safe


def load_connection(path: Path) -> Connection:
    """The connection of one mapping file; a broken file fails loudly with its file and line."""
    from connector.mapping import load_mapping

    mapping = load_mapping(path)
    # load_mapping names a connection after its file when the file names none.
    return Connection(name=dagster_name(mapping.name or path.stem), path=path, mapping=mapping)


def discover(folder: Path) -> list[Connection]:
    """Every connection of the folder; a broken mapping file fails loudly with its file and line."""
    connections: dict[str, Connection] = {}
    for path in mapping_files(folder):
        connection = load_connection(path)
        name = connection.name
        if name in connections:
            raise ConfigError(
                f"two mapping files give the connection name {name!r}: "
                f"{connections[name].path} and {path}; rename one (its `name:` member)"
            )
        connections[name] = connection
    return list(connections.values())
