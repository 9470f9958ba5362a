"""Check a decision callback before trusting it: signature, freshness, and (optionally) replay.

    decision = cosigner.webhooks.verify(body, headers, secret)

`body` is the raw request body (bytes, exactly as received), `headers` the request headers,
`secret` the tenant's callback secret (`cosigner tenants secret NAME`). Anything wrong raises
InvalidSignature and the body must be ignored; pass `seen=DeliveryLog()` (kept across
requests) to also refuse a delivery received before with ReplayedDelivery.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from cosigner.decision import Decision, parse_approval
from cosigner.errors import InvalidSignature, ReplayedDelivery
from cosigner.grants import verify_callback

__all__ = ["DELIVERY_HEADER", "SIGNATURE_HEADER", "DeliveryLog", "verify"]

SIGNATURE_HEADER = "Cosigner-Signature"
DELIVERY_HEADER = "Cosigner-Delivery"
TOLERANCE = 300  # seconds a signature stays valid


class DeliveryLog:
    """Delivery ids already accepted, kept as long as their signatures could still verify."""

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


def _header(headers: Mapping[str, str], name: str) -> str | None:
    wanted = name.lower()
    for key, value in headers.items():
        if key.lower() == wanted:
            return value
    return None


def _timestamp(signature: str) -> int:
    for part in signature.split(","):
        key, _, value = part.strip().partition("=")
        if key == "t" and value.isascii() and value.isdigit():
            return int(value)
    raise InvalidSignature(f"{SIGNATURE_HEADER} has no t=<unix seconds>; it is not a Cosigner callback")


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
    raw = body.encode() if isinstance(body, str) else bytes(body)
    signature = _header(headers, SIGNATURE_HEADER)
    if not signature:
        raise InvalidSignature(f"no {SIGNATURE_HEADER} header: not a Cosigner callback")
    current = time.time() if now is None else now
    age = current - _timestamp(signature)
    if abs(age) > tolerance:
        raise InvalidSignature(
            f"callback signed {int(age)} s ago, over the {tolerance} s tolerance: refused as stale "
            "(check this machine's clock if every callback is refused)"
        )
    if not verify_callback(secret, signature, raw, tolerance=tolerance, now=current):
        raise InvalidSignature(
            "callback signature does not match the body: forged, altered, or signed with another "
            "secret (use this tenant's secret from `cosigner tenants secret NAME`)"
        )
    decision = parse_approval(raw)
    delivery = _header(headers, DELIVERY_HEADER)
    if seen is not None:
        if not delivery:
            raise InvalidSignature(f"no {DELIVERY_HEADER} header: cannot tell a replay from a first delivery")
        if not seen.add(delivery, current):
            replayed = ReplayedDelivery(f"delivery {delivery} was already received; process it once")
            replayed.decision = decision
            raise replayed
    return decision
