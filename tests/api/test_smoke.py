from tests.harness import cosigner_app


async def test_dashboard_round_trip(db_kind: str) -> None:
    async with cosigner_app(database_kind=db_kind) as h:
        key = await h.create_tenant("acme")
        r = await h.client.post(
            "/v1/approvals",
            headers=h.auth(key),
            json={
                "executionId": "run_1",
                "toolCallId": "c1",
                "toolName": "issue_refund",
                "parameters": {"amountCents": 12900, "cardToken": "tok_x"},
                "reason": "because",
                "surface": {"type": "dashboard", "userId": "u_1"},
            },
        )
        assert r.status_code == 201, r.text
        body = r.json()
        assert body["parameters"]["cardToken"] == "[REDACTED]"
        aid = body["approvalId"]
        r = await h.client.post(
            f"/v1/approvals/{aid}/decision",
            headers=h.auth(h.approver_of(key)),
            json={"decision": "approve", "userId": "u_1"},
        )
        assert r.status_code == 200, r.text
        r = await h.client.get(f"/v1/approvals/{aid}?wait=5", headers=h.auth(key))
        assert r.json()["status"] == "approved"
        assert r.json()["grant"]
