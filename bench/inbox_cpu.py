"""CPU per approve round trip answered in the inbox, beside the same round trip answered
through the decision endpoint: what the signed-in page path costs.

    .venv/bin/python bench/inbox_cpu.py [--trips 300] [--rounds 3]

In one process, on SQLite: the app with the inbox signing in through the Slack emulator's
OpenID provider (authlib, as in production), one signed-in browser session (httpx over
ASGI, cookies kept). Each trip: the agent creates a dashboard request, the approver
answers it (the inbox: `GET /inbox/` for the CSRF token and `POST …/answer`; the API:
`POST …/decision` with the approver key), the agent reads the decision with its grant.
The figure is process CPU (user + system) per trip; client and server share the process,
so the difference between the two paths is what the inbox adds.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.harness import Harness
from tests.inbox.test_answers import POLICY_BY_EMAIL
from tests.inbox.world import World, inbox_world

CSRF = re.compile(r'name="csrf" value="([^"]+)"')


async def trip(w: World, h: Harness, agent: str, approver: str, n: int, inbox: bool) -> None:
    aid = await w.ask(agent, "ada@acme.example", call=f"{'i' if inbox else 'a'}{n}")
    if inbox:
        page = (await h.client.get("/inbox/")).text
        token = CSRF.search(page)
        assert token, page
        r = await h.client.post(
            f"/inbox/approvals/{aid}/answer", data={"decision": "approve", "csrf": token.group(1)}
        )
        assert r.status_code == 303, r.text
    else:
        body = {"decision": "approve", "userId": "ada@acme.example"}
        r = await h.client.post(f"/v1/approvals/{aid}/decision", json=body, headers=h.auth(approver))
        assert r.status_code == 200, r.text
    done = (await h.client.get(f"/v1/approvals/{aid}?wait=5", headers=h.auth(agent))).json()
    assert done["status"] == "approved" and done["grant"]


async def main(trips: int, rounds: int) -> None:
    async with inbox_world(POLICY_BY_EMAIL) as w:
        h = w.h
        agent = await h.create_tenant("acme")
        approver = h.approver_key("acme")
        await w.sign_in(h.client, "U0ADMIN")
        seq = 0
        for r in range(rounds):
            for inbox in (False, True):
                # Each answered request leaves the list; nothing accumulates on the page.
                start = time.process_time()
                for _ in range(trips):
                    seq += 1
                    await trip(w, h, agent, approver, seq, inbox)
                ms = (time.process_time() - start) * 1000 / trips
                print(
                    f"round {r + 1}  {'inbox' if inbox else 'API  '}  {ms:.2f} ms CPU per approve round trip"
                )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--trips", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    asyncio.run(main(args.trips, args.rounds))
