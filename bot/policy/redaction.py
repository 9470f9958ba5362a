"""Redaction and digests: what may leave Cosigner, and what binds a decision to a call.

`redact` runs before any surface, log line, callback or audit record sees parameters:
policy paths and secret-looking keys at any depth are replaced whole (`[REDACTED]`); a
credential-looking span inside a value (a card number, a JWT, an API key, a private key)
is masked in place (`payouts@attacker.example [hidden: JWT, 96 chars]`), so the rest of the
value stays in view and an agent cannot hide a field by putting a token-shaped string in it.
A policy's `show` paths un-hide a secret-looking key name the operator knows is not a
secret (an S3 object `key`); never a policy path, and never a masked span.
`digest` is over the *unredacted* parameters, so a grant binds the exact call.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable
from typing import Any

from contracts.digest import parameters_digest
from contracts.shown import REDACTED, mask_text

__all__ = [
    "REDACTED",
    "digest",
    "is_secret_key",
    "is_secret_value",
    "measure",
    "redact",
    "secret_spans",
    "shows",
    "spelling",
]

# Normalised (lower case, no separators) key fragments that mark a secret.
_SECRET_KEY_PARTS = (
    "password",
    "passwd",
    "passphrase",
    "secret",
    "token",
    "apikey",
    "accesskey",
    "privatekey",
    "authorization",
    "auth",
    "cookie",
    "cardnumber",
    "ccnumber",
    "creditcard",
    "cvv",
    "cvc",
    "ssn",
    "credential",
    "bearer",
    "pincode",
    "iban",
    "sessionid",
    "signature",
)
# Exact normalised keys that are secrets although short or generic.
_SECRET_KEYS = {"pan", "pwd", "otp", "key", "pin"}
# Key fragments that contain a fragment above but are not secrets.
_NOT_SECRET = ("author", "tokencount", "maxtokens", "tokenlimit", "tokensused")

# One alternative per kind of credential, named by the group that matched. A PEM private
# key is hidden up to its END line, or to the end of the value when that line is missing.
_SECRET_VALUES = re.compile(
    r"(?P<api_key>"
    r"sk_(?:live|test)_[A-Za-z0-9]{8,}"  # Stripe
    r"|xox[abposr]-[A-Za-z0-9-]{8,}"  # Slack tokens
    r"|AKIA[0-9A-Z]{16}"  # AWS access key id
    r"|gh[pousr]_[A-Za-z0-9]{20,}"  # GitHub
    r")"
    r"|(?P<private_key>-----BEGIN [A-Z ]*PRIVATE KEY-----(?:.*?-----END [A-Z ]*PRIVATE KEY-----|.*\Z))"
    r"|(?P<bearer_token>(?i:bearer)\s+[A-Za-z0-9._~+/=-]{16,})"
    r"|(?P<jwt>eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,})",
    re.DOTALL,
)
_KIND_WORDS = {
    "api_key": "API key",
    "private_key": "private key",
    "bearer_token": "bearer token",
    "jwt": "JWT",
}
# Digit groups joined by single spaces or dashes ("4242 4242 4242 4242 12/28").
_DIGIT_RUN = re.compile(r"\b\d+(?:[ -]\d+)*\b")
_GROUP = re.compile(r"\d+")


_NOT_ALNUM = re.compile(r"[^a-z0-9]")
# Key names repeat from call to call (one tool, the same parameters), so their verdicts are
# remembered; only short names, so a flood of huge distinct keys cannot grow the cache.
_CACHED_KEY_LENGTH = 64


def _normalise(key: str) -> str:
    if len(key) <= _CACHED_KEY_LENGTH:
        return _normalise_cached(key)
    return _normalise_text(key)


def _normalise_text(key: str) -> str:
    # NFKC first: "ｐassword" (fullwidth) would otherwise lose its first letter below and
    # slip past as "assword".
    return _NOT_ALNUM.sub("", unicodedata.normalize("NFKC", key).casefold())


_normalise_cached = functools.lru_cache(maxsize=4096)(_normalise_text)


def is_secret_key(key: str) -> bool:
    """True if a key name looks like it holds a credential or card data."""
    if len(key) <= _CACHED_KEY_LENGTH:
        return _is_secret_key_cached(key)
    return _is_secret_key(key)


def _is_secret_key(key: str) -> bool:
    k = _normalise(key)
    if k in _SECRET_KEYS:
        return True
    # An exemption only silences the fragments it contains: "author" excuses "auth", but
    # "authorization" and "authorToken" still name a secret.
    exempt = [ok for ok in _NOT_SECRET if ok in k]
    return any(part in k and not any(part in ok for ok in exempt) for part in _SECRET_KEY_PARTS)


_is_secret_key_cached = functools.lru_cache(maxsize=4096)(_is_secret_key)


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def is_secret_value(value: str) -> bool:
    """True if a string contains a known credential format or a card number."""
    return bool(secret_spans(value))


def secret_spans(value: str) -> list[tuple[int, int, str]]:
    """The credential-looking spans of `value` as (start, end, kind), in order, never overlapping."""
    found = [
        (m.start(), m.end(), _KIND_WORDS[m.lastgroup or "api_key"]) for m in _SECRET_VALUES.finditer(value)
    ]
    found.extend(_card_spans(value))
    merged: list[tuple[int, int, str]] = []
    for start, end, kind in sorted(found):
        if merged and start < merged[-1][1]:
            first = merged[-1]
            merged[-1] = (first[0], max(first[1], end), first[2])
        else:
            merged.append((start, end, kind))
    return merged


def _card_spans(value: str) -> list[tuple[int, int, str]]:
    # Check every span of whole groups, not just the whole run: a card number written next
    # to its expiry or CVV ("4242 4242 4242 4242 123") must not hide inside a longer run.
    spans = []
    for run in _DIGIT_RUN.finditer(value):
        groups = list(_GROUP.finditer(value, run.start(), run.end()))
        for first in range(len(groups)):
            digits = ""
            for group in groups[first:]:
                digits += group.group(0)
                if len(digits) > 19:
                    break
                if len(digits) >= 13 and _luhn(digits):
                    spans.append((groups[first].start(), group.end(), "card number"))
    return spans


def _mask(value: str) -> str:
    spans = secret_spans(value)
    if not spans:
        return value
    return mask_text(value, spans)


def redact(value: Any, paths: Iterable[str] = (), show: Iterable[str] = ()) -> Any:
    """Return a copy of `value` with policy `paths` and secret-named keys replaced, and
    credential-looking spans inside strings masked in place; a key `show` names is not
    replaced for its name alone (a path in `paths` still hides it).

    A path is dotted ("customer.email"); `*` matches any key or list index at that level;
    a path through a list applies to each element. `show` paths are written alike, without `*`.
    """
    return _redact(value, _split(paths), _split(show))


def _split(paths: Iterable[str]) -> list[tuple[str, ...]]:
    return [tuple(_segment(s) for s in p.split(".")) for p in paths]


def shows(show: Iterable[str], key: str) -> bool:
    """Whether a `show` path names this top-level key (by its normalised spelling)."""
    return (_segment(key),) in _split(show)


def spelling(name: str) -> str:
    """The spelling a path segment matches keys by: case, width and separators folded; `*` kept."""
    # An agent sending "Customer.EMAIL" or "customer.ｅmail" for the policy's "customer.email"
    # must not show it. Redacting a look-alike key too is the safe side.
    return name if name == "*" else _normalise(name)


_segment = spelling


def _redact(value: Any, paths: list[tuple[str, ...]], show: list[tuple[str, ...]]) -> Any:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            k = str(key)
            n = _segment(k)
            if any(len(p) == 1 and p[0] in (n, "*") for p in paths):
                out[k] = REDACTED
                continue
            # `show` un-hides the name alone: the value is still redacted within, as any is.
            if is_secret_key(k) and not any(s == (n,) for s in show):
                out[k] = REDACTED
                continue
            deeper = [p[1:] for p in paths if len(p) > 1 and p[0] in (n, "*")]
            out[k] = _redact(item, deeper, [s[1:] for s in show if len(s) > 1 and s[0] == n])
        return out
    if isinstance(value, list):
        # A path segment naming an index or "*" selects elements; other paths pass through.
        result = []
        for i, item in enumerate(value):
            deeper = [p[1:] for p in paths if len(p) > 1 and p[0] in (str(i), "*")]
            direct = any(len(p) == 1 and p[0] in (str(i), "*") for p in paths)
            passing = [p for p in paths if not p[0].isdigit() and p[0] != "*"]
            shown = [s[1:] for s in show if len(s) > 1 and s[0] == str(i)]
            shown += [s for s in show if not s[0].isdigit()]
            result.append(REDACTED if direct else _redact(item, deeper + passing, shown))
        return result
    if isinstance(value, str):
        return _mask(value)
    return value


def digest(parameters: Any) -> str:
    """`sha256:` + hex of the canonical JSON of the unredacted parameters."""
    return parameters_digest(parameters)


def measure(value: Any, limit_depth: int) -> int:
    """Nesting depth of a JSON value, stopping early once `limit_depth` is passed."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    deepest = 0
    while stack:
        item, depth = stack.pop()
        deepest = max(deepest, depth)
        if deepest > limit_depth:
            return deepest
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return deepest
