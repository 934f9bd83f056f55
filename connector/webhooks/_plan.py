"""What `pms-sync webhooks apply` would change at the service, field by field.

Configurations are matched by name. A name of the file the service lacks is a ``create``; a
name both have whose members differ is an ``update`` (a full replacement, ``PUT``); a
configuration of the service the file does not name (among those it manages, see
``WebhooksFile.prefix``) is a ``delete``, and so is a second configuration of one name.
Header values are never shown: a changed value reads ``*** (changed)``; a URL's password
neither.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from connector.contract import StoredWebhookConfig, WebhookConfig
from connector.secrets import MASK, redact_url
from connector.webhooks._file import WebhooksFile


class WebhookAction(StrEnum):
    CREATE = "create"
    UPDATE = "update"
    DELETE = "delete"


@dataclass(frozen=True)
class FieldChange:
    field: str  # a member (``url``) or one header (``headers.X-Receiver-Secret``)
    old: Any  # None: absent; header values masked
    new: Any


@dataclass(frozen=True)
class WebhookChange:
    action: WebhookAction
    name: str
    webhook_id: str | None  # the service's _id (None for a create)
    fields: tuple[FieldChange, ...] = ()
    config: WebhookConfig | None = None  # what is sent (create, update)
    reason: str = ""

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "action": str(self.action),
            "name": self.name,
            "id": self.webhook_id,
            "reason": self.reason or None,
            "fields": [{"field": f.field, "old": f.old, "new": f.new} for f in self.fields],
        }


@dataclass
class WebhooksPlan:
    changes: list[WebhookChange] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)  # names identical at the service
    unmanaged: list[str] = field(default_factory=list)  # service names outside the prefix

    @property
    def counts(self) -> dict[str, int]:
        counts = {str(action): 0 for action in WebhookAction}
        for change in self.changes:
            counts[str(change.action)] += 1
        return counts | {"unchanged": len(self.unchanged)}

    @property
    def empty(self) -> bool:
        return not self.changes

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "counts": self.counts,
            "changes": [change.to_json_dict() for change in self.changes],
            "unchanged": self.unchanged,
            "unmanaged": self.unmanaged,
        }


def plan_webhooks(desired: WebhooksFile, current: list[StoredWebhookConfig]) -> WebhooksPlan:
    """The changes that make the service's configurations those of ``desired``."""
    plan = WebhooksPlan()
    by_name: dict[str, StoredWebhookConfig] = {}
    for stored in current:
        if not desired.manages(stored.name):
            plan.unmanaged.append(stored.name)
        elif stored.name in by_name:
            plan.changes.append(
                WebhookChange(
                    WebhookAction.DELETE,
                    stored.name,
                    stored.id,
                    reason="a second configuration of this name (plans match by name)",
                )
            )
        else:
            by_name[stored.name] = stored
    wanted = {spec.name: spec.to_config() for spec in desired.webhooks}
    for name, config in wanted.items():
        existing = by_name.get(name)
        if existing is None:
            plan.changes.append(
                WebhookChange(
                    WebhookAction.CREATE, name, None, _differences({}, _members(config)), config
                )
            )
            continue
        differences = _differences(_members(_comparable(existing)), _members(config))
        if differences:
            plan.changes.append(
                WebhookChange(WebhookAction.UPDATE, name, existing.id, differences, config)
            )
        else:
            plan.unchanged.append(name)
    for name, stored in by_name.items():
        if name not in wanted:
            plan.changes.append(
                WebhookChange(
                    WebhookAction.DELETE, name, stored.id, reason="not in the webhooks file"
                )
            )
    return plan


def _comparable(stored: StoredWebhookConfig) -> WebhookConfig:
    """The service's configuration as the members a client sets (``_id`` and members the
    service adds are not the file's to manage)."""
    members = stored.model_dump(include=set(WebhookConfig.model_fields), exclude_none=True)
    return WebhookConfig.model_validate(members, strict=False)


def _members(config: WebhookConfig) -> dict[str, Any]:
    members = config.to_json_dict()
    # An empty list and an absent member mean the same to the service.
    return {key: value for key, value in members.items() if value != []}


def _differences(old: dict[str, Any], new: dict[str, Any]) -> tuple[FieldChange, ...]:
    changes: list[FieldChange] = []
    for member in [*new, *(key for key in old if key not in new)]:
        if member == "headers":
            changes += _header_differences(old.get("headers") or [], new.get("headers") or [])
        elif old.get(member) != new.get(member):
            was, now = old.get(member), new.get(member)
            if member == "url":  # a URL with user:password@ shows without the password
                was, now = (redact_url(v) if isinstance(v, str) else v for v in (was, now))
            changes.append(FieldChange(member, was, now))
    return tuple(changes)


def _header_differences(old: list[dict[str, str]], new: list[dict[str, str]]) -> list[FieldChange]:
    before = {item["key"]: item["value"] for item in old}
    after = {item["key"]: item["value"] for item in new}
    changes: list[FieldChange] = []
    for key in [*after, *(k for k in before if k not in after)]:
        if before.get(key) == after.get(key):
            continue
        was = None if key not in before else MASK
        now = None if key not in after else (MASK if key not in before else f"{MASK} (changed)")
        changes.append(FieldChange(f"headers.{key}", was, now))
    return changes
