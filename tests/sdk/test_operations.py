"""The SDK proposes an operation and learns its outcome: `request_approval(operation=..., request=...)`.

Cosigner runs behind uvicorn on loopback, the example application in a thread of its own;
the approver answers through the dashboard route from another thread.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest

from cosigner import AsyncCosigner, Cosigner, DashboardSurface, OutcomeType
from cosigner.errors import InvalidRequest, OperationRejected
from tests.loopback import LiveServer, loopback_server
from tests.operations.application import (
    OPERATION,
    SECRET,
    SECRET_ENV,
    Application,
    contract_application,
    policy_for,
)

SURFACE = DashboardSurface(user_id="u_1")


@pytest.fixture(scope="module")
def world() -> Iterator[tuple[LiveServer, Application, str]]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(SECRET_ENV, SECRET)
        with (
            contract_application() as app,
            loopback_server(policy_for(app.url), callback_allow="127.0.0.1") as live,
        ):
            yield live, app, live.call(live.harness.create_tenant("acme"))


def test_the_agent_proposes_and_learns_the_outcome(world: tuple[LiveServer, Application, str]) -> None:
    live, _, key = world
    with Cosigner(url=live.url, api_key=key) as client:
        pending = client.request_approval(
            execution_id="run_sdk",
            tool_call_id="c1",
            operation=OPERATION,
            request={"orderId": "ord_4421"},
            surface=SURFACE,
            reason="the discount was missing",
            wait=False,
        )
        assert pending.pending and pending.operation == OPERATION
        assert (
            pending.preview is not None and pending.preview.title == "Refund the missing discount on ord_4421"
        )
        assert pending.arguments_digest is not None and pending.outcome is None
        with Cosigner(url=live.url, api_key=live.harness.approver_of(key)) as dashboard:
            dashboard.decide(pending, decision="approve", user_id="u_1")
        decision = client.wait(pending)
    assert decision.approved and decision.settled
    assert decision.outcome is not None and decision.outcome.type is OutcomeType.SUCCEEDED
    assert decision.outcome.summary() == "Refunded $129.00"
    assert decision.outcome.result == {"refundId": f"re_{pending.approval_id[-8:]}", "amountCents": 12900}


def test_a_rejected_proposal_is_one_exception_with_the_safe_message(
    world: tuple[LiveServer, Application, str],
) -> None:
    live, _, key = world
    with Cosigner(url=live.url, api_key=key) as client, pytest.raises(OperationRejected) as caught:
        client.request_approval(
            execution_id="run_sdk",
            tool_call_id="c2",
            operation=OPERATION,
            request={"orderId": "ord_0"},
            surface=SURFACE,
        )
    assert caught.value.message == "there is no order ord_0; send the orderId of an existing order"


def test_a_proposal_needs_either_a_tool_or_an_operation(world: tuple[LiveServer, Application, str]) -> None:
    live, _, key = world
    with Cosigner(url=live.url, api_key=key) as client, pytest.raises(InvalidRequest):
        client.request_approval(
            execution_id="run_sdk",
            tool_call_id="c3",
            tool_name="x",
            operation=OPERATION,
            request={},
            surface=SURFACE,
        )


def test_the_async_client_waits_for_the_outcome(world: tuple[LiveServer, Application, str]) -> None:
    live, app, key = world
    app.shop.orders["ord_4421"].refunded_cents = 0  # the discount is owed again

    async def agent() -> None:
        async with AsyncCosigner(url=live.url, api_key=key) as client:
            ask = asyncio.create_task(
                client.request_approval(
                    execution_id="run_sdk_async",
                    tool_call_id="c1",
                    operation=OPERATION,
                    request={"orderId": "ord_4421"},
                    surface=SURFACE,
                )
            )
            while True:
                await asyncio.sleep(0.05)
                async with httpx.AsyncClient(
                    base_url=live.url, headers={"Authorization": f"Bearer {key}"}
                ) as api:
                    audit = await api.post(
                        "/v1/approvals",
                        json={
                            "executionId": "run_sdk_async",
                            "toolCallId": "c1",
                            "operation": OPERATION,
                            "request": {"orderId": "ord_4421"},
                            "surface": {"type": "dashboard", "userId": "u_1"},
                        },
                    )
                    if audit.status_code == 201:
                        aid = audit.json()["approvalId"]
                        await api.post(
                            f"/v1/approvals/{aid}/decision",
                            json={"decision": "approve", "userId": "u_1"},
                            headers={"Authorization": f"Bearer {live.harness.approver_of(key)}"},
                        )
                        break
            decision = await ask
            assert decision.outcome is not None
            assert decision.outcome.type is OutcomeType.SUCCEEDED

    asyncio.run(agent())
