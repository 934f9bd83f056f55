"""Plan and apply a webhooks file against the service's Open API."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from connector.client import OpenApiClient
from connector.errors import AuthenticationError, ConfigError, ServiceError
from connector.secrets import mask_text
from connector.settings import SyncSettings
from connector.webhooks._file import WebhooksFile, load_webhooks
from connector.webhooks._plan import WebhookAction, WebhookChange, WebhooksPlan, plan_webhooks

NO_OPEN_API_CLIENT = (
    "outgoing webhooks are managed through the Open API: set the client's credentials, "
    "PMS_SYNC_CLIENT_ID and PMS_SYNC_CLIENT_SECRET (or --client-id / --client-secret)"
)


@dataclass(frozen=True)
class AppliedChange:
    change: WebhookChange
    outcome: str  # applied | failed
    webhook_id: str | None = None  # the _id created, updated or deleted
    message: str | None = None
    http_status: int | None = None
    request_id: str | None = None

    def to_json_dict(self) -> dict[str, Any]:
        return self.change.to_json_dict() | {
            "id": self.webhook_id,
            "outcome": self.outcome,
            "message": self.message,
            "http_status": self.http_status,
            "request_id": self.request_id,
        }


@dataclass
class WebhooksReport:
    file: str
    open_api_url: str
    plan: WebhooksPlan
    applied: list[AppliedChange] | None = None  # None: a plan, nothing sent
    requests: int = 0
    stopped: str | None = None  # the client's credentials were refused while applying

    @property
    def failed(self) -> list[AppliedChange]:
        return [item for item in self.applied or [] if item.outcome == "failed"]

    @property
    def status(self) -> str:
        if self.stopped is not None:
            return "unauthorized"
        return "incomplete" if self.failed else "ok"

    def to_json_dict(self) -> dict[str, Any]:
        document = {
            "status": self.status,
            "file": self.file,
            "open_api_url": self.open_api_url,
            "plan": self.plan.to_json_dict(),
            "requests": self.requests,
            "stopped": self.stopped,
        }
        if self.applied is not None:
            document["applied"] = [item.to_json_dict() for item in self.applied]
            document["failed"] = len(self.failed)
        return document


def plan_webhooks_file(path: str | Path, settings: SyncSettings) -> WebhooksReport:
    """What applying the file would change; sends only GET requests."""
    desired = load_webhooks(path)
    return asyncio.run(_reconcile(str(path), desired, settings, apply=False))


def apply_webhooks_file(path: str | Path, settings: SyncSettings) -> WebhooksReport:
    """Make the service's configurations those of the file: create, update, delete."""
    desired = load_webhooks(path)
    return asyncio.run(_reconcile(str(path), desired, settings, apply=True))


async def _reconcile(
    file: str, desired: WebhooksFile, settings: SyncSettings, *, apply: bool
) -> WebhooksReport:
    open_api = settings.open_api
    if open_api is None:
        raise ConfigError(NO_OPEN_API_CLIENT)
    api = OpenApiClient(
        replace(settings.client, base_url=open_api.base_url),
        open_api.credentials,
        cache_path=open_api.token_cache,
        renew_margin=open_api.renew_margin_s,
    )
    async with api:
        plan = plan_webhooks(desired, await api.webhooks())
        report = WebhooksReport(file=file, open_api_url=open_api.base_url, plan=plan)
        if apply:
            report.applied = []
            for change in plan.changes:
                try:
                    report.applied.append(await _apply(api, change))
                except AuthenticationError as error:
                    report.stopped = mask_text(str(error))
                    break
                except ServiceError as error:
                    report.applied.append(
                        AppliedChange(
                            change,
                            "failed",
                            change.webhook_id,
                            mask_text(str(error)),
                            error.status,
                            error.request_id,
                        )
                    )
        report.requests = api.requests
    return report


async def _apply(api: OpenApiClient, change: WebhookChange) -> AppliedChange:
    if change.action is WebhookAction.CREATE:
        assert change.config is not None
        created = await api.create_webhook(change.config)
        return AppliedChange(change, "applied", created.id, request_id=api.last_request_id)
    assert change.webhook_id is not None
    if change.action is WebhookAction.UPDATE:
        assert change.config is not None
        await api.update_webhook(change.webhook_id, change.config)
    else:
        await api.delete_webhook(change.webhook_id)
    return AppliedChange(change, "applied", change.webhook_id, request_id=api.last_request_id)
