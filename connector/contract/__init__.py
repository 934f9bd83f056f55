"""The service interface as pydantic models: every resource, envelope and response of the spec."""

from connector.contract._base import RequestModel, ResponseModel
from connector.contract._openapi_models import (
    Account,
    AccountsPage,
    ApiError,
    ChatAuthorType,
    ChatMessage,
    ConditionFilterType,
    ConditionOperator,
    GuestLinks,
    OutgoingEvent,
    OutgoingEventName,
    Pagination,
    PropertyStatusResponse,
    PropertyStatusUpdate,
    StoredWebhookConfig,
    TokenRequest,
    TokenResponse,
    WebhookCondition,
    WebhookConfig,
    WebhookConfigList,
    WebhookHeader,
)
from connector.contract._resources import (
    CANCELLED,
    Accommodation,
    AccommodationStatus,
    AdditionalCharge,
    AdditionalField,
    BedType,
    Coordinates,
    Guest,
    PrimaryGuest,
    Reservation,
    RoomType,
    RoomTypeAdditionalField,
    UnitReservation,
)
from connector.contract._sync import (
    ENVELOPES,
    RESOURCES,
    SYNC_PATHS,
    AccommodationEnvelope,
    AccommodationSyncResponse,
    Entity,
    ReservationEnvelope,
    ReservationSyncResponse,
    SyncEvent,
    validate_json_body,
)
from connector.contract.formats import iso_countries, iso_currencies

__all__ = [
    "CANCELLED",
    "CONTRACT_FINGERPRINT",
    "ENVELOPES",
    "RESOURCES",
    "SYNC_PATHS",
    "Accommodation",
    "AccommodationEnvelope",
    "AccommodationStatus",
    "AccommodationSyncResponse",
    "Account",
    "AccountsPage",
    "AdditionalCharge",
    "AdditionalField",
    "ApiError",
    "BedType",
    "ChatAuthorType",
    "ChatMessage",
    "ConditionFilterType",
    "ConditionOperator",
    "Coordinates",
    "Entity",
    "Guest",
    "GuestLinks",
    "OutgoingEvent",
    "OutgoingEventName",
    "Pagination",
    "PrimaryGuest",
    "PropertyStatusResponse",
    "PropertyStatusUpdate",
    "RequestModel",
    "Reservation",
    "ReservationEnvelope",
    "ReservationSyncResponse",
    "ResponseModel",
    "RoomType",
    "RoomTypeAdditionalField",
    "StoredWebhookConfig",
    "SyncEvent",
    "TokenRequest",
    "TokenResponse",
    "UnitReservation",
    "WebhookCondition",
    "WebhookConfig",
    "WebhookConfigList",
    "WebhookHeader",
    "iso_countries",
    "iso_currencies",
    "validate_json_body",
]


def _contract_fingerprint() -> str:
    # The request models' JSON schemas and the package version: a change of either (a new
    # check is a code change, released as a new version) invalidates every validation cached
    # in a snapshot (connector.snapshot.validated_payloads).
    import hashlib
    import json
    from importlib.metadata import PackageNotFoundError, version

    try:
        release = version("pms-sync")
    except PackageNotFoundError:  # running from a source tree that is not installed
        release = "source"
    schemas = {str(entity): model.model_json_schema() for entity, model in RESOURCES.items()}
    text = json.dumps([release, schemas], sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


CONTRACT_FINGERPRINT = _contract_fingerprint()
"""Identifies the contract that validated a payload (see connector.snapshot)."""
