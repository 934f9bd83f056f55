"""Multi-account connections through the Open API: accounts discovered by external id, their
tokens kept valid, and properties offboarded when an account leaves the export.

``AccountDiscovery`` is what a run uses (``connector.pipeline``); ``AccountDirectory`` is the
client's accounts as the service lists and looks them up; ``DiscoveredTokens`` the push's
token source; the property functions decide and send ``PUT /properties/{id}``.
"""

from connector.accounts._directory import AccountDirectory, DirectoryStats
from connector.accounts._discovery import CREDENTIALS_NEEDED, AccountDiscovery, AccountsReport
from connector.accounts._properties import (
    REASON_PROPERTY_REACTIVATED,
    PropertyAction,
    PropertyChange,
    PropertyOutcome,
    PropertyReport,
    apply_properties,
    guard_properties,
    held_properties,
    plan_properties,
    planned_report,
    property_effects,
    status_records,
    with_units_kept_inactive,
    withhold_unreactivated,
)
from connector.accounts._resolve import ACCOUNT_FIELD, external_ids_of, resolve_batch
from connector.accounts._settings import TOKEN_CACHE_FILE, OpenApiSettings, PropertyPolicy
from connector.accounts._tokens import DiscoveredTokens

__all__ = [
    "ACCOUNT_FIELD",
    "CREDENTIALS_NEEDED",
    "REASON_PROPERTY_REACTIVATED",
    "TOKEN_CACHE_FILE",
    "AccountDirectory",
    "AccountDiscovery",
    "AccountsReport",
    "DirectoryStats",
    "DiscoveredTokens",
    "OpenApiSettings",
    "PropertyAction",
    "PropertyChange",
    "PropertyOutcome",
    "PropertyPolicy",
    "PropertyReport",
    "apply_properties",
    "external_ids_of",
    "guard_properties",
    "held_properties",
    "plan_properties",
    "planned_report",
    "property_effects",
    "resolve_batch",
    "status_records",
    "with_units_kept_inactive",
    "withhold_unreactivated",
]
