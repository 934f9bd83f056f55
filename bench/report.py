"""Results: ``bench/results.json`` and the generated table inside ``BENCHMARKS.md``."""

from __future__ import annotations

import os
import platform
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from bench.data import ROOT

RESULTS = Path(__file__).resolve().parent / "results.json"
MARKDOWN = ROOT / "BENCHMARKS.md"


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def _memory_gb() -> float:
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        return round(pages / 2**30, 1)
    except (ValueError, OSError):
        return 0.0


def environment() -> dict[str, Any]:
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    ).stdout.strip()
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "commit": commit + ("+dirty" if dirty else ""),
        "machine": {
            "cpu": _cpu(),
            "cores": os.cpu_count(),
            "memory_gb": _memory_gb(),
            "python": platform.python_version(),
            "load_average_at_start": os.getloadavg()[0],
        },
    }


def _s(value: float) -> str:
    return f"{value:.1f} s" if value >= 10 else f"{value:.2f} s"


def _ratio(ours: float, theirs: float) -> str:
    if not ours:
        return "—" if not theirs else "∞ (0 vs " + f"{theirs:,.0f})"
    return f"{theirs / ours:.1f}x"


def rows(results: dict[str, Any]) -> list[list[str]]:
    """figure | size | target | measured (median) | peak MB | vs naive | vs dlt."""
    table: list[list[str]] = []
    for size_text, r in results["sizes"].items():
        size = int(size_text)
        label = f"{size:,}"
        naive, dlt = r.get("naive"), r.get("dlt")
        if "map" in r:
            m = r["map"]
            table.append(
                [
                    f"extract + map + validate ({m['records']:,} records)",
                    label,
                    "—",
                    _s(m["seconds"]),
                    f"{m['peak_rss_mb']:.0f}",
                    "",
                    "",
                ]
            )
        if "diff" in r:
            d = r["diff"]
            target = "≤ 15 s, ≤ 2 GB" if size >= 1_000_000 else "(15 s, 2 GB at 1M)"
            table.append(
                [
                    "extract + map + validate + diff",
                    label,
                    target,
                    _s(d["seconds"]),
                    f"{d['peak_rss_mb']:.0f}",
                    "",
                    "",
                ]
            )
        if "first" in r:
            f = r["first"]
            table.append(
                [
                    "first run, end to end (time)",
                    label,
                    "—",
                    _s(f["seconds"]),
                    f"{f['peak_rss_mb']:.0f}",
                    _ratio(f["seconds"], naive["first"]["seconds"]) if naive else "",
                    _ratio(f["seconds"], dlt["first"]["seconds"]) if dlt else "",
                ]
            )
            table.append(
                [
                    "first run, requests sent",
                    label,
                    "1 per record",
                    f"{f['requests']:,.0f}",
                    "",
                    _ratio(f["requests"], naive["first"]["requests"]) if naive else "",
                    _ratio(f["requests"], dlt["first"]["requests"]) if dlt else "",
                ]
            )
        if "noop" in r:
            n = r["noop"]
            target = "≤ 20 s, 0 requests" if size >= 1_000_000 else "0 requests (20 s at 1M)"
            table.append(
                [
                    "nightly run, nothing changed (time)",
                    label,
                    target,
                    _s(n["seconds"]),
                    f"{n['peak_rss_mb']:.0f}",
                    _ratio(n["seconds"], naive["noop"]["seconds"]) if naive else "",
                    _ratio(n["seconds"], dlt["noop"]["seconds"]) if dlt else "",
                ]
            )
            table.append(
                [
                    "nightly run, nothing changed (requests)",
                    label,
                    "0",
                    f"{n['sandbox_requests']:,.0f}",
                    "",
                    _ratio(n["sandbox_requests"], naive["noop"]["requests"]) if naive else "",
                    _ratio(n["sandbox_requests"], dlt["noop"]["requests"]) if dlt else "",
                ]
            )
        if "change" in r:
            c = r["change"]
            changed = c["counts"].get("update", 0) + c["counts"].get("create", 0)
            table.append(
                [
                    "1 % changed (time)",
                    label,
                    "linear in rows",
                    _s(c["seconds"]),
                    f"{c['peak_rss_mb']:.0f}",
                    _ratio(c["seconds"], naive["noop"]["seconds"]) if naive else "",
                    _ratio(c["seconds"], dlt["change"]["seconds"]) if dlt else "",
                ]
            )
            table.append(
                [
                    f"1 % changed (requests; {changed:,} records changed)",
                    label,
                    "1 per changed record",
                    f"{c['sandbox_requests']:,.0f}",
                    "",
                    _ratio(c["sandbox_requests"], naive["noop"]["requests"]) if naive else "",
                    _ratio(c["sandbox_requests"], dlt["change"]["requests"]) if dlt else "",
                ]
            )
        if r.get("floor"):
            table += _floor_rows(r["floor"], size, label)
        if r.get("sql"):
            table += sql_rows(r["sql"], label)
        if r.get("sql_incremental"):
            table += sql_rows({"incremental": r["sql_incremental"]}, label)
        if r.get("dagster"):
            ratios = r["dagster"]["ratios"]
            medians, versus = ratios["medians"], ratios["dagster_vs_cli"]
            table.append(
                [
                    "nightly, nothing changed, through Dagster ÷ the CLI (CPU, wall)",
                    label,
                    "≤ 1.5x at 10k, ≤ 1.2x at 1M",
                    f"CPU {_s(medians['dagster_cpu_seconds'])} vs "
                    f"{_s(medians['cli_cpu_seconds'])} = {versus['cpu_seconds']:.1f}x; wall "
                    f"{_s(medians['dagster_wall_seconds'])} vs "
                    f"{_s(medians['cli_wall_seconds'])} = {versus['wall_seconds']:.1f}x",
                    "",
                    "",
                    "",
                ]
            )
            if r["dagster"].get("floor"):
                floor = r["dagster"]["floor"]
                counts = floor["counts"]
                table.append(
                    [
                        "Dagster's floor: the same events written by a job that does nothing, "
                        "÷ the CLI's whole run (CPU)",
                        label,
                        "",
                        f"{counts['materializations']} materializations and "
                        f"{counts['checks']} check evaluations over {counts['months']} months: "
                        f"CPU {_s(floor['median_cpu_seconds'])} = "
                        f"{floor['floor_vs_cli_cpu']:.1f}x",
                        "",
                        "",
                        "",
                    ]
                )
        if r.get("push"):
            p = r["push"]
            table.append(
                [
                    "push throughput, interleaved with raw aiohttp (req/s, concurrency 16)",
                    label,
                    "≥ 90 % of raw aiohttp",
                    f"{p['pms_sync_rate']:,.0f} vs raw {p['raw_rate']:,.0f}: median pair "
                    f"{100 * p['ratio']:.0f} % ("
                    + ", ".join(f"{100 * ratio:.0f} %" for ratio in p.get("ratios", []))
                    + ")",
                    "",
                    "",
                    "",
                ]
            )
    return table


# The sql scenario's figures: (name, target) of each database's time ÷ the CSV's.
SQL_FIGURES = {
    "first": ("first run without HTTP, from the database ÷ from CSV", "≤ 1.3x"),
    "noop": ("nightly plan, nothing changed, from the database ÷ from CSV", "≤ 1.5x"),
    "change": ("plan, 1 % changed, from the database ÷ from CSV", ""),
}
SQL_NAMES = {"postgresql": "PostgreSQL", "mariadb": "MariaDB"}


def sql_rows(sql: dict[str, Any], label: str) -> list[list[str]]:
    """The sql scenario's ratios (bench/harness.py ``scenario_sql``): median of the rounds."""
    table = []
    for name, (figure, target) in SQL_FIGURES.items():
        figures = sql.get(name) or {}
        csv = figures.get("csv")
        for database, shown in SQL_NAMES.items():
            if f"{database}_ratio" not in figures or not csv:
                continue
            ratios = ", ".join(f"{ratio:.2f}" for ratio in figures[f"{database}_ratios"])
            table.append(
                [
                    f"{figure} ({shown})",
                    label,
                    target,
                    f"{_s(figures[database]['seconds'])} vs {_s(csv['seconds'])} = "
                    f"**{figures[f'{database}_ratio']:.2f}x** (rounds {ratios})",
                    f"{figures[database]['peak_rss_mb']:.0f}",
                    "",
                    "",
                ]
            )
    for database, found in (sql.get("incremental") or {}).items():
        ours, whole = found["incremental"], found["full_read"]
        ratios = ", ".join(f"{ratio:.2f}" for ratio in found["time_ratios"])
        table.append(
            [
                f"plan, 1 % changed, incremental read ÷ full read ({SQL_NAMES[database]}): "
                f"{found['rows_read']:,} vs {found['rows_read_full']:,} rows read",
                label,
                "proportional to the change",
                f"{_s(ours['seconds'])} vs {_s(whole['seconds'])} = "
                f"**{found['time_ratio']:.2f}x** (rounds {ratios})",
                f"{ours['peak_rss_mb']:.0f}",
                "",
                "",
            ]
        )
    for database, reason in (sql.get("skipped") or {}).items():
        table.append([f"sql scenario: {database} skipped ({reason})", label, "", "", "", "", ""])
    return table


# The brief's targets at 1M, against the floor (bench/floor.py) measured in the same run.
_FLOOR_TARGETS = {
    "first": ("first run: extract + map + validate ÷ floor (full)", "≤ 15 s, ≤ 1.2 GB, ≤ 2x"),
    "noop": ("nightly run, nothing changed ÷ floor (fingerprint)", "≤ 6 s, ≤ 0.8 GB, ≤ 3x"),
    "change": ("1 % changed, no push ÷ floor (fingerprint)", "≤ 8 s"),
}


def _floor_rows(floor: dict[str, Any], size: int, label: str) -> list[list[str]]:
    rows_: list[list[str]] = []
    for name, (figure, target) in _FLOOR_TARGETS.items():
        if name not in floor:
            continue
        pair = floor[name]
        ours, theirs = pair["pms_sync"], pair["floor"]
        rows_.append(
            [
                figure,
                label,
                target if size >= 1_000_000 else "(at 1M)",
                f"{_s(ours['seconds'])} vs {_s(theirs['seconds'])} = {pair['time_ratio']:.1f}x",
                f"{ours['peak_rss_mb']:.0f} vs {theirs['peak_rss_mb']:.0f}",
                "",
                "",
            ]
        )
    check = floor.get("check")
    if check:
        rows_.append(
            [
                "floor documents identical to pms-sync's",
                label,
                "all",
                f"{check['identical']:,} of {check['reservations']:,}",
                "",
                "",
                "",
            ]
        )
    return rows_


def markdown_table(results: dict[str, Any]) -> str:
    header = [
        "figure",
        "reservations",
        "target",
        "measured (median)",
        "peak RSS MB",
        "naive ÷ pms-sync",
        "dlt ÷ pms-sync",
    ]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(row) + " |" for row in rows(results)]
    m = results["machine"]
    notes = [
        "",
        f"Measured {results['date']} at commit `{results['commit']}` on {m['cores']} cores "
        f"({m['cpu']}), {m['memory_gb']} GB RAM, Python {m['python']}, load average "
        f"{m['load_average_at_start']:.1f} at start; median of "
        + ", ".join(
            f"{len(r.get('map', {}).get('runs', [])) or results['runs']} runs at {int(size):,}"
            for size, r in results["sizes"].items()
        )
        + " reservations per figure.",
    ]
    for size, r in results["sizes"].items():
        first = r.get("first", {})
        if first.get("estimated"):
            notes.append(
                f"At {int(size):,} reservations pms-sync's first run was not pushed: the full "
                f"snapshot was seeded (map + diff + record, {first['seed_seconds']:.1f} s) and "
                "the first run's time estimated as that plus its requests at the push rate "
                "measured at the smaller size."
            )
        for peer in ("naive", "dlt"):
            if r.get(peer, {}).get("prefix"):
                first = r[peer]["first"]
                notes.append(
                    f"At {int(size):,} reservations the {peer} peer's runs sent only the first "
                    f"{r[peer]['prefix']:,} reservations; its first-run time is extrapolated "
                    f"linearly from {first.get('measured_requests', 0):,.0f} requests in "
                    f"{first.get('measured_seconds', 0):.1f} s."
                )
    return "\n".join(lines + notes)


def write_markdown(results: dict[str, Any]) -> None:
    """Replace the table of these sizes (its own marked block) in BENCHMARKS.md."""
    key = ",".join(results["sizes"])
    begin, end = f"<!-- bench:table:{key}:begin -->", f"<!-- bench:table:{key}:end -->"
    table = markdown_table(results)
    text = MARKDOWN.read_text() if MARKDOWN.exists() else "# Benchmarks\n"
    if begin not in text:
        text += f"\n{begin}\n{end}\n"
    head, rest = text.split(begin, 1)
    tail = rest.split(end, 1)[1]
    MARKDOWN.write_text(f"{head}{begin}\n{table}\n{end}{tail}")
