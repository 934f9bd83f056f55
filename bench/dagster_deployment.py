"""A throwaway Dagster deployment for the scale-out bench: an instance, its daemon, and runs
submitted to its queue, as a deployment of pms-sync runs them.

``dagster_deployment`` writes a ``DAGSTER_HOME`` whose ``dagster.yaml`` queues runs
(``QueuedRunCoordinator``, ``max_concurrent_runs``) and launches each in a process of its own
(``DefaultRunLauncher``; each run's steps in that process: the connection job's in-process
executor), and a workspace naming pms-sync's code location (``assets/definitions.py``, configured
by the ``PMS_SYNC_*`` environment). It starts ``dagster-daemon run`` in a session of its own,
which dequeues the runs; ``submit`` creates and submits runs the way ``dagster job launch``
does (``python -m bench.dagster_deployment submit``, in the deployment's environment), and
``wait_for`` follows them to their end. CPU is the user + system time of every process of the
daemon's session (daemon, code servers, runs), sampled from /proc.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
LOCATION = "pms_sync"
DAGSTER_DAEMON = Path(sys.executable).with_name("dagster-daemon")
FINISHED = ("SUCCESS", "FAILURE", "CANCELED")
_RUN_IDS = "run ids: "

_DAGSTER_YAML = """\
run_coordinator:
  module: dagster._core.run_coordinator.queued_run_coordinator
  class: QueuedRunCoordinator
  config:
    max_concurrent_runs: {max_concurrent_runs}
    dequeue_interval_seconds: 1
run_launcher:
  module: dagster._core.launcher.default_run_launcher
  class: DefaultRunLauncher
telemetry:
  enabled: false
"""
_WORKSPACE_YAML = """\
load_from:
  - python_file:
      relative_path: {root}/assets/definitions.py
      working_directory: {root}
      location_name: {location}
"""


@dataclass
class SessionCpu:
    """User + system seconds of the processes of one session, sampled every ``interval``."""

    session: int
    interval: float = 0.25
    _seen: dict[tuple[int, float], float] = field(default_factory=dict)
    _commands: dict[tuple[int, float], str] = field(default_factory=dict)
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self) -> None:
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def sample(self) -> None:
        tick = os.sysconf("SC_CLK_TCK")
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue  # ended meanwhile
            if int(fields[3]) != self.session:  # the session id
                continue
            # A process is (pid, start time): a reused pid is another process.
            key = (int(entry.name), float(fields[19]))
            self._seen[key] = (int(fields[11]) + int(fields[12])) / tick
            if key not in self._commands:
                self._commands[key] = _command_of(entry)

    def total(self) -> float:
        """CPU seconds so far of every process the session had."""
        self.sample()
        return sum(self._seen.values())

    def breakdown_since(self, ticks: float) -> dict[str, float]:
        """CPU seconds per command of the processes ``started_since`` counts."""
        self.sample()
        found: dict[str, float] = {}
        for key, cpu in self._seen.items():
            if key[1] >= ticks:
                name = self._commands.get(key, "?")
                found[name] = round(found.get(name, 0.0) + cpu, 2)
        return found

    def started_since(self, ticks: float) -> float:
        """CPU seconds of the session's processes started at or after ``ticks`` (clock ticks
        since boot, ``boot_ticks()``): a run's own processes, not the daemon's or the code
        server's."""
        self.sample()
        return sum(cpu for (_, start), cpu in self._seen.items() if start >= ticks)

    def stop(self) -> None:
        self._stop.set()


def _command_of(process: Path) -> str:
    """A process's command, shortened to what tells the processes of a deployment apart."""
    try:
        words = (process / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return "?"
    text = [word.decode(errors="replace") for word in words if word]
    return " ".join(Path(text[0]).name.split() + text[1:4]) if text else "?"


def boot_ticks() -> float:
    """Clock ticks since boot now: the unit of a process's start time in /proc/<pid>/stat."""
    uptime = float(Path("/proc/uptime").read_text().split()[0])
    return uptime * os.sysconf("SC_CLK_TCK")


@dataclass
class Deployment:
    home: Path
    workspace: Path
    env: dict[str, str]
    daemon: subprocess.Popen[bytes]
    cpu: SessionCpu

    def submit(self, job: str, tag_sets: Sequence[Mapping[str, str]], accounts: str) -> list[str]:
        """Create and queue one run of ``job`` per tag set; the run ids."""
        done = subprocess.run(
            [
                *(sys.executable, "-m", "bench.dagster_deployment", "submit"),
                *("--workspace", str(self.workspace), "--job", job),
                *("--tags", json.dumps(list(tag_sets)), "--accounts", accounts),
            ],
            env=self.env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(f"submitting the runs failed: {done.stderr[-3000:]}")
        lines = [line for line in done.stdout.splitlines() if line.startswith(_RUN_IDS)]
        if not lines:
            raise RuntimeError(f"no run submitted: {done.stdout[-2000:]}{done.stderr[-2000:]}")
        return json.loads(lines[-1][len(_RUN_IDS) :])

    def wait_for(self, run_ids: Sequence[str], timeout: float) -> list[dict[str, Any]]:
        """Wait until every run ended; per run its status and create/start/end times."""
        from dagster import DagsterInstance, RunsFilter

        deadline = time.monotonic() + timeout
        with DagsterInstance.from_config(str(self.home)) as instance:
            while True:
                records = instance.get_run_records(filters=RunsFilter(run_ids=list(run_ids)))
                if len(records) == len(run_ids) and all(
                    r.dagster_run.status.value in FINISHED for r in records
                ):
                    break
                if self.daemon.poll() is not None:
                    raise RuntimeError(f"dagster-daemon exited ({self.daemon.returncode})")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"runs not finished after {timeout} s")
                time.sleep(0.5)
            return [
                {
                    "run_id": r.dagster_run.run_id,
                    "status": r.dagster_run.status.value,
                    "tags": dict(r.dagster_run.tags),
                    "created": r.create_timestamp.timestamp(),
                    "started": r.start_time,
                    "ended": r.end_time,
                }
                for r in records
            ]


@contextmanager
def dagster_deployment(
    work: Path,
    env: Mapping[str, str],
    max_concurrent_runs: int,
    root: Path = ROOT,
    storage: str = "",
) -> Iterator[Deployment]:
    """A fresh Dagster instance in ``work`` with its daemon running, stopped at the end;
    ``root``: the tree whose code location it serves (another checkout for a before/after);
    ``storage``: a ``storage:`` section of dagster.yaml (SQLite files in the home without)."""
    home = work / f"dagster-home-{uuid.uuid4().hex[:8]}"
    home.mkdir(parents=True)
    (home / "dagster.yaml").write_text(
        _DAGSTER_YAML.format(max_concurrent_runs=max_concurrent_runs) + storage
    )
    workspace = home / "workspace.yaml"
    workspace.write_text(_WORKSPACE_YAML.format(root=root, location=LOCATION))
    full_env = {**env, "DAGSTER_HOME": str(home), "PYTHONPATH": str(root)}
    _create_storage(home)
    log = (home / "daemon.log").open("wb")
    daemon = subprocess.Popen(
        [str(DAGSTER_DAEMON), "run", "-w", str(workspace)],
        env=full_env,
        cwd=root,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own session: CPU sampled by session, stopped as a group
    )
    cpu = SessionCpu(os.getsid(daemon.pid))
    cpu.start()
    try:
        yield Deployment(home, workspace, full_env, daemon, cpu)
    finally:
        cpu.stop()
        _stop_group(daemon)
        log.close()


POSTGRES_STORAGE = """\
storage:
  postgres:
    postgres_url: postgresql+psycopg2://postgres@127.0.0.1:5432/{database}
"""


@contextmanager
def instance_storage(kind: str) -> Iterator[str]:
    """The ``storage:`` section of a fresh instance: SQLite files in its home (Dagster's
    default, what ``dagster dev`` uses), or a new database on the local PostgreSQL (what a
    deployment runs on), dropped afterwards."""
    if kind == "sqlite":
        yield ""
        return
    import psycopg

    database = f"dagster_bench_{uuid.uuid4().hex[:8]}"
    admin = "postgresql://postgres@127.0.0.1:5432/postgres"
    with psycopg.connect(admin, autocommit=True) as connection:
        connection.execute(f"CREATE DATABASE {database}")
    try:
        yield POSTGRES_STORAGE.format(database=database)
    finally:
        with psycopg.connect(admin, autocommit=True) as connection:
            connection.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")


def _create_storage(home: Path) -> None:
    """Create the instance's storage before the daemon and the submitter both would (two
    processes creating the SQLite storage at once stamp its schema twice)."""
    from dagster import DagsterInstance

    with DagsterInstance.from_config(str(home)) as instance:
        instance.get_runs(limit=1)


def _stop_group(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the daemon's process group (it was started as its leader), then SIGKILL."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()


def _submit(workspace: str, job: str, tag_sets: list[dict[str, str]], accounts: str) -> list[str]:
    """Register the accounts as partitions and queue one run per tag set (in DAGSTER_HOME's
    instance), as ``dagster job launch`` creates and submits a run."""
    from dagster import DagsterInstance
    from dagster._cli.job import _create_run
    from dagster._cli.workspace.cli_target import (
        get_code_location_from_workspace,
        get_remote_job_from_remote_repo,
        get_remote_repository_from_code_location,
    )
    from dagster._core.workspace.context import WorkspaceProcessContext
    from dagster._core.workspace.load_target import WorkspaceFileTarget

    instance = DagsterInstance.get()
    if accounts:
        name, _, keys = accounts.partition(":")
        known = set(instance.get_dynamic_partitions(name))
        instance.add_dynamic_partitions(name, [k for k in keys.split(",") if k not in known])
    run_ids: list[str] = []
    with WorkspaceProcessContext(instance, WorkspaceFileTarget([workspace])) as context:
        request = context.create_request_context()
        location = get_code_location_from_workspace(request, LOCATION)
        repo = get_remote_repository_from_code_location(location, None)
        remote_job = get_remote_job_from_remote_repo(repo, job)
        for tags in tag_sets:
            run = _create_run(
                instance=instance,
                code_location=location,
                remote_repo=repo,
                remote_job=remote_job,
                run_config={},
                tags=tags,
                op_selection=None,
                run_id=None,
            )
            instance.submit_run(run.run_id, request)
            run_ids.append(run.run_id)
    return run_ids


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.dagster_deployment")
    commands = parser.add_subparsers(dest="command", required=True)
    submit = commands.add_parser("submit", help="queue runs in DAGSTER_HOME's instance")
    submit.add_argument("--workspace", required=True)
    submit.add_argument("--job", required=True)
    submit.add_argument("--tags", required=True, help="a JSON list of tag sets, one per run")
    submit.add_argument(
        "--accounts", default="", help="<partitions name>:<key>,<key>,… (account partitions)"
    )
    arguments = parser.parse_args()
    run_ids = _submit(
        arguments.workspace, arguments.job, json.loads(arguments.tags), arguments.accounts
    )
    print(_RUN_IDS + json.dumps(run_ids))


if __name__ == "__main__":
    main()
