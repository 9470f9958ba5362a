"""What an operation refuses, and what the agent is told: a standing deny before `prepare`,
an unavailable application without its internal detail, a rejection redacted, and no agent
report beside the application's own outcome."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from tests.harness import cosigner_app, until
from tests.operations.application import SECRET, SECRET_ENV, contract_application, policy_for
from tests.operations.test_lifecycle import ALLOW, decide, proposal, propose

KEY_IN_TEXT = "sk_live_51HxYzAbCdEfGhIjKlMnOpQrSt"


@pytest.fixture(autouse=True)
def secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_ENV, SECRET)


async def test_a_standing_deny_refuses_before_the_application_is_asked_to_prepare(db_kind: str) -> None:
    with contract_application() as app:
        async with cosigner_app(policy_for(app.url), callback_allow=ALLOW, database_kind=db_kind) as h:
            key = await h.create_tenant("acme")
            first = await propose(h, key, proposal("c1"))
            assert first.status_code == 201, first.text
            r = await h.client.post(
                f"/v1/approvals/{first.json()['approvalId']}/decision",
                json={"decision": "always_deny", "userId": "u_1"},
                headers=h.auth(h.approver_of(key)),
            )
            assert r.status_code == 200, r.text
            assert app.shop.calls["prepare"] == 1
            again = await propose(h, key, proposal("c2"))
            assert again.status_code == 403, again.text
            assert again.json()["error"]["code"] == "PERMISSION_DENIED"
            assert app.shop.calls["prepare"] == 1, "the application was asked to prepare a refused call"


@pytest.mark.parametrize("where", ["unreachable", "refused by the egress rules"])
async def test_unavailable_gives_the_agent_a_reference_and_the_log_the_detail(
    where: str, caplog: pytest.LogCaptureFixture
) -> None:
    with contract_application() as app:
        url = app.url.rsplit(":", 1)[0] + ":9/cosigner" if where == "unreachable" else app.url
    allow: dict[str, Any] = {"callback_allow": ALLOW} if where == "unreachable" else {}
    with caplog.at_level(logging.WARNING, logger="cosigner.operations"):
        async with cosigner_app(policy_for(url), **allow) as h:
            key = await h.create_tenant("acme")
            r = await propose(h, key, proposal())
    assert r.status_code == 503, r.text
    error = r.json()["error"]
    assert error["code"] == "OPERATION_UNAVAILABLE" and error["reference"].startswith("apv_")
    for leak in ("127.0.0.1", "http", "callbackUrl", "egress", "loopback", "Unreached", "Connector"):
        assert leak not in error["message"], (leak, error["message"])
    assert error["reference"] in error["message"]
    (line,) = [rec for rec in caplog.records if rec.name == "cosigner.operations"]
    assert error["reference"] in line.getMessage() and "127.0.0.1" in line.getMessage()


async def test_the_applications_rejection_is_redacted_before_the_agent_sees_it() -> None:
    with contract_application() as app:
        async with cosigner_app(policy_for(app.url), callback_allow=ALLOW) as h:
            key = await h.create_tenant("acme")
            # The example application quotes the order id back in its refusal.
            r = await propose(h, key, proposal(order=KEY_IN_TEXT))
            assert r.status_code == 422 and r.json()["error"]["code"] == "OPERATION_REJECTED"
            assert "sk_live_" not in r.text


async def test_an_agent_report_on_an_operation_is_refused_the_outcome_stands() -> None:
    with contract_application() as app:
        async with cosigner_app(policy_for(app.url), callback_allow=ALLOW) as h:
            key = await h.create_tenant("acme")
            aid = (await propose(h, key, proposal())).json()["approvalId"]
            pending = await h.client.post(
                f"/v1/approvals/{aid}/result", json={"outcome": "failed"}, headers=h.auth(key)
            )
            assert pending.status_code == 409, pending.text
            await decide(h, key, aid)
            await until(lambda: app.shop.refunds == 1)
            r = await h.client.post(
                f"/v1/approvals/{aid}/result",
                json={"outcome": "failed", "error": "it did not work"},
                headers=h.auth(key),
            )
            assert r.status_code == 409, r.text
            assert (
                r.json()["error"]["code"] == "ALREADY_DECIDED" and "operation" in r.json()["error"]["message"]
            )
            trail = (await h.client.get(f"/v1/approvals/{aid}/audit", headers=h.auth(key))).json()
            assert "result" not in [e["event"] for e in trail["events"]]
