"""An example tool executor: runs a call only with a grant for exactly those parameters.

Run `cosigner dev` (or `./run dev`) in one terminal, then in another:

    .venv/bin/python examples/executor.py

It reads COSIGNER_URL (default http://127.0.0.1:8000), COSIGNER_API_KEY and
COSIGNER_CALLBACK_SECRET (defaults: demo.key and demo.callback-secret, which `cosigner dev`
writes to its data folder, COSIGNER_DATA, default cosigner-data). `cosigner dev` prints the
line that sets COSIGNER_URL, COSIGNER_API_KEY and COSIGNER_DATA. What it shows:
  1. a callback receiver that checks the Standard Webhooks signature (`cosigner.webhooks`)
     before it believes a decision, and processes each `webhook-id` once;
  2. a call the policy approves at once (a read), whose grant (an EdDSA JWS) the executor
     verifies offline against the JWKS published at /v1/keys, then runs, then reports;
  3. the same grant presented with other parameters: refused, nothing runs;
  4. a forged callback: refused by the receiver.
"""

from __future__ import annotations

import http.server
import json
import os
import queue
import secrets
import sys
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import jwt

from cosigner import webhooks
from cosigner.errors import InvalidSignature, ReplayedDelivery
from cosigner.grants import GrantRefused, verify_grant

DATA = "cosigner-data"  # `cosigner dev --data`'s default


def data_folders() -> list[Path]:
    """Where `cosigner dev` keeps its files: COSIGNER_DATA if set, else cosigner-data here
    or next to the examples (the folder `./run dev` uses)."""
    if os.environ.get("COSIGNER_DATA"):
        return [Path(os.environ["COSIGNER_DATA"])]
    return [Path(DATA), Path(__file__).resolve().parent.parent / DATA]


def setting(env: str, file: str) -> str:
    """An environment variable, else a file `cosigner dev` wrote."""
    if os.environ.get(env):
        return os.environ[env].strip()
    for folder in data_folders():
        if (folder / file).is_file():
            return (folder / file).read_text(encoding="utf-8").strip()
    sys.exit(
        f"no {file} in {data_folders()[0]}: set {env}, or start `cosigner dev` first and paste the "
        "`export …` line it prints (COSIGNER_URL, COSIGNER_API_KEY, COSIGNER_DATA)"
    )


class Receiver(http.server.BaseHTTPRequestHandler):
    """Accepts a callback only if its signature verifies over the id, timestamp and raw body."""

    secret = ""
    verified: queue.Queue[dict[str, Any]] = queue.Queue()
    seen = webhooks.DeliveryLog()

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        headers = dict(self.headers.items())
        try:
            decision = webhooks.verify(body, headers, self.secret, seen=self.seen)
        except ReplayedDelivery:
            print("CALLBACK already processed: answered 204, nothing done", flush=True)
            self.send_response(204)
            self.end_headers()
            return
        except InvalidSignature as exc:
            print(f"CALLBACK REFUSED: {exc}", flush=True)
            self.send_response(401)
            self.end_headers()
            return
        print(
            f"CALLBACK verified: {decision.tool_name} {decision.status.value} "
            f"(delivery {self.headers.get('webhook-id')})",
            flush=True,
        )
        self.verified.put(json.loads(body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet: the example prints its own lines."""


def main() -> int:
    """Run the four steps; exit 0 when each behaved as described."""
    url = os.environ.get("COSIGNER_URL", "http://127.0.0.1:8000").rstrip("/")
    key = setting("COSIGNER_API_KEY", "demo.key")
    tenant = os.environ.get("COSIGNER_TENANT", "demo")
    Receiver.secret = setting("COSIGNER_CALLBACK_SECRET", "demo.callback-secret")
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    callback = f"http://127.0.0.1:{server.server_address[1]}/cosigner"
    print(f"callback receiver listening on {callback}", flush=True)

    params = {"orderId": "ord_4421"}
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=30) as api:
        try:
            jwks = api.get("/v1/keys").json()
        except httpx.ConnectError:
            sys.exit(f"nothing answers at {url}: start `cosigner dev` first")
        answer = api.post(
            "/v1/approvals",
            json={
                "executionId": f"exec_{secrets.token_hex(3)}",
                "toolCallId": "call_1",
                "toolName": "lookup_order",
                "parameters": params,
                "surface": {"type": "api"},
                "callbackUrl": callback,
            },
        )
        decision = answer.json()
        if answer.status_code != 200 or decision.get("status") != "approved":
            print(f"unexpected answer {answer.status_code}: {decision}", flush=True)
            return 1
        try:
            claims = verify_grant(
                decision["grant"],
                jwks,
                tool_name="lookup_order",
                parameters=params,
                tool_call_id="call_1",
                tenant=tenant,
                approval_id=decision["approvalId"],
            )
        except GrantRefused as exc:
            print(f"GRANT REFUSED: {exc}", flush=True)
            return 1
        kid = jwt.get_unverified_header(decision["grant"])["kid"]
        print(
            f"GRANT OK for {claims.tool_name} (approval {claims.approval_id}, tenant "
            f"{claims.tenant}, key {kid}): running it",
            flush=True,
        )
        api.post(
            f"/v1/approvals/{claims.approval_id}/result",
            json={"outcome": "succeeded", "result": {"status": "shipped"}},
        )
        print("RESULT reported to the audit record", flush=True)

        try:
            verify_grant(
                decision["grant"],
                jwks,
                tool_name="lookup_order",
                parameters={"orderId": "ord_9999"},
                tool_call_id="call_1",
            )
            print("a tampered call was accepted: this must not happen", flush=True)
            return 1
        except GrantRefused as exc:
            print(f"TAMPERED CALL REFUSED: {exc}", flush=True)

    try:
        Receiver.verified.get(timeout=10)
    except queue.Empty:
        print("no verified callback arrived within 10 s", flush=True)
        return 1
    forged = json.dumps({**decision, "status": "approved"}).encode()
    response = httpx.post(
        callback,
        content=forged,
        headers=webhooks.sign("whsec_bm90IHRoZSBzZWNyZXQ=", "dlv_forged", int(time.time()), forged),
    )
    print(f"forged callback answered {response.status_code}", flush=True)
    server.shutdown()
    return 0 if response.status_code == 401 else 1


if __name__ == "__main__":
    sys.exit(main())
