"""``PmsSyncComponent``: one PMS connection in any Dagster project, declared in a ``defs.yaml``.

In a ``dg`` project::

    dg scaffold defs pms_sync.PmsSyncComponent hotel    # writes defs/hotel/defs.yaml (+ a mapping)

and ``defs/hotel/defs.yaml`` reads::

    type: pms_sync.PmsSyncComponent
    attributes:
      mapping: mapping.yaml          # relative to this file's folder
      service:                       # optional: this connection's own service
        base_url: https://guest-service.example
        token: "{{ env.HOTEL_SYNC_TOKEN }}"

The component builds what pms-sync's own code location builds per mapping file (the asset
group, its checks, job, nightly schedule, drop-folder sensor and the PMS exports as external
assets), and the resources every connection shares. pms-sync's own code location
(``assets/definitions.py``) is made of one such component per mapping file.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, TypeVar

import dagster as dg
from pydantic import BaseModel, Field, TypeAdapter

from connector.contract import Entity
from pms_sync.assets import SyncStepEvent
from pms_sync.connection_resources import ConnectionResources
from pms_sync.connections import Connection, dagster_name, discover, load_connection
from pms_sync.factory import accepted_preview_apis, connection_definitions
from pms_sync.resources import (
    STATE_DIR_NAME,
    ServiceResource,
    SnapshotResource,
    default_resources,
    own_service,
    own_snapshot,
)

_TEMPLATE = Path(__file__).parent / "templates" / "mapping.yaml"
_Resource = TypeVar("_Resource", ServiceResource, SnapshotResource)


def _resolved(kind: type[_Resource]) -> Callable[[dg.ResolutionContext, Any], _Resource | None]:
    """A resource attribute resolved as dagster-sling resolves its ``sling:``: the members
    ``defs.yaml`` sets, templates such as ``{{ env.NAME }}`` rendered."""

    def resolve(context: dg.ResolutionContext, model: Any) -> _Resource | None:
        if model is None:
            return None
        return kind.model_validate(context.resolve_value(model.model_dump(exclude_unset=True)))

    return resolve


class PmsSyncScaffoldParams(BaseModel):
    """Options of ``dg scaffold defs pms_sync.PmsSyncComponent NAME``."""

    mapping: str | None = Field(
        default=None,
        description=(
            "An existing mapping file for the new connection (relative to the new folder, or "
            "absolute). Without it, a commented starter mapping.yaml is written next to defs.yaml."
        ),
    )


class PmsSyncScaffolder(dg.Scaffolder[PmsSyncScaffoldParams]):
    """Writes ``defs.yaml`` naming the mapping file, and a starter mapping when none is given."""

    @classmethod
    def get_scaffold_params(cls) -> type[PmsSyncScaffoldParams]:
        return PmsSyncScaffoldParams

    def scaffold(self, request: dg.ScaffoldRequest[PmsSyncScaffoldParams]) -> None:
        mapping = request.params.mapping if request.params else None
        if mapping is None:
            mapping = "mapping.yaml"
            name = request.target_path.name
            target = request.target_path / mapping
            if not target.exists():
                target.write_text(_TEMPLATE.read_text().replace("name: hotel", f"name: {name}"))
        dg.scaffold_component(request, {"mapping": mapping})


@dg.scaffold_with(PmsSyncScaffolder)
class PmsSyncComponent(dg.Component, dg.Model, dg.Resolvable):
    """One PMS connection, synced to the guest-experience service: its mapping file becomes an
    asset group (PMS exports → mapped → synced), with checks, a job, a nightly schedule and,
    if the mapping names one, a drop-folder sensor."""

    mapping: str = Field(
        description="The connection's mapping file, relative to the folder of this defs.yaml."
    )
    name: str | None = Field(
        default=None,
        description=(
            "The connection's name in Dagster: the first part of its asset keys, its group, "
            "job, schedules and sensors. Empty: the name of this defs.yaml's folder, so two "
            "components never collide whatever their mapping files say."
        ),
    )
    key_prefix: list[str] = Field(
        default_factory=list,
        description=(
            "Segments before the connection's name in each of its asset keys, e.g. [pms] for "
            "pms/berlin/synced_reservations. Empty: the keys start with the name."
        ),
    )
    state_dir: str = Field(
        default=STATE_DIR_NAME,
        description=(
            "Folder of the snapshot and of the mapped records between steps, relative to the "
            "project root. Every connection of a project shares it (one snapshot per "
            "deployment); PMS_SYNC_SNAPSHOT overrides the snapshot file."
        ),
    )

    service: Annotated[
        ServiceResource | None,
        dg.Resolver(
            _resolved(ServiceResource),
            model_field_type=ServiceResource | None,
            description=(
                "This connection's own guest-experience service, for this component only: any "
                "member of the service resource (base_url, token, concurrency, rate_limits, …) over "
                "the project's; give the token as \"{{ env.NAME }}\". The project's credentials "
                "are used only while base_url is the project's. Empty: the project's shared "
                "`service` resource."
            ),
        ),
    ] = None
    snapshot: Annotated[
        SnapshotResource | None,
        dg.Resolver(
            _resolved(SnapshotResource),
            model_field_type=SnapshotResource | None,
            description=(
                "This connection's own snapshot, for this component only: path (a DuckDB file "
                "relative to the project root, or absolute, or a PostgreSQL URL) and lock_timeout. "
                "Empty: the project's shared `snapshot` resource (state_dir, PMS_SYNC_SNAPSHOT)."
            ),
        ),
    ] = None

    partition_by_account: bool | None = Field(
        default=None,
        description=(
            "Partition the reservations by account as well as by month of check-in, so a "
            "nightly run or a backfill is one run per account (docs/dagster.md). Empty: the "
            "mapping's dagster.partition_by_account (default false)."
        ),
    )

    def mapping_path(self, folder: Path) -> Path:
        path = Path(self.mapping).expanduser()
        return path if path.is_absolute() else (folder / path).resolve()

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        named = self if self.name else self.model_copy(update={"name": context.path.name})
        return named.definitions(self.mapping_path(context.path), context.project_root)

    def definitions(
        self,
        mapping_file: Path,
        project_root: Path,
        resources: Mapping[str, object] | None = None,
    ) -> dg.Definitions:
        """The connection's definitions and the resources all connections of the project share.

        ``resources``: other resource objects than the state folder's defaults (a deployment's
        own service, the tests' sandbox and snapshot); the snapshot's location decides the
        snapshot steps' pool.
        """
        return self.definitions_of(load_connection(mapping_file), project_root, resources)

    def definitions_of(
        self,
        connection: Connection,
        project_root: Path,
        resources: Mapping[str, object] | None = None,
    ) -> dg.Definitions:
        """``definitions`` of a connection already loaded from its mapping file."""
        bound = self.own_resources(project_root)
        connection = replace(
            connection,
            by_account=self.partition_by_account,
            key_prefix=tuple(self.key_prefix),
            resources=bound,
        )
        if self.name:
            connection = replace(connection, name=dagster_name(self.name))
        if resources is None:
            resources = shared_resources(self.state_path(project_root))
        snapshot = resources.get("snapshot")
        location = bound.snapshot_location or (
            snapshot.path if isinstance(snapshot, SnapshotResource) else None
        )
        with accepted_preview_apis():
            own = connection_definitions(connection, location, self.execute)
        return dg.Definitions.merge(own, dg.Definitions(resources=resources))

    def execute(
        self,
        context: dg.AssetExecutionContext,
        entity: Entity,
        events: Iterator[SyncStepEvent],
    ) -> Iterator[SyncStepEvent]:
        """Run one sync step (``synced_accommodations`` or ``synced_reservations``): the
        override point of a subclass, as in Dagster's own integration components.

        Iterating ``events`` runs the step: the push, then its materialization (with the
        counts as metadata), its per-month check results, and at the end the step's failure
        when the verdict asks for one. Code before the loop runs before the push, after it once
        the step succeeded; every event must be yielded, changed or not (docs/dagster.md).
        """
        yield from events

    def own_resources(self, project_root: Path) -> ConnectionResources:
        """The service and snapshot this component's ``defs.yaml`` sets, over the project's."""
        state = self.state_path(project_root)
        return ConnectionResources(
            service=own_service(self.service) if self.service is not None else None,
            snapshot=(
                own_snapshot(self.snapshot, state, project_root)
                if self.snapshot is not None
                else None
            ),
        )

    def state_path(self, project_root: Path) -> Path:
        path = Path(self.state_dir).expanduser()
        return (path if path.is_absolute() else project_root / path).resolve()


@functools.cache
def shared_resources(state_dir: Path) -> dict[str, object]:
    """One set of resource objects per state folder.

    ``Definitions.merge`` accepts a resource key twice only when it is the same object, so every
    component of a project hands back these very objects.
    """
    return default_resources(state_dir)


def folder_definitions(
    folder: Path, project_root: Path, resources: Mapping[str, object] | None = None
) -> dg.Definitions:
    """One ``PmsSyncComponent`` per mapping file of ``folder``, resolved from its attributes as
    ``dg`` resolves a ``defs.yaml``: pms-sync's own code location, ``make demo`` and the tests.

    ``resources``: as in ``PmsSyncComponent.definitions``, the same objects for every
    connection (so that they merge).
    """
    # discover refuses two mapping files naming one connection, with both paths.
    return dg.Definitions.merge(
        *(
            _component({"mapping": str(connection.path)}).definitions_of(
                connection, project_root, resources
            )
            for connection in discover(folder)
        ),
        # Runs of an asset selection (the UI's Materialize) run in one process too, as the
        # connections' jobs do (pms_sync.jobs); a host project keeps its own default.
        dg.Definitions(executor=dg.in_process_executor),
    )


def _component(attributes: dict[str, object]) -> PmsSyncComponent:
    """The component of these ``defs.yaml`` attributes, validated and resolved as ``dg`` does."""
    model = TypeAdapter(PmsSyncComponent.model()).validate_python(attributes)
    return PmsSyncComponent.resolve_from_model(dg.ResolutionContext.default(), model)
