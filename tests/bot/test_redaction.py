"""Redaction (secret keys, policy paths, credential-looking values) and the parameters digest."""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.policy.redaction import REDACTED, digest, is_secret_key, is_secret_value, redact
from contracts.digest import SAFE_INTEGER, CanonicalFormError, canonical_json, parameters_digest
from contracts.shown import MASK

SECRET_KEYS = [
    "password",
    "Password",
    "user_password",
    "passwd",
    "api_key",
    "apiKey",
    "API-KEY",
    "X-Api-Key",
    "x_api_key",
    "Authorization",
    "authorization",
    "Proxy-Authorization",
    "cardToken",
    "card_token",
    "access_token",
    "refreshToken",
    "cookie",
    "Set-Cookie",
    "card_number",
    "cardNumber",
    "cc_number",
    "creditCard",
    "cvv",
    "CVC",
    "ssn",
    "client_secret",
    "secretKey",
    "private_key",
    "privateKey",
    "sessionId",
    "session_id",
    "credentials",
    "pin",
    "otp",
    "pwd",
    "iban",
    "webhookSignature",
    "authToken",
    "authorToken",
]
INNOCENT_KEYS = [
    "orderId",
    "amountCents",
    "currency",
    "customer",
    "items",
    "name",
    "note",
    "city",
    "quantity",
    "sku",
    "tags",
    "description",
    "author",
    "maxTokens",
    "tokenCount",
    "status",
    "createdAt",
    "email",
    "address",
    "reason",
    "keyboard_layout",
]
# Values under secret keys carry a marker the innocent alphabet cannot produce.
MARK = "ZQ#"

_innocent_text = st.text(alphabet="abcdefghijklmnopqrstuvwxyz ,.é日", max_size=12)
_leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**6), 10**6),
    st.floats(allow_nan=False, allow_infinity=False),
    _innocent_text,
)
_secret_values = st.one_of(
    st.text(min_size=1, max_size=16).map(lambda s: MARK + s),
    st.lists(st.text(max_size=8).map(lambda s: MARK + s), min_size=1, max_size=3),
    st.dictionaries(
        st.sampled_from(INNOCENT_KEYS), st.text(max_size=8).map(lambda s: MARK + s), min_size=1, max_size=3
    ),
)


def _dicts(children: st.SearchStrategy[tuple[Any, Any]]) -> st.SearchStrategy[tuple[Any, Any]]:
    """(input, expected) dicts: innocent entries recurse, secret entries become REDACTED."""

    def build(parts: tuple[dict[str, tuple[Any, Any]], list[tuple[str, Any]]]) -> tuple[Any, Any]:
        plain, secrets = parts
        given_ = {k: pair[0] for k, pair in plain.items()}
        expected = {k: pair[1] for k, pair in plain.items()}
        for key, value in secrets:
            given_[key] = value
            expected[key] = REDACTED
        return given_, expected

    return st.tuples(
        st.dictionaries(st.sampled_from(INNOCENT_KEYS), children, max_size=4),
        st.lists(st.tuples(st.sampled_from(SECRET_KEYS), _secret_values), max_size=2),
    ).map(build)


def _lists(children: st.SearchStrategy[tuple[Any, Any]]) -> st.SearchStrategy[tuple[Any, Any]]:
    return st.lists(children, max_size=4).map(lambda xs: ([a for a, _ in xs], [b for _, b in xs]))


pairs = st.recursive(
    _leaves.map(lambda v: (v, v)),
    lambda children: st.one_of(_dicts(children), _lists(children)),
    max_leaves=25,
)
documents = st.one_of(_dicts(pairs), _dicts(pairs).map(lambda p: ({"wrap": [p[0]]}, {"wrap": [p[1]]})))


@settings(max_examples=300)
@given(documents)
def test_secret_keys_at_any_depth_are_redacted_and_nothing_else_changes(pair: tuple[Any, Any]) -> None:
    given_, expected = pair
    before = copy.deepcopy(given_)
    out = redact(given_)
    assert MARK not in json.dumps(out, ensure_ascii=False)
    assert out == expected, "non-secret values must survive unchanged"
    assert given_ == before, "redact must not mutate its input"


@pytest.mark.parametrize("key", SECRET_KEYS)
def test_each_secret_key_is_recognised(key: str) -> None:
    assert is_secret_key(key)
    out = redact({"outer": [{"inner": {key: "hunter2"}}]})
    assert "hunter2" not in json.dumps(out)


@pytest.mark.parametrize("key", INNOCENT_KEYS)
def test_innocent_keys_are_kept(key: str) -> None:
    assert not is_secret_key(key)
    assert redact({key: "plain value"}) == {key: "plain value"}


def test_policy_paths() -> None:
    params = {
        "customer": {"email": "a@example.com", "name": "Ann"},
        "items": [{"sku": "s1", "iban": "DE89370400440532013000", "note": "n1"}, {"sku": "s2", "note": "n2"}],
        "email": "top@example.com",
    }
    before = copy.deepcopy(params)
    out = redact(params, ["customer.email", "items.*.note"])
    assert out["customer"] == {"email": REDACTED, "name": "Ann"}
    assert out["items"] == [
        {"sku": "s1", "iban": REDACTED, "note": REDACTED},
        {"sku": "s2", "note": REDACTED},
    ]
    assert out["email"] == "top@example.com", "a path matches from the top, not anywhere"
    assert params == before


def test_policy_paths_star_and_index_and_whole_subtrees() -> None:
    params = {
        "items": [{"iban": "x1", "a": 1}, {"iban": "x2", "a": 2}],
        "customer": {"address": {"city": "Oslo", "zip": "0150"}},
        "lines": ["l0", "l1", "l2"],
    }
    out = redact(params, ["items.*.iban", "customer.address", "lines.1"])
    assert out["items"] == [{"iban": REDACTED, "a": 1}, {"iban": REDACTED, "a": 2}]
    assert out["customer"] == {"address": REDACTED}
    assert out["lines"] == ["l0", REDACTED, "l2"]
    # A path reaching into a list without a star applies to every element.
    assert redact({"people": [{"email": "e1"}, {"email": "e2", "n": 1}]}, ["people.email"]) == {
        "people": [{"email": REDACTED}, {"email": REDACTED, "n": 1}]
    }
    # A path that matches nothing changes nothing.
    assert redact({"a": {"b": 1}}, ["a.c", "x.y.z"]) == {"a": {"b": 1}}


@st.composite
def _path_cases(draw: st.DrawFn) -> tuple[dict[str, Any], list[str], str]:
    """A nested dict with one innocent-keyed leaf holding a marker, and the path to it."""
    keys = draw(st.lists(st.sampled_from(INNOCENT_KEYS), min_size=1, max_size=5))
    marker = "PATHMARK" + draw(st.text(alphabet="abc", max_size=5))
    tree: Any = marker
    for k in reversed(keys):
        tree = {k: tree, "sibling": "kept"}
    return tree, [".".join(keys)], marker


@given(_path_cases())
def test_generated_policy_paths_are_redacted(case: tuple[dict[str, Any], list[str], str]) -> None:
    tree, paths, marker = case
    out = redact(tree, paths)
    text = json.dumps(out)
    assert marker not in text
    assert "kept" in text


STRIPE = "sk_live_" + "4eC39HqLyjWDarjtT1zdp7dc"
CREDENTIALS = [
    STRIPE,
    "sk_test_" + "abcdefgh12345678",
    "xoxb-" + "123456789012-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx",
    "xoxp-" + "1234-5678-abcdefgh",
    "AKIA" + "IOSFODNN7EXAMPLE",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----",
    "-----BEGIN PRIVATE KEY-----\nMIIEvQ",
    "-----BEGIN OPENSSH PRIVATE KEY-----",
    "4242424242424242",
    "4111 1111 1111 1111",
    "5555-5555-5555-4444",
    "card on file: 378282246310005, thanks",
    "4242 4242 4242 4242 12/28",
    "4242424242424242 123",
    "Bearer abcdefghijklmnop1234",
    "ghp_" + "a" * 36,
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N",
]


@pytest.mark.parametrize("value", CREDENTIALS)
def test_credential_values_are_masked_under_innocent_keys(value: str) -> None:
    assert is_secret_value(value)
    out = redact({"note": value, "items": [{"description": value}], "tags": [value]})
    assert value not in json.dumps(out)
    assert MASK.search(out["note"]), out
    assert out["items"][0]["description"] == out["note"] == out["tags"][0]
    assert list(out) == ["note", "items", "tags"], "keys are never hidden"


# The two payloads the card once hid whole, and credentials inside ordinary text: only the
# credential is masked, the words around it stay.
JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    ".eyJzdWIiOiJwYXlvdXRzIiwiYW1vdW50Ijo1MDAwMCwiaWF0IjoxNzAwMDAwMDAwfQ"
    ".SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
)
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA\n-----END RSA PRIVATE KEY-----"
IN_TEXT = [
    (f"payouts@attacker.example {JWT}", f"payouts@attacker.example [hidden: JWT, {len(JWT)} chars]"),
    (
        "Wire $50,000 to acct 4111111111111111 today",
        "Wire $50,000 to acct [hidden: card number, 16 chars] today",
    ),
    ("pay with 4242 4242 4242 4242 12/28 please", "pay with [hidden: card number, 19 chars] 12/28 please"),
    (f"use key {STRIPE} for acme", f"use key [hidden: API key, {len(STRIPE)} chars] for acme"),
    ("id AKIAIOSFODNN7EXAMPLE, region eu", "id [hidden: API key, 20 chars], region eu"),
    ("header: Bearer abcdefghijklmnop1234 end", "header: [hidden: bearer token, 27 chars] end"),
    (
        f"key:\n{PEM}\nsend to bob",
        f"key:\n[hidden: private key, {len(PEM)} chars]\nsend to bob",
    ),
    # A private key without its END line hides everything after BEGIN: fail closed.
    ("cert -----BEGIN PRIVATE KEY-----\nMIIEvQ rest", "cert [hidden: private key, 39 chars]"),
]


@pytest.mark.parametrize(("value", "shown"), IN_TEXT)
def test_credentials_inside_text_are_masked_in_place(value: str, shown: str) -> None:
    out = redact({"to": value, "nested": [{"memo": value}]})
    assert out == {"to": shown, "nested": [{"memo": shown}]}


def test_the_attack_payload_keeps_every_visible_word() -> None:
    params = {"to": f"payouts@attacker.example {JWT}", "body": "Wire $50,000 to acct 4111111111111111 today"}
    out = redact(params)
    assert out["to"].startswith("payouts@attacker.example [hidden: JWT, ")
    assert out["body"] == "Wire $50,000 to acct [hidden: card number, 16 chars] today"
    assert JWT not in json.dumps(out) and "4111111111111111" not in json.dumps(out)
    assert digest(params) != digest(out), "the digest binds the real values"


@pytest.mark.parametrize(
    "value",
    [
        "4111111111111112",  # fails the Luhn check
        "ord_4421",
        "+15550000002",
        "12900",
        "2026-11-01T00:00:00Z",
        "sk_live_short",
        "the author of the token guide",
        "AKIA-not-a-key",
        "0150",
    ],
)
def test_ordinary_values_are_kept(value: str) -> None:
    assert not is_secret_value(value)
    assert redact({"note": value}) == {"note": value}


def _luhn_complete(digits: list[int]) -> str:
    """Append the Luhn check digit."""
    total = 0
    for i, d in enumerate(reversed(digits)):
        if i % 2 == 0:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return "".join(map(str, digits)) + str((10 - total % 10) % 10)


@given(
    st.lists(st.integers(0, 9), min_size=12, max_size=18),
    st.sampled_from(["", " ", "-"]),
    st.sampled_from(["", "card ", "pay with ", "qty 2 "]),
    st.sampled_from(["", " 12/28", " 123", "-0925", ", thanks"]),
)
def test_luhn_valid_card_numbers_are_redacted(digits: list[int], sep: str, prefix: str, suffix: str) -> None:
    number = _luhn_complete(digits)
    shown = sep.join(number[i : i + 4] for i in range(0, len(number), 4))
    memo = redact({"memo": prefix + shown + suffix})["memo"]
    assert shown not in memo and number not in memo.replace(" ", "").replace("-", "")
    assert "[hidden: card number, " in memo
    # The words around it stay (a digit next to the number may be masked with it when the
    # longer run is also Luhn-valid: hiding more is the safe side).
    assert all(word in memo for word in (prefix + suffix).replace(",", " ").split() if word.isalpha())
    # One digit changed breaks the checksum, and the value is an ordinary string again.
    broken = number[:-1] + str((int(number[-1]) + 1) % 10)
    assert redact({"memo": broken}) == {"memo": broken}


# --- digest ----------------------------------------------------------------------------


def test_digest_is_sha256_of_canonical_json() -> None:
    params = {
        "orderId": "ord_4421",
        "amountCents": 12900,
        "cardToken": "tok_x",
        "customer": {"name": "Zoë", "email": "z@example.com"},
        "tags": ["a", "b"],
    }
    canonical = (
        '{"amountCents":12900,"cardToken":"tok_x","customer":{"email":"z@example.com",'
        '"name":"Zoë"},"orderId":"ord_4421","tags":["a","b"]}'
    )
    assert canonical_json(params) == canonical.encode("utf-8")
    expected = "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    assert parameters_digest(params) == expected
    assert digest(params) == expected


def test_digest_is_over_unredacted_parameters() -> None:
    params = {"cardToken": "tok_a", "amountCents": 1}
    assert digest(params) != digest(redact(params))
    assert digest(params) != digest({"cardToken": "tok_b", "amountCents": 1})


json_values = st.recursive(
    st.one_of(
        st.none(),
        st.booleans(),
        st.integers(-SAFE_INTEGER, SAFE_INTEGER),
        st.text(),
        st.floats(allow_nan=False, allow_infinity=False),
    ),
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=4)
    ),
    max_leaves=20,
)


def _shuffled(value: Any, rnd: Any) -> Any:
    if isinstance(value, dict):
        items = list(value.items())
        rnd.shuffle(items)
        return {k: _shuffled(v, rnd) for k, v in items}
    if isinstance(value, list):
        return [_shuffled(v, rnd) for v in value]
    return value


@given(st.dictionaries(st.text(max_size=6), json_values, max_size=6), st.randoms())
def test_digest_ignores_key_order(params: dict[str, Any], rnd: Any) -> None:
    expected = "sha256:" + hashlib.sha256(canonical_json(params)).hexdigest()
    assert parameters_digest(params) == expected
    assert parameters_digest(_shuffled(params, rnd)) == expected


@given(
    st.dictionaries(st.text(max_size=6), json_values, min_size=1, max_size=6),
    st.dictionaries(st.text(max_size=6), json_values, min_size=1, max_size=6),
)
def test_digest_differs_for_different_values(a: dict[str, Any], b: dict[str, Any]) -> None:
    if canonical_json(a) != canonical_json(b):
        assert parameters_digest(a) != parameters_digest(b)
    key = next(iter(a))
    changed = dict(a)
    changed[key] = [a[key]]
    assert parameters_digest(changed) != parameters_digest(a)


def test_digest_keeps_unicode_unescaped_and_rejects_nan() -> None:
    assert canonical_json({"n": "日本"}) == '{"n":"日本"}'.encode()
    assert parameters_digest({"n": "日本"}) != parameters_digest({"n": "\\u65e5\\u672c"})
    with pytest.raises(CanonicalFormError, match=r"parameters\.x: is NaN or Infinity"):
        parameters_digest({"x": float("nan")})
    with pytest.raises(CanonicalFormError, match=r"parameters\.ids\[1\]: .*send it as a string"):
        parameters_digest({"ids": [1, 2**53]})


def test_the_documented_digest_test_vector() -> None:
    from contracts.digest import parameters_digest

    assert parameters_digest({"b": 1, "a": "é"}) == (
        "sha256:aa58fba8483623bed37c1b02edfccbdd9a53123837c20bfa4cb4049993a2872e"
    )
