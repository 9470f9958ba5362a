"""The agent SDK understands handoffs: their start, each outcome, and one exception class per code."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from cosigner import AsyncCosigner, DashboardSurface, errors
from cosigner._gate import refuse_unless_approved
from tests.handoff_world import (
    EXPECT_SECRET,
    LOOPBACK,
    PARAMETERS,
    SECRET_ENV,
    expect_server,
    handoff_policy,
)
from tests.harness import BASE_URL, Harness, ManualClock, cosigner_app

TENANT = "[tenants.acme]"
SURFACE = DashboardSurface(user_id="u_42")


@pytest.fixture(autouse=True)
def _secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_ENV, EXPECT_SECRET)


@pytest.fixture
async def world() -> AsyncIterator[tuple[Harness, Any, AsyncCosigner, AsyncCosigner]]:
    clock = ManualClock()
    async with expect_server(clock) as (shop, url):
        async with cosigner_app(handoff_policy(url, TENANT), clock=clock, callback_allow=LOOPBACK) as h:
            key = await h.create_tenant("acme")
            transport = httpx.ASGITransport(app=h.app)
            client = AsyncCosigner(url=BASE_URL, api_key=key, transport=transport)
            app = AsyncCosigner(url=BASE_URL, api_key=h.approver_of(key), transport=transport)
            yield h, shop, client, app
            await client.aclose()
            await app.aclose()


async def ask(client: AsyncCosigner, call: str) -> Any:
    return await client.request_approval(
        execution_id="run_1",
        tool_call_id=call,
        tool_name="publish_changes",
        parameters=PARAMETERS,
        surface=SURFACE,
        wait=False,
    )


def check_gate(decision: Any) -> None:
    import inspect

    def publish_changes(changeId: str, ownerPin: str) -> None: ...

    refuse_unless_approved(decision, inspect.signature(publish_changes), **PARAMETERS)


async def test_each_outcome_as_the_sdk_sees_it(world: Any) -> None:
    h, shop, client, app = world
    pending = await ask(client, "c1")
    assert pending.pending and pending.reason and pending.steps[2] == "Press Publish"
    assert pending.parameters == {"changeId": "chg_1", "ownerPin": "[REDACTED]"}
    failed = await app.decide(pending, decision="done", user_id="u_42")
    assert (failed.status.value, failed.code, failed.detail) == (
        "failed",
        "HANDOFF_FAILED",
        "change chg_1 is not published",
    )
    with pytest.raises(errors.HandoffFailed, match="not published"):
        check_gate(failed)

    shop.publish("chg_1")
    done = await app.decide(await ask(client, "c2"), decision="done", user_id="u_42")
    assert done.completed and not done.approved and done.grant is None
    assert done.receipt is not None and done.receipt.detail == "change chg_1 is live"
    check_gate(done)  # completed: the gate lets the body run

    cancelled = await app.decide(await ask(client, "c3"), decision="cancel", user_id="u_42")
    with pytest.raises(errors.HandoffCancelled):
        check_gate(cancelled)

    late = await ask(client, "c4")
    h.advance(301)
    expired = await client.wait(late, timeout=10)
    assert expired.code == "HANDOFF_TIMEOUT"
    with pytest.raises(errors.HandoffTimeout) as caught:
        check_gate(expired)
    assert caught.value.decision is expired
    with pytest.raises(errors.ApprovalExpired):
        await app.decide(late, decision="done", user_id="u_42")


async def test_the_stream_starts_with_handoff_start(world: Any) -> None:
    h, shop, client, app = world
    pending = await ask(client, "c1")
    events: list[Any] = []

    async def read() -> None:
        async for event in client.stream(pending):
            events.append(event)

    task = asyncio.create_task(read())
    await h.waiters(1)
    shop.publish("chg_1")
    await app.decide(pending, decision="done", user_id="u_42")
    await asyncio.wait_for(task, 10)
    assert [e.event for e in events] == ["handoff_start", "approval_decided"]
    assert events[0].decision.steps and events[1].decision.completed
