"""What `cosigner dev`'s banner tells a new user: who is who on each surface, and requests
to paste that land where a person can answer them."""

from __future__ import annotations

import json
import shlex
from typing import TYPE_CHECKING

from bot.dev.page import DEMO_PHONE
from bot.dev.teams import CONVERSATION, DEMO_TENANT
from bot.dev.teams import PEOPLE as TEAMS_PEOPLE

if TYPE_CHECKING:
    from bot.dev.sandbox import Sandbox

# The surfaces the banner offers Alice on: her ids in the Teams emulator and on the phone.
TEAMS_SURFACE = {
    "type": "teams",
    "tenantId": DEMO_TENANT,
    "conversationId": CONVERSATION,
    "userId": TEAMS_PEOPLE["alice"],
}
WHATSAPP_SURFACE = {"type": "whatsapp", "phone": DEMO_PHONE}
DASHBOARD_USER = "U0ALICE"  # Alice's id in the inbox: her Slack user id (or alice@demo.example)


def people_lines() -> list[str]:
    """Who is who in the sandbox, with the id each surface knows them by."""
    return [
        "The sandbox's people (Clicking as on the page; Sign in with Slack in the inbox):",
        f"  Alice, the requester: Slack U0ALICE; inbox/dashboard {DASHBOARD_USER} or alice@demo.example;",
        f"    Teams {TEAMS_PEOPLE['alice']}; phone {DEMO_PHONE} (SMS, and WhatsApp as whatsapp:{DEMO_PHONE})",
        f"  Ada and Ben, tenant admins: Slack U0ADMIN and U0ADMIN2; Teams (Ada) {TEAMS_PEOPLE['admin']}",
        "  Mallory, in the channel but nobody's approver: Slack U0MALLORY",
    ]


def dashboard_curl(sb: Sandbox) -> list[str]:
    """A request Alice answers in her inbox: a dashboard request that names her."""
    body = {
        "executionId": "run_3",
        "toolCallId": "call_1",
        "toolName": "issue_refund",
        "parameters": {"orderId": "ord_4421", "amountCents": 12900, "cardToken": "tok_x"},
        "surface": {"type": "dashboard", "userId": DASHBOARD_USER},
    }
    return [
        f"  curl -s {sb.url}/v1/approvals -H 'Authorization: Bearer {sb.api_key}' \\",
        f"    -H 'content-type: application/json' -d '{json.dumps(body)}'",
    ]


def exports(sb: Sandbox) -> str:
    """The shell line that points the examples at this sandbox: its URL, key and data folder."""
    values = {
        "COSIGNER_URL": sb.url,
        "COSIGNER_API_KEY": sb.api_key,
        "COSIGNER_DATA": str(sb.key_file.parent.resolve()),
    }
    return "export " + " ".join(f"{k}={shlex.quote(v)}" for k, v in values.items())
