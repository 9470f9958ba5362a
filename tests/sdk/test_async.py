"""AsyncCosigner mirrors Cosigner: the same outcomes, awaited, against the app in-process."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass

import httpx
import pytest

from cosigner import ApprovalStatus, AsyncCosigner, DeciderKind, Decision, HeadlessSurface
from cosigner.audit_events import Result
from cosigner.errors import (
    AlreadyDecided,
    ApprovalModeUnsupported,
    ParametersMismatch,
    PermissionDenied,
    Unauthenticated,
)
from tests.harness import BASE_URL, Harness, cosigner_app, until
from tests.sdk.conftest import SURFACE, USER, AsyncPolling

REFUND = {"orderId": "ord_1", "amountCents": 12900}


@dataclass
class Clients:
    """The app, an agent's client (whose long-polls are signalled) and a person's."""

    h: Harness
    agent: AsyncCosigner
    person: AsyncCosigner  # the tenant app, with the approver key
    transport: AsyncPolling
    finder: AsyncCosigner  # a second agent-key client: asks again to find a pending call, streams it


@pytest.fixture
async def clients() -> AsyncIterator[Clients]:
    async with cosigner_app() as h:
        key = await h.create_tenant("acme")
        transport = AsyncPolling(h.app)
        async with (
            AsyncCosigner(url=BASE_URL, api_key=key, transport=transport) as agent,
            AsyncCosigner(url=BASE_URL, api_key=h.approver_of(key), transport=AsyncPolling(h.app)) as person,
            AsyncCosigner(url=BASE_URL, api_key=key, transport=AsyncPolling(h.app)) as finder,
        ):
            yield Clients(h, agent, person, transport, finder)


async def ask(client: AsyncCosigner, call: str = "c1", wait: bool = False, **extra: object) -> Decision:
    args: dict[str, object] = {"tool_name": "issue_refund", "parameters": REFUND, "surface": SURFACE}
    args.update(extra)
    return await client.request_approval(execution_id="run_a", tool_call_id=call, wait=wait, **args)  # type: ignore[arg-type]


async def test_policy_allow_and_its_grant(clients: Clients) -> None:
    d = await ask(clients.agent, tool_name="lookup_order", parameters={"orderId": "o"}, wait=True)
    claims = await clients.agent.verify_grant(d.grant, {"orderId": "o"})
    assert d.approved and d.decided_by is not None and d.decided_by.kind is DeciderKind.POLICY
    assert claims.approval_id == d.approval_id


async def test_a_person_decides_while_the_agent_waits_and_streams(clients: Clients) -> None:
    waiting = asyncio.create_task(ask(clients.agent, wait=True))
    await clients.transport.polling.wait()
    handle = await ask(clients.finder)
    events = []

    async def follow() -> None:
        async for event in clients.finder.stream(handle):
            events.append(event.event)

    streaming = asyncio.create_task(follow())
    await clients.person.decide(handle, decision="deny", user_id=USER, comment="not today")
    d = await waiting
    await streaming
    assert d.status is ApprovalStatus.DENIED and d.comment == "not today" and not d.approved
    assert events == ["approval_start", "approval_decided"]


async def test_cancel_then_a_second_cancel_is_already_decided(clients: Clients) -> None:
    handle = await ask(clients.agent)
    assert (await clients.agent.cancel(handle)).status is ApprovalStatus.CANCELLED
    with pytest.raises(AlreadyDecided):
        await clients.agent.cancel(handle)


async def test_errors_map_to_their_classes(clients: Clients) -> None:
    await ask(clients.agent)
    with pytest.raises(ParametersMismatch):
        await ask(clients.agent, parameters={"orderId": "other"})
    with pytest.raises(PermissionDenied):
        await ask(clients.agent, call="c2", tool_name="delete_account", parameters={})
    async with AsyncCosigner(url=BASE_URL, api_key="wrong", transport=AsyncPolling(clients.h.app)) as bad:
        with pytest.raises(Unauthenticated):
            await ask(bad)
    globex = await clients.h.create_tenant("globex")
    async with AsyncCosigner(url=BASE_URL, api_key=globex, transport=AsyncPolling(clients.h.app)) as other:
        with pytest.raises(ApprovalModeUnsupported):
            await other.admit(execution_id="r", surface=HeadlessSurface("batch"), tools=["issue_refund"])


async def test_wait_with_a_timeout_and_the_result_report(clients: Clients) -> None:
    handle = await ask(clients.agent)
    with pytest.raises(TimeoutError):
        await clients.agent.wait(handle, timeout=0)
    await clients.person.decide(handle, decision="approve", user_id=USER)
    await clients.agent.report_result(handle, result={"refundId": "re_1"})
    events = await clients.agent.audit(handle)
    assert [e["data"] for e in events if e["event"] == "result"] == [
        {"outcome": "succeeded", "result": {"refundId": "re_1"}, "error": None}
    ]
    typed = [e.typed() for e in await clients.agent.audit_trail(handle)]
    assert [r.result for r in typed if isinstance(r, Result)] == [{"refundId": "re_1"}]


class _ShortPolls(AsyncPolling):
    """Answers each 60 s long-poll at once (as the server does when its 60 s run out)."""

    def __init__(self, app: object) -> None:
        super().__init__(app)
        self.asked: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if "wait" in request.url.params:
            self.asked.append(request.url.params["wait"])
            request.url = request.url.copy_set_param("wait", "0")
        return await super().handle_async_request(request)


async def test_waiting_polls_again_when_a_long_poll_ends_undecided(clients: Clients) -> None:
    transport = _ShortPolls(clients.h.app)
    key = clients.agent.config.headers["Authorization"].removeprefix("Bearer ")
    async with AsyncCosigner(url=BASE_URL, api_key=key, transport=transport) as agent:
        handle = await ask(agent)
        waiting = asyncio.create_task(agent.wait(handle))
        await until(lambda: len(transport.asked) >= 3)
        assert not waiting.done()
        await clients.person.decide(handle, decision="approve", user_id=USER)
        d = await waiting
    assert d.approved and set(transport.asked) == {"60"}
