"""The twilio client's HTTP seam on httpx, so the SMS surface needs no aiohttp session.

twilio's own `AsyncTwilioHttpClient` is built on aiohttp and trips aiohttp's deprecation
of `BasicAuth` on every request; this one speaks httpx, which respx and
`httpx.MockTransport` can also intercept in tests.
"""

from __future__ import annotations

import logging

import httpx
from twilio.http import AsyncHttpClient
from twilio.http.response import Response
from twilio.rest import Client

_logger = logging.getLogger("cosigner.sms.http")


class HttpxTwilioClient(AsyncHttpClient):  # type: ignore[misc]
    """An `AsyncHttpClient` for `twilio.rest.Client(http_client=...)`, on `httpx.AsyncClient`."""

    def __init__(self, timeout: float = 10.0, transport: httpx.AsyncBaseTransport | None = None) -> None:
        super().__init__(_logger, True, timeout)
        self.client = httpx.AsyncClient(timeout=timeout, transport=transport)

    async def request(
        self,
        method: str,
        url: str,
        params: dict[str, object] | None = None,
        data: dict[str, object] | None = None,
        headers: dict[str, str] | None = None,
        auth: tuple[str, str] | None = None,
        timeout: float | None = None,  # noqa: ASYNC109 (twilio's signature)
        allow_redirects: bool = False,
    ) -> Response:
        """Send one API request; httpx errors propagate for the caller to translate."""
        if timeout is not None and timeout <= 0:
            raise ValueError(timeout)
        response = await self.client.request(
            method.upper(),
            url,
            params=params,  # type: ignore[arg-type]
            data=data,
            headers=headers,
            auth=auth,
            timeout=timeout if timeout is not None else self.timeout,
            follow_redirects=allow_redirects,
        )
        # Only method, path and status: bodies carry the approval text and numbers.
        _logger.debug("twilio %s %s -> %s", method.upper(), response.url.path, response.status_code)
        return Response(response.status_code, response.text, response.headers)

    async def close(self) -> None:
        """Close the connection pool."""
        await self.client.aclose()


def twilio_client(account_sid: str, auth_token: str, api_url: str | None, http: HttpxTwilioClient) -> Client:
    """The official `twilio.rest.Client` on `http`, talking to `api_url` (an emulator) when set."""
    client = Client(account_sid, auth_token, http_client=http)
    # TWILIO_EDGE / TWILIO_REGION from the environment would rewrite the host,
    # sending an emulator's traffic (or a region-pinned account's) elsewhere.
    client.edge = None
    client.region = None
    if api_url:
        client.api.base_url = api_url.rstrip("/")
    return client
