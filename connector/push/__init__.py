"""Executing a plan: each change sent once, every answer recorded in the snapshot.

``push_plan`` sends a :class:`connector.plan.Plan` through the client, holds back
reservations whose unit is not at the service, commits the answers on one writer
thread (the recorder) and closes reconciliation passes.
"""

from connector.push._push import (
    OUTCOMES,
    Outcome,
    ProgressCallback,
    PushOptions,
    PushResult,
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
    "Outcome",
    "ProgressCallback",
    "PushOptions",
    "PushResult",
    "answer_contradictions",
    "finish_passes",
    "open_passes",
    "push_plan",
    "response_disagreement",
]
