"""Server CPU per dashboard round trip with no network and no HTTP client in the way.

    .venv/bin/python bench/asgi_cpu.py [REPETITIONS]

Calls the ASGI app of `tests.harness.cosigner_app` (SQLite, the real engine) directly:
create, long-poll, decide, 8 round trips at a time, and prints the process CPU time per
round trip, best and median of REPETITIONS × 200. On a shared machine the best figure is
the one to compare between two versions of the code (run them interleaved).

The same run measures a quorum-2 round trip too, interleaved with the single one: create,
long-poll, two admins approve in turn (the first answer is still pending, 1 of 2), the
long-poll answers approved; and the single round trips per second it is worth (single CPU
/ quorum CPU: the share of the single-approver round trips/s the quorum's reach when the
server is the bottleneck).

And, interleaved with both, a quorum-2 round trip with an edit: the agent says it accepts
edits, the first admin approves with an edit (`edit` and the `parametersDigest` of the call
shown; the answer is still pending, 1 of 2, with the edited call as `currentCall`), the
second approves the edited call (naming its digest), the long-poll answers approved with
the edited call.
"""

import asyncio
import json
import os
import sys
import time
from collections.abc import Sequence

from starlette.types import ASGIApp, Message, Scope

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from tests.harness import cosigner_app

POLICY = """
[defaults]
timeout = "1h"
max_gated_calls_per_execution = 100000

[tools.wire_money]
kind = "danger"
approvers = ["requester"]
redact = ["cardToken"]

[tools.close_account]
kind = "danger"
approvers = ["tenant_admins"]
quorum = 2
redact = ["cardToken"]
editable = ["amountCents"]  # offered only to a request that says acceptsEdits (the edited kind)

[tenants.acme]
admins = { dashboard = ["u_admin_1", "u_admin_2"] }
"""
APPROVERS = {"wire_money": ("u_bench",), "close_account": ("u_admin_1", "u_admin_2")}
EDITED = "close_account (edited)"  # the quorum-2 round trip in which the first admin edits


async def call(
    app: ASGIApp, method: str, path: str, body: bytes = b"", headers: Sequence[tuple[bytes, bytes]] = ()
) -> tuple[int, bytes]:
    q = path.split("?", 1)
    scope: Scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": q[0],
        "raw_path": q[0].encode(),
        "query_string": (q[1] if len(q) > 1 else "").encode(),
        "root_path": "",
        "headers": [
            (b"host", b"x"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
            *headers,
        ],
        "client": ("127.0.0.1", 1),
        "server": ("x", 80),
    }
    sent = False

    async def receive() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()
        return {"type": "http.disconnect"}

    out: dict[str, int] = {}
    chunks: list[bytes] = []

    async def send(msg: Message) -> None:
        if msg["type"] == "http.response.start":
            out["status"] = msg["status"]
        elif msg["type"] == "http.response.body":
            chunks.append(msg.get("body", b""))

    await app(scope, receive, send)
    return out["status"], b"".join(chunks)


async def main() -> None:
    async with cosigner_app(POLICY) as h:
        key = await h.create_tenant("acme")
        auth = [(b"authorization", f"Bearer {key}".encode())]
        approver = [(b"authorization", f"Bearer {h.approver_of(key)}".encode())]
        app = h.app
        n = [0]

        async def rt(tool: str = "wire_money") -> None:
            n[0] += 1
            i = n[0]
            edits = tool == EDITED
            tool = "close_account" if edits else tool
            body = json.dumps(
                {
                    **({"acceptsEdits": True} if edits else {}),
                    "executionId": f"run_{i}",
                    "toolCallId": f"call_{i}",
                    "toolName": tool,
                    "parameters": {
                        "orderId": f"ord_{i}",
                        "amountCents": 12900,
                        "cardToken": "tok_x",
                        "note": "bench",
                    },
                    "reason": "benchmark",
                    "surface": {"type": "dashboard", "userId": "u_bench"},
                }
            ).encode()
            s, b = await call(app, "POST", "/v1/approvals", body, auth)
            assert s == 201, b
            start = json.loads(b)
            aid = start["approvalId"]
            poll = asyncio.create_task(call(app, "GET", f"/v1/approvals/{aid}?wait=30", b"", auth))
            await asyncio.sleep(0)
            shown = start["parametersDigest"]
            for k, who in enumerate(APPROVERS[tool]):
                answer: dict[str, object] = {"decision": "approve", "userId": who}
                if edits:
                    answer["parametersDigest"] = shown
                    if k == 0:
                        answer["edit"] = {"amountCents": 4000}
                s, b = await call(
                    app, "POST", f"/v1/approvals/{aid}/decision", json.dumps(answer).encode(), approver
                )
                assert s == 200, b
                if edits and k == 0:
                    shown = json.loads(b)["currentCall"]["digest"]
            s, b = await poll
            decided = json.loads(b)
            assert decided["status"] == "approved" and decided.get("edited", False) is edits, b

        for _ in range(100):
            await rt()
            await rt("close_account")
            await rt(EDITED)
        cpu: dict[str, list[float]] = {"wire_money": [], "close_account": [], EDITED: []}
        for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 8):
            for tool, runs in cpu.items():
                t0 = time.process_time()
                for _ in range(25):
                    await asyncio.gather(*(rt(tool) for _ in range(8)))
                runs.append((time.process_time() - t0) / 200 * 1000)
        for runs in cpu.values():
            runs.sort()
        single, quorum = cpu["wire_money"], cpu["close_account"]
        print(f"server CPU ms per round trip: min {single[0]:.3f} median {single[len(single) // 2]:.3f}")
        middle = quorum[len(quorum) // 2]
        print(
            f"server CPU ms per quorum-2 round trip: min {quorum[0]:.3f} median {middle:.3f}"
            f" ({single[0] / quorum[0]:.0%} of the single round trips/s, best against best)"
        )
        edited = cpu[EDITED]
        print(
            f"server CPU ms per quorum-2 round trip with an edit: min {edited[0]:.3f} median "
            f"{edited[len(edited) // 2]:.3f} ({quorum[0] / edited[0]:.0%} of the plain quorum-2 "
            "round trips/s)"
        )


asyncio.run(main())
