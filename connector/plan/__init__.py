"""The plan: what one sync will send, decided before anything is sent.

``build_plan`` compares mapped records with the snapshot and returns every change that
costs a request, in delivery (urgency) order, with the re-sends of unchanged records
(drift, rolling refresh, reconciliation), the budgets that bound a run and the
field-level differences people review. Executed by :func:`connector.push.push_plan`.
"""

from connector.plan._budget import (
    BacklogRow,
    Budget,
    BudgetGate,
    backlog,
    backlog_json,
    backlog_table,
    format_duration,
)
from connector.plan._diff import (
    FieldChange,
    field_changes,
    record_differences,
    render_value,
)
from connector.plan._drift import (
    OPTIONAL_REASONS,
    REASON_RECONCILE,
    RESEND_REASONS,
    DriftKind,
    drift_of,
    missing_reservation,
)
from connector.plan._effects import (
    Approval,
    HeldWork,
    PropertyEffect,
    WaitingForUnit,
    fields_json,
)
from connector.plan._plan import (
    ACTIONS,
    CHANGE_COLUMNS,
    REASON_POSSIBLY_STORED_GONE,
    UNIT_STAYS_COLUMNS,
    Action,
    Force,
    Plan,
    ReconcilePolicy,
    build_plan,
    delivery_order,
    extracted_counts,
)
from connector.plan._resend import (
    DEFAULT_REMOTE_REFRESH_DAYS,
    RefreshPolicy,
    ResendOptions,
    parse_share,
)
from connector.plan._urgency import (
    DEFAULT_HORIZON_DAYS,
    URGENCY_CLASSES,
    UrgencyPolicy,
)

__all__ = [
    "ACTIONS",
    "CHANGE_COLUMNS",
    "DEFAULT_HORIZON_DAYS",
    "DEFAULT_REMOTE_REFRESH_DAYS",
    "OPTIONAL_REASONS",
    "REASON_POSSIBLY_STORED_GONE",
    "REASON_RECONCILE",
    "RESEND_REASONS",
    "UNIT_STAYS_COLUMNS",
    "URGENCY_CLASSES",
    "Action",
    "Approval",
    "BacklogRow",
    "Budget",
    "BudgetGate",
    "DriftKind",
    "FieldChange",
    "Force",
    "HeldWork",
    "Plan",
    "PropertyEffect",
    "ReconcilePolicy",
    "RefreshPolicy",
    "ResendOptions",
    "UrgencyPolicy",
    "WaitingForUnit",
    "backlog",
    "backlog_json",
    "backlog_table",
    "build_plan",
    "delivery_order",
    "drift_of",
    "extracted_counts",
    "field_changes",
    "fields_json",
    "format_duration",
    "missing_reservation",
    "parse_share",
    "record_differences",
    "render_value",
]
