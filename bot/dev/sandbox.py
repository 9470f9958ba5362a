"""`cosigner dev`: the whole flow on one machine, with emulated Slack and Twilio.

One process runs the real app (SQLite, the sample policy `sandbox_policy.toml`, the real
Slack and SMS surfaces) against the bundled emulators, plus the `/sandbox` page that plays
a Slack channel and a phone by sending really signed requests to the real webhooks. With
`socket_mode` (`cosigner dev --slack-socket-mode`) Slack runs over Socket Mode instead:
the app opens a WebSocket to the emulator with an app-level token, has no signing secret
and serves no `/slack/events`, and the page's clicks travel as Socket Mode envelopes.
`sandbox()` starts and stops all of it; `run_dev()` adds the banner and waits for Ctrl-C.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import ipaddress
import json
import os
import sys
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import BaseRoute, Mount, Route

from bot.approvals import GrantSigner, callback_secret
from bot.dev.guide import TEAMS_SURFACE, WHATSAPP_SURFACE, dashboard_curl, exports, people_lines
from bot.dev.page import DEMO_PHONE, SandboxPage
from bot.dev.teams import APP_ID, APP_PASSWORD, HOME_TENANT, TeamsPane
from bot.egress import LOOPBACK_ALLOW
from bot.http import ListenError, Server, TenantKeys, bind, build_app, parts_of
from bot.policy import Policy, load_policy
from bot.settings import DEV_SECRET, Settings
from surfaces.slack.emulator import APP_TOKEN, SlackEmulator
from surfaces.sms.emulator import TwilioEmulator
from surfaces.teams.emulator import TeamsEmulator
from surfaces.whatsapp.template import TEMPLATE_ACTIONS, TEMPLATE_BODY

POLICY_FILE = Path(__file__).with_name("sandbox_policy.toml")
TENANT = "demo"
SLACK_TEAM = "T0DEMO"  # must match [tenants.demo] slack_team in sandbox_policy.toml
SLACK_APP_ID = "A0EMU"
SLACK_SIGNING_SECRET = "cosigner-dev-slack-signing-secret"
SLACK_BOT_TOKEN = "xoxb-cosigner-dev"
TWILIO_SID = "AC" + "0" * 31 + "1"
TWILIO_TOKEN = "cosigner-dev-twilio-auth-token"
SMS_FROM = "+15550100001"  # must match [tenants.demo] sms_from
ORDERS_APP = Path(__file__).resolve().parents[2] / "examples" / "contract_app.py"
ORDERS_SECRET_ENV = "COSIGNER_DEMO_ORDERS_SECRET"  # as the sample policy's operation names it
ORDERS_SECRET = "cosigner-dev-demo-orders-secret"
POLICY_ORIGIN = "http://127.0.0.1:8000"  # the sample policy's operation url, moved to the real port
EXPECT_SECRET_ENV = "APP_EXPECT_SECRET"  # [tools.publish_changes.handoff] in sandbox_policy.toml
DEV_EXPECT_SECRET = "cosigner-dev-expect-secret"
EXPECT_APP = Path(__file__).resolve().parents[2] / "examples" / "expect_app.py"
KEY_FILE = "demo.key"
CALLBACK_SECRET_FILE = "demo.callback-secret"


@dataclass
class Sandbox:
    """A running sandbox: where it listens, its emulators and the demo tenant's key."""

    url: str  # where this process can reach the server (loopback)
    public_url: str  # what Slack and Twilio would call; Twilio signatures cover it
    port: int
    api_key: str
    key_file: Path
    slack: SlackEmulator
    twilio: TwilioEmulator
    app: Starlette
    served: asyncio.Task[None]
    teams: TeamsEmulator | None = None
    socket_mode: bool = False  # Slack over Socket Mode (no /slack/events)


def _example(name: str, path: Path) -> ModuleType:
    """An example application's module, loaded once by file path (examples/ is no package)."""
    module = sys.modules.get(name)
    if module is None:
        spec = importlib.util.spec_from_file_location(name, path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # its dataclasses look their module up
        spec.loader.exec_module(module)
    return module


def demo_applications(public_url: str) -> tuple[Policy, list[BaseRoute]]:
    """The sample policy with its operation and its handoff's `expect` pointed at this
    sandbox, and the demo applications mounted where they point, when the files are there:
    the orders application (examples/contract_app.py) under /demo-orders, the publishing
    application (examples/expect_app.py) under /demo-expect, with
    `POST /demo-expect/publish/{changeId}` standing for the person publishing a change."""
    os.environ.setdefault(ORDERS_SECRET_ENV, ORDERS_SECRET)
    text = POLICY_FILE.read_text(encoding="utf-8").replace(POLICY_ORIGIN, public_url)
    policy = load_policy(text, source=str(POLICY_FILE))
    routes: list[BaseRoute] = []
    if ORDERS_APP.is_file():
        orders = _example("contract_app", ORDERS_APP)
        # It checks each execute's grant against the sandbox's own keys (the same DEV_SECRET).
        keys = GrantSigner(DEV_SECRET).jwks()
        routes.append(Mount("/demo-orders", app=orders.build(os.environ[ORDERS_SECRET_ENV], lambda: keys)))
    if EXPECT_APP.is_file():
        expect = _example("expect_app", EXPECT_APP).ExpectApp(os.environ[EXPECT_SECRET_ENV])

        async def publish(request: Request) -> Response:
            change = request.path_params["change"]
            expect.publish(change)
            return JSONResponse({"published": change})

        routes.append(
            Mount(
                "/demo-expect",
                routes=[Route("/publish/{change}", publish, methods=["POST"]), Mount("/", app=expect)],
            )
        )
    return policy, routes


OIDC_CLIENT_ID, OIDC_CLIENT_SECRET = "cosigner-dev-inbox", "cosigner-dev-inbox-secret"


def sign_in_with_slack(slack: SlackEmulator) -> None:
    """The emulated "Sign in with Slack" for the inbox: the sandbox's people may sign in. Alice,
    the requester, also has the sandbox phone's number (the `phone` scope), so the inbox lists
    what is texted to it."""
    from bot.dev.page import DEMO_PHONE, PEOPLE

    slack.openid.register_client(OIDC_CLIENT_ID, OIDC_CLIENT_SECRET)
    for p in PEOPLE:
        phone = DEMO_PHONE if p.key == "requester" else None
        slack.openid.add_person(p.user_id, p.name, f"{p.name.lower()}@demo.example", p.team_id, phone=phone)


def dev_settings(
    data_dir: Path,
    public_url: str,
    slack: SlackEmulator,
    twilio: TwilioEmulator,
    teams: TeamsEmulator | None = None,
    *,
    socket_mode: bool = False,
) -> Settings:
    """Settings built in code, so the sandbox ignores whatever the environment holds."""
    # Socket Mode alone: an app-level token and no signing secret, so no /slack/events.
    slack_door: dict[str, Any] = (
        {"slack_app_token": APP_TOKEN} if socket_mode else {"slack_signing_secret": SLACK_SIGNING_SECRET}
    )
    return Settings(
        database_url=f"sqlite+aiosqlite:///{(data_dir / 'cosigner.db').resolve()}",
        policy=str(POLICY_FILE),
        public_url=public_url,
        secret=DEV_SECRET,
        callback_allow=LOOPBACK_ALLOW,
        **slack_door,
        slack_bot_token=SLACK_BOT_TOKEN,
        slack_api_url=slack.api_url,
        slack_app_id=slack.app_id,
        twilio_account_sid=TWILIO_SID,
        twilio_auth_token=TWILIO_TOKEN,
        twilio_from_number=SMS_FROM,
        twilio_api_url=twilio.api_url,
        oidc_issuer=slack.openid.issuer,
        oidc_client_id=OIDC_CLIENT_ID,
        oidc_client_secret=OIDC_CLIENT_SECRET,
        oidc_display_name="Slack (emulated)",
        # WhatsApp from the same number, with the approval template registered in the emulator.
        twilio_whatsapp_from=SMS_FROM,
        twilio_whatsapp_content_sid=twilio.add_template(TEMPLATE_BODY, TEMPLATE_ACTIONS),
        **(teams_settings(teams) if teams is not None else {}),
    )


def teams_settings(teams: TeamsEmulator) -> dict[str, Any]:
    """The Teams variables pointing at the emulator (`TEAMS_API_URL` is for dev and tests only)."""
    return {
        "microsoft_app_id": APP_ID,
        "microsoft_app_password": APP_PASSWORD,
        "microsoft_app_tenant_id": HOME_TENANT,
        "teams_api_url": teams.api_url,
    }


async def demo_key(keys: TenantKeys) -> str:
    """A fresh key for the demo tenant: created the first time, rotated on every start."""
    if TENANT in await keys.names():
        return await keys.rotate(TENANT)
    return (await keys.create(TENANT)).agent.key


def _data_dir(path: str | Path) -> Path:
    data = Path(path)
    data.mkdir(parents=True, exist_ok=True)
    return data


def _write_key(data: Path, key: str) -> Path:
    # Only for the example agent on this machine; the database keeps the hash alone.
    key_file = data / KEY_FILE
    key_file.touch(mode=0o600)
    key_file.write_text(key + "\n", encoding="utf-8")
    # The demo tenant's callback signing secret, for examples/executor.py's receiver.
    secret_file = data / CALLBACK_SECRET_FILE
    secret_file.touch(mode=0o600)
    secret_file.write_text(callback_secret(DEV_SECRET, TENANT) + "\n", encoding="utf-8")
    return key_file


def _loopback(host: str) -> str:
    if host in ("", "0.0.0.0", "::"):
        return "127.0.0.1"
    return f"[{host}]" if ":" in host else host


class SandboxError(Exception):
    """The sandbox cannot start; the message says what to change."""


@contextlib.asynccontextmanager
async def sandbox(
    host: str = "127.0.0.1",
    port: int = 8000,
    data_dir: str | Path = "cosigner-data",
    *,
    handle_signals: bool = False,
    socket_mode: bool = False,
) -> AsyncIterator[Sandbox]:
    """Start emulators, app and server (port 0: any free port); stop them all on exit."""
    data = _data_dir(data_dir)
    sock = bind(host, port, command="cosigner dev")
    real_port = sock.getsockname()[1]
    shown_host = _loopback(host)
    public_url = f"http://{shown_host}:{real_port}"
    try:
        async with (
            SlackEmulator.running(team_id=SLACK_TEAM, app_id=SLACK_APP_ID) as slack,
            TwilioEmulator.running(TWILIO_SID, TWILIO_TOKEN) as twilio,
            TeamsEmulator.running(app_id=APP_ID, app_password=APP_PASSWORD, tenant_id=HOME_TENANT) as teams,
            httpx.AsyncClient(base_url=public_url, timeout=30) as loop_http,
        ):
            sign_in_with_slack(slack)
            settings = dev_settings(data, public_url, slack, twilio, teams, socket_mode=socket_mode)
            page = SandboxPage(
                slack,
                twilio,
                loop_http,
                public_url=public_url,
                slack_secret=SLACK_SIGNING_SECRET,
                sms_number=SMS_FROM,
                socket_mode=socket_mode,
            )
            # The sample handoff's expect call is signed with this secret (examples/expect_app.py).
            if not os.environ.get(EXPECT_SECRET_ENV):
                os.environ[EXPECT_SECRET_ENV] = DEV_EXPECT_SECRET
            policy, demos = demo_applications(public_url)
            pane = TeamsPane(teams, loop_http)
            app = build_app(settings, policy=policy, extra_routes=[*page.routes(), *pane.routes(), *demos])
            async with app.router.lifespan_context(app):
                key = await demo_key(parts_of(app).keys)
                page.api_key = pane.api_key = key
                key_file = _write_key(data, key)
                config = uvicorn.Config(
                    app,
                    log_config=None,
                    log_level="warning",
                    access_log=False,
                    lifespan="off",
                    ws="none",
                    timeout_graceful_shutdown=3,
                )
                server = Server(config, handle_signals=handle_signals)
                served = asyncio.create_task(server.serve(sockets=[sock]))
                while not server.started:
                    if served.done():
                        await served
                        raise SandboxError("the server stopped while starting")
                    await asyncio.sleep(0.01)
                try:
                    yield Sandbox(
                        url=public_url,
                        public_url=public_url,
                        port=real_port,
                        api_key=key,
                        key_file=key_file,
                        slack=slack,
                        twilio=twilio,
                        teams=teams,
                        app=app,
                        served=served,
                        socket_mode=socket_mode,
                    )
                finally:
                    server.should_exit = True
                    await served
    finally:
        sock.close()


def banner(sb: Sandbox, host: str) -> str:
    """What `cosigner dev` prints: the URLs, the demo key and a request to paste."""
    u = sb.url
    lines = [
        "",
        "Cosigner sandbox is running: SQLite, emulated Slack, Teams and Twilio (SMS and WhatsApp), "
        "the sample policy.",
        *(
            ["Slack runs over Socket Mode: clicks arrive on the app's WebSocket; no /slack/events."]
            if sb.socket_mode
            else []
        ),
        "",
        f"  Sandbox (Slack, Teams and a phone):     {u}/sandbox",
        f"  Inbox (sign in with the emulated Slack): {u}/inbox/",
        f"  Agent API:                              {u}/v1/approvals",
        f"  API description:                        {u}/openapi.json",
        f"  Policy:                                 {POLICY_FILE}",
        "",
        f"  Demo tenant API key (new on every start; also in {sb.key_file}):",
        f"    {sb.api_key}",
        "",
        "Try the examples in another terminal, then answer in the sandbox:",
        f"  {exports(sb)}",
        "  .venv/bin/python examples/agent.py",
        "  .venv/bin/python examples/executor.py",
        "",
        "Or propose an operation the demo orders application carries out once approved:",
        f"  curl -s {u}/v1/approvals -H 'Authorization: Bearer {sb.api_key}' \\",
        '    -H \'content-type: application/json\' -d \'{"executionId": "run_2", '
        '"toolCallId": "call_1", "operation": "order.refund_missing_discount",',
        '    "request": {"orderId": "ord_4421"},',
        '    "surface": {"type": "slack", "teamId": "T0DEMO", "channelId": "C0DEMO", "userId": "U0ALICE"}}\'',
        "",
        "Or hand a step to a person: examples/agent.py --handoff, then publish its change in the",
        "demo publishing application before pressing Done (without it, Done fails closed):",
        f"  curl -s -X POST {u}/demo-expect/publish/chg_<run>",
        "",
        "Or ask for one approval yourself:",
        f"  curl -s {u}/v1/approvals -H 'Authorization: Bearer {sb.api_key}' \\",
        '    -H \'content-type: application/json\' -d \'{"executionId": "run_1", '
        '"toolCallId": "call_1", "toolName": "issue_refund",',
        '    "parameters": {"orderId": "ord_4421", "amountCents": 12900, "cardToken": "tok_x"},',
        '    "surface": {"type": "slack", "teamId": "T0DEMO", "channelId": "C0DEMO", "userId": "U0ALICE"}}\'',
        "",
        *people_lines(),
        "",
        f"Ask Alice in her inbox (a dashboard request; sign in at {u}/inbox/ as Alice, then Approve):",
        *dashboard_curl(sb),
        "",
        "Ask on Teams or WhatsApp: press Ask here in the page's Microsoft Teams pane, or send the",
        "request above with one of these surfaces (WhatsApp shows on the page's phone as",
        f"whatsapp:{DEMO_PHONE}; answer with its Approve or Deny buttons):",
        f"    {json.dumps(TEAMS_SURFACE)}",
        f"    {json.dumps(WHATSAPP_SURFACE)}",
        "",
        "Press Ctrl-C to stop.",
    ]
    if not _is_loopback(host):
        lines.insert(
            1,
            f"WARNING: listening on {host}: anyone who can reach it can answer "
            "approvals through /sandbox. The sandbox is for one machine.",
        )
    return "\n".join(lines)


def _is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


async def _serve(host: str, port: int, data_dir: str, socket_mode: bool) -> int:
    async with sandbox(host, port, data_dir, handle_signals=True, socket_mode=socket_mode) as sb:
        print(banner(sb, host), flush=True)
        await sb.served
    return 0


def run_dev(host: str, port: int, data_dir: str, *, socket_mode: bool = False) -> int:
    """Run the sandbox until Ctrl-C; the exit code for `cosigner dev`."""
    from bot.observability import configure

    configure(readable=True)
    try:
        asyncio.run(_serve(host, port, data_dir, socket_mode))
    except (SandboxError, ListenError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        pass
    print(f"\nCosigner sandbox stopped; its data stays in {data_dir}. Goodbye.", flush=True)
    return 0
