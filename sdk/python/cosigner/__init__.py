"""Cosigner's agent SDK: ask before a gated tool call, wait for the decision, run only if approved.

from cosigner import Cosigner, SlackSurface
client = Cosigner()    # COSIGNER_URL and COSIGNER_API_KEY from the environment
d = client.request_approval(execution_id="run_81", tool_call_id="call_7",
                            tool_name="issue_refund", parameters={...}, surface=SlackSurface(...))

The names below are loaded when first used (PEP 562), so that a part of the SDK that needs
none of them, such as `cosigner-hook`, starts without loading the client, pydantic or httpx.
"""

from __future__ import annotations

import importlib

TYPE_CHECKING = False  # typing.TYPE_CHECKING without loading typing (mypy reads it the same)
if TYPE_CHECKING:
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

_HOMES = {
    "Approval": "decision",
    "ApprovalEvent": "events",
    "ApprovalStatus": "enums",
    "AsyncCosigner": "async_client",
    "Cosigner": "client",
    "DashboardSurface": "surfaces",
    "DecidedBy": "decision",
    "DeciderKind": "enums",
    "Decision": "decision",
    "GrantClaims": "grants",
    "HeadlessSurface": "surfaces",
    "OperationOutcome": "operations",
    "OutcomeType": "operations",
    "Preview": "operations",
    "SlackSurface": "surfaces",
    "SmsSurface": "surfaces",
    "Surface": "surfaces",
    "SurfaceType": "enums",
    "TeamsSurface": "surfaces",
    "WhatsAppSurface": "surfaces",
    "execution": "context",
    "parameters_digest": "digest",
    "tool_call": "context",
}
"""The module each public name is defined in (`errors` and `webhooks` are modules themselves)."""

_EAGER = ("client", "async_client", "context", "decision", "enums", "events", "grants", "operations")
"""Modules the package once imported on its own: `import cosigner` then `cosigner.client` still works."""


if not TYPE_CHECKING:  # mypy reads the imports above; a module __getattr__ would hide typos

    def __getattr__(name: str) -> object:
        home = _HOMES.get(name)
        if home is not None:
            value = getattr(importlib.import_module(f"cosigner.{home}"), name)
        elif name in ("errors", "webhooks", "digest", "surfaces", *_EAGER):
            value = importlib.import_module(f"cosigner.{name}")
        else:
            raise AttributeError(f"module 'cosigner' has no attribute {name!r}")
        globals()[name] = value  # found once; later lookups do not come here
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *__all__})
