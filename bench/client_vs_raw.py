"""The client stack against the raw aiohttp generator, interleaved, in one process.

``python -m bench.client_vs_raw``: one sandbox process; three rounds of 2,000 identical
accommodation upserts through ``ServiceClient`` (aiohttp transport, concurrency 16) and through
the raw generator (same envelope, same concurrency), alternating, so both see the same load.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
from pathlib import Path

from bench.peers import raw_post
from connector.canonical import canonical_json
from connector.client._client import _envelope
from connector.client._config import TokenPlacement, Transport
from connector.client.bench import _UNIT, measure
from connector.contract import SYNC_PATHS, Entity, SyncEvent
from connector.sandbox.testing import sandbox_process

N = 2000


def main() -> None:
    with tempfile.TemporaryDirectory() as d, sandbox_process(Path(d)) as sb:
        body = _envelope(
            Entity.ACCOMMODATION,
            "demo",
            SyncEvent.UPDATE,
            canonical_json(_UNIT),
            "demo-token",
            frozenset({TokenPlacement.WISHBOX_HEADER}),
        )
        bodies = [(SYNC_PATHS[Entity.ACCOMMODATION], body)] * N
        client, raw = [], []
        for i in range(3):
            m = asyncio.run(measure(sb.base_url, "demo-token", "demo", Transport.AIOHTTP, 16, N))
            client.append(m.per_second)
            r = raw_post(sb.base_url, bodies, 16)
            raw.append(N / r["seconds"])
            print(
                f"round {i}: ServiceClient {client[-1]:.0f} req/s, raw aiohttp {raw[-1]:.0f} req/s",
                flush=True,
            )
        print(
            f"median ServiceClient {statistics.median(client):.0f}, raw {statistics.median(raw):.0f}, ratio {statistics.median(client) / statistics.median(raw):.2f}"
        )


if __name__ == "__main__":
    main()
