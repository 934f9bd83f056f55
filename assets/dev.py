"""``make dev``: the Dagster UI (``dg dev``) on the instance ``make demo`` wrote to.

``dg dev`` runs in its own process group; Ctrl-C or SIGTERM here is passed on as SIGINT to the
whole group (webserver, daemon, code servers), which stops in about two seconds. Whatever still
runs after STOP_GRACE_S is killed, so the command always ends. A ``dagster dev`` started in the
background by a non-interactive shell ignores both signals: it inherits SIGINT ignored, and maps
SIGTERM to the same handler; the child here gets SIGINT's default back.

When the configured service (``PMS_SYNC_BASE_URL``, default the local sandbox's address) is a
loopback address where nothing answers, the sandbox is started there first and stopped after
the UI (``assets.local_sandbox``), so the first Materialize reaches a service.

    python -m assets.dev [--port 3000] [--no-sandbox]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType

from assets.local_sandbox import sandbox_if_needed
from assets.project import PROJECT_ROOT, prepare_dagster_home
from connector.config import ServiceSection

STOP_GRACE_S = 15.0


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=3000)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument(
        "--no-sandbox",
        action="store_true",
        help="do not start the local sandbox when nothing answers on the configured service",
    )
    arguments = parser.parse_args(argv)
    if arguments.no_sandbox:
        return _run_ui(arguments.port, arguments.host)
    with sandbox_if_needed(ServiceSection.read().base_url):
        return _run_ui(arguments.port, arguments.host)


def _run_ui(port: int, host: str) -> int:
    """``dg dev`` until it ends or a stop is asked for; its exit code (0 after a stop)."""
    home = prepare_dagster_home()
    dg = Path(sys.executable).with_name("dg")
    command = [str(dg), "dev", "-w", "workspace.yaml", "-p", str(port), "-h", host]
    print(f"DAGSTER_HOME={home}: the runs of `make demo` are there", flush=True)
    child = subprocess.Popen(
        command,
        cwd=PROJECT_ROOT,
        env={**os.environ, "DAGSTER_HOME": str(home)},
        start_new_session=True,
        preexec_fn=_default_sigint,
    )

    deadline: list[float] = []  # set once a stop was asked for

    def stop(signum: int, _frame: FrameType | None) -> None:
        print(f"\nstopping dg dev ({signal.Signals(signum).name})", flush=True)
        if not deadline:
            deadline.append(time.monotonic() + STOP_GRACE_S)
        _signal_group(child.pid, signal.SIGINT)

    signal.signal(signal.SIGINT, stop)
    signal.signal(signal.SIGTERM, stop)
    while True:
        try:
            code = child.wait(timeout=0.5)
            break
        except subprocess.TimeoutExpired:
            if deadline and time.monotonic() > deadline[0]:
                _signal_group(child.pid, signal.SIGKILL)
    # The group leader is gone; a code server or the daemon may linger a moment: not longer
    # than the grace period.
    end = (deadline[0] if deadline else time.monotonic()) + STOP_GRACE_S
    while _signal_group(child.pid, 0) and time.monotonic() < end:
        time.sleep(0.2)
    _signal_group(child.pid, signal.SIGKILL)
    return 0 if deadline or code == 0 else code


def _signal_group(group: int, signum: int) -> bool:
    """Send ``signum`` to the process group; whether any process of it was still there."""
    try:
        os.killpg(group, signum)
    except ProcessLookupError:
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
