"""The canonical JSON form (RFC 8785, JCS) and the parameters digest that binds a decision to a call.

One form serves every hash and signature Cosigner makes: the parameters digest, the
grant payload and the audit chain. Any language with a JCS library reproduces it.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Mapping

TYPE_CHECKING = False  # typing.TYPE_CHECKING without loading typing
if TYPE_CHECKING:
    from typing import Any

# JCS numbers are IEEE 754 doubles; integers beyond this lose digits in most languages.
SAFE_INTEGER = 2**53 - 1


class CanonicalFormError(ValueError):
    """A value has no RFC 8785 form; the message names where it is and what to send instead."""

    def __init__(self, path: str, problem: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem


# json.dumps with these options builds a new encoder object on every call; one shared
# instance writes the same text (it keeps no state between calls).
_SORTED_COMPACT = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_-]{0,63}")


def member(path: str, key: str) -> str:
    """`path.key` for a plain key; any other key (empty, dotted, long) by its JSON-quoted
    start, so the path stays unambiguous: `parameters[""]`, `parameters["a.b"]`."""
    if _PLAIN_KEY.fullmatch(key):
        return f"{path}.{key}"
    return f"{path}[{json.dumps(key[:64], ensure_ascii=True)}]"


def _locate(value: Any, path: str) -> CanonicalFormError | None:
    # Only walked after the library refused, to name the offending member.
    if isinstance(value, bool) or value is None or isinstance(value, str):
        if isinstance(value, str) and any(0xD800 <= ord(c) <= 0xDFFF for c in value):
            return CanonicalFormError(path, "holds a lone UTF-16 surrogate; send valid Unicode text")
        return None
    if isinstance(value, int):
        if abs(value) > SAFE_INTEGER:
            return CanonicalFormError(
                path,
                "is an integer beyond ±(2^53−1), which JSON numbers cannot hold exactly; send it as a string",
            )
        return None
    if isinstance(value, float):
        if not math.isfinite(value):
            return CanonicalFormError(
                path, "is NaN or Infinity, which JSON cannot hold; send a finite number"
            )
        return None
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                return CanonicalFormError(path, f"has a non-string key {key!r}; JSON keys are strings")
            found = _locate(key, f"{path}.<key>") or _locate(item, member(path, key))
            if found:
                return found
        return None
    if isinstance(value, list | tuple):
        for i, item in enumerate(value):
            found = _locate(item, f"{path}[{i}]")
            if found:
                return found
        return None
    return CanonicalFormError(path, f"is a {type(value).__name__}, which is not a JSON value")


def _without_floats(value: Any) -> bool:
    """True when `value` holds no float, only safe integers, and no object key with a
    character beyond U+FFFF: then the standard library's sorted, compact JSON is exactly
    the JCS form (integers print the same, strings escape the same, and code point order
    equals UTF-16 order), and much faster than the general writer."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str) or item is None or isinstance(item, bool):
            continue
        if isinstance(item, int):
            if abs(item) > SAFE_INTEGER:
                return False
        elif isinstance(item, dict):
            for key in item:
                if not isinstance(key, str) or (not key.isascii() and max(key) > "\uffff"):
                    return False
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
        else:
            return False
    return True


def canonical_json(value: Any, path: str = "$") -> bytes:
    """The RFC 8785 (JCS) bytes of `value`; raises `CanonicalFormError` naming the bad member."""
    if _without_floats(value):
        try:
            return _SORTED_COMPACT.encode(value).encode("utf-8")
        except UnicodeEncodeError:
            pass  # a lone surrogate: the general writer names it
    import rfc8785  # loaded only for floats and the rare keys above (`cosigner-hook` starts faster)

    try:
        return rfc8785.dumps(value)
    except rfc8785.CanonicalizationError as exc:
        raise _locate(value, path) or CanonicalFormError(path, str(exc)) from exc


def parameters_digest(parameters: Any) -> str:
    """`sha256:` + hex of the JCS bytes of the unredacted parameters."""
    return digest_of_canonical(canonical_json(parameters, "parameters"))


def digest_of_canonical(canonical: bytes) -> str:
    """The digest of parameters whose JCS bytes (`canonical_json`) are already at hand."""
    return "sha256:" + hashlib.sha256(canonical).hexdigest()
