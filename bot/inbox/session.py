"""The signed-in session and its CSRF token, kept in the inbox's signed cookie.

Starlette's SessionMiddleware signs the cookie; the expiry is also written inside it and
checked against the app's clock, so a session ends on time even if a browser keeps the
cookie, and tests move the clock instead of waiting.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Callable

from starlette.requests import Request

from bot.inbox.people import Person

PERSON, EXPIRES, CSRF = "person", "expires", "csrf"


def sign_in(request: Request, person: Person, clock: Callable[[], float], lifetime: float) -> None:
    """Start a session for `person` (a fresh CSRF token with it)."""
    request.session.clear()
    request.session[PERSON] = person.to_json()
    request.session[EXPIRES] = clock() + lifetime
    request.session[CSRF] = secrets.token_urlsafe(24)


def sign_out(request: Request) -> None:
    """End the session."""
    request.session.clear()


def signed_in(request: Request, clock: Callable[[], float]) -> Person | None:
    """The person of a live session; an expired one is cleared."""
    data, expires = request.session.get(PERSON), request.session.get(EXPIRES)
    if not isinstance(data, dict) or not isinstance(expires, (int, float)):
        return None
    if clock() >= expires:
        sign_out(request)
        return None
    return Person.from_json(data)


def csrf_token(request: Request) -> str:
    """The session's CSRF token, for every form."""
    token = request.session.get(CSRF)
    if not isinstance(token, str):
        token = request.session[CSRF] = secrets.token_urlsafe(24)
    return token


def csrf_ok(request: Request, sent: object) -> bool:
    """True if a posted form carries the session's CSRF token."""
    token = request.session.get(CSRF)
    return isinstance(token, str) and isinstance(sent, str) and hmac.compare_digest(token, sent)
