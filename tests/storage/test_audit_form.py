"""The audit chain hashes the same canonical form (RFC 8785) as the digest and the grants."""

from __future__ import annotations

import enum
import hashlib
import json
from collections import OrderedDict
from typing import Any

from contracts.digest import canonical_json
from storage.audit import GENESIS, Event, chain_hash, chain_rows, recordable


def test_events_are_stored_in_jcs_form() -> None:
    data = {"parameters": {"b": 1e21, "a": "Zoë 日本", "neg": -0.0}, "comment": None}
    rows, seq, head = chain_rows(
        "apv_1", "acme", 0, GENESIS, 1795975676.64, [Event("requested", {"kind": "agent"}, data)]
    )
    (row,) = rows
    assert row["data"] == '{"comment":null,"parameters":{"a":"Zoë 日本","b":1e+21,"neg":0}}'
    assert row["actor"] == '{"kind":"agent"}'
    assert (seq, head) == (1, row["hash"])


def test_chain_hash_is_sha256_over_the_previous_hash_and_the_jcs_envelope() -> None:
    actor, data = '{"kind":"agent"}', '{"comment":"ok \\u00e9\\n"}'
    envelope = {
        "approvalId": "apv_1",
        "tenant": "acme",
        "seq": 3,
        "at": repr(1795975676.64),
        "event": "approved",
        "actor": actor,
        "data": data,
    }
    expected = hashlib.sha256(b"f" * 64 + canonical_json(envelope)).hexdigest()
    assert chain_hash("f" * 64, "apv_1", "acme", 3, 1795975676.64, "approved", actor, data) == expected
    # Chains written before version 0.2 hashed json.dumps(sort_keys, compact, ensure_ascii=False)
    # of this envelope; for its ASCII keys, text values and small integer that is the same
    # bytes, so they still verify.
    before = json.dumps(envelope, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()
    assert before == canonical_json(envelope)


class Colour(enum.Enum):
    RED = "red"


def test_values_without_a_json_form_are_recorded_as_text() -> None:
    odd: dict[Any, Any] = {
        "tuple": (1, 2),
        "huge": 2**64,
        "nan": float("nan"),
        "object": Colour.RED,
        "surrogate": "a\ud800b",
        1: "non-string key",
    }
    plain = recordable(odd)
    assert plain == {
        "tuple": [1, 2],
        "huge": str(2**64),
        "nan": "nan",
        "object": "Colour.RED",
        "surrogate": "a\\ud800b",
        "1": "non-string key",
    }
    canonical_json(plain)
    rows, _seq, _head = chain_rows(
        "apv_1", "acme", 0, GENESIS, 1.5, [Event("note", {"kind": "surface"}, odd)]
    )
    assert json.loads(rows[0]["data"]) == plain


class Text(str):
    pass


class Number(enum.IntEnum):
    ONE = 1


def test_subclasses_of_the_json_types_are_recorded_like_the_types() -> None:
    # The exact types take a fast path; their subclasses must come out the same.
    value = OrderedDict(
        b=Text("x"), a=[Number.ONE, True, None, 2**60, ("t",)], c={Text("k"): 1.5, 2: "é"}, d="Zoë"
    )
    plain = recordable(value)
    assert plain == {"b": "x", "a": [1, True, None, str(2**60), ["t"]], "c": {"k": 1.5, "2": "é"}, "d": "Zoë"}
    assert type(plain) is dict and type(plain["c"]) is dict and type(plain["a"][4]) is list
    assert (
        canonical_json(plain)
        == '{"a":[1,true,null,"1152921504606846976",["t"]],"b":"x","c":{"2":"é","k":1.5},"d":"Zoë"}'.encode()
    )
