"""The commands and figures docs/dagster.md gives work as written."""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import dagster as dg
import pytest
from click.testing import CliRunner

from pms_sync.assets import SYNC_RETRY
from pms_sync.component import PmsSyncComponent
from pms_sync.partitions import ASSET_PARTITION_RANGE_END_TAG, ASSET_PARTITION_RANGE_START_TAG

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "dagster.md").read_text()


def _documented(marker: str) -> list[str]:
    """The arguments of the first command in docs/dagster.md (between backticks) with ``marker``."""
    command = next(c for c in re.findall(r"`(dagster [^`\n]+)`", DOC) if marker in c)
    return shlex.split(command)


def test_the_documented_backfill_command_is_one_run_over_the_range(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from dagster._cli import asset as asset_cli

    arguments = _documented("--partition-range")
    assert arguments[:3] == ["dagster", "asset", "materialize"]
    launched: list[dict[str, Any]] = []

    def execute_job(**job: Any) -> SimpleNamespace:
        # Dagster's CLI has validated the selection and the range by now: record, do not run.
        launched.append(job)
        return SimpleNamespace(success=True)

    monkeypatch.setattr(asset_cli, "execute_job", execute_job)
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    (tmp_path / "dagster.yaml").write_text("")
    result = CliRunner().invoke(asset_cli.asset_cli, arguments[2:], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    (job,) = launched
    start, end = arguments[arguments.index("--partition-range") + 1].split("...")
    assert job["tags"] == {
        ASSET_PARTITION_RANGE_START_TAG: start,
        ASSET_PARTITION_RANGE_END_TAG: end,
    }
    selected = {key.to_user_string() for key in job["asset_selection"]}
    # The units (and the accounts they feed) join the months' run.
    assert {
        "hotel/synced_accommodations",
        "hotel/accounts",
        "hotel/synced_reservations",
    } <= selected


def test_the_documented_retry_delays_are_the_policys() -> None:
    policy = SYNC_RETRY
    no_jitter = dg.RetryPolicy(
        max_retries=policy.max_retries, delay=policy.delay, backoff=policy.backoff
    )
    delays = [int(no_jitter.calculate_delay(n)) for n in range(1, policy.max_retries + 1)]
    documented = (
        f"up to {policy.max_retries} times, "
        + ", ".join(f"{d} s" for d in delays[:-1])
        + f" and {delays[-1]} s after the failure before it"
    )
    assert documented in " ".join(DOC.split())
    assert f"± up to {int(policy.delay or 0)} s" in " ".join(DOC.split())


def _python_examples() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC, flags=re.DOTALL)


@pytest.mark.parametrize("example", _python_examples(), ids=lambda code: code.splitlines()[0])
def test_every_python_example_runs_as_written(
    example: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As in the project's own code location: run from the checkout, its root importable.
    monkeypatch.chdir(ROOT)
    monkeypatch.syspath_prepend(str(ROOT))
    namespace: dict[str, Any] = {}
    exec(compile(example, "docs/dagster.md", "exec"), namespace)
    subclasses = [
        value
        for value in namespace.values()
        if isinstance(value, type)
        and issubclass(value, PmsSyncComponent)
        and value is not PmsSyncComponent
    ]
    if subclasses:  # the execute() example: a component of its own
        assert all("execute" in vars(subclass) for subclass in subclasses)
        return
    resources = namespace["resources"]
    assert {"service", "snapshot", "open_api"} <= set(resources)
    if "defs" in namespace:
        defs = namespace["defs"]
        assert isinstance(defs, dg.Definitions)
        assert defs.resources["service"] is resources["service"]
        defs.resolve_job_def("hotel_sync")


def test_the_docs_have_python_examples_importing_the_project() -> None:
    # The examples above import the checkout's modules the way a project does.
    imports = "\n".join(_python_examples())
    assert "from assets.project import" in imports and "from pms_sync.resources import" in imports
