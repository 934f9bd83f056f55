"""Guest links written back to the PMS (spec §4.4, docs/loop.md).

After reservations are synced, the links of upcoming arrivals (check-in within the policy's
days ahead, not cancelled) are fetched from the Open API, soonest arrival first, within a
budget and the client's rate limits; the rest waits in a backlog with an ETA. Links are kept
in the snapshot and fetched again only when missing or older than the policy allows, then
written back where the mapping declares (``links: destination:``).
"""

from connector.links._fetch import FetchResult, LinkFailure, LinkRequest, fetch_links
from connector.links._policy import LinksPolicy
from connector.links._report import LinksReport
from connector.links._run import (
    LINK_COLUMN_TYPES,
    LINK_KEY,
    NO_OPEN_API_CLIENT,
    links_for_mapping,
    run_links,
)

__all__ = [
    "LINK_COLUMN_TYPES",
    "LINK_KEY",
    "NO_OPEN_API_CLIENT",
    "FetchResult",
    "LinkFailure",
    "LinkRequest",
    "LinksPolicy",
    "LinksReport",
    "fetch_links",
    "links_for_mapping",
    "run_links",
]
