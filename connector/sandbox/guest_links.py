"""The guest links the sandbox makes up for a reservation: deterministic (a hash of account
and reservation id), so the links endpoint, outgoing events and tests agree on them."""

from __future__ import annotations

import hashlib


def guest_links(links_base_url: str, account_id: str, reservation_id: str) -> dict[str, str]:
    """``guestApp``, ``chatLink``, ``onlineCheckInLink`` and ``onlineCheckOutLink``."""
    digest = hashlib.blake2b(f"{account_id}/{reservation_id}".encode(), digest_size=10).hexdigest()
    base = f"{links_base_url.rstrip('/')}/{account_id}"
    return {
        "guestApp": f"{base}/app/{digest}",
        "chatLink": f"{base}/chat/{digest}",
        "onlineCheckInLink": f"{base}/check-in/{digest}",
        "onlineCheckOutLink": f"{base}/check-out/{digest}",
    }
