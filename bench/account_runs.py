"""A run of one account against a run of every account (issue 39): the hotel export with its
reservations spread over many accounts, seeded, then ``plan --account <one>`` and ``plan``
interleaved, each in a fresh process (``bench.stage diff``).

    python -m bench.account_runs --size 1000000 --accounts 200 --pairs 3
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from bench.data import DATA_ROOT, prepare
from bench.harness import run_stage

ACCOUNT = "    account: {{sql: \"hotel_code || '-' || CAST(CAST({column} AS BIGINT) % {per_hotel} AS VARCHAR)\"}}\n"


def accounts_dataset(size: int, accounts: int) -> Path:
    """The benchmark export whose records belong to ``accounts`` accounts (two hotels, each
    split by booking number, and its rooms by room number): its mapping file."""
    base = prepare(size).base
    home = DATA_ROOT / f"hotel-{size}-accounts-{accounts}"
    mapping = home / "mapping.yaml"
    if mapping.exists():
        return mapping
    shutil.rmtree(home, ignore_errors=True)
    shutil.copytree(base, home)
    per_hotel = max(1, accounts // 2)
    text = mapping.read_text(encoding="utf-8")
    text = text.replace(
        "    input: rooms\n",
        "    input: rooms\n" + ACCOUNT.format(column="room_no", per_hotel=per_hotel),
        1,
    ).replace(
        "    input: bookings\n",
        "    input: bookings\n"
        + ACCOUNT.format(column="right(booking_no, 7)", per_hotel=per_hotel),
        1,
    )
    mapping.write_text(text, encoding="utf-8")
    return mapping


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1_000_000)
    parser.add_argument("--accounts", type=int, default=200)
    parser.add_argument("--pairs", type=int, default=3)
    parser.add_argument("--account", default="BER-7", help="the account of the single runs")
    options = parser.parse_args()
    mapping = accounts_dataset(options.size, options.accounts)
    snapshot = mapping.parent / "snapshot.duckdb"
    if not snapshot.exists():
        seeded = run_stage("seed", mapping=str(mapping), snapshot=str(snapshot))
        print(json.dumps({"seed": seeded}), flush=True)
    for pair in range(options.pairs):
        for label, accounts in (("one", [options.account]), ("all", None)):
            result = run_stage(
                "diff", mapping=str(mapping), snapshot=str(snapshot), accounts=accounts
            )
            result.pop("counts", None)
            print(json.dumps({"pair": pair, "run": label, **result}), flush=True)


if __name__ == "__main__":
    main()
