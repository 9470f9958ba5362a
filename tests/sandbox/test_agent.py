"""examples/agent.py, run as it stands against a sandbox, prints each decision as it arrives."""

from __future__ import annotations

import asyncio
import os
import re
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from bot.dev.sandbox import Sandbox
from tests.sandbox.delivery import until_delivered

AGENT = Path(__file__).resolve().parents[2] / "examples" / "agent.py"


async def cards(http: httpx.AsyncClient) -> dict[str, dict[str, Any]]:
    messages = (await http.get("/sandbox/api/state")).json()["messages"]
    return {m["blocks"][0]["text"]["text"]: m for m in messages}


async def test_the_example_agent_sees_every_decision(
    sb: Sandbox, http: httpx.AsyncClient, wait_until: Any, run_agent: Any
) -> None:
    # The agent finds the key in cosigner-data/demo.key below its working directory.
    agent = await run_agent("--timeout", "60")
    try:
        await wait_until(lambda: agent.said("WAITING issue_refund"), 20)
        await wait_until(lambda: len(sb.slack.messages) >= 2, 20)
        shown = await cards(http)
        assert set(shown) == {"issue_credit", "issue_refund"}
        for card in shown.values():
            await until_delivered(http, card)
        for tool, action, said in (
            ("issue_refund", "cosigner.approve", "DECISION issue_refund APPROVED"),
            ("issue_credit", "cosigner.approve_for_run", "RAN issue_credit"),
        ):
            card = shown[tool]
            r = await http.post(
                "/sandbox/api/click",
                json={"channel": card["channel"], "ts": card["ts"], "actionId": action, "as": "requester"},
            )
            assert r.json() == {"status": 200}
            try:
                await wait_until(lambda said=said: agent.said(said), 15)
            except AssertionError:
                state = (await http.get("/sandbox/api/state")).json()
                raise AssertionError(
                    f"the agent did not say {said!r}; it said:\n"
                    + "\n".join(agent.lines)
                    + f"\nephemerals: {state.get('ephemerals')}"
                ) from None
        await wait_until(lambda: sb.twilio.sent, 10)
        phone = sb.twilio.sent[0].to
        r = await http.post("/sandbox/api/text", json={"from": phone, "body": "NO"})
        assert r.json()["status"] == 200
        assert await agent.finish() == 0, "\n".join(agent.lines)
    finally:
        await agent.kill()
    out = "\n".join(agent.lines)
    assert "REFUSED before start: scheduled run" in out and "APPROVAL_MODE_UNSUPPORTED" in out
    assert "RAN lookup_order: {'orderId': 'ord_4421', 'status': 'delivered'" in out
    assert "'cardToken': '[REDACTED]'" in out and "tok_" not in out.replace("[REDACTED]", "")
    assert "DECISION issue_refund APPROVED by U0ALICE via slack [signed grant attached]" in out
    assert "RAN issue_credit: credited 500 cents on ord_4421" in out
    assert f"DECISION send_email DENIED by {phone} via sms" in out
    # Every call that waits for a person says so, the gated function's too.
    for tool in ("issue_credit", "issue_refund", "send_email"):
        assert sum(line.startswith(f"WAITING {tool} ") for line in agent.lines) == 1, out
    assert not any(line.startswith("WAITING lookup_order") for line in agent.lines), out
    assert (
        "REFUSED delete_account denied by policy (tools.delete_account): PERMISSION_DENIED: "
        "accounts are deleted by the support team, not by agents"
    ) in out
    assert out.rstrip().endswith("all decisions are in")


async def test_the_agent_gives_up_after_its_timeout_and_cancels(sb: Sandbox, run_agent: Any) -> None:
    agent = await run_agent("--timeout", "1", key=sb.api_key)
    assert await agent.finish() == 1
    assert sum("TIMED OUT" in line for line in agent.lines) == 3, "\n".join(agent.lines)


async def test_the_agent_names_the_fix_when_nothing_listens(sb: Sandbox) -> None:
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        str(AGENT),
        env={**os.environ, "COSIGNER_URL": "http://127.0.0.1:9", "COSIGNER_API_KEY": "k"},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await proc.communicate()
    assert proc.returncode == 1 and b"start it with `cosigner dev`" in err


async def _press_done(http: httpx.AsyncClient) -> None:
    card = (await cards(http))["Handoff: publish_changes"]
    buttons = [e["action_id"] for b in card["blocks"] if b["type"] == "actions" for e in b["elements"]]
    assert buttons == [
        "cosigner.done",
        "cosigner.cancel",
        "cosigner.full_call",
    ]  # See the full call, as on approval cards
    await until_delivered(http, card)
    r = await http.post(
        "/sandbox/api/click",
        json={"channel": card["channel"], "ts": card["ts"], "actionId": "cosigner.done", "as": "requester"},
    )
    assert r.json() == {"status": 200}


@pytest.mark.parametrize("published", [False, True])
async def test_the_example_agent_hands_off_a_step_checked_by_the_demo_application(
    sb: Sandbox, http: httpx.AsyncClient, wait_until: Any, run_agent: Any, published: bool
) -> None:
    agent = await run_agent("--handoff", "--timeout", "60")
    try:
        await wait_until(lambda: agent.said("waiting for Done or Cancel"), 20)
        waiting = next(line for line in agent.lines if "waiting for Done or Cancel" in line)
        change = re.search(r"\(change (chg_[0-9a-f]+)\)", waiting)
        assert change is not None, waiting
        await wait_until(lambda: sb.slack.messages, 20)
        if published:  # the person publishes the change in the application, then presses Done
            r = await http.post(f"/demo-expect/publish/{change.group(1)}")
            assert r.status_code == 200 and r.json() == {"published": change.group(1)}
        await _press_done(http)
        assert await agent.finish() == 0, "\n".join(agent.lines)
    finally:
        await agent.kill()
    out = "\n".join(agent.lines)
    assert "HANDED OFF publish_changes: Publishing needs the verification code" in out
    assert "  1. Open Settings → Publishing" in out
    if published:
        assert "HANDOFF publish_changes COMPLETED by U0ALICE via slack" in out, out
        assert "NOT DONE" not in out
    else:
        # The demo application has not seen the change published: Done never counts on its own.
        assert "HANDOFF publish_changes FAILED by U0ALICE via slack (HANDOFF_FAILED:" in out
        assert "NOT DONE: the application did not confirm it" in out
