"""Rate-limit state shared by the runs of one deployment, kept in the snapshot store.

Each run's limiter starts from the requests earlier runs sent with the same token to the same
service within the longest window (an hour), instead of assuming a fresh limit: a backfill of
many partitions, run one after another, shares one budget. Runs on one DuckDB snapshot are
serialised by its single-writer lock, so read-at-start / write-at-end is exact for them; the
service's X-RateLimit-Remaining-* headers cover any process that does not share the file.

On PostgreSQL, runs of different scopes overlap: there a snapshot offers ``rate_ledger()``,
the log every run admits each request against as it goes (``connector.snapshot._rate_ledger``),
so runs sharing a token together stay under its limits; nothing is read at the start or
replaced at the end.

The key names the service and a fingerprint of the token (never the token itself).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from connector.client._client import ServiceClient
from connector.client._limiter import WindowLimiter


def limiter_key(base_url: str, token: str) -> str:
    fingerprint = hashlib.sha256(token.encode()).hexdigest()[:16]
    return f"{base_url.rstrip('/')}#{fingerprint}"


@dataclass
class SharedState:
    """What ``load_shared_state`` set up, for ``save_shared_state``."""

    keys: dict[str, str] = field(default_factory=dict)  # token → key
    ledger: Any = None  # the snapshot's rate ledger (PostgreSQL), closed by the save


def load_shared_state(snapshot: Any, client: ServiceClient) -> SharedState:
    """Preload every token's limiter from the snapshot, or share the snapshot's ledger."""
    state = SharedState()
    load = getattr(snapshot, "limiter_history", None)
    open_ledger = getattr(snapshot, "rate_ledger", None)
    tokens = {client.tokens.default, *client.tokens.per_account.values()} - {None, ""}
    for token in sorted(t for t in tokens if t):
        limiter = client.limiter_of(token)
        if not isinstance(limiter, WindowLimiter) or (load is None and open_ledger is None):
            continue
        state.keys[token] = limiter_key(client.config.base_url, token)
        if open_ledger is not None and not getattr(snapshot, "read_only", False):
            if state.ledger is None:
                state.ledger = open_ledger()
            limiter.share(state.ledger, state.keys[token])
        elif load is not None:
            limiter.preload(load(state.keys[token]))
    return state


def save_shared_state(snapshot: Any, client: ServiceClient, state: SharedState) -> None:
    if state.ledger is not None:
        for limiter in client.window_limiters().values():
            limiter.share(None)
        state.ledger.close()  # every request is in it already
        return
    save = getattr(snapshot, "save_limiter_history", None)
    if save is None:
        return
    for token, limiter in client.window_limiters().items():
        if limiter.sent or limiter.foreign:
            key = state.keys.get(token) or limiter_key(client.config.base_url, token)
            save(key, limiter.history())
