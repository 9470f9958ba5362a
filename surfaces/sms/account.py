"""The Twilio account behind the SMS surface, fetched to prove its credentials (`cosigner doctor`).

The same official client the adapter sends with (`transport.twilio_client`) fetches
`/2010-04-01/Accounts/{AccountSid}.json`: Twilio answers only the account's own SID with its
own auth token, so a wrong token or SID is refused here rather than at the first text.
"""

from __future__ import annotations

import httpx
from twilio.base.exceptions import TwilioException, TwilioRestException

from contracts.errors import SurfaceUnavailable
from surfaces.sms.adapter import SmsConfig
from surfaces.sms.transport import HttpxTwilioClient, twilio_client

# Twilio's error codes for credentials it does not accept (wrong token, unknown SID).
_REFUSED_CREDENTIALS = {20003, 20404}


async def account_status(
    config: SmsConfig, *, request_seconds: float = 10.0, transport: httpx.AsyncBaseTransport | None = None
) -> str:
    """The account's status as Twilio reports it (`active`, `suspended`, `closed`), or
    `SurfaceUnavailable` naming what to fix when Twilio refuses or cannot be reached."""
    http = HttpxTwilioClient(timeout=request_seconds, transport=transport)
    try:
        client = twilio_client(config.account_sid, config.auth_token, config.api_url, http)
        account = await client.api.v2010.accounts(config.account_sid).fetch_async()
    except TwilioRestException as exc:
        if exc.status in (401, 404) or exc.code in _REFUSED_CREDENTIALS:
            raise SurfaceUnavailable(
                f"Twilio refused TWILIO_ACCOUNT_SID with TWILIO_AUTH_TOKEN (HTTP {exc.status}, error "
                f"{exc.code}); copy both from the Twilio console (Account Info)"
            ) from exc
        raise SurfaceUnavailable(f"Twilio answered HTTP {exc.status} (error {exc.code})") from exc
    except (TimeoutError, TwilioException, httpx.HTTPError, OSError, ValueError) as exc:
        raise SurfaceUnavailable(
            f"could not reach Twilio ({type(exc).__name__}); check TWILIO_API_URL and the network"
        ) from exc
    finally:
        await http.close()
    return str(account.status or "unknown")
