"""Measure the sync-webhook throughput of the client stack, per transport and concurrency.

``python -m connector.client.bench --base-url http://127.0.0.1:8765 --token demo-token``
sends the same valid accommodation upsert ``--requests`` times through :class:`ServiceClient`
(retries off, no rate limit) for each transport and concurrency, and prints requests/second.
Run it against a sandbox started without faults and without rate limits.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

import click

from connector.canonical import canonical_json
from connector.client._client import ServiceClient
from connector.client._config import DEFAULT_BASE_URL, ClientConfig, RetryPolicy, Transport
from connector.client._sync import Delivery
from connector.client._tokens import AccountTokens
from connector.contract import Entity, SyncEvent

_UNIT = {
    "id": "bench-unit",
    "status": "ACTIVE",
    "name": "Benchmark room",
    "street": "Main",
    "streetNumber": "1",
    "country": "DE",
    "city": "Berlin",
    "wifiName": "guest",
    "wifiCode": "bench",
    "doorCode": "bench",
}


@dataclass(frozen=True)
class Measurement:
    transport: Transport
    concurrency: int
    requests: int
    seconds: float
    acknowledged: int

    @property
    def per_second(self) -> float:
        return self.requests / self.seconds if self.seconds else 0.0


async def measure(
    base_url: str, token: str, account: str, transport: Transport, concurrency: int, requests: int
) -> Measurement:
    config = ClientConfig(
        base_url=base_url,
        transport=transport,
        concurrency=concurrency,
        retry=RetryPolicy(max_attempts=1),
    )
    payload = canonical_json(_UNIT)
    remaining = requests
    acknowledged = 0
    async with ServiceClient(config, AccountTokens(default=token)) as client:
        await client.send_record(Entity.ACCOMMODATION, account, SyncEvent.UPDATE, payload)  # warm

        async def worker() -> None:
            nonlocal remaining, acknowledged
            while remaining > 0:
                remaining -= 1
                answer = await client.send_record(
                    Entity.ACCOMMODATION, account, SyncEvent.UPDATE, payload
                )
                acknowledged += answer.delivery == Delivery.ACKNOWLEDGED

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        seconds = time.perf_counter() - started
    return Measurement(transport, concurrency, requests, seconds, acknowledged)


@click.command()
@click.option("--base-url", default=DEFAULT_BASE_URL, show_default=True)
@click.option("--token", default="demo-token", show_default=True)
@click.option("--account", default="demo", show_default=True)
@click.option("--requests", "count", default=3000, show_default=True)
@click.option("--concurrency", "concurrencies", multiple=True, type=int, default=(1, 32))
def main(
    base_url: str, token: str, account: str, count: int, concurrencies: tuple[int, ...]
) -> None:
    """Print requests/second per transport and concurrency."""
    click.echo("transport  concurrency  requests  seconds  req/s  acknowledged")
    for transport in Transport:
        for concurrency in concurrencies:
            result = asyncio.run(measure(base_url, token, account, transport, concurrency, count))
            click.echo(
                f"{transport.value:<9}  {concurrency:>11}  {result.requests:>8}  "
                f"{result.seconds:>7.2f}  {result.per_second:>5.0f}  {result.acknowledged:>12}"
            )


if __name__ == "__main__":
    main()
