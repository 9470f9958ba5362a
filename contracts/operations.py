"""Operation contracts: the wire models shared with the agent SDK (`cosigner.operations`)."""

from __future__ import annotations

from cosigner.operations import (
    ExecuteCall,
    ExecuteOutcome,
    InProgress,
    NeedsReconciliation,
    NotStarted,
    OperationOutcome,
    OutcomeType,
    PrepareCall,
    Prepared,
    PrepareRejection,
    Preview,
    PreviewField,
    RevisionRequired,
    StatusCall,
    Succeeded,
    TerminalFailure,
    arguments_digest,
    execute_answer,
    outcome_of,
    status_answer,
)

__all__ = [
    "ExecuteCall",
    "ExecuteOutcome",
    "InProgress",
    "NeedsReconciliation",
    "NotStarted",
    "OperationOutcome",
    "OutcomeType",
    "PrepareCall",
    "PrepareRejection",
    "Prepared",
    "Preview",
    "PreviewField",
    "RevisionRequired",
    "StatusCall",
    "Succeeded",
    "TerminalFailure",
    "arguments_digest",
    "execute_answer",
    "outcome_of",
    "status_answer",
]
