"""Grant checks, as the agent SDK defines them (`cosigner.grants`).

The server and the SDK share one definition; this name stays for the server's imports.
"""

from __future__ import annotations

from cosigner.grants import (
    ALGORITHM,
    GRANT_DETAIL_TYPE,
    GRANT_TYPE,
    ISSUER,
    GrantClaims,
    GrantRefused,
    jwk_thumbprint,
    verify_grant,
)

__all__ = [
    "ALGORITHM",
    "GRANT_DETAIL_TYPE",
    "GRANT_TYPE",
    "ISSUER",
    "GrantClaims",
    "GrantRefused",
    "jwk_thumbprint",
    "verify_grant",
]
