"""Outgoing-webhook configurations as code (spec §4.7, §6.2; docs/loop.md): a webhooks file
per connection, planned against the service (field-level differences, header values masked)
and applied (create, update, delete; matched by name)."""

from connector.webhooks._file import (
    FILTER_NAMES,
    RENAMED_EVENTS,
    ConditionSpec,
    WebhooksFile,
    WebhooksFileError,
    WebhookSpec,
    load_mapping_webhooks,
    load_webhooks,
    webhooks_schema,
)
from connector.webhooks._plan import (
    FieldChange,
    WebhookAction,
    WebhookChange,
    WebhooksPlan,
    plan_webhooks,
)
from connector.webhooks._run import (
    NO_OPEN_API_CLIENT,
    AppliedChange,
    WebhooksReport,
    apply_webhooks_file,
    plan_webhooks_file,
)

__all__ = [
    "FILTER_NAMES",
    "NO_OPEN_API_CLIENT",
    "RENAMED_EVENTS",
    "AppliedChange",
    "ConditionSpec",
    "FieldChange",
    "WebhookAction",
    "WebhookChange",
    "WebhookSpec",
    "WebhooksFile",
    "WebhooksFileError",
    "WebhooksPlan",
    "WebhooksReport",
    "apply_webhooks_file",
    "load_mapping_webhooks",
    "load_webhooks",
    "plan_webhooks",
    "plan_webhooks_file",
    "webhooks_schema",
]
