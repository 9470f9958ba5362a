"""Standard Webhooks signatures: what Cosigner signs its outbound POSTs with, and the checks.

    decision = cosigner.webhooks.verify(body, headers, secret, seen=log)

Every POST Cosigner sends (decision callbacks, a handoff's `expect` check, an operation's
`prepare`/`execute`/`status`) is signed by the Standard Webhooks specification
(https://www.standardwebhooks.com): `webhook-id` (the delivery id, the same on every retry),
`webhook-timestamp` (UNIX seconds) and `webhook-signature: v1,<base64 HMAC-SHA256 of
"<id>.<timestamp>.<body>">`. The id is inside the signature, so a replay under another id
fails, and any Standard Webhooks library verifies Cosigner's requests.

The HMAC key comes from the secret by the specification's rule: a secret written
`whsec_<base64>` is the bytes that base64 decodes to (the tenant's callback secret that
`cosigner tenants create` prints has this form: its 64 characters after `whsec_` are valid
base64, so `standardwebhooks.Webhook(secret)` takes it as printed); any other secret (an
operation's `secret_env`, say) is its UTF-8 bytes (`Webhook(secret.encode())`).

`body` is the raw request body (bytes, exactly as received). Anything wrong raises
InvalidSignature and the body must be ignored; pass `seen=DeliveryLog()` (kept across
requests) to also refuse an id received before with ReplayedDelivery.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import time
from collections.abc import Mapping

from cosigner.decision import Decision, parse_approval
from cosigner.errors import InvalidSignature, ReplayedDelivery

__all__ = [
    "ID_HEADER",
    "SIGNATURE_HEADER",
    "TIMESTAMP_HEADER",
    "DeliveryLog",
    "sign",
    "signing_key",
    "verify",
    "verify_request",
]

ID_HEADER = "webhook-id"
TIMESTAMP_HEADER = "webhook-timestamp"
SIGNATURE_HEADER = "webhook-signature"
SECRET_PREFIX = "whsec_"
TOLERANCE = 300  # seconds a signature stays valid, either way (the specification's 5 minutes)


class DeliveryLog:
    """Webhook ids already accepted, kept as long as their signatures could still verify."""

    def __init__(self, tolerance: int = TOLERANCE) -> None:
        self.tolerance = tolerance
        self._seen: dict[str, float] = {}

    def add(self, delivery: str, now: float) -> bool:
        """Record `delivery`; False if it was already recorded."""
        self._seen = {d: t for d, t in self._seen.items() if now - t <= 2 * self.tolerance}
        if delivery in self._seen:
            return False
        self._seen[delivery] = now
        return True


def signing_key(secret: str) -> bytes:
    """The HMAC key of a secret: base64-decoded after `whsec_`, else the secret's UTF-8 bytes."""
    if not secret:
        raise ValueError("the signing secret is empty; set it to the tenant's or operation's secret")
    if not secret.startswith(SECRET_PREFIX):
        return secret.encode()
    encoded = secret[len(SECRET_PREFIX) :]
    try:
        key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise ValueError(
            "a secret starting with whsec_ must continue in base64 (Standard Webhooks); "
            "use the secret exactly as printed, or one without the whsec_ prefix"
        ) from None
    if not key:
        raise ValueError("the secret has nothing after whsec_; use the secret exactly as printed")
    return key


def _mac(key: bytes, webhook_id: str, timestamp: str, body: bytes) -> str:
    signed = f"{webhook_id}.{timestamp}.".encode() + body
    return base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()


def sign(secret: str, webhook_id: str, timestamp: int, body: bytes) -> dict[str, str]:
    """The three Standard Webhooks headers for `body`, sent as delivery `webhook_id` at `timestamp`."""
    stamp = str(int(timestamp))
    return {
        ID_HEADER: webhook_id,
        TIMESTAMP_HEADER: stamp,
        SIGNATURE_HEADER: "v1," + _mac(signing_key(secret), webhook_id, stamp, body),
    }


def _header(headers: Mapping[str, str], name: str) -> str:
    for key, value in headers.items():
        if key.lower() == name:
            return value
    raise InvalidSignature(f"no {name} header: not a request signed by Standard Webhooks")


def verify_request(
    body: bytes | str,
    headers: Mapping[str, str],
    secret: str,
    *,
    tolerance: int = TOLERANCE,
    seen: DeliveryLog | None = None,
    now: float | None = None,
) -> str:
    """The signed `webhook-id` of a request whose signature and age check out (any signed POST)."""
    raw = body.encode() if isinstance(body, str) else bytes(body)
    webhook_id = _header(headers, ID_HEADER)
    stamp = _header(headers, TIMESTAMP_HEADER)
    signatures = _header(headers, SIGNATURE_HEADER)
    if not (stamp.isascii() and stamp.isdigit()):
        raise InvalidSignature(f"{TIMESTAMP_HEADER} is not UNIX seconds: not a Standard Webhooks request")
    current = time.time() if now is None else now
    age = current - int(stamp)
    if abs(age) > tolerance:
        raise InvalidSignature(
            f"request signed {int(age)} s ago, over the {tolerance} s tolerance: refused as stale "
            "(check this machine's clock if every request is refused)"
        )
    expected = _mac(signing_key(secret), webhook_id, stamp, raw).encode()
    # Several space-separated signatures may come (a secret being rotated); one match is enough.
    # Compare bytes: compare_digest raises on non-ASCII str, and a header is untrusted input.
    if not any(
        version == "v1" and hmac.compare_digest(expected, value.encode(errors="replace"))
        for version, _, value in (part.partition(",") for part in signatures.split(" "))
    ):
        raise InvalidSignature(
            "signature does not match the id, timestamp and body: forged, altered, or signed with "
            "another secret (use the secret as printed by `cosigner tenants secret NAME`)"
        )
    if seen is not None and not seen.add(webhook_id, current):
        raise ReplayedDelivery(f"delivery {webhook_id} was already received; process it once")
    return webhook_id


def verify(
    body: bytes | str,
    headers: Mapping[str, str],
    secret: str,
    *,
    tolerance: int = TOLERANCE,
    seen: DeliveryLog | None = None,
    now: float | None = None,
) -> Decision:
    """The decision a callback carries, once its signature and age check out."""
    webhook_id = verify_request(body, headers, secret, tolerance=tolerance, now=now)
    decision = parse_approval(body.encode() if isinstance(body, str) else bytes(body))
    current = time.time() if now is None else now
    if seen is not None and not seen.add(webhook_id, current):
        replayed = ReplayedDelivery(f"delivery {webhook_id} was already received; process it once")
        replayed.decision = decision
        raise replayed
    return decision
