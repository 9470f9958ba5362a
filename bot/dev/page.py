"""The `/sandbox` page and its JSON API: a Slack channel and a phone in the browser.

Everything the page does goes through the real front doors: a button press becomes the
signed `block_actions` request Slack would send to `/slack/events`, a modal submit the
signed `view_submission`, opening Cosigner's Home tab the signed `app_home_opened` event
(the tab shows what Cosigner then publishes with `views.publish`), and a phone reply the
signed Twilio webhook to `/sms/inbound`.
The page only chooses who is clicking, so refusals come from the real checks. Under
`cosigner dev --slack-socket-mode` the same Slack payloads travel as Socket Mode envelopes
over the WebSocket the app opened to the emulator instead (unsigned, as Slack sends them
there), and the acknowledgement is the app's answer. Mounted by `cosigner dev` only: these
routes let anyone on the machine answer as anyone.
"""

from __future__ import annotations

import time
import uuid
import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Route

from bot.dev.teams import SAMPLE
from bot.http import decode_json, read_body
from contracts.errors import InvalidRequest
from surfaces.slack import interactions
from surfaces.slack.emulator import SlackEmulator
from surfaces.sms.caller import TwilioCaller
from surfaces.sms.emulator import TwilioEmulator

STATIC = Path(__file__).with_name("static")
ASSETS = {"sandbox.js": "text/javascript", "sandbox.css": "text/css", "sandbox_teams.js": "text/javascript"}
DEMO_PHONE = "+15550100200"  # the requester's phone in examples/agent.py
WHATSAPP = "whatsapp:"
CHANNELS = {"C0DEMO": "support", "C0ADMINS": "cosigner-admins"}
ACTIVITY_KEPT = 50


@dataclass(frozen=True)
class Person:
    """Someone the page can click as."""

    key: str
    user_id: str
    team_id: str
    name: str
    note: str


PEOPLE = (
    Person("requester", "U0ALICE", "T0DEMO", "Alice", "the requester: she started the run"),
    Person("admin", "U0ADMIN", "T0DEMO", "Ada", "a demo tenant admin (admins may answer refunds)"),
    Person("second_admin", "U0ADMIN2", "T0DEMO", "Ben", "a second admin: closing an account needs two"),
    Person("outsider", "U0MALLORY", "T0DEMO", "Mallory", "in the channel, but not an approver"),
    Person("other_workspace", "U0EVE", "T0OTHER", "Eve", "a user of another Slack workspace"),
)


class PageError(Exception):
    """A page request that cannot be carried out; answered as 400 or 409 with the message."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


class SandboxPage:
    """The page's routes, bound to the emulators and a client that reaches this server."""

    def __init__(
        self,
        slack: SlackEmulator,
        twilio: TwilioEmulator,
        http: httpx.AsyncClient,
        *,
        public_url: str,
        slack_secret: str,
        sms_number: str,
        socket_mode: bool = False,
    ) -> None:
        self.slack, self.twilio, self.http = slack, twilio, http
        self.slack_secret = slack_secret
        self.socket_mode = socket_mode
        self.slack_route = "Socket Mode" if socket_mode else "/slack/events"
        self.sms_number = sms_number
        self.caller = TwilioCaller(
            http, public_url=public_url, account_sid=twilio.account_sid, auth_token=twilio.auth_token
        )
        self.closed_views: set[str] = set()
        self.activity: list[dict[str, Any]] = []
        self.phone_log: list[dict[str, Any]] = []
        self._texts_seen = 0
        self.api_key: str | None = None  # the demo tenant's agent key, once the sandbox made it

    def routes(self) -> list[BaseRoute]:
        """`GET /sandbox`, its two assets, and the JSON API under `/sandbox/api/`."""
        return [
            Route("/sandbox", self.page, methods=["GET"]),
            Route("/sandbox/{name:str}", self.asset, methods=["GET"]),
            Route("/sandbox/api/state", self.state, methods=["GET"]),
            Route("/sandbox/api/click", self._json(self.click), methods=["POST"]),
            Route("/sandbox/api/submit", self._json(self.submit), methods=["POST"]),
            Route("/sandbox/api/view-click", self._json(self.view_click), methods=["POST"]),
            Route("/sandbox/api/close", self._json(self.close), methods=["POST"]),
            Route("/sandbox/api/text", self._json(self.text), methods=["POST"]),
            Route("/sandbox/api/tap", self._json(self.tap), methods=["POST"]),
            Route("/sandbox/api/home", self._json(self.home), methods=["POST"]),
            Route("/sandbox/api/ask", self._json(self.ask), methods=["POST"]),
        ]

    async def page(self, request: Request) -> Response:
        return FileResponse(
            STATIC / "sandbox.html", media_type="text/html", headers={"Cache-Control": "no-store"}
        )

    async def asset(self, request: Request) -> Response:
        name = request.path_params["name"]
        if name not in ASSETS:
            return JSONResponse(InvalidRequest("no such file").body(), status_code=404)
        return FileResponse(STATIC / name, media_type=ASSETS[name], headers={"Cache-Control": "no-store"})

    async def state(self, request: Request) -> Response:
        """Everything the page shows, read from the emulators as they are now."""
        self._sync_texts()
        messages = []
        for posted in self.slack.messages:
            if posted.method != "chat.postMessage":
                continue
            now = self.slack.latest(posted.channel, posted.ts) or posted
            messages.append(
                {
                    "channel": posted.channel,
                    "ts": posted.ts,
                    "text": now.text,
                    "blocks": now.blocks,
                    "threadTs": posted.thread_ts,
                    "edited": now.method == "chat.update",
                }
            )
        ephemerals = [
            {
                "channel": e.channel,
                "ts": e.ts,
                "user": e.user,
                "text": e.text,
                "blocks": e.blocks,
                "threadTs": e.thread_ts,
            }
            for e in self.slack.ephemerals
        ]
        views = [
            {"id": v.id, "view": v.view, "updates": v.updates}
            for v in self.slack.views
            if v.id not in self.closed_views
        ]
        # The same phone twice: by SMS, and on WhatsApp (`whatsapp:` numbers).
        phones = sorted({DEMO_PHONE, WHATSAPP + DEMO_PHONE, *(t["phone"] for t in self.phone_log)})
        return JSONResponse(
            {
                "team": self.slack.team_id,
                "channels": CHANNELS,
                "people": [asdict(p) for p in PEOPLE],
                "messages": messages,
                "ephemerals": ephemerals,
                "views": views,
                "homes": self.slack.home_tabs,
                "phone": {"bot": self.sms_number, "numbers": phones, "texts": self.phone_log},
                "activity": self.activity,
            },
            headers={"Cache-Control": "no-store"},
        )

    async def click(self, body: dict[str, Any]) -> dict[str, Any]:
        """Press a button on a card as `as`, with the request Slack would sign and send."""
        who = _person(body.get("as"))
        channel, ts, action = (_text(body, k) for k in ("channel", "ts", "actionId"))
        try:
            payload = interactions.click_payload(
                self.slack,
                channel=channel,
                ts=ts,
                action_id=action,
                user=who.user_id,
                team=who.team_id,
                user_team=who.team_id,
            )
        except LookupError as exc:
            raise PageError(f"{exc}", status=409) from exc
        status, _ = await self._slack(payload)
        self._log(f"block_actions {action} as {who.user_id} ({who.team_id})", self.slack_route, status)
        return {"status": status}

    async def ask(self, body: dict[str, Any]) -> dict[str, Any]:
        """ "Ask here": the sample refund requested as Alice in `channel` (a channel of the
        page), through the agent API with the demo tenant's key, as an agent would."""
        channel = body.get("channel", "C0DEMO")
        if channel not in CHANNELS:
            raise PageError(f"`channel` must be one of {', '.join(CHANNELS)}")
        if self.api_key is None:
            raise PageError("the demo tenant has no key yet", status=409)
        requester = _person("requester")
        request = {
            "executionId": f"run_slack_{uuid.uuid4().hex[:12]}",  # a new run each time
            "toolCallId": "call_1",
            **SAMPLE,
            "surface": {
                "type": "slack",
                "teamId": requester.team_id,
                "channelId": channel,
                "userId": requester.user_id,
            },
        }
        response = await self.http.post(
            "/v1/approvals", json=request, headers={"Authorization": f"Bearer {self.api_key}"}
        )
        return {"status": response.status_code, "answer": response.json()}

    async def home(self, body: dict[str, Any]) -> dict[str, Any]:
        """Open Cosigner's Home tab as `as`: the signed `app_home_opened` event Slack sends."""
        who = _person(body.get("as"))
        payload = interactions.home_payload(self.slack, user=who.user_id, team=who.team_id)
        status, _ = await self._slack(payload, kind="events_api")
        self._log(f"app_home_opened as {who.user_id} ({who.team_id})", self.slack_route, status)
        return {"status": status}

    async def view_click(self, body: dict[str, Any]) -> dict[str, Any]:
        """Press a button inside an open modal (a full call's Next page) as `as`."""
        who = _person(body.get("as"))
        view_id, action = _text(body, "viewId"), _text(body, "actionId")
        index = next((i for i, v in enumerate(self.slack.views) if v.id == view_id), None)
        if index is None or view_id in self.closed_views:
            raise PageError(f"no open modal {view_id}", status=409)
        try:
            payload = interactions.view_click_payload(
                self.slack,
                action_id=action,
                index=index,
                user=who.user_id,
                team=who.team_id,
                user_team=who.team_id,
            )
        except LookupError as exc:
            raise PageError(f"{exc}", status=409) from exc
        status, _ = await self._slack(payload)
        self._log(f"block_actions {action} in {view_id} as {who.user_id}", self.slack_route, status)
        return {"status": status}

    async def submit(self, body: dict[str, Any]) -> dict[str, Any]:
        """Submit an open modal (the deny comment) as `as`."""
        who = _person(body.get("as"))
        view_id = _text(body, "viewId")
        comment = body.get("comment") or ""
        if not isinstance(comment, str):
            raise PageError("comment must be text")
        index = next((i for i, v in enumerate(self.slack.views) if v.id == view_id), None)
        if index is None or view_id in self.closed_views:
            raise PageError(f"no open modal {view_id}", status=409)
        values = {"comment": {"comment": {"type": "plain_text_input", "value": comment or None}}}
        payload = interactions.submission_payload(
            self.slack, values=values, index=index, user=who.user_id, team=who.team_id, user_team=who.team_id
        )
        status, ack = await self._slack(payload)
        self._log(f"view_submission {view_id} as {who.user_id} ({who.team_id})", self.slack_route, status)
        errors = _ack_errors(ack)
        if errors:
            return {"status": status, "errors": errors}
        self.closed_views.add(view_id)
        return {"status": status, "errors": None}

    async def _slack(self, payload: dict[str, Any], kind: str = "interactive") -> tuple[int, Any]:
        """Send a payload as Slack would: signed to `/slack/events`, or as a Socket Mode
        envelope; the HTTP status (200 once acknowledged) and the acknowledgement's body."""
        if self.socket_mode:
            try:
                ack = await self.slack.push(payload, kind=kind)
            except LookupError as exc:
                raise PageError(f"{exc}; is the app connected over Socket Mode?", status=409) from exc
            except TimeoutError:
                return 504, None  # Slack would show the person an error and retry
            return 200, ack.get("payload")
        if kind == "events_api":
            response = await interactions.send_signed_event(
                self.http, "/slack/events", payload, secret=self.slack_secret
            )
        else:
            response = await interactions.send_signed(
                self.http, "/slack/events", payload, secret=self.slack_secret
            )
        try:
            body = response.json()
        except ValueError:
            body = None
        return response.status_code, body

    async def close(self, body: dict[str, Any]) -> dict[str, Any]:
        """Dismiss a modal with Cancel (Slack would send `view_closed`; Cosigner ignores it)."""
        self.closed_views.add(_text(body, "viewId"))
        return {"closed": True}

    async def text(self, body: dict[str, Any]) -> dict[str, Any]:
        """Text `body` from a phone to the tenant's number, as a signed Twilio webhook."""
        phone, words = _text(body, "from"), body.get("body")
        if not isinstance(words, str) or not words.strip() or len(words) > 1600:
            raise PageError("body must be the text to send (1 to 1600 characters)")
        self._sync_texts()
        self.phone_log.append({"phone": phone, "dir": "out", "body": words, "at": time.time()})
        if phone.startswith(WHATSAPP):
            path = "/whatsapp/inbound"
            response = await self.caller.text(phone, WHATSAPP + self.sms_number, words, path=path)
        else:
            path = "/sms/inbound"
            response = await self.caller.text(phone, self.sms_number, words)
        return self._replied(phone, f"inbound message from {phone}", path, response)

    async def tap(self, body: dict[str, Any]) -> dict[str, Any]:
        """Tap a quick-reply button of a WhatsApp message, as a signed Twilio webhook."""
        sid, title = _text(body, "sid"), _text(body, "title")
        sent = next((t for t in self.twilio.sent if t.sid == sid), None)
        payload = next((p for t, p in sent.buttons if t == title), None) if sent else None
        if sent is None or payload is None:
            raise PageError(f"no WhatsApp message {sid} with a button {title!r}", status=404)
        self._sync_texts()
        self.phone_log.append({"phone": sent.to, "dir": "out", "body": title, "at": time.time()})
        response = await self.caller.tap(
            sent.to, sent.from_ or "", title=title, payload=payload, replied_to=sent.sid
        )
        return self._replied(sent.to, f"WhatsApp tap from {sent.to}", "/whatsapp/inbound", response)

    def _replied(self, phone: str, what: str, path: str, response: httpx.Response) -> dict[str, Any]:
        self._log(what, path, response.status_code)
        replies = _twiml_messages(response.text) if response.status_code == 200 else []
        for reply in replies:
            self.phone_log.append({"phone": phone, "dir": "in", "body": reply, "at": time.time()})
        return {"status": response.status_code, "replies": replies}

    def _sync_texts(self) -> None:
        # Texts Cosigner sent through the Twilio emulator, appended in the order they arrived.
        for sent in self.twilio.sent[self._texts_seen :]:
            text = {"phone": sent.to, "dir": "in", "body": sent.body, "at": time.time()}
            if sent.buttons:
                text |= {"sid": sent.sid, "buttons": [title for title, _ in sent.buttons]}
            self.phone_log.append(text)
        self._texts_seen = len(self.twilio.sent)

    def _log(self, what: str, route: str, status: int) -> None:
        self.activity.append({"at": time.time(), "what": what, "route": route, "status": status})
        del self.activity[:-ACTIVITY_KEPT]

    def _json(self, handler: Any) -> Any:
        async def endpoint(request: Request) -> Response:
            # JSON only: a cross-site form post cannot send it without a CORS preflight.
            if request.headers.get("content-type", "").split(";")[0] != "application/json":
                return _error("send application/json", 415)
            try:
                body = decode_json(await read_body(request))
                if not isinstance(body, dict):
                    raise PageError("send a JSON object")
                return JSONResponse(await handler(body))
            except InvalidRequest as exc:
                return _error(exc.message, 400)
            except PageError as exc:
                return _error(str(exc), exc.status)

        return endpoint


def _error(message: str, status: int) -> JSONResponse:
    return JSONResponse(InvalidRequest(message).body(), status_code=status)


def _person(key: Any) -> Person:
    for person in PEOPLE:
        if person.key == key:
            return person
    raise PageError(f"`as` must be one of {', '.join(p.key for p in PEOPLE)}")


def _text(body: dict[str, Any], key: str) -> str:
    value = body.get(key)
    if not isinstance(value, str) or not value or len(value) > 200:
        raise PageError(f"`{key}` is required")
    return value


def _ack_errors(ack: Any) -> dict[str, str] | None:
    if isinstance(ack, dict) and ack.get("response_action") == "errors":
        errors = ack.get("errors")
        return errors if isinstance(errors, dict) else {"": "refused"}
    return None


def _twiml_messages(xml: str) -> list[str]:
    try:
        root = ET.fromstring(xml)
    except ET.ParseError:
        return []
    return [m.text or "" for m in root.iter("Message")]
