"""Web Push: a request that waits for a person, told to each browser they subscribed.

The message names the tool and the tenant only, never a parameter, and carries the path of
the request's inbox page, which a click on the notification opens (the service worker,
`bot/inbox/static/sw.js`). It is encrypted to the subscription's keys by pywebpush (RFC 8291,
`aes128gcm`) and signed with the server's VAPID key (RFC 8292: an ES256 JWT whose `aud` is
the push service's origin, `exp` at most 24 hours ahead, `sub` a contact). `Topic` is the
request, so a push service keeps only its latest undelivered message, and the notification's
`tag` too, so a second copy replaces the first on the device.

The POST leaves through the server's checked client (`Post`), never redirected. 201 (or any
2xx) is sent; 404 and 410 mean the subscription is gone, and it is removed; 413 (too
large), 400 and 403 are recorded and not retried; 429 and 5xx, or no answer, may pass and
are retried by the job worker.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from py_vapid import Vapid
from pywebpush import WebPusher

from contracts.errors import SurfaceUnavailable
from contracts.ports import ApprovalCard, Delivered, Route
from contracts.reach import Channel, Device, Post, PushBook, Pushed, Unsent

log = logging.getLogger("cosigner.push")
TTL = 3600  # seconds a push service keeps an undelivered message
EXP = 12 * 3600  # the VAPID JWT's lifetime (RFC 8292 allows at most 24 hours)
GONE = {404, 410}
PASSING = {429}


@dataclass(frozen=True)
class PushConfig:
    """The contact the VAPID JWT names (`sub`: mailto: or https:)."""

    contact: str


def payload(card: ApprovalCard) -> bytes:
    """What the browser gets: the tool and tenant, and the page to open; no parameter."""
    body = {
        "title": f"Approval needed: {card.tool_name[:100]}",
        "body": f"{card.tool_name[:100]} for {card.tenant[:60]} waits for your answer.",
        "url": f"/inbox/approvals/{card.approval_id}",
        "tag": card.approval_id,
    }
    return json.dumps(body, separators=(",", ":")).encode()


class PushAdapter:
    """Sends each subscribed browser of a request's approvers one Web Push message."""

    name = Channel.PUSH.value

    def __init__(self, config: PushConfig, book: PushBook, post: Post, clock: Callable[[], float]) -> None:
        self.config = config
        self.book = book
        self.post = post
        self.clock = clock
        self._vapid: Vapid | None = None

    def routes(self) -> list[Any]:
        """None here: the inbox serves the subscription's routes."""
        return []

    async def start(self) -> None:
        """Nothing at start: the VAPID key pair is loaded (or made) at the first push."""

    async def stop(self) -> None:
        """Nothing to close: posts go through the server's client."""

    async def deliver(self, card: ApprovalCard, route: Route) -> Delivered:
        """Never a route's carrier: a push goes beside the request's own surface."""
        raise SurfaceUnavailable("Web Push tells people of a request; it is not where a request is asked")

    async def show_outcome(self, card: ApprovalCard, route: Route, delivered: Delivered) -> None:
        """Nothing: the inbox page shows the outcome."""

    async def push(self, card: ApprovalCard, approvers: tuple[str, ...]) -> Pushed:
        """Tell every browser of `approvers` that the request waits (see the module's text)."""
        devices = await self.book.devices_for(approvers)
        if devices and self._vapid is None:
            self._vapid = Vapid.from_pem(await self.book.vapid_pem())
        return await self._send_all(card, devices)

    async def _send_all(self, card: ApprovalCard, devices: Sequence[Device]) -> Pushed:
        sent: list[str] = []
        gone: list[str] = []
        failed: dict[str, str] = {}
        retry = False
        data = payload(card)
        for device in devices:
            try:
                body = self._encrypted(device, data)
                status, reason = await self.post(device.endpoint, body, self._headers(card, device))
            except Unsent as exc:
                failed[device.endpoint] = exc.reason
                retry = retry or not exc.lasting
                continue
            except ValueError as exc:  # keys that are not a P-256 point and a 16-byte secret
                failed[device.endpoint] = f"the subscription's keys cannot be used: {exc}"
                gone.append(device.endpoint)
                await self.book.forget(device.endpoint)
                continue
            if 200 <= status < 300:
                sent.append(device.endpoint)
            elif status in GONE:
                gone.append(device.endpoint)
                await self.book.forget(device.endpoint)
            else:
                failed[device.endpoint] = f"HTTP {status} {reason}".strip()
                retry = retry or status in PASSING or status >= 500
        return Pushed(tuple(sent), tuple(gone), failed, retry)

    def _encrypted(self, device: Device, data: bytes) -> bytes:
        info = {"endpoint": device.endpoint, "keys": {"p256dh": device.p256dh, "auth": device.auth}}
        encoded = WebPusher(info).encode(data, content_encoding="aes128gcm")
        body: bytes = encoded["body"]
        return body

    def _headers(self, card: ApprovalCard, device: Device) -> dict[str, str]:
        assert self._vapid is not None  # push() loads it first
        url = urlsplit(device.endpoint)
        claims = {
            "aud": f"{url.scheme}://{url.netloc}",
            "exp": int(self.clock()) + EXP,
            "sub": self.config.contact,
        }
        signed = {str(k): str(v) for k, v in self._vapid.sign(claims).items()}
        return {
            "Content-Encoding": "aes128gcm",
            "Content-Type": "application/octet-stream",
            "TTL": str(TTL),
            "Urgency": "high",
            # RFC 8030 §5.4: at most 32 base64url characters; the approval id is shorter.
            "Topic": card.approval_id.replace("_", "-")[:32],
            **signed,
        }
