"""Run the Temporal recipe against Cosigner on Temporal's time-skipping test server; print JSON.

A separate process because the Temporal client's native threads can abort the interpreter
at exit (temporalio/sdk-python#300); this one leaves with `os._exit` once it has printed.
Reads COSIGNER_URL, COSIGNER_API_KEY and CALLBACK_SECRET. Three workflows: one approved,
one denied with a comment, one that nobody answers before its deadline.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import uuid
from concurrent.futures import Future
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal

from temporalio.client import Client, WorkflowHandle
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from cosigner import AsyncCosigner, Cosigner, DashboardSurface
from cosigner.adapters.temporal import CosignerActivities, deliver
from tests.adapters.temporal_workflow import RAN, Refund, issue_refund

SERVER = Path(sys.executable).with_name("temporal-test-server")
ORDER = {"order_id": "ord_1", "amount_cents": 12900}


def receiver(client: Client, loop: asyncio.AbstractEventLoop) -> ThreadingHTTPServer:
    """The application's callback endpoint: verify, then deliver the decision as an update."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            headers = {k: v for k, v in self.headers.items()}
            done: Future[None] = asyncio.run_coroutine_threadsafe(
                deliver(client, body, headers, os.environ["CALLBACK_SECRET"]), loop
            )
            done.result(timeout=30)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


async def waiting(handle: WorkflowHandle[Any, Any]) -> str:
    """The approval id the workflow waits on, once it has asked."""
    for _ in range(600):
        approval_id: str | None = await handle.query(Refund.waiting_for)
        if approval_id:
            return approval_id
        await asyncio.sleep(0.05)
    raise AssertionError("the workflow never asked")


async def main() -> dict[str, Any]:
    out: dict[str, Any] = {}
    surface = DashboardSurface(user_id="u_1")
    async with (
        await WorkflowEnvironment.start_time_skipping(test_server_existing_path=str(SERVER)) as env,
        AsyncCosigner() as client,
    ):
        callbacks = receiver(env.client, asyncio.get_running_loop())
        url = f"http://127.0.0.1:{callbacks.server_address[1]}/cosigner"
        activities = CosignerActivities(client, surface).activities
        person = Cosigner(api_key=os.environ["COSIGNER_APPROVER_KEY"])
        async with Worker(
            env.client, task_queue="refunds", workflows=[Refund], activities=[*activities, issue_refund]
        ):
            for case in ("approve", "deny"):
                RAN.clear()
                with env.auto_time_skipping_disabled():
                    handle = await env.client.start_workflow(
                        Refund.run, args=[ORDER, url], id=f"wf_{uuid.uuid4().hex[:10]}", task_queue="refunds"
                    )
                    approval_id = await waiting(handle)
                    shown = person.get(approval_id)
                    comment = None if case == "approve" else "refund already issued"
                    decision: Literal["approve", "deny"] = "approve" if case == "approve" else "deny"
                    person.decide(approval_id, decision=decision, user_id="u_1", comment=comment)
                    result = await handle.result()
                audit = person.audit(approval_id)
                out[case] = {
                    "result": result,
                    "ran": list(RAN),
                    "shown": shown.parameters,
                    "executionId": shown.execution_id,
                    "workflowId": handle.id,
                    "reported": [e["data"] for e in audit if e["event"] == "result"],
                }
            RAN.clear()
            handle = await env.client.start_workflow(
                Refund.run, args=[ORDER, url], id=f"wf_{uuid.uuid4().hex[:10]}", task_queue="refunds"
            )
            result = await handle.result()  # the test server skips to the deadline
            out["expire"] = {"result": result, "ran": list(RAN)}
        callbacks.shutdown()
        person.close()
    return out


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main())), flush=True)
    os._exit(0)
