"""The one place the SDK imports the protocol it shares with the server.

Wire models, closed sets, the parameters digest and the grant and callback checks have a
single definition; every other SDK module imports them from here, never from elsewhere.
"""

from __future__ import annotations

from contracts import answers, wire
from contracts.enums import ApprovalStatus, DeciderKind, ErrorCode, SurfaceType
from cosigner import handoff
from cosigner.digest import canonical_json, parameters_digest
from cosigner.grants import GrantClaims, GrantRefused, sign_callback, verify_callback, verify_grant

__all__ = [
    "ApprovalStatus",
    "DeciderKind",
    "ErrorCode",
    "GrantClaims",
    "GrantRefused",
    "SurfaceType",
    "answers",
    "canonical_json",
    "handoff",
    "parameters_digest",
    "sign_callback",
    "verify_callback",
    "verify_grant",
    "wire",
]
