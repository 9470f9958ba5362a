"""Calls a bot's SMS webhooks the way Twilio does: form-encoded and really signed.

The sandbox uses it to play a phone; the tests use it to play Twilio and, by overriding
the URL signed, the token or any parameter, to play a forger.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from urllib.parse import urlencode

import httpx
from twilio.request_validator import RequestValidator

_UNSET = "\x00unset"  # a signature header we compute, unless the caller forges one


class TwilioCaller:
    """Posts signed inbound texts and status callbacks through an `httpx.AsyncClient`."""

    def __init__(
        self, client: httpx.AsyncClient, *, public_url: str, account_sid: str, auth_token: str
    ) -> None:
        self.client = client
        self.public_url = public_url.rstrip("/")
        self.account_sid = account_sid
        self.auth_token = auth_token

    async def text(
        self,
        from_: str,
        to: str,
        body: str,
        *,
        messaging_service_sid: str | None = None,
        message_sid: str | None = None,
        override: Mapping[str, str | None] | None = None,
        signed_url: str | None = None,
        token: str | None = None,
        signature: str | None = _UNSET,
        path: str = "/sms/inbound",
    ) -> httpx.Response:
        """Deliver an inbound text from `from_` to `to` to `POST /sms/inbound` (or `path`)."""
        sid = message_sid or "SM" + secrets.token_hex(16)
        params = {
            "ToCountry": "US",
            "SmsMessageSid": sid,
            "NumMedia": "0",
            "SmsSid": sid,
            "SmsStatus": "received",
            "Body": body,
            "FromCountry": "US",
            "To": to,
            "NumSegments": "1",
            "MessageSid": sid,
            "AccountSid": self.account_sid,
            "From": from_,
            "ApiVersion": "2010-04-01",
        }
        if messaging_service_sid:
            params["MessagingServiceSid"] = messaging_service_sid
        return await self.post(
            path,
            _merge(params, override),
            signed_url=signed_url,
            token=token,
            signature=signature,
        )

    async def status(
        self,
        message_sid: str,
        status: str,
        *,
        to: str = "+15550000000",
        from_: str | None = None,
        error_code: str | None = None,
        override: Mapping[str, str | None] | None = None,
        signed_url: str | None = None,
        token: str | None = None,
        signature: str | None = _UNSET,
        path: str = "/sms/status",
    ) -> httpx.Response:
        """Deliver a status callback for `message_sid` to `POST /sms/status` (or `path`)."""
        params = {
            "SmsSid": message_sid,
            "SmsStatus": status,
            "MessageStatus": status,
            "To": to,
            "MessageSid": message_sid,
            "AccountSid": self.account_sid,
            "ApiVersion": "2010-04-01",
        }
        if from_:
            params["From"] = from_
        if error_code:
            params["ErrorCode"] = error_code
        return await self.post(
            path,
            _merge(params, override),
            signed_url=signed_url,
            token=token,
            signature=signature,
        )

    async def tap(
        self,
        from_: str,
        to: str,
        *,
        title: str,
        payload: str,
        replied_to: str | None,
        message_sid: str | None = None,
        override: Mapping[str, str | None] | None = None,
        signature: str | None = _UNSET,
    ) -> httpx.Response:
        """A WhatsApp quick-reply tap, as Twilio posts it to `POST /whatsapp/inbound`.

        `from_` and `to` are `whatsapp:+E164`; the button's title arrives as `Body` and
        `ButtonText`, its id as `ButtonPayload`, and the message it answers as
        `OriginalRepliedMessageSid`.
        """
        sid = message_sid or "SM" + secrets.token_hex(16)
        params = {
            "SmsMessageSid": sid,
            "NumMedia": "0",
            "ProfileName": "Approver",
            "MessageType": "button",
            "SmsSid": sid,
            "WaId": from_.removeprefix("whatsapp:+"),
            "SmsStatus": "received",
            "Body": title,
            "ButtonText": title,
            "ButtonPayload": payload,
            "To": to,
            "NumSegments": "1",
            "ReferralNumMedia": "0",
            "MessageSid": sid,
            "AccountSid": self.account_sid,
            "From": from_,
            "ApiVersion": "2010-04-01",
        }
        if replied_to is not None:
            params["OriginalRepliedMessageSid"] = replied_to
        return await self.post("/whatsapp/inbound", _merge(params, override), signature=signature)

    async def post(
        self,
        path: str,
        params: list[tuple[str, str]],
        *,
        signed_url: str | None = None,
        token: str | None = None,
        signature: str | None = _UNSET,
    ) -> httpx.Response:
        """Post `params` to `path`, signed over `signed_url` (default: public URL + path).

        `signature=None` sends no `X-Twilio-Signature` header; a string sends that one.
        """
        url = signed_url or self.public_url + path
        headers = {"Content-Type": "application/x-www-form-urlencoded"}
        if signature == _UNSET:
            validator = RequestValidator(token or self.auth_token)
            multi = _MultiParams(params)
            headers["X-Twilio-Signature"] = validator.compute_signature(url, multi)
        elif signature is not None:
            headers["X-Twilio-Signature"] = signature
        return await self.client.post(path, content=_encode(params), headers=headers)


def _merge(params: dict[str, str], override: Mapping[str, str | None] | None) -> list[tuple[str, str]]:
    merged: dict[str, str | None] = {**params, **(override or {})}
    return [(key, value) for key, value in merged.items() if value is not None]


def _encode(params: list[tuple[str, str]]) -> bytes:
    return urlencode(params).encode("ascii")


class _MultiParams(dict[str, str]):
    """The view of repeated keys `RequestValidator` reads through `getall`."""

    def __init__(self, pairs: list[tuple[str, str]]) -> None:
        super().__init__(pairs)
        self._pairs = pairs

    def getall(self, key: str) -> list[str]:
        return [value for name, value in self._pairs if name == key]
