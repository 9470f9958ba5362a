"""Every outcome of a gated call through the blocking client, against both kinds of server."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from cosigner import ApprovalStatus, Cosigner, DeciderKind, Decision, HeadlessSurface, parameters_digest
from cosigner.denials import Denial
from cosigner.errors import (
    ApprovalDenied,
    ApprovalModeUnsupported,
    ParametersMismatch,
    PermissionDenied,
    ToolCallCapExceeded,
    Unauthenticated,
)
from tests.sdk.conftest import SURFACE, USER, Target

REFUND = {"orderId": "ord_1", "amountCents": 12900}


def ask(client: Cosigner, run_id: str, call: str = "call_1", **extra: Any) -> Decision:
    """A refund that needs a person (dashboard surface), created without waiting."""
    args: dict[str, Any] = {"tool_name": "issue_refund", "parameters": REFUND, "surface": SURFACE}
    args.update(extra)
    return client.request_approval(execution_id=run_id, tool_call_id=call, wait=False, **args)


def in_background(fn: Callable[[], Decision]) -> Future[Decision]:
    """Run `fn` in a thread (an agent blocked waiting)."""
    pool = ThreadPoolExecutor(1)
    future = pool.submit(fn)
    pool.shutdown(wait=False)
    return future


def test_policy_allow_returns_an_approved_decision_with_a_grant(target: Target, run_id: str) -> None:
    with target.client() as client:
        d = client.request_approval(
            execution_id=run_id,
            tool_call_id="c1",
            tool_name="lookup_order",
            parameters={"orderId": "ord_1"},
            surface=SURFACE,
        )
        claims = client.verify_grant(d.grant, {"orderId": "ord_1"}, tool_name="lookup_order")
    assert d.approved and d.status is ApprovalStatus.APPROVED
    assert d.decided_by is not None and d.decided_by.kind is DeciderKind.POLICY and d.decided_by.rule
    assert d.parameters_digest == parameters_digest({"orderId": "ord_1"})
    assert (claims.approval_id, claims.tool_call_id) == (d.approval_id, "c1")


@pytest.mark.parametrize("verdict", ["approve", "deny"])
def test_a_person_decides_with_a_comment_while_the_agent_waits(
    target: Target, run_id: str, verdict: str
) -> None:
    with target.client() as agent, target.client() as again, target.approver() as dashboard:
        waiting = in_background(
            lambda: agent.request_approval(
                execution_id=run_id,
                tool_call_id="call_1",
                tool_name="issue_refund",
                parameters=REFUND,
                surface=SURFACE,
                reason="customer asked",
            )
        )
        handle = ask(again, run_id, reason="customer asked")  # the same call: the same approval
        assert handle.pending and handle.parameters == REFUND and handle.expires_at is not None
        dashboard.decide(handle, decision=verdict, user_id=USER, comment=f"{verdict}: checked")  # type: ignore[arg-type]
        d = waiting.result(timeout=30)
    assert d.approval_id == handle.approval_id
    assert d.approved is (verdict == "approve")
    assert d.status is (ApprovalStatus.APPROVED if verdict == "approve" else ApprovalStatus.DENIED)
    assert d.comment == f"{verdict}: checked"
    assert d.decided_by is not None and (d.decided_by.kind, d.decided_by.user_id) == (
        DeciderKind.PERSON,
        USER,
    )
    assert (d.grant is not None) is (verdict == "approve")


def test_expiry_means_deny(target: Target, run_id: str) -> None:
    with target.client() as client:
        handle = ask(client, run_id, timeout_seconds=target.expiry_timeout)
        target.expire(handle.approval_id)
        d = client.wait(handle)
    assert d.status is ApprovalStatus.EXPIRED and not d.approved and d.grant is None
    assert d.decided_by is not None and d.decided_by.kind is DeciderKind.TIMEOUT


def test_cancel_answers_the_waiting_agent(target: Target, run_id: str) -> None:
    with target.client() as client:
        handle = ask(client, run_id)
        waiting = in_background(lambda: client.wait(handle))
        cancelled = client.cancel(handle)
        d = waiting.result(timeout=30)
    assert cancelled.status is d.status is ApprovalStatus.CANCELLED
    assert d.decided_by is not None and d.decided_by.kind is DeciderKind.AGENT and not d.approved


def test_a_standing_deny_raises_permission_denied(target: Target, run_id: str) -> None:
    with target.client() as client, pytest.raises(PermissionDenied) as caught:
        client.request_approval(
            execution_id=run_id,
            tool_call_id="c1",
            tool_name="delete_account",
            parameters={"accountId": "a1"},
            surface=SURFACE,
        )
    assert not isinstance(caught.value, ApprovalDenied)
    assert caught.value.code == "PERMISSION_DENIED" and caught.value.status == 403
    assert "support staff only" in caught.value.message
    assert caught.value.details["policy"] and caught.value.details["approvalId"]


def test_always_deny_refuses_the_next_call_naming_who_set_it(target: Target, run_id: str) -> None:
    with target.client() as agent, target.approver() as dashboard:
        first = ask(agent, run_id)
        denied = dashboard.decide(first, decision="always_deny", user_id=USER)
        assert denied.status is ApprovalStatus.DENIED and not denied.approved and denied.grant is None
        with pytest.raises(PermissionDenied) as caught:
            ask(agent, run_id, call="call_2")
    denial = Denial.model_validate(caught.value.details["denial"], strict=False)
    assert (denial.toolName, denial.approver.userId, denial.requester) == (
        "issue_refund",
        USER,
        f"dashboard:{USER}",
    )
    assert denial.approvalId == first.approval_id and denial.liftedAt is None
    lifted = httpx.delete(
        f"{target.url}/v1/denials/{denial.denialId}",
        headers={"Authorization": f"Bearer {target.acme_approver}"},
    )
    assert lifted.status_code == 200


def test_a_headless_run_without_a_route_is_refused(target: Target, run_id: str) -> None:
    schedule = HeadlessSurface("schedule")
    with target.client(target.globex) as client:
        with pytest.raises(ApprovalModeUnsupported) as refused:
            client.request_approval(
                execution_id=run_id,
                tool_call_id="c1",
                tool_name="issue_refund",
                parameters=REFUND,
                surface=schedule,
            )
        with pytest.raises(ApprovalModeUnsupported) as not_admitted:
            client.admit(execution_id=run_id, surface=schedule, tools=["lookup_order", "issue_refund"])
    assert refused.value.details["surface"] == "schedule" and refused.value.details["policy"]
    assert not_admitted.value.details["tools"] == ["issue_refund"]


def test_the_cap_on_gated_calls_raises(target: Target, run_id: str) -> None:
    with target.client() as client:
        for i in range(5):  # five different calls (identical pending ones are one question)
            ask(client, run_id, call=f"call_{i}", parameters={**REFUND, "orderId": f"ord_{i}"})
        with pytest.raises(ToolCallCapExceeded) as caught:
            ask(client, run_id, call="call_5")
    assert caught.value.details["limit"] == 5 and caught.value.status == 429


def test_same_ids_other_parameters_is_a_mismatch_and_same_ones_resume(target: Target, run_id: str) -> None:
    with target.client() as client:
        first = ask(client, run_id)
        with pytest.raises(ParametersMismatch) as caught:
            ask(client, run_id, parameters={**REFUND, "amountCents": 99999})
    # An agent that crashed while waiting starts again and asks the same call: it resumes.
    with target.client() as restarted, target.approver() as dashboard:
        again = ask(restarted, run_id)
        dashboard.decide(again, decision="approve", user_id=USER)
        resumed = restarted.request_approval(
            execution_id=run_id,
            tool_call_id="call_1",
            tool_name="issue_refund",
            parameters=REFUND,
            surface=SURFACE,
        )
    assert caught.value.details["approvalId"] == first.approval_id
    assert again.approval_id == resumed.approval_id == first.approval_id and resumed.approved


def test_a_wrong_key_is_unauthenticated(target: Target, run_id: str) -> None:
    with target.client("not-a-key") as client, pytest.raises(Unauthenticated) as caught:
        ask(client, run_id)
    assert caught.value.status == 401 and "tenants create" in caught.value.message


def test_stream_yields_start_then_decision(target: Target, run_id: str) -> None:
    with target.client() as client:
        handle = ask(client, run_id)
        seen: list[str] = []
        started = threading.Event()

        def follow() -> Decision:
            for event in client.stream(handle):
                seen.append(event.event)
                started.set()
                last = event.decision
            return last

        streaming = in_background(follow)
        assert started.wait(30)
        with target.approver() as dashboard:
            dashboard.decide(handle, decision="approve", user_id=USER)
        d = streaming.result(timeout=30)
    assert seen == ["approval_start", "approval_decided"] and d.approved


def test_wait_with_a_timeout_leaves_the_approval_open(target: Target, run_id: str) -> None:
    with target.client() as client:
        handle = ask(client, run_id)
        with pytest.raises(TimeoutError):
            client.wait(handle, timeout=0)
        assert client.get(handle).pending


def test_cosigner_unreachable_raises_after_retry_for(run_id: str) -> None:
    from tests.processes import free_port

    with Cosigner(url=f"http://127.0.0.1:{free_port()}", api_key="k", retry_for=0.2) as client:
        with pytest.raises(httpx.ConnectError):
            ask(client, run_id)
