"""The canonical JSON form and the parameters digest that bind a decision to a call."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> bytes:
    """Keys sorted, no spaces, UTF-8: the form digests and signatures are computed over."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def parameters_digest(parameters: Any) -> str:
    """`sha256:` + hex of the canonical JSON of the unredacted parameters."""
    return "sha256:" + hashlib.sha256(canonical_json(parameters)).hexdigest()
