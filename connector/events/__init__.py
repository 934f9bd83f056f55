"""Receiving the service's outgoing events (spec §6.2, docs/loop.md): ``pms-sync receive``
serves ``POST /events/{connection}``, checks the secret header, bounds the body, stores each
event once in a DuckDB file of its own (``events.duckdb``), and answers at once.

``write_new_events`` writes a connection's events where its mapping declares, each
destination only the events it does not hold yet (a cursor per destination, kept in the
store): ``pms-sync events write`` and Dagster's ``<connection>/service_events`` both call it.
"""

from connector.events._app import create_receiver_app, event_key
from connector.events._server import (
    BackgroundReceiver,
    ReceiverExposedError,
    build_server,
    exposure_warning,
    serve_forever,
)
from connector.events._settings import (
    DEFAULT_PORT,
    DEFAULT_SECRET_HEADER,
    EVENTS_FILE,
    ReceiverSettings,
    events_store_path,
    receiver_settings,
)
from connector.events._store import (
    EVENT_COLUMN_TYPES,
    EVENT_KEY,
    DestinationWrite,
    EventsWriteReport,
    NewEvents,
    last_event_seq,
    new_events,
    write_new_events,
)
from connector.events._writer import EventWriter

__all__ = [
    "DEFAULT_PORT",
    "DEFAULT_SECRET_HEADER",
    "EVENTS_FILE",
    "EVENT_COLUMN_TYPES",
    "EVENT_KEY",
    "BackgroundReceiver",
    "DestinationWrite",
    "EventWriter",
    "EventsWriteReport",
    "NewEvents",
    "ReceiverExposedError",
    "ReceiverSettings",
    "build_server",
    "create_receiver_app",
    "event_key",
    "events_store_path",
    "exposure_warning",
    "last_event_seq",
    "new_events",
    "receiver_settings",
    "serve_forever",
    "write_new_events",
]
