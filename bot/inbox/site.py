"""The inbox under `/inbox`: its pages (`pages.py`), forms (`forms.py`) and live list
(`live.py`) as one Starlette app with its own signed session cookie.

Every page is rendered on the server and every form works without JavaScript; a small
script listens to `/inbox/events` and reloads the list when what waits changes, and another
offers `a`/`d` on a request's page. Every POST carries the session's CSRF token, and every
response a Content-Security-Policy.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import partial
from urllib.parse import urlsplit

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from bot.approvals import Allowances, Denials, Engine, Notifier
from bot.inbox import passkeys, selection, step_up
from bot.inbox.allowance_pages import allowance_routes
from bot.inbox.core import HERE, MAX_FORM, not_configured_message
from bot.inbox.forms import Forms
from bot.inbox.live import Live
from bot.inbox.pages import Pages
from bot.inbox.push_routes import push_routes
from bot.policy.rules import Policy
from bot.settings import Settings
from storage.database import Database

__all__ = ["COOKIE", "MAX_FORM", "Inbox", "inbox_mount", "not_configured_message", "secure_cookie"]
COOKIE = "cosigner_inbox"
LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}


class Inbox(Pages, Forms, Live):
    """The inbox routes over one engine, with the settings' sign-in and the app's clock."""


def secure_cookie(public_url: str) -> bool:
    """The cookie is Secure unless Cosigner is reached over loopback (local development)."""
    return urlsplit(public_url).hostname not in LOOPBACK


def inbox_mount(
    engine: Engine,
    settings: Settings,
    clock: Callable[[], float],
    surfaces: Mapping[str, object] | None = None,
    *,
    db: Database,
    policy: Policy,
    denials: Denials,
    notifier: Notifier,
) -> Mount:
    """`/inbox` with its own signed session cookie; nothing outside it sees the cookie."""
    inbox = Inbox(engine, settings, clock, surfaces, db=db, policy=policy, denials=denials, notifier=notifier)
    rp = passkeys.RelyingParty(settings.public_url)
    keys = passkeys.Passkeys(inbox, db, rp, clock)
    stepped = step_up.StepUp(inbox, engine, db, rp, policy.people, clock)
    app = Starlette(
        routes=[
            Route("/", inbox.home, methods=["GET"]),
            Route("/login", inbox.login, methods=["GET"]),
            Route("/callback", inbox.callback, methods=["GET"]),
            Route("/logout", inbox.logout, methods=["POST"]),
            Route("/history", inbox.history, methods=["GET"]),
            Route("/events", inbox.events, methods=["GET"]),
            Route("/approvals/{approval_id}", inbox.detail, methods=["GET"]),
            Route("/approvals/{approval_id}/answer", inbox.answer, methods=["POST"]),
            Route("/answer-selected", partial(selection.handle, inbox), methods=["POST"]),
            Route("/approvals/{approval_id}/edit", inbox.edit, methods=["GET"]),
            Route("/approvals/{approval_id}/edit", inbox.review, methods=["POST"]),
            Route("/approvals/{approval_id}/edit/approve", inbox.approve_edited, methods=["POST"]),
            Route("/denials/{denial_id}/lift", inbox.lift, methods=["POST"]),
            Route("/passkeys", keys.page, methods=["GET"]),
            Route("/passkeys", keys.add, methods=["POST"]),
            Route("/passkeys/options", keys.options, methods=["POST"]),
            Route("/passkeys/{credential_id}/remove", keys.remove, methods=["POST"]),
            Route("/approvals/{approval_id}/step-up", stepped.page, methods=["GET"]),
            Route("/approvals/{approval_id}/step-up", stepped.answer, methods=["POST"]),
            Route("/approvals/{approval_id}/step-up/options", stepped.options, methods=["POST"]),
            *push_routes(inbox),
            *allowance_routes(inbox, Allowances(db, clock)),
            Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
        ],
        middleware=[
            Middleware(
                SessionMiddleware,
                secret_key=f"inbox-session:{settings.secret}",
                session_cookie=COOKIE,
                max_age=settings.inbox_session_seconds,
                path="/inbox",
                same_site="lax",
                https_only=secure_cookie(settings.public_url),
            )
        ],
    )
    app.state.inbox = inbox
    return Mount("/inbox", app=app)
