"""The canonical JSON form and the parameters digest, as the agent SDK defines them (`cosigner.digest`).

The server and the SDK share one definition; this name stays for the server's imports.
"""

from __future__ import annotations

from cosigner.digest import (
    SAFE_INTEGER,
    CanonicalFormError,
    canonical_json,
    digest_of_canonical,
    member,
    parameters_digest,
)

__all__ = [
    "SAFE_INTEGER",
    "CanonicalFormError",
    "canonical_json",
    "digest_of_canonical",
    "member",
    "parameters_digest",
]
