"""Acknowledgement latency of the two newer answer paths: a Slack click over Socket Mode and
a WhatsApp quick-reply tap.

    .venv/bin/python bench/answer_acks.py [--clicks 300] [--db sqlite|postgres-url]

One process, everything real but the network (loopback): a Cosigner app built by
`bot.http.app.build_app` on a fresh SQLite file (or the PostgreSQL URL given), the bundled Slack
and Twilio emulators on port 0, the real slack_bolt/slack_sdk and twilio clients.

- Socket Mode: `--clicks` approvals are created over the API (not timed); for each card the
  emulator sends an Approve click as an `interactive` envelope on the WebSocket the app
  opened, and the time until the app's acknowledgement comes back is one sample. The app
  acknowledges only after the decision is committed.
- WhatsApp: `--clicks` approvals with a `whatsapp` surface (not timed); for each template
  the phone posts a really signed tap (`TwilioCaller.tap`) to `/whatsapp/inbound` through
  `httpx.ASGITransport`; the response time is one sample (the decision is committed before
  the TwiML answer).

One answer at a time (concurrency 1): the figure is the path's own latency, not throughput.
Every clicked approval is read back and must be `approved`; anything else is an error.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import httpx  # noqa: E402

from bot.approvals import Desk  # noqa: E402
from bot.http.app import build_app, parts_of  # noqa: E402
from bot.policy.rules import load_policy  # noqa: E402
from bot.settings import Settings  # noqa: E402
from contracts.ports import ApprovalDesk  # noqa: E402
from storage.database import Database  # noqa: E402
from surfaces.slack import SlackAdapter, SlackConfig  # noqa: E402
from surfaces.slack.emulator import APP_TOKEN, SlackEmulator  # noqa: E402
from surfaces.sms import SmsConfig  # noqa: E402
from surfaces.sms.caller import TwilioCaller  # noqa: E402
from surfaces.sms.emulator import TwilioEmulator  # noqa: E402
from surfaces.whatsapp import WhatsAppAdapter, WhatsAppConfig  # noqa: E402
from surfaces.whatsapp.template import TEMPLATE_ACTIONS, TEMPLATE_BODY  # noqa: E402

PUBLIC = "http://cosigner.bench"
ACCOUNT, TOKEN = "AC" + "b" * 32, "bench-twilio-token"
BOT, PHONE = "+15550000001", "+15550000002"
POLICY = """
[tools.issue_refund]
kind = "danger"

[tenants.bench]
slack_team = "T0BENCH"
"""


def summary(name: str, samples: list[float], errors: int) -> str:
    ms = sorted(s * 1000 for s in samples)
    q = statistics.quantiles(ms, n=100) if len(ms) > 1 else ms * 99
    return f"| {name} | {len(ms)} | {q[49]:.1f} | {q[89]:.1f} | {q[98]:.1f} | {errors} |"


async def create(client: httpx.AsyncClient, key: str, call: str, surface: dict[str, Any]) -> str:
    body = {
        "executionId": f"bench_{call}",
        "toolCallId": call,
        "toolName": "issue_refund",
        "parameters": {"orderId": call},
        "surface": surface,
    }
    r = await client.post("/v1/approvals", json=body, headers={"Authorization": f"Bearer {key}"})
    r.raise_for_status()
    return str(r.json()["approvalId"])


async def approved(client: httpx.AsyncClient, key: str, ids: list[str]) -> int:
    bad = 0
    for approval_id in ids:
        r = await client.get(f"/v1/approvals/{approval_id}", headers={"Authorization": f"Bearer {key}"})
        bad += r.json()["status"] != "approved"
    return bad


async def until(check: Any, seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError("cards did not arrive in time")
        await asyncio.sleep(0.01)


async def run(clicks: int, db_url: str) -> list[str]:
    lines = []
    async with (
        SlackEmulator.running(team_id="T0BENCH", app_id="A0BENCH") as slack,
        TwilioEmulator.running(ACCOUNT, TOKEN) as twilio,
    ):
        content_sid = twilio.add_template(TEMPLATE_BODY, TEMPLATE_ACTIONS)
        sms = SmsConfig(ACCOUNT, TOKEN, None, None, twilio.api_url, PUBLIC)
        whatsapp = WhatsAppConfig(sms, BOT, content_sid)
        slack_config = SlackConfig(
            signing_secret="",
            bot_token="xoxb-bench",
            api_url=slack.api_url,
            app_id="A0BENCH",
            app_token=APP_TOKEN,
        )

        def slack_factory(desk: ApprovalDesk) -> SlackAdapter:
            return SlackAdapter(slack_config, desk)

        def whatsapp_factory(desk: Desk) -> WhatsAppAdapter:
            return WhatsAppAdapter(whatsapp, desk, desk.sms_store)

        db = Database(db_url)
        await db.migrate()
        settings = Settings(secret="bench-secret-" + "x" * 32, public_url=PUBLIC, twilio_whatsapp_from=BOT)
        app = build_app(
            settings,
            policy=load_policy(POLICY),
            db=db,
            surfaces=[slack_factory, whatsapp_factory],
            migrate=False,
        )
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url=PUBLIC) as client:
                key = (await parts_of(app).keys.create("bench")).agent.key
                await slack.wait_connected()

                # Socket Mode
                ids = [
                    await create(
                        client,
                        key,
                        f"s{i}",
                        {"type": "slack", "teamId": "T0BENCH", "channelId": f"C{i}", "userId": "U1"},
                    )
                    for i in range(clicks)
                ]
                await until(
                    lambda: len([m for m in slack.messages if m.method == "chat.postMessage"]) >= clicks
                )
                posts = [m for m in slack.messages if m.method == "chat.postMessage"]
                samples = []
                for post in posts:
                    start = time.perf_counter()
                    await slack.socket_click(
                        channel=post.channel, ts=post.ts, action_id="cosigner.approve", user="U1"
                    )
                    samples.append(time.perf_counter() - start)
                lines.append(
                    summary("Slack click over Socket Mode", samples, await approved(client, key, ids))
                )

                # WhatsApp
                ids = [
                    await create(client, key, f"w{i}", {"type": "whatsapp", "phone": PHONE})
                    for i in range(clicks)
                ]
                await until(lambda: len(twilio.sent) >= clicks)
                phone = TwilioCaller(client, public_url=PUBLIC, account_sid=ACCOUNT, auth_token=TOKEN)
                samples = []
                for sent in list(twilio.sent[:clicks]):
                    payload = next(p for t, p in sent.buttons if t == "Approve")
                    start = time.perf_counter()
                    r = await phone.tap(
                        f"whatsapp:{PHONE}",
                        f"whatsapp:{BOT}",
                        title="Approve",
                        payload=payload,
                        replied_to=sent.sid,
                    )
                    samples.append(time.perf_counter() - start)
                    r.raise_for_status()
                lines.append(summary("WhatsApp tap", samples, await approved(client, key, ids)))
        await db.close()
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clicks", type=int, default=300)
    parser.add_argument("--db", default="sqlite")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite+aiosqlite:///{tmp}/bench.db" if args.db == "sqlite" else args.db
        lines = asyncio.run(run(args.clicks, url))
    print("| path | answers | p50 ms | p90 ms | p99 ms | errors |")
    print("| --- | --- | --- | --- | --- | --- |")
    print("\n".join(lines))
    return 0 if all(line.endswith("| 0 |") for line in lines) else 1


if __name__ == "__main__":
    sys.exit(main())
