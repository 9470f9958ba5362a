"""Cosigner's agent SDK: ask before a gated tool call, wait for the decision, run only if approved.

from cosigner import Cosigner, SlackSurface
client = Cosigner()    # COSIGNER_URL and COSIGNER_API_KEY from the environment
d = client.request_approval(execution_id="run_81", tool_call_id="call_7",
                            tool_name="issue_refund", parameters={...}, surface=SlackSurface(...))
"""

from __future__ import annotations

from cosigner import errors, webhooks
from cosigner.async_client import AsyncCosigner
from cosigner.client import Cosigner
from cosigner.context import execution, tool_call
from cosigner.decision import Approval, DecidedBy, Decision
from cosigner.digest import parameters_digest
from cosigner.enums import ApprovalStatus, DeciderKind, SurfaceType
from cosigner.events import ApprovalEvent
from cosigner.grants import GrantClaims
from cosigner.operations import OperationOutcome, OutcomeType, Preview
from cosigner.surfaces import (
    DashboardSurface,
    HeadlessSurface,
    SlackSurface,
    SmsSurface,
    Surface,
    TeamsSurface,
    WhatsAppSurface,
)

__all__ = [
    "Approval",
    "ApprovalEvent",
    "ApprovalStatus",
    "AsyncCosigner",
    "Cosigner",
    "DashboardSurface",
    "DecidedBy",
    "DeciderKind",
    "Decision",
    "GrantClaims",
    "HeadlessSurface",
    "OperationOutcome",
    "OutcomeType",
    "Preview",
    "SlackSurface",
    "SmsSurface",
    "Surface",
    "SurfaceType",
    "TeamsSurface",
    "WhatsAppSurface",
    "errors",
    "execution",
    "parameters_digest",
    "tool_call",
    "webhooks",
]
