"""What every handler of one sandbox server shares: its config, store, faults, limits, stats
and the dispatcher of outgoing events."""

from __future__ import annotations

from dataclasses import dataclass, field

from connector.sandbox.config import SandboxConfig
from connector.sandbox.events import EventDispatcher
from connector.sandbox.faults import FaultInjector
from connector.sandbox.rate_limits import RateLimiter
from connector.sandbox.stats import RequestStats
from connector.sandbox.store import SandboxStore


@dataclass
class SandboxState:
    config: SandboxConfig
    store: SandboxStore
    faults: FaultInjector
    rate_limiter: RateLimiter
    events: EventDispatcher
    stats: RequestStats = field(default_factory=RequestStats)
    sync_token_accounts: dict[str, frozenset[str]] = field(default_factory=dict)
    shutting_down: bool = False
    """Set when the server stops: requests hung by a timeout fault are then released."""

    @classmethod
    def build(cls, config: SandboxConfig, store: SandboxStore) -> SandboxState:
        return cls(
            config=config,
            store=store,
            faults=FaultInjector(config.faults),
            rate_limiter=RateLimiter(config.rate_limits),
            events=EventDispatcher(config, store),
            sync_token_accounts=config.accounts_of_sync_token(),
        )

    def reset(self) -> None:
        """Back to the state right after start, minus the records: accounts and tokens stay."""
        self.events.reset()
        self.store.clear()
        self.stats.reset()
        self.faults.configure(self.config.faults)
        self.rate_limiter.reset()
