"""A Twilio Messages API emulator on loopback, for `cosigner dev` and the tests.

It serves `POST /2010-04-01/Accounts/{AccountSid}/Messages.json` the way Twilio does
(Basic auth, form fields, JSON resource or JSON error), and the account itself
(`GET /2010-04-01/Accounts/{AccountSid}.json`, what `cosigner doctor` fetches to check the
credentials; `account_status` is its status), records every text it accepts,
and can be told to refuse the next request or to treat a number as opted out. Point the
real twilio client at `emu.api_url`.

WhatsApp goes through the same endpoint with `whatsapp:+E164` numbers: a Content API
template registered with `add_template` is sent by `ContentSid` and `ContentVariables`,
and the text is recorded as the phone shows it, with its quick-reply buttons
(`SentText.buttons`, each a title and the payload a tap sends back).
"""

from __future__ import annotations

import base64
import contextlib
import json
import re
import secrets
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import format_datetime
from typing import Any
from urllib.parse import parse_qsl

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from surfaces.loopback import LoopbackServer
from surfaces.sms.fit import segments

E164_DIGITS = range(7, 16)
WHATSAPP = "whatsapp:"
_VARIABLE = re.compile(r"\{\{([A-Za-z0-9_]{1,16})\}\}")


@dataclass(frozen=True)
class Template:
    """A `twilio/quick-reply` Content API template: a body and buttons, with `{{n}}` variables."""

    sid: str
    body: str
    actions: tuple[tuple[str, str], ...]  # (title, id) of each quick-reply button


@dataclass
class SentText:
    """One text the emulator accepted."""

    sid: str
    to: str
    from_: str | None
    messaging_service_sid: str | None
    body: str
    status_callback: str | None
    status: str
    content_sid: str | None = None
    content_variables: dict[str, str] | None = None
    buttons: tuple[tuple[str, str], ...] = ()  # WhatsApp quick replies: (title, payload)


@dataclass(frozen=True)
class _Failure:
    status: int
    code: int | None
    message: str


def _error(status: int, code: int | None, message: str) -> JSONResponse:
    more_info = f"https://www.twilio.com/docs/errors/{code}" if code else None
    body = {"code": code, "message": message, "more_info": more_info, "status": status}
    return JSONResponse(body, status_code=status)


def _is_e164(number: str) -> bool:
    digits = number[1:]
    return (
        number.startswith("+")
        and digits.isascii()
        and digits.isdigit()
        and not digits.startswith("0")
        and len(digits) in E164_DIGITS
    )


class TwilioEmulator:
    """The Twilio Messages API, in process; `sent` records what was texted."""

    def __init__(self, account_sid: str, auth_token: str) -> None:
        self.account_sid = account_sid
        self.auth_token = auth_token
        self.sent: list[SentText] = []
        self.opted_out: set[str] = set()
        self.templates: dict[str, Template] = {}
        self.requests = 0
        self.account_status = "active"  # or "suspended", "closed", as Twilio reports an account
        self._failures: list[_Failure] = []
        self.api_url = ""
        self.app = Starlette(
            routes=[
                Route("/2010-04-01/Accounts/{account_sid}.json", self._account, methods=["GET"]),
                Route(
                    "/2010-04-01/Accounts/{account_sid}/Messages.json",
                    self._create_message,
                    methods=["POST"],
                ),
            ]
        )

    @classmethod
    @contextlib.asynccontextmanager
    async def running(cls, account_sid: str, auth_token: str) -> AsyncIterator[TwilioEmulator]:
        """Serve an emulator on 127.0.0.1 at a free port (port 0) for the block's duration."""
        emulator = cls(account_sid, auth_token)
        server = LoopbackServer(emulator.app, "Twilio emulator")
        port = await server.start()
        try:
            emulator.api_url = f"http://127.0.0.1:{port}"
            yield emulator
        finally:
            await server.stop()

    def opt_out(self, number: str) -> None:
        """Treat `number` as having texted STOP: sends to it fail with error 21610."""
        self.opted_out.add(number)

    def opt_in(self, number: str) -> None:
        """Undo `opt_out`."""
        self.opted_out.discard(number)

    def fail_next(self, status: int = 500, code: int | None = None, message: str = "") -> None:
        """Refuse the next create request with this HTTP status and Twilio error code."""
        self._failures.append(_Failure(status, code, message or "Injected failure"))

    def add_template(self, body: str, actions: list[tuple[str, str]]) -> str:
        """Register a quick-reply template (as the Content API would) and return its `HX…` SID."""
        sid = "HX" + secrets.token_hex(16)
        self.templates[sid] = Template(sid, body, tuple(actions))
        return sid

    def texts_to(self, number: str) -> list[SentText]:
        """Every accepted text addressed to `number`, oldest first."""
        return [text for text in self.sent if text.to == number]

    def _authorized(self, request: Request, account_sid: str) -> bool:
        header = request.headers.get("authorization", "")
        scheme, _, encoded = header.partition(" ")
        if scheme.lower() != "basic":
            return False
        try:
            user, _, password = base64.b64decode(encoded).decode("utf-8").partition(":")
        except ValueError:
            return False
        return (
            secrets.compare_digest(user, self.account_sid)
            and secrets.compare_digest(password, self.auth_token)
            and account_sid == self.account_sid
        )

    async def _account(self, request: Request) -> JSONResponse:
        account_sid = request.path_params["account_sid"]
        if not self._authorized(request, account_sid):
            return _error(401, 20003, "Authenticate")
        now = format_datetime(datetime.now(UTC))
        uri = f"/2010-04-01/Accounts/{self.account_sid}"
        return JSONResponse(
            {
                "sid": self.account_sid,
                "friendly_name": "Emulated account",
                "status": self.account_status,
                "type": "Full",
                "owner_account_sid": self.account_sid,
                "date_created": now,
                "date_updated": now,
                "uri": f"{uri}.json",
                "subresource_uris": {"messages": f"{uri}/Messages.json"},
            }
        )

    async def _create_message(self, request: Request) -> JSONResponse:
        self.requests += 1
        account_sid = request.path_params["account_sid"]
        if not self._authorized(request, account_sid):
            return _error(401, 20003, "Authenticate")
        if self._failures:
            failure = self._failures.pop(0)
            return _error(failure.status, failure.code, failure.message)
        form = await _read_form(request)
        to = form.get("To", "")
        sender = form.get("From") or None
        service = form.get("MessagingServiceSid") or None
        body = form.get("Body", "")
        if not to:
            return _error(400, 21604, "A 'To' phone number is required.")
        if not _is_e164(to.removeprefix(WHATSAPP)):
            return _error(400, 21211, f"The 'To' number {to} is not a valid phone number.")
        if sender is None and service is None:
            return _error(400, 21603, "A 'From' phone number is required.")
        if sender is not None and to.startswith(WHATSAPP) != sender.startswith(WHATSAPP):
            return _error(400, 63007, "Twilio could not find a Channel with the specified From address")
        content = self._content(form)
        if isinstance(content, JSONResponse):
            return content
        sid_of_content, variables, rendered, buttons = content
        body = rendered or body
        if not body:
            return _error(400, 21602, "Message body is required.")
        if to in self.opted_out:
            return _error(400, 21610, "Attempt to send to unsubscribed recipient")
        status = "accepted" if service and not sender else "queued"
        text = SentText(
            sid="SM" + secrets.token_hex(16),
            to=to,
            from_=sender,
            messaging_service_sid=service,
            body=body,
            status_callback=form.get("StatusCallback") or None,
            status=status,
            content_sid=sid_of_content,
            content_variables=variables,
            buttons=buttons,
        )
        self.sent.append(text)
        return JSONResponse(self._resource(text), status_code=201)

    def _content(
        self, form: dict[str, str]
    ) -> tuple[str | None, dict[str, str] | None, str, tuple[tuple[str, str], ...]] | JSONResponse:
        """A template's rendered body and buttons, or Twilio's error for a bad ContentSid."""
        sid = form.get("ContentSid") or None
        if sid is None:
            return None, None, "", ()
        template = self.templates.get(sid)
        if template is None:
            return _error(400, 21655, f"The ContentSid {sid} is invalid")
        try:
            variables = json.loads(form.get("ContentVariables") or "{}")
        except ValueError:
            return _error(400, 21656, "The ContentVariables Parameter is invalid")
        if not isinstance(variables, dict) or not all(isinstance(v, str) for v in variables.values()):
            return _error(400, 21656, "The ContentVariables Parameter is invalid")

        def fill(text: str) -> str:
            return _VARIABLE.sub(lambda m: str(variables.get(m.group(1), m.group(0))), text)

        buttons = tuple((fill(title), fill(ident)) for title, ident in template.actions)
        return sid, variables, fill(template.body), buttons

    def _resource(self, text: SentText) -> dict[str, Any]:
        now = format_datetime(datetime.now(UTC))
        uri = f"/2010-04-01/Accounts/{self.account_sid}/Messages/{text.sid}"
        return {
            "account_sid": self.account_sid,
            "api_version": "2010-04-01",
            "body": text.body,
            "date_created": now,
            "date_sent": None,
            "date_updated": now,
            "direction": "outbound-api",
            "error_code": None,
            "error_message": None,
            "from": text.from_,
            "messaging_service_sid": text.messaging_service_sid,
            "num_media": "0",
            "num_segments": str(segments(text.body)),
            "price": None,
            "price_unit": "USD",
            "sid": text.sid,
            "status": text.status,
            "subresource_uris": {"media": f"{uri}/Media.json"},
            "to": text.to,
            "uri": f"{uri}.json",
        }


async def _read_form(request: Request) -> dict[str, str]:
    # The twilio client sends plain form posts; parsing them by hand avoids needing
    # python-multipart just for the emulator.
    return dict(parse_qsl((await request.body()).decode("utf-8"), keep_blank_values=True))
