"""The configuration: every ``PMS_SYNC_*`` setting declared once (``_model``), read from the
environment or given explicitly (``_reading``), and projected onto the CLI's options and the
Dagster resources' members, whose variables and defaults come from here.

The only package that reads ``PMS_SYNC_*`` variables (tests/test_settings_spine.py); the
library's settings of a sync are built from it by :mod:`connector.settings`. It imports nothing
of the library at load time but errors and secrets, so every module may import it.
"""

from connector.config._model import (
    DEFAULT_BASE_URL,
    DEFAULT_CONCURRENCY,
    DEFAULT_FULL_READ_INTERVAL,
    DEFAULT_HORIZON_DAYS,
    DEFAULT_MAX_ATTEMPTS,
    DEFAULT_MAX_DURATION_S,
    DEFAULT_MEMORY_LIMIT,
    DEFAULT_READ_TIMEOUT_S,
    DEFAULT_SNAPSHOT,
    SECTIONS,
    CliSection,
    InputSection,
    OpenApiSection,
    ReceiverSection,
    RunSection,
    SandboxSection,
    ServiceSection,
    Settings,
    environment_without_dagster_member,
)
from connector.config._reading import FALSE_WORDS, TRUE_WORDS, Section, parse_flag
from connector.config._table import settings_table

__all__ = [
    "DEFAULT_BASE_URL",
    "DEFAULT_CONCURRENCY",
    "DEFAULT_FULL_READ_INTERVAL",
    "DEFAULT_HORIZON_DAYS",
    "DEFAULT_MAX_ATTEMPTS",
    "DEFAULT_MAX_DURATION_S",
    "DEFAULT_MEMORY_LIMIT",
    "DEFAULT_READ_TIMEOUT_S",
    "DEFAULT_SNAPSHOT",
    "FALSE_WORDS",
    "SECTIONS",
    "TRUE_WORDS",
    "CliSection",
    "InputSection",
    "OpenApiSection",
    "ReceiverSection",
    "RunSection",
    "SandboxSection",
    "Section",
    "ServiceSection",
    "Settings",
    "environment_without_dagster_member",
    "parse_flag",
    "settings_table",
]
