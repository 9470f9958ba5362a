"""What every inbox page shares: the engine and settings it runs over, rendering with the
security headers, who is signed in, reading a posted form, and what waits for a person.

The pages themselves are in `pages.py` (sign-in, Waiting, the request, History), `forms.py`
(answers, edits, lifting a standing deny) and `live.py` (the live list's event stream);
`site.py` puts them together under `/inbox`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from bot.approvals import Denials, Engine, Notifier
from bot.approvals.allowances import offered as offered_lengths
from bot.inbox import items, session
from bot.inbox.people import Person, names_on_slack, tenants_of, texted_to
from bot.inbox.signin import SignIn
from bot.inbox.step_up import approver_id
from bot.policy.rules import Policy
from bot.settings import Settings
from contracts.enums import SurfaceType
from contracts.errors import ApprovalNotFound, CosignerError, InvalidRequest
from contracts.pending import Permalinks
from storage import inbox as listing
from storage import ledger
from storage.database import Database
from storage.records import Record
from surfaces.bodies import read_form

HERE = Path(__file__).parent
HEARTBEAT = 15.0  # seconds of quiet after which the live list's stream says it is alive
MIN_INTERVAL = 1.0  # seconds between two reads of one stream's list: a burst is read once
# A form is an answer, or an edit of at most the policy's editable parameters (whose call is at
# most 64 KiB of JSON: under 600 KB form-encoded even if every character is non-ASCII).
MAX_FORM = 1024 * 1024
MAX_FIELDS = 1000
_pages = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(["html"]))


def not_configured_message() -> str:
    """What `/inbox` and `serve` say when no sign-in is configured."""
    return (
        "the inbox is off: set COSIGNER_OIDC_ISSUER, COSIGNER_OIDC_CLIENT_ID and "
        "COSIGNER_OIDC_CLIENT_SECRET (an OpenID Connect client whose redirect URI is "
        "COSIGNER_PUBLIC_URL/inbox/callback) to let approvers sign in"
    )


def csp() -> str:
    """Scripts, styles and forms from this origin only; nothing may frame the inbox."""
    return (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; "
        "object-src 'none'"
    )


def seen_digest(form: FormData) -> str | None:
    """The digest of the call the page showed (every answer form carries it); None from a page
    made before forms carried one: taken as the agent's own call."""
    value = str(form.get("digest", ""))[:200]
    return value or None


class InboxBase:
    """The inbox's state over one engine, with the settings' sign-in and the app's clock."""

    def __init__(
        self,
        engine: Engine,
        settings: Settings,
        clock: Callable[[], float],
        surfaces: Mapping[str, object] | None = None,
        *,
        db: Database,
        policy: Policy,
        denials: Denials,
        notifier: Notifier,
    ) -> None:
        self.engine, self.settings, self.clock = engine, settings, clock
        self.db, self.policy, self.denials = db, policy, denials
        self.notifier = notifier  # wakes the live list when a request is created or closed
        # Surfaces that can link to their cards (Slack: chat.getPermalink).
        self.linkers = {n: s for n, s in (surfaces or {}).items() if isinstance(s, Permalinks)}
        self.signin: SignIn | None = None
        if settings.oidc_enabled:
            self.signin = SignIn(
                settings.oidc_issuer or "",
                settings.oidc_client_id or "",
                settings.oidc_client_secret or "",
                settings.oidc_display_name,
            )
        self.sessions = session.Sessions(db, policy, clock, float(settings.inbox_session_seconds))
        self.heartbeat = HEARTBEAT
        self.min_interval = MIN_INTERVAL
        self.pause: Callable[[float], Awaitable[None]] = asyncio.sleep

    # --- rendering ---------------------------------------------------------------

    def page(self, request: Request, name: str, status: int = 200, **values: Any) -> Response:
        """A template rendered with the session's CSRF token and the inbox's headers."""
        body = _pages.get_template(name).render(
            csrf=session.csrf_token(request) if "session" in request.scope else "", when=items.when, **values
        )
        return HTMLResponse(body, status_code=status, headers=self.headers())

    def headers(self) -> dict[str, str]:
        """Every inbox response's security headers."""
        return {
            "Content-Security-Policy": csp(),
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "same-origin",
            "Cache-Control": "no-store",
        }

    def refused(self, request: Request, person: Person | None, message: str, status: int) -> Response:
        """The page saying what was not done and why."""
        return self.page(request, "refused.html", status, person=person, message=message)

    # --- who is signed in ----------------------------------------------------------

    async def signed(self, request: Request) -> session.Signed | None:
        """The request's live session (one read by primary key), or None: signed out."""
        return await self.sessions.current(request) if self.signin is not None else None

    async def who(self, request: Request) -> Person | None:
        """The person of the request's live session, or None: signed out."""
        signed = await self.signed(request)
        return signed.person if signed is not None else None

    async def signed_form(self, request: Request) -> tuple[Person, FormData] | Response:
        """The signed-in person and the form they posted, or what refuses it: back to the
        inbox (and its sign-in) without a session, 403 when the form's CSRF token does not
        match. Every POST of a signed-in person starts here."""
        person = await self.who(request)
        if person is None:
            return RedirectResponse("/inbox/", status_code=303)
        form = await self.read_form(request, person)
        if isinstance(form, Response):
            return form
        if not session.csrf_ok(request, form.get("csrf")):
            return self.refused(request, person, "This form has expired; reload the page and try again.", 403)
        return person, form

    async def read_form(self, request: Request, person: Person | None) -> FormData | Response:
        """The posted form, read no further than MAX_FORM bytes, or the page refusing it."""
        try:
            return await read_form(request, MAX_FORM, max_fields=MAX_FIELDS)
        except InvalidRequest as exc:  # BodyTooLarge (413), too many fields, a bad Content-Length
            return self.refused(request, person, f"This form was not accepted: {exc.message}.", exc.status)

    # --- what the person sees ------------------------------------------------------

    async def waiting(self, person: Person) -> tuple[list[Record], list[Record]]:
        """Dashboard requests this person may answer, and the Slack, SMS and WhatsApp
        requests that name them (read-only: an answer counts only where it was asked)."""
        tenants = tenants_of(self.policy, person)

        def read(tx: Any) -> tuple[list[Record], list[Record]]:
            listed = listing.listed(tx, tenants, pending=True, limit=200)
            # A text names a number in any tenant: its requester need not be a tenant's admin.
            return listed, listing.texted(tx, person.numbers)

        recs, texts = await self.db.run_read(read)
        # Requests asked on the dashboard, or escalated to it, that name this person.
        mine = [r for r in recs if answers_here(person, r)]
        elsewhere = [r for r in recs if names_on_slack(person, r)]
        seen = {r.id for r in elsewhere}
        elsewhere += [r for r in texts if texted_to(person, r) and r.id not in seen]
        elsewhere.sort(key=lambda r: r.created_at, reverse=True)
        return mine, elsewhere

    async def waiting_count(self, person: Person) -> int:
        """How many requests wait for this person, here or where they were asked (the title's count)."""
        mine, elsewhere = await self.waiting(person)
        return len(mine) + len(elsewhere)

    async def visible(self, person: Person, approval_id: str) -> Record:
        """A request of one of the person's tenants, or one texted to their number;
        `ApprovalNotFound` for anything else, as if it did not exist."""
        rec = await self.db.run_read(lambda tx: ledger.load(tx, approval_id))
        if rec is None or not (rec.tenant in tenants_of(self.policy, person) or texted_to(person, rec)):
            raise ApprovalNotFound(f"approval {approval_id} does not exist")
        return rec

    async def link(self, rec: Record) -> str | None:
        """Where the request was asked, as its surface links to it."""
        linker = self.linkers.get(rec.route.surface) if rec.route is not None else None
        if linker is None or rec.route is None or rec.delivered is None:
            return None
        try:
            return await linker.permalink(rec.route, rec.delivered)
        except CosignerError:
            return None

    def item(self, rec: Record, link: str | None = None, person: Person | None = None) -> dict[str, Any]:
        """One request as the templates show it."""
        described = items.describe(rec, self.clock(), link, person)
        described["allow_for"] = offered_lengths(self.policy, rec)  # "Allow for …" (bot.approvals.allowances)
        # A step-up request asked in Slack, Teams or by text: its approvers confirm an Approve
        # with a passkey in the inbox (`bot.inbox.step_up`, which checks the same again).
        described["passkey_answer"] = (
            person is not None
            and rec.step_up
            and not rec.closed
            and approver_id(rec, person, self.policy.people, tenants_of(self.policy, person)) is not None
        )
        return described


def answers_here(person: Person, rec: Record) -> bool:
    """True if the request was asked on the dashboard (or escalated to it) and names this person."""
    return bool(set(person.ids) & set(rec.approvers_on(SurfaceType.DASHBOARD)))
