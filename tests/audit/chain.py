"""A receiver's check of CloudEvents an audit export or the sink produced: the chain verified
from the events alone, as docs/audit.md tells a receiver to."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any
from urllib.parse import unquote

import rfc8785

GENESIS = "0" * 64


def link_hash(event: dict[str, Any]) -> str:
    """sha256 over the previous hash and the JCS form of the link's content (docs/audit.md)."""
    content = rfc8785.dumps(
        {
            "approvalId": event["subject"],
            "tenant": unquote(event["source"].removeprefix("/tenants/")),
            "seq": event["cosignerseq"],
            "at": event["cosignerat"],
            "event": event["cosignerevent"],
            "actor": event["cosigneractor"],
            "data": rfc8785.dumps(event["data"]).decode("utf-8"),
        }
    )
    return hashlib.sha256(event["cosignerprevhash"].encode() + content).hexdigest()


def verify(events: Iterable[dict[str, Any]]) -> int:
    """Check each approval's links: in order from the genesis, each hash what it claims."""
    heads: dict[str, tuple[int, str]] = {}
    n = 0
    for e in events:
        seq, prev = heads.get(e["subject"], (0, GENESIS))
        assert e["cosignerseq"] == seq + 1, f"{e['subject']}: link {seq + 1} missing or out of order"
        assert e["cosignerprevhash"] == prev, f"{e['subject']}: previous-hash link broken"
        assert link_hash(e) == e["id"], f"{e['subject']} link {e['cosignerseq']}: content edited"
        heads[e["subject"]] = (e["cosignerseq"], e["id"])
        n += 1
    return n
