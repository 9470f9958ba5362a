"""`@client.gate` on sync and async functions: the body runs only when exactly its call is approved."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

import cosigner
from cosigner import AsyncCosigner, Cosigner
from cosigner.audit_events import Requested, Result
from cosigner.errors import ApprovalDenied, ApprovalExpired, ParametersMismatch, PermissionDenied
from tests.harness import BASE_URL, cosigner_app
from tests.sdk.conftest import SURFACE, USER, AsyncPolling, Polling, Target, results_of
from tests.sdk.test_outcomes import in_background


def test_an_approved_call_runs_and_its_result_is_audited(inprocess: Target, run_id: str) -> None:
    ran: list[str] = []
    with inprocess.client(execution_id=run_id) as client:

        @client.gate(surface=SURFACE)
        def lookup_order(order_id: str, verbose: bool = False) -> dict[str, Any]:
            ran.append(order_id)
            return {"orderId": order_id, "total": 12900}

        with cosigner.tool_call("call_lookup"):
            assert lookup_order("ord_1") == {"orderId": "ord_1", "total": 12900}
        d = client.request_approval(
            execution_id=run_id,
            tool_call_id="call_lookup",
            tool_name="lookup_order",
            parameters={"order_id": "ord_1", "verbose": False},
            surface=SURFACE,
        )
        audit = client.audit(d)
        trail = client.audit_trail(d)
    assert ran == ["ord_1"]
    assert results_of(audit) == [
        {"outcome": "succeeded", "result": {"orderId": "ord_1", "total": 12900}, "error": None}
    ]
    # The same events read through the models the server wrote them from.
    typed = [e.typed() for e in trail]
    assert [e.model_dump(mode="json") for e in trail] == audit
    requested = typed[0]
    assert isinstance(requested, Requested) and requested.toolName == "lookup_order"
    results = [e for e in typed if isinstance(e, Result)]
    assert [(r.outcome, r.result, r.error) for r in results] == [
        ("succeeded", {"orderId": "ord_1", "total": 12900}, None)
    ]


def test_a_denied_call_never_runs_and_carries_the_comment(inprocess: Target, run_id: str) -> None:
    ran: list[int] = []
    polling = Polling()
    with (
        inprocess.client(transport=polling) as agent,
        inprocess.client() as finder,
        inprocess.approver() as person,
    ):

        @agent.gate(surface=SURFACE)
        def issue_refund(order_id: str, amount_cents: int) -> None:
            ran.append(amount_cents)

        def run() -> None:
            with cosigner.execution(run_id), cosigner.tool_call("call_1"):
                issue_refund("ord_1", 12900)

        failing = in_background(run)  # type: ignore[arg-type]
        assert polling.polling.wait(30)
        handle = finder.request_approval(
            execution_id=run_id,
            tool_call_id="call_1",
            tool_name="issue_refund",
            parameters={"order_id": "ord_1", "amount_cents": 12900},
            surface=SURFACE,
            wait=False,
        )
        person.decide(handle, decision="deny", user_id=USER, comment="refund already issued")
        with pytest.raises(ApprovalDenied) as denied:
            failing.result(timeout=30)
    assert ran == []
    assert denied.value.comment == "refund already issued"
    assert denied.value.decision is not None and denied.value.decision.approval_id == handle.approval_id


def test_an_expired_call_never_runs(inprocess: Target, run_id: str) -> None:
    ran: list[int] = []
    polling = Polling()
    with inprocess.client(transport=polling, execution_id=run_id) as client:

        @client.gate(surface=SURFACE, tool_name="issue_refund")
        def refund(order_id: str) -> None:
            ran.append(1)

        def run() -> None:
            with cosigner.tool_call("call_1"):
                refund("ord_1")

        failing = in_background(run)  # type: ignore[arg-type]
        assert polling.polling.wait(30)
        handle = client.get(
            client.request_approval(
                execution_id=run_id,
                tool_call_id="call_1",
                tool_name="issue_refund",
                parameters={"order_id": "ord_1"},
                surface=SURFACE,
                wait=False,
            )
        )
        inprocess.expire(handle.approval_id)
        with pytest.raises(ApprovalExpired) as expired:
            failing.result(timeout=30)
    assert ran == [] and expired.value.details["approvalId"] == handle.approval_id


def test_a_standing_deny_never_runs(inprocess: Target, run_id: str) -> None:
    ran: list[int] = []
    with inprocess.client(execution_id=run_id) as client:

        @client.gate(surface=SURFACE)
        def delete_account(account_id: str) -> None:
            ran.append(1)

        with pytest.raises(PermissionDenied):
            delete_account("a1")
    assert ran == []


def test_arguments_changed_while_waiting_are_refused_by_the_digest(inprocess: Target, run_id: str) -> None:
    ran: list[dict[str, Any]] = []
    order = {"orderId": "ord_1", "amountCents": 12900}
    polling = Polling()
    with (
        inprocess.client(transport=polling) as agent,
        inprocess.client() as finder,
        inprocess.approver() as person,
    ):

        @agent.gate(surface=SURFACE, tool_name="issue_refund", execution_id=run_id)
        def refund(order: dict[str, Any]) -> None:
            ran.append(order)

        def run() -> None:
            with cosigner.tool_call("call_t"):
                refund(order)

        failing = in_background(run)  # type: ignore[arg-type]
        assert polling.polling.wait(30)
        handle = finder.request_approval(
            execution_id=run_id,
            tool_call_id="call_t",
            tool_name="issue_refund",
            parameters={"order": {"orderId": "ord_1", "amountCents": 12900}},
            surface=SURFACE,
            wait=False,
        )
        order["amountCents"] = 99999  # changed after the approver saw it
        assert person.decide(handle, decision="approve", user_id=USER).approved
        with pytest.raises(ParametersMismatch) as refused:
            failing.result(timeout=30)
    assert ran == [] and "not the ones approved" in refused.value.message


def test_an_exception_in_the_body_is_reported_and_raised(inprocess: Target, run_id: str) -> None:
    with inprocess.client(execution_id=run_id) as client:

        @client.gate(surface=SURFACE)
        def lookup_order(order_id: str) -> None:
            raise LookupError(f"no order {order_id}")

        with cosigner.tool_call("call_x"), pytest.raises(LookupError):
            lookup_order("ord_404")
        d = client.request_approval(
            execution_id=run_id,
            tool_call_id="call_x",
            tool_name="lookup_order",
            parameters={"order_id": "ord_404"},
            surface=SURFACE,
        )
        assert results_of(client.audit(d)) == [
            {"outcome": "failed", "result": None, "error": "LookupError: no order ord_404"}
        ]


def test_the_blocking_client_gates_an_async_function(inprocess: Target, run_id: str) -> None:
    with inprocess.client(execution_id=run_id) as client:

        @client.gate(surface=SURFACE)
        async def lookup_order(order_id: str) -> str:
            return f"found {order_id}"

        assert asyncio.run(lookup_order("ord_1")) == "found ord_1"


def test_a_call_without_execution_or_json_arguments_is_refused_before_asking(inprocess: Target) -> None:
    with inprocess.client() as client:

        @client.gate(surface=SURFACE)
        def lookup_order(order_id: Any) -> None:
            raise AssertionError("must not run")

        with pytest.raises(ValueError, match=r"cosigner\.execution"):
            lookup_order("ord_1")
        with cosigner.execution("run_json"), pytest.raises(TypeError, match="JSON values"):
            lookup_order(object())


async def test_async_gate_runs_only_the_approved_call() -> None:
    async with cosigner_app() as h:
        key = await h.create_tenant("acme")
        transport = AsyncPolling(h.app)
        ran: list[int] = []
        async with (
            AsyncCosigner(url=BASE_URL, api_key=key, transport=transport) as agent,
            AsyncCosigner(url=BASE_URL, api_key=h.approver_of(key), transport=AsyncPolling(h.app)) as person,
            AsyncCosigner(url=BASE_URL, api_key=key, transport=AsyncPolling(h.app)) as finder,
        ):

            @agent.gate(surface=SURFACE, execution_id="run_async")
            async def issue_refund(order_id: str, amount_cents: int) -> str:
                ran.append(amount_cents)
                return "refunded"

            async def decide(call: str, verdict: str) -> None:
                await transport.polling.wait()
                transport.polling.clear()
                handle = await finder.request_approval(
                    execution_id="run_async",
                    tool_call_id=call,
                    tool_name="issue_refund",
                    parameters={"order_id": "ord_1", "amount_cents": 12900},
                    surface=SURFACE,
                    wait=False,
                )
                await person.decide(handle, decision=verdict, user_id=USER, comment=verdict)  # type: ignore[arg-type]

            with cosigner.tool_call("call_ok"):
                done, _ = await asyncio.gather(issue_refund("ord_1", 12900), decide("call_ok", "approve"))
            with cosigner.tool_call("call_no"):
                denied = asyncio.gather(issue_refund("ord_1", 12900), decide("call_no", "deny"))
                with pytest.raises(ApprovalDenied) as caught:
                    await denied
            audit = await agent.audit(
                await agent.request_approval(
                    execution_id="run_async",
                    tool_call_id="call_ok",
                    tool_name="issue_refund",
                    parameters={"order_id": "ord_1", "amount_cents": 12900},
                    surface=SURFACE,
                )
            )
    assert done == "refunded" and ran == [12900]
    assert caught.value.comment == "deny"
    assert results_of(audit) == [{"outcome": "succeeded", "result": "refunded", "error": None}]


async def test_async_gate_refuses_a_sync_function() -> None:
    async with AsyncCosigner(url=BASE_URL, api_key="k") as client:
        with pytest.raises(TypeError, match=r"Cosigner\.gate"):

            @client.gate(surface=SURFACE)
            def lookup_order(order_id: str) -> None: ...


def test_cosigner_reads_its_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COSIGNER_URL", raising=False)
    monkeypatch.setenv("COSIGNER_API_KEY", "k")
    with pytest.raises(ValueError, match="COSIGNER_URL"):
        Cosigner()
    monkeypatch.setenv("COSIGNER_URL", "http://127.0.0.1:9/")
    with Cosigner() as client:
        assert client.config.url == "http://127.0.0.1:9"
