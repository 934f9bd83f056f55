"""Which token authenticates which account on the sync webhooks.

:class:`AccountTokens` holds tokens given by the operator (a tokens file, one token for every
account); they never change during a run. A :class:`TokenSource` may also hand out tokens
that expire and can be renewed (``connector.accounts.DiscoveredTokens``: account-level tokens
from the Open API), which is why the client asks for a token asynchronously, per request.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from connector.secrets import MASK, checked_secret

MISSING_TOKEN_HINT = (
    "set PMS_SYNC_TOKEN or add the account to the tokens file (PMS_SYNC_TOKENS_FILE), or "
    "configure an Open API client (PMS_SYNC_CLIENT_ID, PMS_SYNC_CLIENT_SECRET) whose scope "
    "covers the account"
)
REFUSED_TOKEN_HINT = "fix the token (PMS_SYNC_TOKEN or PMS_SYNC_TOKENS_FILE) and run again"


@runtime_checkable
class TokenSource(Protocol):
    """Where the sync webhooks' token of each account comes from."""

    @property
    def default(self) -> str | None:
        """The token of every account without its own (a single configured token)."""
        ...

    @property
    def per_account(self) -> Mapping[str, str]:
        """The tokens known now, per account (rate-limit state is kept per token)."""
        ...

    async def token_for(self, account_id: str) -> str | None:
        """The token to send for ``account_id`` now (renewed first when it nears expiry)."""
        ...

    async def renew(self, account_id: str, refused: str) -> str | None:
        """A new token after ``refused`` met a 401, or None when it cannot be renewed."""
        ...

    def missing_hint(self, account_id: str) -> str:
        """What to do when there is no token for ``account_id``."""
        ...

    def refused_hint(self, account_id: str) -> str:
        """What to do when the service refused the token of ``account_id`` for good."""
        ...

    async def open(self) -> None:
        """Called when the client opens (inside the event loop of the run)."""
        ...

    async def close(self) -> None: ...


@dataclass(frozen=True)
class AccountTokens:
    """Per-account tokens, with an optional token for every other account."""

    per_account: Mapping[str, str] = field(default_factory=dict)
    default: str | None = None

    def __post_init__(self) -> None:
        # Every token the client may send is masked wherever it could be echoed or logged, and
        # checked (a reader names the setting first; this holds for every other caller).
        default = checked_secret(self.default, "the sync token for every account") or None
        per_account = {
            account: checked_secret(token, "the sync token", account=account) or ""
            for account, token in self.per_account.items()
        }
        object.__setattr__(self, "default", default)
        object.__setattr__(self, "per_account", per_account)

    def for_account(self, account_id: str) -> str | None:
        return self.per_account.get(account_id, self.default)

    def given_for(self, account_id: str) -> bool:
        """Whether the operator gave a token that covers ``account_id`` (it wins over any
        token discovered through the Open API)."""
        return bool(self.for_account(account_id))

    async def token_for(self, account_id: str) -> str | None:
        return self.for_account(account_id)

    async def renew(self, account_id: str, refused: str) -> None:
        return None  # a configured token is fixed: a 401 means it must be fixed by hand

    def missing_hint(self, account_id: str) -> str:
        return MISSING_TOKEN_HINT

    def refused_hint(self, account_id: str) -> str:
        return REFUSED_TOKEN_HINT

    async def open(self) -> None:
        return None

    async def close(self) -> None:
        return None

    def __repr__(self) -> str:  # never print a token
        accounts = ", ".join(sorted(self.per_account))
        return f"AccountTokens(per_account=[{accounts}], default={MASK if self.default else None})"
