"""An example agent on the Cosigner SDK: gated tools, approvals, and every decision printed.

Run `cosigner dev` (or `./run dev`) in one terminal, then in another:

    .venv/bin/python examples/agent.py

It reads COSIGNER_URL (default http://127.0.0.1:8000) and COSIGNER_API_KEY (default: the
key `cosigner dev` wrote to demo.key in its data folder, COSIGNER_DATA, default
cosigner-data). `cosigner dev` prints the line that sets all three. It needs only the SDK
(`pip install ./sdk/python`).

What it does, against the sandbox's sample policy (bot/dev/sandbox_policy.toml):
  1. asks whether a nightly *scheduled* run may start: refused with APPROVAL_MODE_UNSUPPORTED,
     because nobody could approve it (the policy routes no headless runs);
  2. a read (lookup_order), a gated function: decided by policy at once, its body runs;
  3. a write with confirm (issue_credit), a gated function: a card in Slack, with "Approve
     for this run"; its body runs only if approved, else the denial's comment is printed;
  4. a danger refund (issue_refund) whose cardToken is redacted before anyone sees it; the
     agent accepts edits, so the approver may press Edit and correct the amount or the note
     (the sandbox policy marks them editable): the decision is then the edited refund, which
     is what the agent would run (it prints EDITED and the changes);
  5. an email (send_email) asked by SMS, from a run started by text message;
  6. an account deletion (delete_account) the policy itself denies: refused at once, nobody
     is asked.
It says WAITING for each call that waits for a person, waits for every decision at once and
exits when all are in (or after --timeout seconds, cancelling what is left).

With --handoff it shows a handoff instead: publishing (publish_changes) needs a code only the
owner has, so the agent hands the step to a person. The card shows the steps and Done /
Cancel; Done counts only once the application confirms it (run examples/expect_app.py and
type the change id to publish it first, or watch Done fail closed without it).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import secrets
import sys
from pathlib import Path
from typing import Any

import httpx

import cosigner
from cosigner import AsyncCosigner, Decision, HeadlessSurface, SlackSurface, SmsSurface
from cosigner.errors import (
    ApprovalDenied,
    ApprovalExpired,
    ApprovalModeUnsupported,
    CosignerError,
    HandoffCancelled,
    HandoffFailed,
    HandoffTimeout,
)

DEFAULT_URL = "http://127.0.0.1:8000"
DATA = "cosigner-data"  # `cosigner dev --data`'s default
KEY_FILE = "demo.key"
# Where the sandbox's demo runs happen (see bot/dev/sandbox_policy.toml and the /sandbox page).
SLACK = SlackSurface(team_id="T0DEMO", channel_id="C0DEMO", user_id="U0ALICE")
PHONE = SmsSurface(phone="+15550100200")
# The refund tool's argument schema, as a framework would give it to the model: the approver's
# Edit form gets typed inputs from it, and an edited refund must satisfy it.
REFUND_SCHEMA = {
    "type": "object",
    "properties": {
        "orderId": {"type": "string"},
        "amountCents": {"type": "integer", "minimum": 1, "description": "Amount to refund, in cents"},
        "note": {"type": "string", "maxLength": 200},
        "cardToken": {"type": "string"},
    },
    "required": ["orderId", "amountCents", "cardToken"],
}


def say(line: str) -> None:
    """Print a line at once, even into a pipe."""
    print(line, flush=True)


class Waiting(logging.Handler):
    """Prints the SDK's note that a gated function's call waits for a person (its body has
    not run yet), so that every pending call gets its WAITING line."""

    def emit(self, record: logging.LogRecord) -> None:
        approval_id = getattr(record, "approval_id", None)
        if approval_id is not None:
            tool = getattr(record, "tool", "?")
            say(f"WAITING {tool} (gated function): approval {approval_id}; it runs once approved")


def show_waiting() -> None:
    """Let the SDK's `waiting for a person` notes (INFO on the `cosigner` logger) through to `Waiting`."""
    sdk = logging.getLogger("cosigner")
    sdk.addHandler(Waiting(logging.INFO))
    sdk.setLevel(logging.INFO)


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


def describe(d: Decision) -> str:
    """One line for a decision."""
    by = d.decided_by
    if by is not None and by.kind == "person":
        who = f"by {by.user_id} via {by.surface}"
    elif by is not None and by.kind == "policy":
        who = f"by policy ({by.rule})"
    else:
        who = f"by {by.kind if by else 'nobody'}"
    line = f"{d.tool_name} {d.status.upper()} {who}"
    if d.code:
        line += f" ({d.code}: {d.detail})" if d.detail else f" ({d.code})"
    if d.receipt is not None:
        line += f", confirmed by the application: {d.receipt.detail}"
    if d.comment:
        line += f", comment: {d.comment!r}"
    if d.grant:
        line += " [signed grant attached]"
    return line


def tools(client: AsyncCosigner) -> tuple[Any, Any]:
    """The agent's gated tools: bodies that run only once Cosigner approved the exact call."""

    @client.gate(surface=SLACK)
    async def lookup_order(order_id: str) -> dict[str, Any]:
        return {"orderId": order_id, "status": "delivered", "totalCents": 12900}

    @client.gate(surface=SLACK, reason="Late delivery: a goodwill credit")
    async def issue_credit(order_id: str, amount_cents: int) -> str:
        return f"credited {amount_cents} cents on {order_id}"

    return lookup_order, issue_credit


async def gated(label: str, call: Any) -> bool:
    """Run one gated call and say how it ended; False if it was still undecided at the end."""
    try:
        say(f"RAN {label}: {await call}")
    except ApprovalDenied as denied:
        say(f"DID NOT RUN {label}: {denied.message}")
    except ApprovalExpired:
        say(f"DID NOT RUN {label}: the approval expired (expiry means deny)")
    except TimeoutError:
        say(f"TIMED OUT waiting for {label}; its approval expires on its own")
        return False
    except CosignerError as refused:
        say(f"REFUSED {label}: {refused.code}: {refused.message}")
    return True


async def asked(client: AsyncCosigner, label: str, wait_for: float, **call: Any) -> bool:
    """Ask without a decorator, show what the approver sees, and wait for the decision."""
    try:
        d = await client.request_approval(wait=False, **call)
    except CosignerError as refused:
        policy = refused.details.get("policy")
        by = f" denied by policy ({policy})" if policy else ""
        say(f"REFUSED {call['tool_name']}{by}: {refused.code}: {refused.message}")
        return True
    if d.pending:
        say(
            f"WAITING {d.tool_name} ({label}): approval {d.approval_id}, shown with parameters {d.parameters}"
        )
        try:
            d = await client.wait(d, timeout=wait_for)
        except TimeoutError:
            await client.cancel(d)
            say(f"TIMED OUT waiting for {d.approval_id}; cancelled it")
            return False
    say(f"DECISION {describe(d)}")
    if d.edited:
        # The call to run: the agent's own with the approver's changes (checked against the
        # approved digest); only the changed values are printed, never the hidden card token.
        to_run = d.with_original(call["parameters"]).parameters or {}
        changes = ", ".join(f"{name}={to_run[name]!r}" for name in d.edited_fields)
        was = call["parameters"][d.edited_fields[0]]
        say(f"EDITED {d.tool_name} by the approver: runs with {changes} (was {was!r})")
    return True


async def handoff(client: AsyncCosigner, run: str, wait_for: float) -> int:
    """Hand a step only a person may do to the requester, and learn whether it really happened."""
    d = await client.request_approval(
        execution_id=f"publish_{run}",
        tool_call_id="publish",
        tool_name="publish_changes",
        parameters={"changeId": f"chg_{run}", "ownerPin": "482910"},
        surface=SLACK,
        reason="The user asked to publish their changes",
        wait=False,
    )
    say(f"HANDED OFF {d.tool_name}: {d.reason}")
    for n, step in enumerate(d.steps, 1):
        say(f"  {n}. {step}")
    say(f"waiting for Done or Cancel on the card at the sandbox (change chg_{run})")
    try:
        d = await client.wait(d, timeout=wait_for)
    except TimeoutError:
        await client.cancel(d)
        say(f"TIMED OUT waiting for {d.approval_id}; cancelled it")
        return 1
    say(f"HANDOFF {describe(d)}")
    try:
        if d.code is not None:
            raise cosigner.errors.error_for(409, d.code, d.detail or d.status, {})
    except HandoffFailed as failed:
        say(f"NOT DONE: the application did not confirm it ({failed.message}); the agent stops here")
    except (HandoffCancelled, HandoffTimeout) as stopped:
        say(f"NOT DONE: {stopped.code}")
    return 0


async def main(url: str, wait_for: float, handoff_only: bool = False) -> int:
    run = secrets.token_hex(3)
    key = api_key()
    async with AsyncCosigner(url=url, api_key=key, retry_for=0) as probe:
        try:
            await probe.get("apv_probe")
        except httpx.TransportError:
            sys.exit(f"cannot reach Cosigner at {url}: start it with `cosigner dev` or set COSIGNER_URL")
        except CosignerError:
            pass  # reachable (there is no such approval)
    show_waiting()
    async with AsyncCosigner(url=url, api_key=key) as client:
        say(f"agent run {run} talking to {url}")
        if handoff_only:
            return await handoff(client, run, wait_for)
        try:
            await client.admit(
                execution_id=f"nightly_{run}", surface=HeadlessSurface("schedule"), tools=["send_email"]
            )
        except ApprovalModeUnsupported as refused:
            say(f"REFUSED before start: scheduled run nightly_{run}: {refused.code}: {refused.message}")
        lookup_order, issue_credit = tools(client)
        with cosigner.execution(f"support_{run}"):
            await client.admit(
                execution_id=f"support_{run}",
                surface=SLACK,
                tools=["lookup_order", "issue_credit", "issue_refund"],
            )
            refund = {
                "orderId": "ord_4421",
                "amountCents": 12900,
                "note": "discount not applied",
                "cardToken": f"tok_{secrets.token_hex(8)}",
            }
            say(f"waiting for decisions: answer them at {url}/sandbox")
            done = await asyncio.gather(
                gated("lookup_order", lookup_order("ord_4421")),
                gated("issue_credit", asyncio.wait_for(issue_credit("ord_4421", 500), wait_for)),
                asked(
                    client,
                    "Slack, danger",
                    wait_for,
                    execution_id=f"support_{run}",
                    tool_call_id="refund",
                    tool_name="issue_refund",
                    parameters=refund,
                    surface=SLACK,
                    reason="Customer says the discount was not applied",
                    accepts_edits=True,
                    parameters_schema=REFUND_SCHEMA,
                ),
                asked(
                    client,
                    "Slack, denied by the policy",
                    wait_for,
                    execution_id=f"support_{run}",
                    tool_call_id="delete",
                    tool_name="delete_account",
                    parameters={"accountId": "acc_77"},
                    surface=SLACK,
                    reason="The customer asked to close their account",
                ),
                asked(
                    client,
                    "SMS",
                    wait_for,
                    execution_id=f"sms_{run}",
                    tool_call_id="email",
                    tool_name="send_email",
                    parameters={"to": "customer@example.com", "subject": "Your refund"},
                    surface=PHONE,
                    reason="The customer asked for a confirmation by email",
                ),
            )
    if not all(done):
        return 1
    say("all decisions are in")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("COSIGNER_URL", DEFAULT_URL))
    parser.add_argument(
        "--timeout", type=float, default=600.0, help="seconds to wait for all decisions (default 600)"
    )
    parser.add_argument("--handoff", action="store_true", help="show a handoff (publish_changes) instead")
    args = parser.parse_args()
    sys.exit(asyncio.run(main(args.url.rstrip("/"), args.timeout, args.handoff)))
