"""docs/test-vectors.md is checked against the code, so the published vectors cannot drift."""

from __future__ import annotations

import hashlib
import json
import re
import struct
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.hashes import SHA256
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat
from jwt.utils import base64url_encode

from bot.approvals.grants import GrantSigner
from contracts.digest import canonical_json, parameters_digest
from contracts.grants import GrantRefused, verify_grant

DOC = Path(__file__).resolve().parents[2] / "docs" / "test-vectors.md"


def blocks() -> list[Any]:
    found = re.findall(r"```json\n(.*?)\n```", DOC.read_text(encoding="utf-8"), flags=re.S)
    assert len(found) == 3, "the page has three JSON blocks: digests, numbers, grant"
    return [json.loads(b) for b in found]


DIGESTS, NUMBERS, GRANT = blocks()


@pytest.mark.parametrize("vector", DIGESTS, ids=[v["name"] for v in DIGESTS])
def test_canonical_form_and_digest(vector: dict[str, str]) -> None:
    value = json.loads(vector["input"])
    assert canonical_json(value).decode("utf-8") == vector["canonical"]
    assert parameters_digest(value) == vector["digest"]
    assert vector["digest"] == "sha256:" + hashlib.sha256(vector["canonical"].encode()).hexdigest()
    # Canonical text is a fixed point (numbers read as doubles, as JCS sees them).
    again = json.loads(vector["canonical"], parse_int=float)
    assert canonical_json(again).decode("utf-8") == vector["canonical"]


def test_the_page_covers_what_other_languages_get_wrong() -> None:
    inputs = " ".join(v["input"] for v in DIGESTS)
    for case in ["1e21", "0.1", "-0.0", "1.0", "\\ud83d\\ude00", "\\u0000", "9007199254740991"]:
        assert case in inputs, case
    assert sum(v.get("source") == "RFC 8785" for v in DIGESTS) >= 2


@pytest.mark.parametrize("vector", NUMBERS, ids=[v["ieee754"] for v in NUMBERS])
def test_numbers_from_rfc8785_appendix_b(vector: dict[str, str]) -> None:
    (number,) = struct.unpack(">d", bytes.fromhex(vector["ieee754"]))
    assert canonical_json(number).decode("ascii") == vector["canonical"]


def test_grant_vector_is_what_cosigner_issues() -> None:
    signer = GrantSigner(GRANT["secret"])
    assert signer.jwks() == GRANT["jwks"]
    assert signer.sign(GRANT["claims"]) == GRANT["token"]
    assert GRANT["claims"]["digest"] == parameters_digest(GRANT["parameters"])


def test_grant_key_derivation_is_as_documented() -> None:
    seed = HKDF(SHA256(), 32, None, b"cosigner grant signing key v2").derive(GRANT["secret"].encode())
    public = (
        Ed25519PrivateKey.from_private_bytes(seed).public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    )
    (jwk,) = GRANT["jwks"]["keys"]
    assert base64url_encode(public).decode() == jwk["x"]
    thumbprint_input = json.dumps({"crv": "Ed25519", "kty": "OKP", "x": jwk["x"]}, separators=(",", ":"))
    assert base64url_encode(hashlib.sha256(thumbprint_input.encode()).digest()).decode() == jwk["kid"]


def test_grant_vector_verifies_and_refuses_as_documented() -> None:
    claims = GRANT["claims"]
    check = {"tool_name": claims["toolName"], "tool_call_id": claims["toolCallId"]}
    got = verify_grant(
        GRANT["token"], GRANT["jwks"], parameters=GRANT["parameters"], now=GRANT["checkAt"], **check
    )
    assert (got.approval_id, got.tenant, got.digest) == (claims["sub"], claims["tenant"], claims["digest"])
    assert claims["iat"] <= GRANT["checkAt"] < claims["exp"]
    with pytest.raises(GrantRefused, match="expired"):
        verify_grant(
            GRANT["token"], GRANT["jwks"], parameters=GRANT["parameters"], now=claims["exp"] + 5, **check
        )
    with pytest.raises(GrantRefused, match="parameters differ"):
        verify_grant(
            GRANT["token"],
            GRANT["jwks"],
            parameters={**GRANT["parameters"], "amountCents": 1},
            now=GRANT["checkAt"],
            **check,
        )
