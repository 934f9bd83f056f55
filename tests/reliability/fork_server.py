"""``python -m tests.reliability.fork_server MAPPING``: runs `pms-sync` commands in forked children.

The kill campaign needs twenty real sync processes to SIGKILL. Starting each with
``python -m connector.cli`` costs ≈ 3 s of imports and ≈ 1.5 s of cold DuckDB/pandas start on
this machine, more than the sync itself; this process pays that once (it imports the CLI and
maps MAPPING once to warm up), then forks a child per request that runs the real `pms-sync`
entry point with the requested arguments and environment. Each child is an ordinary process
with its own pid, its own DuckDB connection and sockets, and can be SIGKILLed like any.

Protocol, one JSON object per line: the test writes ``{"args": [...], "env": {...}, "log": path}``
(and optionally ``"stderr": path``, to keep standard error apart from standard output);
this process answers ``{"pid": N}`` when the child starts. Then the test writes
``{"signal": S}`` (any number of times) to have the child signalled, and ``{"wait": true}``,
answered ``{"pid": N, "returncode": R}`` when the child ends (R < 0: killed by signal -R).
End of input: exit.

The child is reaped only on ``wait``, so a signal never reaches another process that took its
pid: the test itself must never signal the pid it was told.
"""

from __future__ import annotations

import json
import os
import sys


def main(warm_up_mapping: str) -> None:
    from connector.cli import main as pms_sync
    from connector.pipeline import load_batches

    load_batches(warm_up_mapping)
    _answer({"ready": True})
    for line in sys.stdin:
        request = json.loads(line)
        pid = os.fork()
        if pid == 0:  # the child: become `pms-sync ARGS`
            code = 1
            try:
                with open(request["log"], "w") as log:
                    os.dup2(log.fileno(), 1)
                    os.dup2(log.fileno(), 2)
                if "stderr" in request:
                    with open(request["stderr"], "w") as errors:
                        os.dup2(errors.fileno(), 2)
                os.environ.update(request["env"])
                sys.argv = ["pms-sync", *request["args"]]
                pms_sync()
                code = 0
            except SystemExit as done:
                code = done.code if isinstance(done.code, int) else 1
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        _answer({"pid": pid})
        for command in map(json.loads, sys.stdin):
            if "signal" in command:
                os.kill(pid, command["signal"])  # unreaped: a zombie at worst, never another
                continue
            _, status = os.waitpid(pid, 0)
            _answer({"pid": pid, "returncode": os.waitstatus_to_exitcode(status)})
            break


def _answer(message: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1])
