"""The service and snapshot a connection's steps use: its component's own, else the project's.

A component whose ``defs.yaml`` sets ``service:`` or ``snapshot:`` holds that resource as a
value and hands it to its steps, as dagster-sling's component hands its ``resource`` to its
asset's body: it takes no resource key, so two components never collide on one. Without them
the steps take the project's shared ``service`` and ``snapshot`` by key, as the run config of
``sync_checks`` (the approvals) and ``sources`` always do (docs/decisions.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import dagster as dg

from pms_sync.resources import (
    ServiceResource,
    SnapshotResource,
    SourcesResource,
    SyncChecksResource,
)

SERVICE = "service"
SNAPSHOT = "snapshot"
SOURCES = "sources"
SYNC_CHECKS = "sync_checks"

_Resource = TypeVar("_Resource", bound=dg.ConfigurableResource)


class _WithResources(Protocol):
    """A step's or a sensor's context: the project's resources by key."""

    @property
    def resources(self) -> Any: ...


@dataclass(frozen=True, eq=False)
class ConnectionResources:
    """A connection's own service and snapshot; None: the project's shared resource."""

    service: ServiceResource | None = None
    snapshot: SnapshotResource | None = None

    def keys(self, *names: str) -> set[str]:
        """The project's resource keys a step using ``names`` requires: an own one needs none."""
        own = {SERVICE: self.service, SNAPSHOT: self.snapshot}
        return {name for name in names if own.get(name) is None}

    def service_of(self, context: _WithResources) -> ServiceResource:
        if self.service is not None:
            return _ready(self.service)
        return _shared(context, SERVICE, ServiceResource)

    def snapshot_of(self, context: _WithResources) -> SnapshotResource:
        if self.snapshot is not None:
            return _ready(self.snapshot)
        return _shared(context, SNAPSHOT, SnapshotResource)

    @property
    def snapshot_location(self) -> str | None:
        """The own snapshot's path or URL (it decides the steps' pool); None: the project's."""
        return self.snapshot.path if self.snapshot is not None else None


def sources_of(context: _WithResources) -> SourcesResource:
    return _shared(context, SOURCES, SourcesResource)


def sync_checks_of(context: _WithResources) -> SyncChecksResource:
    return _shared(context, SYNC_CHECKS, SyncChecksResource)


def _shared(context: _WithResources, key: str, kind: type[_Resource]) -> _Resource:
    resource = getattr(context.resources, key)
    if not isinstance(resource, kind):
        raise dg.DagsterInvariantViolationError(
            f"the resource {key!r} is a {type(resource).__name__}, not a {kind.__name__}"
        )
    return resource


def _ready(resource: _Resource) -> _Resource:
    """The resource with its EnvVar members read, as Dagster reads a bound resource's when the
    step starts. pms-sync's resources tear nothing down, so leaving the context at once is safe."""
    with resource.process_config_and_initialize_cm() as ready:
        return ready
