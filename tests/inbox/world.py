"""An inbox test world: the Slack emulator's OpenID provider and an app signed in through it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import httpx
import uvicorn

from surfaces.slack.emulator import SlackEmulator
from surfaces.sms.emulator import TwilioEmulator
from tests.harness import DEFAULT_POLICY, Harness, cosigner_app, until

CLIENT_ID, CLIENT_SECRET = "inbox-client", "inbox-client-secret"
PUBLIC_URL = "http://127.0.0.1:8000"
SLACK_SECRET = "inbox-slack-signing-secret"
TWILIO_ACCOUNT, TWILIO_TOKEN = "AC" + "1" * 32, "inbox-twilio-token"
SENDER = "+15550000001"  # the SMS and WhatsApp sender of the `texts` world


@dataclass
class World:
    """The running app and the emulated issuer."""

    h: Harness
    emu: SlackEmulator
    twilio: TwilioEmulator | None = None

    async def sign_in(self, client: httpx.AsyncClient, user: str) -> httpx.Response:
        """Sign `client` in as `user` through the issuer, as a browser would; the callback's answer."""
        start = await client.get("/inbox/login")
        assert start.status_code == 302, start.text
        authorize = start.headers["location"]
        assert authorize.startswith(self.emu.openid.issuer)
        args = dict(parse_qsl(urlsplit(authorize).query))
        async with httpx.AsyncClient() as browser:
            chosen = await browser.post(authorize.split("?")[0], data={**args, "user": user})
        assert chosen.status_code == 302, chosen.text
        back = urlsplit(chosen.headers["location"])
        return await client.get(f"{back.path}?{back.query}")

    def browser(self) -> httpx.AsyncClient:
        """Another browser (its own cookies) on the same app."""
        transport = httpx.ASGITransport(app=self.h.app)
        return httpx.AsyncClient(transport=transport, base_url=PUBLIC_URL)

    async def ask(self, key: str, user: str, *, call: str = "c1", tool: str = "issue_refund") -> str:
        """A dashboard request an agent of `key`'s tenant makes for `user`; its id."""
        r = await self.h.client.post(
            "/v1/approvals",
            headers=self.h.auth(key),
            json={
                "executionId": f"run_{call}",
                "toolCallId": call,
                "toolName": tool,
                "parameters": {"amountCents": 12900, "cardToken": "tok_x"},
                "reason": "the customer asked twice",
                "surface": {"type": "dashboard", "userId": user},
            },
        )
        assert r.status_code == 201, r.text
        return str(r.json()["approvalId"])


class _QuietServer(uvicorn.Server):
    # pytest owns SIGINT/SIGTERM, not this server.
    @contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@asynccontextmanager
async def served(app: Any, port: int) -> AsyncIterator[str]:
    """Serve an app under uvicorn on 127.0.0.1:`port` in this event loop, for a real browser."""
    config = uvicorn.Config(
        app,
        port=port,
        log_config=None,
        log_level="warning",
        lifespan="off",
        ws="none",
        timeout_graceful_shutdown=5,
    )
    server = _QuietServer(config)
    task = asyncio.create_task(server.serve())
    # The suite's usual bound for a wait gone wrong (a loaded 2-core machine is slow to start
    # a server); a server that ended instead of starting (its port taken meanwhile) says so here.
    await until(lambda: server.started or task.done())
    if not server.started:
        try:
            await task
        except BaseException as exc:  # uvicorn exits (SystemExit) when it cannot bind
            raise AssertionError(f"the server on 127.0.0.1:{port} did not start: {exc!r}") from exc
        raise AssertionError(f"the server on 127.0.0.1:{port} ended before it started")
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


@asynccontextmanager
async def inbox_world(
    policy: str = DEFAULT_POLICY,
    public_url: str = PUBLIC_URL,
    *,
    slack: bool = False,
    texts: bool = False,
    extra_surfaces: Sequence[Any] = (),
    **settings: Any,
) -> AsyncIterator[World]:
    """The emulator with Ada (acme's Slack admin), Bob (acme) and Gus (globex), and an app
    whose inbox signs in through it; with `texts`, SMS and WhatsApp through the Twilio emulator;
    `extra_surfaces` are more surface factories (Teams on its own emulator)."""
    async with SlackEmulator.running(team_id="T0ACME") as emu, contextlib.AsyncExitStack() as stack:
        emu.openid.register_client(CLIENT_ID, CLIENT_SECRET)
        emu.openid.add_person("U0ADMIN", "Ada Admin", "ada@acme.example")
        emu.openid.add_person("U0BOB", "Bob Builder", "bob@acme.example")
        emu.openid.add_person("U0GUS", "Gus Globex", "gus@globex.example", team_id="T0GLOBEX")
        surfaces: list[Any] = []
        if slack:  # the Slack surface too, posting to the same emulator
            from surfaces.slack import SlackAdapter, SlackConfig

            config = SlackConfig(
                signing_secret=SLACK_SECRET,
                bot_token="xoxb-acme",
                api_url=emu.api_url,
                app_id=emu.app_id,
                inbox_url=f"{public_url.rstrip('/')}/inbox/",  # step-up cards link there
            )
            surfaces.append(lambda desk: SlackAdapter(config, desk))
        twilio = None
        if texts:
            from surfaces.sms import SmsAdapter, SmsConfig
            from surfaces.whatsapp import WhatsAppAdapter, WhatsAppConfig
            from surfaces.whatsapp.template import TEMPLATE_ACTIONS, TEMPLATE_BODY

            twilio = await stack.enter_async_context(TwilioEmulator.running(TWILIO_ACCOUNT, TWILIO_TOKEN))
            sms = SmsConfig(TWILIO_ACCOUNT, TWILIO_TOKEN, SENDER, None, twilio.api_url, public_url)
            wa = WhatsAppConfig(sms, SENDER, twilio.add_template(TEMPLATE_BODY, TEMPLATE_ACTIONS))
            surfaces += [
                lambda desk: SmsAdapter(sms, desk, desk.sms_store),
                lambda desk: WhatsAppAdapter(wa, desk, desk.sms_store),
            ]
            settings = {"twilio_from_number": SENDER, "twilio_whatsapp_from": SENDER, **settings}
        async with cosigner_app(
            policy,
            surfaces=[*surfaces, *extra_surfaces],
            oidc_issuer=emu.openid.issuer,
            oidc_client_id=CLIENT_ID,
            oidc_client_secret=CLIENT_SECRET,
            public_url=public_url,
            **settings,
        ) as h:
            h.client.base_url = httpx.URL(public_url)
            yield World(h, emu, twilio)
