"""Write `sdk/conformance.json`: the vectors both SDKs must reproduce exactly.

    python -m tests.sdk.conformance        # rewrite the file after a deliberate change

The digests and the grant of docs/test-vectors.md, more digests, grants with the check each
must pass or fail, and Standard Webhooks signatures made by the `standardwebhooks` PyPI
package. Everything is deterministic (Ed25519 signatures, fixed ids and times), so the file
only changes when the rules change; `tests/sdk/test_conformance.py` fails if it is stale, and
the TypeScript SDK's tests read the same file.
"""

from __future__ import annotations

import base64
import json
import re
import struct
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from standardwebhooks.webhooks import Webhook

from bot.approvals.bodies import grant_id
from bot.approvals.grants import GrantSigner
from cosigner.decision import parse_approval
from cosigner.digest import canonical_json, parameters_digest
from cosigner.errors import ParametersMismatch
from cosigner.grants import GRANT_DETAIL_TYPE

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "test-vectors.md"
FILE = REPO / "sdk" / "conformance.json"

# More digest inputs than the page has, as JSON text, covering what JSON libraries disagree on.
EXTRA_DIGESTS: list[tuple[str, str]] = [
    ("deeply nested", '{"a": {"b": {"c": {"d": {"e": [1, [2, [3, {"f": "g"}]]]}}}}}'),
    ("keys that differ in case", '{"b": 1, "B": 2, "a": 3, "A": 4, "_": 5, "0": 6}'),
    ("empty key and empty values", '{"": "", "list": [], "obj": {}, "nil": null}'),
    ("booleans and null in arrays", '[true, false, null, [true], {"x": false}]'),
    ("negative and fractional numbers", '{"n": -1, "f": -0.5, "e": -1.5e-10, "p": 123.456, "h": 100.0}'),
    ("large doubles", '{"a": 1e300, "b": -1e-300, "c": 5e-324, "d": 1.7976931348623157e308}'),
    ("integers written as floats", '{"a": 12900.0, "b": 1e2, "c": 0.0, "d": -0.0}'),
    ("emoji and combining marks", '{"text": "e\\u0301 \\ud83d\\udc69\\u200d\\ud83d\\udcbb \\u00e9"}'),
    ("line and paragraph separators", '{"s": "a\\u2028b\\u2029c"}'),
    ("all control characters", json.dumps({"c": "".join(chr(i) for i in range(32))})),
    (
        "a refund as an agent sends it",
        '{"orderId": "ord_4421", "amountCents": 12900, "currency": "EUR", '
        '"lines": [{"sku": "A-1", "qty": 2, "price": 19.99}, {"sku": "B-2", "qty": 1, "price": 5.5}], '
        '"note": "Kunde sagt: \\"Rabatt fehlt\\" \\u2013 bitte pr\\u00fcfen"}',
    ),
]

WEBHOOK_SECRET = "whsec_" + base64.b64encode(bytes(range(32))).decode()
WEBHOOK_BODY = {
    "type": "approval_decided",
    "approvalId": "apv_7Kq2",
    "executionId": "run_81",
    "toolCallId": "call_7",
    "toolName": "issue_refund",
    "status": "approved",
    "decidedBy": {"kind": "person", "surface": "slack", "userId": "U2", "teamId": "T1"},
    "decidedAt": "2026-11-30T09:20:10Z",
    "comment": "ok – geprüft",
    "parametersDigest": "sha256:bf4315b9037a003e9c3237800c03fa8487029f2803b8f22522a1f9751cbf582b",
    "grant": None,
}


QUORUM_APPROVERS = [{"by": "U0ANN", "surface": "slack"}, {"by": "+15550000012", "surface": "sms"}]
QUORUM_DECISION = {
    **WEBHOOK_BODY,
    "approvalId": "apv_7Kq2LmN4pQ8rS1tU3vW5",
    "decidedBy": {"kind": "person", "surface": "sms", "userId": "+15550000012"},
    "quorum": 2,
    "approvals": [
        {"by": "U0ANN", "surface": "slack", "at": "2026-11-30T09:18:02.500Z"},
        {"by": "+15550000012", "surface": "sms", "at": "2026-11-30T09:20:10Z"},
    ],
}


def decisions() -> list[dict[str, Any]]:
    """Decision objects both SDKs must read the same: a quorum's, a pending one, and one from a
    server that predates quorums (no `quorum` nor `approvals`: one approval decides)."""
    pending = {
        "type": "approval_start",
        "approvalId": "apv_7Kq3LmN4pQ8rS1tU3vW5",
        "executionId": "run_81",
        "toolCallId": "call_8",
        "toolName": "delete_account",
        "parameters": {"accountId": "acct_9"},
        "parametersDigest": parameters_digest({"accountId": "acct_9"}),
        "timeout": 300000,
        "startedAt": "2026-11-30T09:15:00Z",
        "expiresAt": "2026-11-30T09:20:00Z",
        "status": "pending",
        "shortCode": "4821",
        "quorum": 3,
        "approvals": [{"by": "u_ann", "surface": "dashboard", "at": "2026-11-30T09:16:00Z"}],
    }
    return [
        {
            "name": "approved by a quorum of two",
            "body": QUORUM_DECISION,
            "quorum": 2,
            "approvers": ["U0ANN", "+15550000012"],
        },
        {"name": "pending, one of three", "body": pending, "quorum": 3, "approvers": ["u_ann"]},
        {
            "name": "from a server without quorums",
            "body": {**WEBHOOK_BODY, "approvalId": "apv_7Kq4LmN4pQ8rS1tU3vW5"},
            "quorum": 1,
            "approvers": [],
        },
    ]


def doc_blocks() -> list[Any]:
    """The three JSON blocks of docs/test-vectors.md: digests, numbers, grant."""
    found = re.findall(r"```json\n(.*?)\n```", DOC.read_text(encoding="utf-8"), flags=re.S)
    return [json.loads(b) for b in found]


def digests(page: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The page's digest vectors, then the extra ones computed by the Python SDK."""
    out = [dict(v) for v in page]
    for name, text in EXTRA_DIGESTS:
        value = json.loads(text)
        out.append(
            {
                "name": name,
                "input": text,
                "canonical": canonical_json(value).decode("utf-8"),
                "digest": parameters_digest(value),
            }
        )
    return out


def grants(doc: dict[str, Any]) -> dict[str, Any]:
    """The page's grant, plus further tokens, each with the checks it must pass or fail."""
    signer = GrantSigner(doc["secret"])
    claims = doc["claims"]
    check_at = doc["checkAt"]
    token = doc["token"]
    head, payload, signature = token.split(".")
    flipped = signature[:10] + ("A" if signature[10] != "A" else "B") + signature[11:]
    other_params = {"orderId": "ord_4421", "amountCents": 12901, "cardToken": "tok_x"}
    unicode_params = {"note": "Zoë – 日本 😀", "amount": 0.1, "big": 1e21}
    unicode_claims = {**claims, "toolCallId": "call_8", "digest": parameters_digest(unicode_params)}
    cases: list[dict[str, Any]] = [
        {"name": "the page's grant", "token": token, "parameters": doc["parameters"], "ok": True},
        {
            "name": "other parameters",
            "token": token,
            "parameters": other_params,
            "ok": False,
            "refusal": "parameters",
        },
        {
            "name": "another tool",
            "token": token,
            "parameters": doc["parameters"],
            "toolName": "delete_user",
            "ok": False,
            "refusal": "tool",
        },
        {
            "name": "another tool call",
            "token": token,
            "parameters": doc["parameters"],
            "toolCallId": "call_other",
            "ok": False,
            "refusal": "tool call",
        },
        {
            "name": "checked at exp plus leeway",
            "token": token,
            "parameters": doc["parameters"],
            "checkAt": claims["exp"] + 5,
            "ok": False,
            "refusal": "expired",
        },
        {
            "name": "issued in the future",
            "token": token,
            "parameters": doc["parameters"],
            "checkAt": claims["iat"] - 60,
            "ok": False,
            "refusal": "future",
        },
        {
            "name": "a flipped signature byte",
            "token": f"{head}.{payload}.{flipped}",
            "parameters": doc["parameters"],
            "ok": False,
            "refusal": "signature",
        },
        {
            "name": "claims swapped under the same signature",
            "token": f"{head}.{signer.sign(unicode_claims).split('.')[1]}.{signature}",
            "parameters": unicode_params,
            "toolCallId": "call_8",
            "ok": False,
            "refusal": "signature",
        },
        {
            "name": "unicode and float parameters",
            "token": signer.sign(unicode_claims),
            "parameters": unicode_params,
            "toolCallId": "call_8",
            "ok": True,
        },
        {
            "name": "not three parts",
            "token": f"{head}.{payload}",
            "parameters": doc["parameters"],
            "ok": False,
            "refusal": "malformed",
        },
        {
            "name": "signed by another key",
            "token": GrantSigner("another-secret").sign(claims),
            "parameters": doc["parameters"],
            "ok": False,
            "refusal": "unknown key",
        },
        {
            "name": "a quorum's grant names every approver",
            "token": signer.sign({**claims, "approvers": QUORUM_APPROVERS}),
            "parameters": doc["parameters"],
            "ok": True,
            "approvers": QUORUM_APPROVERS,
        },
    ]
    cases += standard_claim_cases(signer, claims, doc["parameters"])
    for case in cases:
        case.setdefault("toolName", claims["toolName"])
        case.setdefault("toolCallId", claims["toolCallId"])
        case.setdefault("checkAt", check_at)
    return {"jwks": signer.jwks(), "claims": claims, "cases": cases}


EXECUTOR = "payments-executor"


def standard_claim_cases(
    signer: GrantSigner, claims: dict[str, Any], parameters: Any
) -> list[dict[str, Any]]:
    """Grants with `jti`, `aud` and RFC 9396 `authorization_details`, as the server signs them
    (`bot.approvals.bodies.standard_claims`), and each check of them that must pass or fail.
    `audience` is the executor checking; `seen` the grant ids it has used already."""
    jti = grant_id(claims["sub"], claims["digest"], claims["iat"])
    detail = {"type": GRANT_DETAIL_TYPE, "tool": claims["toolName"], "parameters_digest": claims["digest"]}
    full = {**claims, "jti": jti, "authorization_details": [detail]}
    addressed = {**full, "aud": EXECUTOR}

    def sign(**changes: Any) -> str:
        return signer.sign({**full, **changes})

    return [
        {"name": "standard claims", "token": sign(), "parameters": parameters, "ok": True, "jti": jti},
        {
            "name": "standard claims, first use against a seen-set",
            "token": sign(),
            "parameters": parameters,
            "seen": ["grt_someOtherGrant"],
            "ok": True,
            "jti": jti,
        },
        {
            "name": "standard claims, used already",
            "token": sign(),
            "parameters": parameters,
            "seen": [jti],
            "ok": False,
            "refusal": "used already",
        },
        {
            "name": "a grant without jti against a seen-set",
            "token": signer.sign(claims),
            "parameters": parameters,
            "seen": [],
            "ok": False,
            "refusal": "no 'jti'",
        },
        {
            "name": "for this executor",
            "token": signer.sign(addressed),
            "parameters": parameters,
            "audience": EXECUTOR,
            "ok": True,
            "jti": jti,
            "aud": EXECUTOR,
        },
        {
            "name": "for another executor",
            "token": signer.sign(addressed),
            "parameters": parameters,
            "audience": "ledger-executor",
            "ok": False,
            "refusal": "audience",
        },
        {
            "name": "naming an audience, checked without one",
            "token": signer.sign(addressed),
            "parameters": parameters,
            "ok": False,
            "refusal": "audience",
        },
        {
            "name": "naming no audience, checked by an executor that expects one",
            "token": sign(),
            "parameters": parameters,
            "audience": EXECUTOR,
            "ok": False,
            "refusal": "audience",
        },
        {
            "name": "authorization_details for another tool",
            "token": sign(authorization_details=[{**detail, "tool": "delete_user"}]),
            "parameters": parameters,
            "ok": False,
            "refusal": "another tool than",
        },
        {
            "name": "authorization_details for other parameters",
            "token": sign(authorization_details=[{**detail, "parameters_digest": "sha256:" + "0" * 64}]),
            "parameters": parameters,
            "ok": False,
            "refusal": "other parameters",
        },
        {
            "name": "authorization_details with two tool calls",
            "token": sign(authorization_details=[detail, detail]),
            "parameters": parameters,
            "ok": False,
            "refusal": "one 'cosigner_tool_call' entry",
        },
        {
            "name": "authorization_details naming arguments the grant does not bind",
            "token": sign(authorization_details=[{**detail, "arguments_digest": "sha256:" + "1" * 64}]),
            "parameters": parameters,
            "ok": False,
            "refusal": "other arguments",
        },
        {
            "name": "authorization_details that is not a list",
            "token": sign(authorization_details=detail),
            "parameters": parameters,
            "ok": False,
            "refusal": "must be a list",
        },
    ]


def webhooks() -> dict[str, Any]:
    """Callbacks signed by the `standardwebhooks` PyPI package, and how each must be judged."""
    hook = Webhook(WEBHOOK_SECRET)
    body = json.dumps(WEBHOOK_BODY, separators=(",", ":"), ensure_ascii=False)
    timestamp = 1795975210
    msg_id = "msg_2Lq8ZrJ0b5pXo1"
    signature = hook.sign(msg_id, datetime.fromtimestamp(timestamp, UTC), body)
    other = Webhook("whsec_" + base64.b64encode(b"another secret of 32 bytes long!").decode())
    cases: list[dict[str, Any]] = [
        {
            "name": "signed by standardwebhooks",
            "id": msg_id,
            "timestamp": timestamp,
            "body": body,
            "signature": signature,
            "ok": True,
        },
        {
            "name": "two signatures, one valid",
            "id": msg_id,
            "timestamp": timestamp,
            "body": body,
            "signature": f"v1,{base64.b64encode(b'x' * 32).decode()} {signature}",
            "ok": True,
        },
        {
            "name": "altered body",
            "id": msg_id,
            "timestamp": timestamp,
            "body": body.replace("approved", "denied", 1),
            "signature": signature,
            "ok": False,
        },
        {
            "name": "another delivery id",
            "id": "msg_other",
            "timestamp": timestamp,
            "body": body,
            "signature": signature,
            "ok": False,
        },
        {
            "name": "signed with another secret",
            "id": msg_id,
            "timestamp": timestamp,
            "body": body,
            "signature": other.sign(msg_id, datetime.fromtimestamp(timestamp, UTC), body),
            "ok": False,
        },
        {
            "name": "too old",
            "id": msg_id,
            "timestamp": timestamp,
            "body": body,
            "signature": signature,
            "checkAt": timestamp + 301,
            "ok": False,
        },
    ]
    for case in cases:
        case.setdefault("checkAt", timestamp + 10)
    return {"secret": WEBHOOK_SECRET, "tolerance": 300, "cases": cases}


def numbers(page: list[dict[str, str]]) -> list[dict[str, str]]:
    """RFC 8785 appendix B, checked here against the Python SDK before it is written."""
    for vector in page:
        (number,) = struct.unpack(">d", bytes.fromhex(vector["ieee754"]))
        assert canonical_json(number).decode("ascii") == vector["canonical"], vector
    return page


def edits() -> list[dict[str, Any]]:
    """Edited decisions: the call asked, the decision, and the call to run that follows (the
    asked call with `editedFields` taken from `parameters`), or a refusal when it does not
    match `digest`. Worked out by the Python SDK's `Decision.with_original`."""
    asked = {"orderId": "ord_4421", "amountCents": 40000, "note": "late", "cardToken": "tok_x"}
    edited = {**asked, "amountCents": 4000, "note": "goodwill: 10 %"}
    shown = {**edited, "cardToken": "[REDACTED]"}
    decision = {
        "type": "approval_decided",
        "approvalId": "apv_AAAAAAAAAAAAAAAAAAAA",
        "executionId": "run_81",
        "toolCallId": "call_7",
        "toolName": "issue_refund",
        "status": "approved",
        "decidedBy": {"kind": "person", "surface": "slack", "userId": "U2", "teamId": "T1"},
        "decidedAt": "2026-11-30T09:20:10.000Z",
        "comment": None,
        "parametersDigest": parameters_digest(edited),
        "grant": None,
        "edited": True,
        "parameters": shown,
        "editedFields": ["amountCents", "note"],
        "originalDigest": parameters_digest(asked),
        "digest": parameters_digest(edited),
    }
    cases: list[dict[str, Any]] = []
    for name, original in [("the call as asked", asked), ("another call", {**asked, "cardToken": "tok_y"})]:
        try:
            run = parse_approval(json.dumps(decision)).with_original(original).parameters
            cases.append({"name": name, "asked": original, "decision": decision, "ok": True, "run": run})
        except ParametersMismatch:
            cases.append({"name": name, "asked": original, "decision": decision, "ok": False})
    return cases


def vectors() -> dict[str, Any]:
    """The whole file's content."""
    page_digests, page_numbers, page_grant = doc_blocks()
    return {
        "version": 1,
        "about": "Generated by `python -m tests.sdk.conformance`; both SDKs' tests read it. Do not edit.",
        "digests": digests(page_digests),
        "numbers": numbers(page_numbers),
        "grants": grants(page_grant),
        "webhooks": webhooks(),
        "edits": edits(),
        "decisions": decisions(),
    }


def text() -> str:
    """The file as written: one-space-indented JSON, UTF-8, one trailing newline."""
    return json.dumps(vectors(), indent=1, ensure_ascii=False) + "\n"


if __name__ == "__main__":
    FILE.write_text(text(), encoding="utf-8")
    print(f"wrote {FILE.relative_to(REPO)}")
