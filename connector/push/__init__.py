"""Executing a plan: each change sent once, every answer recorded in the snapshot.

``push_plan`` sends a :class:`connector.plan.Plan` through the client, holds back
reservations whose unit is not at the service, commits the answers on one writer
thread (the recorder) and closes reconciliation passes.
"""

from connector.push._holdback import HeldRecord, expected_holdback
from connector.push._push import (
    OUTCOMES,
    Disagreement,
    Outcome,
    ProgressCallback,
    PushOptions,
    PushResult,
    RecordProblem,
    answer_contradictions,
    push_plan,
    response_disagreement,
)
from connector.push._reconciliation import (
    finish_passes,
    open_passes,
)

__all__ = [
    "OUTCOMES",
    "Disagreement",
    "HeldRecord",
    "Outcome",
    "ProgressCallback",
    "PushOptions",
    "PushResult",
    "RecordProblem",
    "answer_contradictions",
    "expected_holdback",
    "finish_passes",
    "open_passes",
    "push_plan",
    "response_disagreement",
]
