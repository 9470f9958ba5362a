"""The inbox as an installable web app, and "Notify me on this device" (Web Push).

`/inbox/manifest.webmanifest` and the service worker `/inbox/sw.js` (scope `/inbox/`) make the
inbox installable; `/inbox/push/key` gives a signed-in person's browser the VAPID public key
to subscribe with (the Push API's `applicationServerKey`); `POST /inbox/push/subscriptions`
stores the browser's subscription under every id the person's sign-in vouched for, so a
request that names any of them is pushed there (`bot.workers.pushes`); `.../delete`
removes it. Both POSTs carry the session's CSRF token (`X-CSRF-Token`). A subscription is
checked before it is kept: an https endpoint the egress rules allow, a P-256 public key and
a 16-byte auth secret; anything else is refused with what is wrong.
"""

from __future__ import annotations

import base64
import binascii
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Route

from bot.egress import EgressRefused, check_url, parse_allow_list
from bot.inbox import session
from bot.push.keys import public_key, vapid_pem
from contracts.answers import ErrorBody
from contracts.enums import ErrorCode
from cosigner.strict_json import read
from storage import push as push_store
from storage.sealing import TokenSeal

if TYPE_CHECKING:
    from bot.inbox.site import Inbox

STATIC = Path(__file__).parent / "static"
MAX_BODY = 8 * 1024
MAX_ENDPOINT = 1000
__all__ = ["push_routes"]


class BadSubscription(ValueError):
    """A subscription that cannot be used; the message says what is wrong."""


def _b64(value: object, name: str, size: int) -> str:
    if not isinstance(value, str) or len(value) > 200:
        raise BadSubscription(f"keys.{name} must be a base64url string")
    if not re.fullmatch(r"[A-Za-z0-9_-]+={0,2}", value):
        raise BadSubscription(f"keys.{name} is not base64url")
    try:
        raw = base64.urlsafe_b64decode(value + "=" * (-len(value) % 4))
    except (binascii.Error, ValueError):
        raise BadSubscription(f"keys.{name} is not base64url") from None
    if len(raw) != size or (name == "p256dh" and raw[0] != 4):
        what = "an uncompressed P-256 point (65 bytes)" if name == "p256dh" else "16 bytes"
        raise BadSubscription(f"keys.{name} must be {what}, as PushSubscription.toJSON() gives it")
    return value


def json_of(raw: bytes) -> Any:
    """The body as JSON, refused when it is not JSON or could be read two ways."""
    reading = read(raw)
    if reading.error is not None:
        raise BadSubscription("the body is not JSON")
    if reading.ambiguous:
        raise BadSubscription("; ".join(reading.problems))
    return reading.value


def subscription_of(body: Any, allow: str) -> push_store.Subscription:
    """The subscription in a `PushSubscription.toJSON()` body, checked."""
    sub = body.get("subscription") if isinstance(body, dict) else None
    if not isinstance(sub, dict) or not isinstance(sub.get("keys"), dict):
        raise BadSubscription('send {"subscription": PushSubscription.toJSON()} with endpoint and keys')
    endpoint = sub.get("endpoint")
    if (
        not isinstance(endpoint, str)
        or not endpoint.startswith(("https://", "http://"))
        or len(endpoint) > MAX_ENDPOINT
    ):
        raise BadSubscription(f"endpoint must be the push service's URL (at most {MAX_ENDPOINT} characters)")
    try:
        check_url(endpoint, parse_allow_list(allow))
    except EgressRefused as exc:
        raise BadSubscription(f"this push service cannot be reached from here: {exc}") from None
    keys = sub["keys"]
    return push_store.Subscription(
        endpoint, _b64(keys.get("p256dh"), "p256dh", 65), _b64(keys.get("auth"), "auth", 16)
    )


def push_routes(inbox: Inbox) -> list[Route]:
    """The routes above, over one inbox (its sessions, database and clock)."""
    seal = TokenSeal(inbox.settings.secret or "")

    def refused(message: str, status: int) -> Response:
        code = ErrorCode.UNAUTHENTICATED if status == 401 else ErrorCode.INVALID_REQUEST
        body = ErrorBody.of(code, message, {}).dump()
        return JSONResponse(body, status_code=status, headers=inbox.headers())

    async def worker(request: Request) -> Response:
        headers = {"Service-Worker-Allowed": "/inbox/", "Cache-Control": "no-cache"}
        return FileResponse(STATIC / "sw.js", media_type="text/javascript", headers=headers)

    async def manifest(request: Request) -> Response:
        return FileResponse(STATIC / "manifest.webmanifest", media_type="application/manifest+json")

    async def key(request: Request) -> Response:
        if await inbox.who(request) is None:
            return refused("sign in first", 401)
        pem = await vapid_pem(inbox.db, seal, inbox.clock())
        return JSONResponse({"publicKey": public_key(pem)}, headers=inbox.headers())

    async def subscribe(request: Request) -> Response:
        person = await inbox.who(request)
        if person is None:
            return refused("sign in first", 401)
        if not session.csrf_ok(request, request.headers.get("x-csrf-token")):
            return refused("this page has expired; reload it and press the button again", 403)
        raw = await request.body()
        try:
            if len(raw) > MAX_BODY:
                raise BadSubscription(f"the body is over {MAX_BODY} bytes")
            sub = subscription_of(json_of(raw), inbox.settings.callback_allow)
        except BadSubscription as exc:
            return refused(f"subscription refused: {exc}", 400)
        ids = (*person.vouched, *person.numbers)
        now = inbox.clock()
        await inbox.db.run_write(
            lambda tx: push_store.subscribe(tx, ids, sub, person.issuer, person.subject, now)
        )
        return JSONResponse({"subscribed": True}, status_code=201, headers=inbox.headers())

    async def unsubscribe(request: Request) -> Response:
        person = await inbox.who(request)
        if person is None:
            return refused("sign in first", 401)
        if not session.csrf_ok(request, request.headers.get("x-csrf-token")):
            return refused("this page has expired; reload it and press the button again", 403)
        try:
            body = json_of(await request.body())
            endpoint = body.get("endpoint") if isinstance(body, dict) else None
        except BadSubscription:
            endpoint = None
        if not isinstance(endpoint, str):
            return refused('send {"endpoint": the subscription\'s endpoint}', 400)
        done = await inbox.db.run_write(
            lambda tx: push_store.unsubscribe(tx, endpoint, person.issuer, person.subject)
        )
        return JSONResponse({"unsubscribed": done}, headers=inbox.headers())

    return [
        Route("/sw.js", worker, methods=["GET"]),
        Route("/manifest.webmanifest", manifest, methods=["GET"]),
        Route("/push/key", key, methods=["GET"]),
        Route("/push/subscriptions", subscribe, methods=["POST"]),
        Route("/push/subscriptions/delete", unsubscribe, methods=["POST"]),
    ]
