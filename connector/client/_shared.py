"""Rate-limit state shared by the runs of one deployment, kept in the snapshot store.

Each run's limiter starts from the requests earlier runs sent with the same token to the same
service within the longest window (an hour), instead of assuming a fresh limit: a backfill of
many partitions, run one after another, shares one budget. Runs on one DuckDB snapshot are
serialised by its single-writer lock, so read-at-start / write-at-end is exact for them; the
service's X-RateLimit-Remaining-* headers cover any process that does not share the file.

The key names the service and a fingerprint of the token (never the token itself).
"""

from __future__ import annotations

import hashlib
from typing import Any

from connector.client._client import ServiceClient
from connector.client._limiter import WindowLimiter


def limiter_key(base_url: str, token: str) -> str:
    fingerprint = hashlib.sha256(token.encode()).hexdigest()[:16]
    return f"{base_url.rstrip('/')}#{fingerprint}"


def load_shared_state(snapshot: Any, client: ServiceClient) -> dict[str, str]:
    """Preload every token's limiter from the snapshot; returns token → key for the save."""
    keys: dict[str, str] = {}
    load = getattr(snapshot, "limiter_history", None)
    tokens = {client.tokens.default, *client.tokens.per_account.values()} - {None, ""}
    for token in sorted(t for t in tokens if t):
        limiter = client.limiter_of(token)
        if not isinstance(limiter, WindowLimiter) or load is None:
            continue
        keys[token] = limiter_key(client.config.base_url, token)
        limiter.preload(load(keys[token]))
    return keys


def save_shared_state(snapshot: Any, client: ServiceClient, keys: dict[str, str]) -> None:
    save = getattr(snapshot, "save_limiter_history", None)
    if save is None:
        return
    for token, limiter in client.window_limiters().items():
        if limiter.sent or limiter.foreign:
            key = keys.get(token) or limiter_key(client.config.base_url, token)
            save(key, limiter.history())
