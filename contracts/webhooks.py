"""Standard Webhooks signing, as the agent SDK defines it (`cosigner.webhooks`).

The server signs with the same code the SDK verifies with; this name stays for the server's imports.
"""

from __future__ import annotations

from cosigner.webhooks import ID_HEADER, SIGNATURE_HEADER, TIMESTAMP_HEADER, sign, signing_key

__all__ = ["ID_HEADER", "SIGNATURE_HEADER", "TIMESTAMP_HEADER", "sign", "signing_key"]
