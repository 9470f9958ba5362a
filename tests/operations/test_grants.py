"""An operation's grant binds the contract: `argumentsDigest` and `previewDigest` are in it,
and `cosigner.grants.verify_execute` (which the example application runs before every
execute) refuses an execute whose arguments or preview are not the approved ones."""

from __future__ import annotations

import json
import time
from typing import Any

import httpx
import jwt
import pytest

from bot.approvals.grants import GrantSigner
from cosigner.digest import parameters_digest
from cosigner.grants import GrantRefused, verify_execute
from cosigner.operations import ExecuteCall, arguments_digest
from cosigner.webhooks import sign
from tests.harness import TEST_SECRET, cosigner_app, until
from tests.operations.application import SECRET, SECRET_ENV, contract_application, policy_for
from tests.operations.test_lifecycle import ALLOW, decide, proposal, propose

JWKS = GrantSigner(TEST_SECRET).jwks()


@pytest.fixture(autouse=True)
def secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_ENV, SECRET)


async def _executed() -> tuple[dict[str, Any], dict[str, Any], str]:
    """(the decision, the execute call the application received, the application's URL) of one
    approved refund."""
    with contract_application() as app:
        async with cosigner_app(policy_for(app.url), callback_allow=ALLOW) as h:
            key = await h.create_tenant("acme")
            aid = (await propose(h, key, proposal())).json()["approvalId"]
            await decide(h, key, aid)
            await until(lambda: app.shop.refunds == 1)
            decision = (await h.client.get(f"/v1/approvals/{aid}", headers=h.auth(key))).json()
            call = app.shop.last_execute
            assert call is not None and app.shop.refused_grants == 0
            return decision, call, app.url


async def test_the_grant_carries_the_arguments_and_preview_digests() -> None:
    decision, call, _ = await _executed()
    claims = jwt.decode(decision["grant"], options={"verify_signature": False})
    assert claims["argumentsDigest"] == decision["argumentsDigest"] == call["argumentsDigest"]
    assert claims["argumentsDigest"] == arguments_digest(
        call["operation"], call["arguments"], ExecuteCall.model_validate(call).preview
    )
    assert claims["previewDigest"] == parameters_digest(call["preview"])
    assert call["grant"] == decision["grant"]
    checked = verify_execute(ExecuteCall.model_validate(call), JWKS)
    assert checked.arguments_digest == claims["argumentsDigest"]
    assert checked.preview_digest == claims["previewDigest"]


async def test_a_tampered_execute_is_refused_by_the_sdk_helper() -> None:
    _, call, _ = await _executed()
    more = {**call, "arguments": {**call["arguments"], "amountCents": 999_999}}
    with pytest.raises(GrantRefused, match="arguments differ"):
        verify_execute(ExecuteCall.model_validate(more), JWKS)
    # Recomputing the call's own argumentsDigest does not help: the grant binds the approved one.
    preview = ExecuteCall.model_validate(call).preview
    relabelled = {**more, "argumentsDigest": arguments_digest(call["operation"], more["arguments"], preview)}
    with pytest.raises(GrantRefused, match="arguments differ"):
        verify_execute(ExecuteCall.model_validate(relabelled), JWKS)
    shown = {**call, "preview": {**call["preview"], "title": "Something harmless"}}
    with pytest.raises(GrantRefused, match="differ"):
        verify_execute(ExecuteCall.model_validate(shown), JWKS)
    with pytest.raises(GrantRefused, match="no grant"):
        verify_execute(ExecuteCall.model_validate({k: v for k, v in call.items() if k != "grant"}), JWKS)
    with pytest.raises(GrantRefused, match="another approval"):
        verify_execute(ExecuteCall.model_validate({**call, "proposalId": "apv_other"}), JWKS)


async def test_a_plain_tool_grant_is_not_an_operations_grant() -> None:
    _, call, _ = await _executed()
    claims = jwt.decode(call["grant"], options={"verify_signature": False})
    plain = {k: v for k, v in claims.items() if k not in ("argumentsDigest", "previewDigest")}
    token = GrantSigner(TEST_SECRET).sign(plain)
    with pytest.raises(GrantRefused, match="not an operation's grant"):
        verify_execute(ExecuteCall.model_validate({**call, "grant": token}), JWKS)


async def test_the_example_application_refuses_a_tampered_execute_before_running_it() -> None:
    _, call, _ = await _executed()
    with contract_application() as app:
        body = json.dumps({**call, "arguments": {**call["arguments"], "amountCents": 1}}).encode()
        headers = {"Content-Type": "application/json", **sign(SECRET, "dlv_x", int(time.time()), body)}
        async with httpx.AsyncClient() as client:
            answer = await client.post(app.url, content=body, headers=headers)
        assert answer.status_code == 403 and "arguments differ" in answer.text
        assert app.shop.refunds == 0 and app.shop.refused_grants == 1
