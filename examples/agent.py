"""An example agent: asks Cosigner before each gated tool call and prints each decision.

Run `cosigner dev` (or `./run dev`) in one terminal, then in another:

    .venv/bin/python examples/agent.py

It reads COSIGNER_URL (default http://127.0.0.1:8000) and COSIGNER_API_KEY (default: the
key `cosigner dev` wrote to demo.key in its data folder, COSIGNER_DATA, default
cosigner-data). `cosigner dev` prints the line that sets all three. It needs only httpx.

What it does, against the sandbox's sample policy (bot/sandbox_policy.toml):
  1. asks whether a nightly *scheduled* run may start: refused with APPROVAL_MODE_UNSUPPORTED,
     because nobody could approve it (the policy routes no headless runs);
  2. a read (lookup_order): decided by policy at once, nobody is asked;
  3. a write with confirm (issue_credit): a card in Slack, with "Approve for this run";
  4. a danger refund (issue_refund) whose cardToken is redacted before anyone sees it;
  5. an email (send_email) asked by SMS, from a run started by text message.
Then it long-polls each pending approval and prints the decision as soon as it arrives,
and exits when all are decided (or after --timeout seconds, cancelling what is left).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import secrets
import sys
import time
from pathlib import Path
from typing import Any

import httpx

DEFAULT_URL = "http://127.0.0.1:8000"
DATA = "cosigner-data"  # `cosigner dev --data`'s default
KEY_FILE = "demo.key"
# Where the sandbox's demo runs happen (see bot/sandbox_policy.toml and the /sandbox page).
SLACK = {"type": "slack", "teamId": "T0DEMO", "channelId": "C0DEMO", "userId": "U0ALICE"}
PHONE = "+15550100200"


def say(line: str) -> None:
    """Print a line at once, even into a pipe."""
    print(line, flush=True)


def data_folders() -> list[Path]:
    """Where `cosigner dev` keeps its files: COSIGNER_DATA if set, else cosigner-data here
    or next to the examples (the folder `./run dev` uses)."""
    if os.environ.get("COSIGNER_DATA"):
        return [Path(os.environ["COSIGNER_DATA"])]
    return [Path(DATA), Path(__file__).resolve().parent.parent / DATA]


def api_key() -> str:
    """COSIGNER_API_KEY, else the key file `cosigner dev` writes."""
    key = os.environ.get("COSIGNER_API_KEY")
    if key:
        return key.strip()
    for folder in data_folders():
        if (folder / KEY_FILE).is_file():
            return (folder / KEY_FILE).read_text(encoding="utf-8").strip()
    sys.exit(
        f"no API key in {data_folders()[0] / KEY_FILE}: start `cosigner dev` first and paste the "
        "`export …` line it prints (COSIGNER_URL, COSIGNER_API_KEY, COSIGNER_DATA)"
    )


def error_of(response: httpx.Response) -> str:
    """`CODE: message` from a Cosigner error body."""
    try:
        error = response.json()["error"]
        return f"{error['code']}: {error['message']}"
    except (ValueError, KeyError, TypeError):
        return f"HTTP {response.status_code}"


def describe(decision: dict[str, Any]) -> str:
    """One line for a decision object."""
    by = decision.get("decidedBy") or {}
    if by.get("kind") == "person":
        who = f"by {by.get('userId')} via {by.get('surface')}"
    elif by.get("kind") == "policy":
        who = f"by policy ({by.get('rule')})"
    else:
        who = f"by {by.get('kind', 'nobody')}"
    line = f"{decision['toolName']} {decision['status'].upper()} {who}"
    if decision.get("comment"):
        line += f", comment: {decision['comment']!r}"
    if decision.get("grant"):
        line += " [signed grant attached]"
    return line


async def admit_schedule(http: httpx.AsyncClient, run: str) -> None:
    """A nightly job wants to send emails: no person can answer a schedule, so it is refused."""
    body = {
        "executionId": f"nightly_{run}",
        "surface": {"type": "schedule"},
        "tools": ["lookup_order", "send_email"],
    }
    r = await http.post("/v1/runs/admit", json=body)
    if r.status_code == 422:
        say(f"REFUSED before start: scheduled run nightly_{run}: {error_of(r)}")
    else:
        say(f"unexpected answer to the scheduled run: {r.status_code} {r.text}")


async def ask(http: httpx.AsyncClient, label: str, **call: Any) -> str | None:
    """Submit one gated call; print what happened; return the approval id if a person decides."""
    r = await http.post("/v1/approvals", json=call)
    if r.status_code == 200:
        say(f"DECIDED {describe(r.json())}")
        return None
    if r.status_code != 201:
        say(f"REFUSED {call['toolName']}: {error_of(r)}")
        return None
    start = r.json()
    say(
        f"WAITING {call['toolName']} ({label}): approval {start['approvalId']}, "
        f"shown with parameters {start['parameters']}"
    )
    return str(start["approvalId"])


async def wait(http: httpx.AsyncClient, approval_id: str, deadline: float) -> dict[str, Any] | None:
    """Long-poll until the approval is decided or the deadline passes."""
    while (left := deadline - time.monotonic()) > 0:
        r = await http.get(
            f"/v1/approvals/{approval_id}", params={"wait": max(1, min(60, int(left)))}, timeout=70
        )
        r.raise_for_status()
        decision: dict[str, Any] = r.json()
        if decision["status"] != "pending":
            say(f"DECISION {describe(decision)}")
            return decision
    return None


async def main(url: str, wait_seconds: float) -> int:
    run = secrets.token_hex(3)
    headers = {"Authorization": f"Bearer {api_key()}"}
    async with httpx.AsyncClient(base_url=url, headers=headers, timeout=30) as http:
        try:
            await http.get("/healthz")
        except httpx.TransportError:
            sys.exit(f"cannot reach Cosigner at {url}: start it with `cosigner dev` or set COSIGNER_URL")
        say(f"agent run {run} talking to {url}")
        await admit_schedule(http, run)
        r = await http.post(
            "/v1/runs/admit",
            json={
                "executionId": f"support_{run}",
                "surface": SLACK,
                "tools": ["lookup_order", "issue_credit", "issue_refund"],
            },
        )
        if r.status_code != 200:
            say(f"the Slack run was not admitted: {error_of(r)}")
            return 1
        slack_run = {"executionId": f"support_{run}", "surface": SLACK}
        pending = [
            await ask(
                http,
                "read",
                toolCallId="lookup",
                toolName="lookup_order",
                parameters={"orderId": "ord_4421"},
                **slack_run,
            ),
            await ask(
                http,
                "Slack, write with confirm",
                toolCallId="credit",
                toolName="issue_credit",
                parameters={"orderId": "ord_4421", "amountCents": 500},
                reason="Late delivery: a goodwill credit",
                **slack_run,
            ),
            await ask(
                http,
                "Slack, danger",
                toolCallId="refund",
                toolName="issue_refund",
                parameters={
                    "orderId": "ord_4421",
                    "amountCents": 12900,
                    "cardToken": f"tok_{secrets.token_hex(8)}",
                },
                reason="Customer says the discount was not applied",
                **slack_run,
            ),
            await ask(
                http,
                "SMS",
                executionId=f"sms_{run}",
                toolCallId="email",
                toolName="send_email",
                surface={"type": "sms", "phone": PHONE},
                parameters={"to": "customer@example.com", "subject": "Your refund"},
                reason="The customer asked for a confirmation by email",
            ),
        ]
        ids = [p for p in pending if p]
        say(f"waiting for {len(ids)} decisions: answer them at {url}/sandbox")
        deadline = time.monotonic() + wait_seconds
        results = await asyncio.gather(*(wait(http, i, deadline) for i in ids))
        left = [i for i, result in zip(ids, results, strict=True) if result is None]
        for approval_id in left:
            await http.post(f"/v1/approvals/{approval_id}/cancel")
            say(f"TIMED OUT waiting for {approval_id}; cancelled it")
        if left:
            return 1
        say("all decisions are in")
        return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("COSIGNER_URL", DEFAULT_URL))
    parser.add_argument(
        "--timeout", type=float, default=600.0, help="seconds to wait for all decisions (default 600)"
    )
    args = parser.parse_args()
    sys.exit(asyncio.run(main(args.url.rstrip("/"), args.timeout)))
