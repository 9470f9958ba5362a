"""The VAPID key pair Web Push messages are signed with (RFC 8292), kept sealed in the database.

One P-256 key pair per installation, made by `cosigner vapid` or at the first start that
needs it, and stored like the other secrets at rest: sealed (AES-256-GCM) under a key
derived from COSIGNER_SECRET (`storage.sealing`), so a copy of the database alone holds no
usable key. Every replica reads the same pair; the first to make one wins. A new pair
(`cosigner vapid --new`) drops every subscription: browsers subscribed to the old public key.
"""

from __future__ import annotations

import base64

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from storage import push as push_store
from storage.database import Database
from storage.sealing import TokenSeal

CONTEXT = "vapid:private"  # what the sealed value is bound to (`TokenSeal.seal`)


def new_pem() -> bytes:
    """A fresh P-256 private key, PEM (PKCS#8)."""
    key = ec.generate_private_key(ec.SECP256R1())
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def public_key(pem: bytes) -> str:
    """The application server key a browser subscribes with: the uncompressed point, base64url."""
    key = serialization.load_pem_private_key(pem, None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError("the VAPID key is not an EC key")
    raw = key.public_key().public_bytes(
        serialization.Encoding.X962, serialization.PublicFormat.UncompressedPoint
    )
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


async def vapid_pem(db: Database, seal: TokenSeal, now: float, *, new: bool = False) -> bytes:
    """The installation's VAPID private key, made and kept sealed at first use (or `new`)."""
    if not new:
        kept = await db.run_read(push_store.vapid_key)
        if kept is not None:
            return seal.open(kept, CONTEXT).encode()
    sealed = seal.seal(new_pem().decode(), CONTEXT)
    kept = await db.run_write(lambda tx: push_store.keep_vapid_key(tx, sealed, now, replace=new))
    return seal.open(kept, CONTEXT).encode()
