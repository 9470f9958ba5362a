"""Logs carry approval ids and allow-listed fields, never parameters or bodies."""

from __future__ import annotations

import io
import json
import logging

from bot.observability.logs import JsonFormatter
from tests.harness import cosigner_app

SECRET_VALUE = "tok_live_supersecret"
PLAIN_VALUE = "ord_visible_but_not_logged"


async def test_logs_never_carry_parameters(db_kind: str) -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger("cosigner")
    old_level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.DEBUG)
    try:
        async with cosigner_app(database_kind=db_kind) as h:
            key = await h.create_tenant("acme")
            r = await h.client.post(
                "/v1/approvals",
                headers=h.auth(key),
                json={
                    "executionId": "run_1",
                    "toolCallId": "c1",
                    "toolName": "issue_refund",
                    "parameters": {"orderId": PLAIN_VALUE, "cardToken": SECRET_VALUE},
                    "reason": f"reason mentioning {PLAIN_VALUE}",
                    "surface": {"type": "dashboard", "userId": "u_1"},
                },
            )
            aid = r.json()["approvalId"]
            await h.client.post(
                f"/v1/approvals/{aid}/decision",
                headers=h.auth(h.approver_of(key)),
                json={"decision": "approve", "userId": "u_1", "comment": f"ok {PLAIN_VALUE}"},
            )
            await h.client.post(
                "/v1/approvals",
                headers=h.auth(key),
                content=json.dumps({"parameters": SECRET_VALUE}).encode(),
            )
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    text = stream.getvalue()
    assert SECRET_VALUE not in text and PLAIN_VALUE not in text
    assert {line["msg"] for line in lines} >= {"approval created", "approval closed"}
    assert all(
        line.get("approval_id") == aid
        for line in lines
        if line["msg"] in ("approval created", "approval closed")
    )
