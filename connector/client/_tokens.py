"""Which token authenticates which account on the sync webhooks."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from connector.secrets import MASK, register_secret


@dataclass(frozen=True)
class AccountTokens:
    """Per-account tokens, with an optional token for every other account."""

    per_account: Mapping[str, str] = field(default_factory=dict)
    default: str | None = None

    def __post_init__(self) -> None:
        # Every token the client may send is masked wherever it could be echoed or logged.
        for token in (self.default, *self.per_account.values()):
            register_secret(token)

    def for_account(self, account_id: str) -> str | None:
        return self.per_account.get(account_id, self.default)

    def __repr__(self) -> str:  # never print a token
        accounts = ", ".join(sorted(self.per_account))
        return f"AccountTokens(per_account=[{accounts}], default={MASK if self.default else None})"
