"""Open API resources (spec §2.13, §2.14, §4.3-§4.7, §6.2).

Where the spec says "not shown", the shapes follow docs/decisions.md.
"""

from __future__ import annotations

from enum import IntEnum, StrEnum
from typing import Literal

from pydantic import ConfigDict, Field

from connector.contract._base import RequestModel, ResponseModel
from connector.contract._resources import AccommodationStatus
from connector.contract.formats import HTTP_URL_PATTERN, JsonInt, NonEmptyStr


class Account(ResponseModel):
    name: str
    externalId: str
    id: str | None = None
    token: str | None = None
    expires_in: int | None = Field(default=None, description="Token lifetime in seconds.")


class Pagination(ResponseModel):
    pageSize: int
    total: int
    pages: int
    page: int
    hasMore: bool


class AccountsPage(ResponseModel):
    data: list[Account]
    pagination: Pagination


class TokenRequest(RequestModel):
    """OAuth2 client-credentials grant (RFC 6749 §4.4), as a form or a JSON body."""

    grant_type: Literal["client_credentials"]
    client_id: NonEmptyStr
    client_secret: NonEmptyStr
    scope: str | None = None


class TokenResponse(ResponseModel):
    access_token: str
    token_type: str = "Bearer"
    expires_in: int = Field(description="Token lifetime in seconds.")
    scope: str | None = None


class ChatAuthorType(StrEnum):
    ADMIN = "admin"
    USER = "user"


class ChatMessage(ResponseModel):
    body: str
    author: str
    authorType: ChatAuthorType = Field(description='"admin" is the host, "user" the guest.')
    time: str
    sentVia: str | None = None
    hasAttachment: bool = False
    seen: bool = False


class GuestLinks(ResponseModel):
    guestApp: str
    chatLink: str
    onlineCheckInLink: str
    chatLastMessage: ChatMessage | None = None


class PropertyStatusUpdate(RequestModel):
    status: AccommodationStatus = Field(strict=False)


class PropertyStatusResponse(ResponseModel):
    id: str
    status: AccommodationStatus
    updatedSubUnits: int = 0


class OutgoingEventName(StrEnum):
    """Outgoing webhook events named by the spec (§6.2)."""

    RESERVATION_CREATED = "reservationCreated"
    PRE_CHECK_IN_STARTED = "preCheckInStarted"
    ORDER_DENIED = "orderDenied"
    ORDER_EXPIRED = "orderExpired"
    GUEST_LINK_OPENED_GUEST_APP = "guestLinkOpenedGuestApp"
    GUEST_LINK_OPENED_CHECK_IN = "guestLinkOpenedCheckIn"
    GUEST_LINK_OPENED_CHECK_OUT = "guestLinkOpenedCheckOut"


class ConditionFilterType(IntEnum):
    """Condition filter types documented publicly for a service with this interface."""

    BOOKING_SOURCE = 1
    RESERVATION_STATUS = 2
    NIGHTS = 6
    ADULTS = 10
    CHILDREN = 11
    COUNTRY = 15
    AGENT = 16
    MEMBERSHIP = 30


class ConditionOperator(StrEnum):
    EQ = "="
    NE = "!="
    GT = ">"
    LT = "<"
    GE = ">="
    LE = "<="
    RANGE = "range"
    EXISTS = "exists"
    NOT_EXISTS = "not exists"
    IN = "in"
    NOT_IN = "!in"


class WebhookCondition(RequestModel):
    # An int, not ConditionFilterType: the public list is explicitly incomplete ("…").
    filterType: JsonInt = Field(ge=1)
    op: ConditionOperator = Field(strict=False)
    value: str | JsonInt | float | bool | list[str] | list[JsonInt] | None = None
    secondValue: str | JsonInt | float | None = None


class WebhookHeader(RequestModel):
    key: NonEmptyStr
    value: str


class WebhookConfig(RequestModel):
    """An outgoing-webhook configuration as created or updated by a client."""

    name: NonEmptyStr
    event: OutgoingEventName = Field(strict=False)
    # A plain str: NonEmptyStr's own pattern would replace this one (the last pattern wins).
    url: str = Field(pattern=HTTP_URL_PATTERN)
    conditions: list[WebhookCondition] | None = None
    dataPoints: list[str] | None = None
    isEnabled: bool = True
    headers: list[WebhookHeader] | None = None
    notifyOnWebhookFailures: bool | None = None
    failureNotificationEmails: list[str] | None = None


class StoredWebhookConfig(WebhookConfig):
    """A webhook configuration as the service returns it, with its identifier."""

    # Parsed from a response (a dict from JSON): lax like every ResponseModel, so enum members
    # given as strings validate and members the service adds are kept.
    model_config = ConfigDict(strict=False, extra="allow")

    id: str = Field(alias="_id")


class WebhookConfigList(ResponseModel):
    """The outgoing-webhook configurations of the token's owner, oldest first."""

    data: list[StoredWebhookConfig]


class OutgoingEvent(ResponseModel):
    accountId: str
    event: OutgoingEventName
    resource: dict[str, object]


class ApiError(ResponseModel):
    """Error body of the Open API endpoints (the spec leaves it open; see decisions)."""

    error: str
    message: str
