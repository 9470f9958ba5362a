"""sdk/conformance.json, the vectors the TypeScript SDK's tests also read, hold for the Python SDK."""

from __future__ import annotations

import hashlib
import json
import struct
from typing import Any

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

from cosigner.decision import parse_approval
from cosigner.digest import canonical_json, parameters_digest
from cosigner.grants import GrantRefused, verify_grant
from tests.sdk import conformance

VECTORS = json.loads(conformance.FILE.read_text(encoding="utf-8"))
GRANTS = VECTORS["grants"]
HOOKS = VECTORS["webhooks"]


def test_the_file_is_what_the_generator_writes() -> None:
    assert conformance.FILE.read_text(encoding="utf-8") == conformance.text(), (
        "sdk/conformance.json is stale: run `python -m tests.sdk.conformance` and commit it"
    )


def test_the_file_carries_the_documented_vectors() -> None:
    page_digests, page_numbers, page_grant = conformance.doc_blocks()
    assert VECTORS["digests"][: len(page_digests)] == page_digests
    assert VECTORS["numbers"] == page_numbers
    assert GRANTS["cases"][0]["token"] == page_grant["token"]
    assert GRANTS["jwks"] == page_grant["jwks"]


@pytest.mark.parametrize("vector", VECTORS["digests"], ids=[v["name"] for v in VECTORS["digests"]])
def test_digest(vector: dict[str, str]) -> None:
    value = json.loads(vector["input"])
    assert canonical_json(value).decode("utf-8") == vector["canonical"]
    assert parameters_digest(value) == vector["digest"]
    assert vector["digest"] == "sha256:" + hashlib.sha256(vector["canonical"].encode()).hexdigest()


@pytest.mark.parametrize("vector", VECTORS["numbers"], ids=[v["ieee754"] for v in VECTORS["numbers"]])
def test_number(vector: dict[str, str]) -> None:
    (number,) = struct.unpack(">d", bytes.fromhex(vector["ieee754"]))
    assert canonical_json(number).decode("ascii") == vector["canonical"]


@pytest.mark.parametrize("case", GRANTS["cases"], ids=[c["name"] for c in GRANTS["cases"]])
def test_grant(case: dict[str, Any]) -> None:
    def check() -> Any:
        return verify_grant(
            case["token"],
            GRANTS["jwks"],
            tool_name=case["toolName"],
            tool_call_id=case["toolCallId"],
            parameters=case["parameters"],
            now=case["checkAt"],
            audience=case.get("audience"),
            seen=set(case["seen"]) if "seen" in case else None,
        )

    if case["ok"]:
        claims = check()
        assert claims.digest == parameters_digest(case["parameters"])
        assert claims.approvers == tuple((a["surface"], a["by"]) for a in case.get("approvers", []))
        assert claims.grant_id == case.get("jti") and claims.audience == case.get("aud")
    else:
        with pytest.raises(GrantRefused, match=case["refusal"]):
            check()


@pytest.mark.parametrize("case", VECTORS["decisions"], ids=[c["name"] for c in VECTORS["decisions"]])
def test_decision(case: dict[str, Any]) -> None:
    decision = parse_approval(json.dumps(case["body"]))
    assert decision.quorum == case["quorum"]
    assert [a.by for a in decision.approvals] == case["approvers"]
    assert all(a.at.tzinfo is not None for a in decision.approvals)


@pytest.mark.parametrize("case", HOOKS["cases"], ids=[c["name"] for c in HOOKS["cases"]])
def test_webhook(case: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    # The library reads the wall clock; the vector fixes the moment of the check.
    monkeypatch.setattr("standardwebhooks.webhooks.datetime", _Frozen.at(case["checkAt"]))
    headers = {
        "webhook-id": case["id"],
        "webhook-timestamp": str(case["timestamp"]),
        "webhook-signature": case["signature"],
    }
    hook = Webhook(HOOKS["secret"])
    if case["ok"]:
        assert hook.verify(case["body"], headers) == json.loads(case["body"])
    else:
        with pytest.raises(WebhookVerificationError):
            hook.verify(case["body"], headers)


class _Frozen:
    """`datetime` as the standardwebhooks module uses it, stopped at one instant."""

    @staticmethod
    def at(seconds: int) -> Any:
        import datetime as real

        class Frozen(real.datetime):
            @classmethod
            def now(cls, tz: Any = None) -> Any:
                return real.datetime.fromtimestamp(seconds, tz or real.UTC)

        return Frozen
