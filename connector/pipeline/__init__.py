"""One sync of one mapping, the one place that composes the stages.

map -> plan -> push -> record the run -> report (``run_request``, ``plan_request``, and
``run_sync``, ``plan_sync``, ``sync_batches`` that build the ``SyncRequest`` from keyword
arguments; the plan shaped by ``shape_plan``), reviewed
plan files (``plan_to_file``, ``apply_plan_file``), a run's report split by check-in window
(``report_within``), and the one table of a run's verdict: status word, exit code, Dagster's
consequence (``VERDICTS``, ``verdict_of``). Used by the CLI and Dagster.
"""

from connector.arrow_memory import use_run_allocator
from connector.pipeline._incremental import ReadOptions
from connector.pipeline._plan_file import (
    apply_plan_file,
    plan_to_file,
)
from connector.pipeline._request import SyncRequest
from connector.pipeline._run import (
    SyncReport,
    keep_fingerprints,
    load_batches,
    plan_request,
    plan_sync,
    run_request,
    run_sync,
    sync_batches,
    sync_request,
)
from connector.pipeline._shape import shape_plan
from connector.pipeline._verdict import (
    VERDICTS,
    ExitCode,
    RunConditions,
    RunOutcome,
    RunStatus,
    Verdict,
    verdict_for,
    verdict_of,
    verdict_of_error,
)
from connector.pipeline._windowed_report import (
    records_by_window,
    records_within,
    report_within,
)

# Before a run allocates: every run, from the CLI or Dagster, comes through this package.
use_run_allocator()

__all__ = [
    "VERDICTS",
    "ExitCode",
    "ReadOptions",
    "RunConditions",
    "RunOutcome",
    "RunStatus",
    "SyncReport",
    "SyncRequest",
    "Verdict",
    "apply_plan_file",
    "keep_fingerprints",
    "load_batches",
    "plan_request",
    "plan_sync",
    "plan_to_file",
    "records_by_window",
    "records_within",
    "report_within",
    "run_request",
    "run_sync",
    "shape_plan",
    "sync_batches",
    "sync_request",
    "verdict_for",
    "verdict_of",
    "verdict_of_error",
]
