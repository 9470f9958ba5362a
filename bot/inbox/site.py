"""The inbox's pages and forms: sign-in, the list, an answer, history, standing denies, events.

Every page is rendered on the server and every form works without JavaScript; a small
script listens to `/inbox/events` and reloads the list when what waits changes. Every POST
carries the session's CSRF token, and every response a Content-Security-Policy.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.applications import Starlette
from starlette.datastructures import FormData
from starlette.middleware import Middleware
from starlette.middleware.sessions import SessionMiddleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from bot.approvals import Allowances, Denials, Engine, Notifier
from bot.approvals.allowances import offered as offered_lengths
from bot.inbox import answering, session
from bot.inbox.allowance_pages import allowance_routes
from bot.inbox.editing import FIELD, TEXT_MAX, edited_changes, input_of, shown, starting_text
from bot.inbox.people import Person, SignInRefused, names_on_slack, tenants_of, texted_to
from bot.inbox.signin import SignIn
from bot.policy.rules import Policy
from bot.settings import Settings
from contracts.allowances import choice_named
from contracts.edits import parse_input
from contracts.enums import ApprovalStatus, SurfaceType, Verdict
from contracts.errors import CosignerError, DenialNotFound, InvalidRequest
from contracts.pending import Permalinks
from cosigner.strict_json import read
from storage import inbox as listing
from storage.database import Database
from storage.records import Record
from surfaces.bodies import read_form

log = logging.getLogger("cosigner.inbox")
HERE = Path(__file__).parent
COOKIE = "cosigner_inbox"
HEARTBEAT = 15.0  # seconds of quiet after which the live list's stream says it is alive
MIN_INTERVAL = 1.0  # seconds between two reads of one stream's list: a burst is read once
FORM_VERDICTS = {v.value: v for v in answering.VERDICTS}
LOOPBACK = {"127.0.0.1", "localhost", "::1", "[::1]"}
# A form is an answer, or an edit of at most the policy's editable parameters (whose call is at
# most 64 KiB of JSON: under 600 KB form-encoded even if every character is non-ASCII).
MAX_FORM = 1024 * 1024
MAX_FIELDS = 1000
_pages = Environment(loader=FileSystemLoader(HERE / "templates"), autoescape=select_autoescape(["html"]))


def seen_digest(form: FormData) -> str | None:
    """The digest of the call the page showed (every answer form carries it); None from a page
    made before forms carried one: taken as the agent's own call."""
    value = str(form.get("digest", ""))[:200]
    return value or None


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


def when(seconds: float | None) -> str:
    """A UTC time for people."""
    if seconds is None:
        return ""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M UTC")


def left(seconds: float) -> str:
    """Time left, roughly."""
    if seconds <= 0:
        return "expiring"
    minutes = int(seconds // 60)
    return f"{minutes // 60}h {minutes % 60}m" if minutes >= 60 else f"{minutes}m {int(seconds % 60)}s"


class Inbox:
    """The inbox routes over one engine, with the settings' sign-in and the app's clock."""

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
                settings.oidc_issuer or "", settings.oidc_client_id or "", settings.oidc_client_secret or ""
            )
        self.sessions = session.Sessions(db, policy, clock, float(settings.inbox_session_seconds))
        self.heartbeat = HEARTBEAT
        self.min_interval = MIN_INTERVAL
        self.pause: Callable[[float], Awaitable[None]] = asyncio.sleep

    # --- rendering ---------------------------------------------------------------

    def page(self, request: Request, name: str, status: int = 200, **values: Any) -> Response:
        body = _pages.get_template(name).render(
            csrf=session.csrf_token(request) if "session" in request.scope else "", when=when, **values
        )
        return HTMLResponse(body, status_code=status, headers=self.headers())

    def headers(self) -> dict[str, str]:
        return {
            "Content-Security-Policy": csp(),
            "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "same-origin",
            "Cache-Control": "no-store",
        }

    def refused(self, request: Request, person: Person | None, message: str, status: int) -> Response:
        return self.page(request, "refused.html", status, person=person, message=message)

    # --- sign-in -----------------------------------------------------------------

    async def login(self, request: Request) -> Response:
        if self.signin is None:
            return self.page(request, "off.html", 503, message=not_configured_message())
        back_to = f"{self.settings.public_url.rstrip('/')}/inbox/callback"
        try:
            return await self.signin.redirect(request, back_to)
        except SignInRefused as exc:
            return self.refused(request, None, f"Sign-in is unavailable: {exc}", 502)

    async def callback(self, request: Request) -> Response:
        if self.signin is None:
            return self.page(request, "off.html", 503, message=not_configured_message())
        try:
            person = await self.signin.finish(request)
        except SignInRefused as exc:
            log.warning("inbox sign-in refused", extra={"code": type(exc.__cause__).__name__})
            return self.refused(request, None, f"Sign-in refused: {exc}", 401)
        await self.sessions.start(request, person)
        return RedirectResponse("/inbox/", status_code=303)

    async def logout(self, request: Request) -> Response:
        form = await self.read_form(request, None)
        if isinstance(form, Response):
            return form
        if not session.csrf_ok(request, form.get("csrf")):
            return self.refused(request, None, "This form has expired; reload the page and try again.", 403)
        await self.sessions.end(request)
        return RedirectResponse("/inbox/", status_code=303)

    async def signed(self, request: Request) -> session.Signed | None:
        """The request's live session (one read by primary key), or None: signed out."""
        return await self.sessions.current(request) if self.signin is not None else None

    async def who(self, request: Request) -> Person | None:
        """The person of the request's live session, or None: signed out."""
        signed = await self.signed(request)
        return signed.person if signed is not None else None

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
        mine = [r for r in recs if set(person.ids) & set(r.approvers_on(SurfaceType.DASHBOARD))]
        elsewhere = [r for r in recs if names_on_slack(person, r)]
        seen = {r.id for r in elsewhere}
        elsewhere += [r for r in texts if texted_to(person, r) and r.id not in seen]
        elsewhere.sort(key=lambda r: r.created_at, reverse=True)
        return mine, elsewhere

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
        card = rec.card()
        mine = set(person.ids) if person is not None else set()
        return {
            "id": rec.id,
            "tenant": rec.tenant,
            "tool": card.tool_name,
            # While pending, the call the approvers are asked to approve (an edited one after an
            # edit); once closed, the agent's, with an approved edit's changes beside it.
            "call": json.dumps(
                rec.call_shown if not rec.closed else dict(card.parameters),
                indent=2,
                sort_keys=True,
                ensure_ascii=False,
            ),
            "digest": card.digest,
            "edited_by": card.edited_by,
            "reason": card.reason,
            "triggered_by": card.triggered_by,
            "policy": card.policy_rule,
            "left": left(rec.expires_at - self.clock()),
            "created": when(rec.created_at),
            "status": rec.status.value,
            "decided": when(rec.decided_at),
            "comment": rec.comment,
            "always_deny": card.offers_always_deny,
            "allow_for": offered_lengths(self.policy, rec),  # "Allow for …" (bot.approvals.allowances)
            "slack_link": link,
            "asked_on": rec.route.surface.value if rec.route is not None else None,
            "code": rec.short_code,
            "handoff": card.handoff is not None,
            "quorum": card.quorum,
            "separate_duties": card.separate_duties,
            "progress": card.progress(),
            "approvals": [
                {"by": v.by, "surface": v.surface.value, "at": when(v.at.timestamp())} for v in card.approvals
            ],
            "you_approved": any(v.by in mine for v in card.approvals if v.surface is SurfaceType.DASHBOARD),
            "editable": rec.edit is not None and bool(rec.edit.fields) and not rec.closed,
            "edited": edited_changes(rec),
        }

    async def home(self, request: Request) -> Response:
        if self.signin is None:
            return self.page(request, "off.html", 200, message=not_configured_message())
        person = await self.who(request)
        if person is None:
            return self.page(request, "signin.html", 200, issuer=self.signin.issuer)
        mine, elsewhere = await self.waiting(person)
        return self.page(
            request,
            "inbox.html",
            person=person,
            tenants=tenants_of(self.policy, person),
            mine=[self.item(r, person=person) for r in mine],
            elsewhere=[self.item(r, await self.link(r)) for r in elsewhere],
        )

    async def history(self, request: Request) -> Response:
        person = await self.who(request)
        if person is None:
            return RedirectResponse("/inbox/", status_code=303)
        q = request.query_params
        tenants = tenants_of(self.policy, person)
        status = q.get("status") or None
        if status not in {None, *(s.value for s in ApprovalStatus if s is not ApprovalStatus.PENDING)}:
            return self.refused(request, person, f"unknown status {status!r}; pick one from the list", 400)
        since = None
        if q.get("since"):
            try:
                since = datetime.strptime(q["since"], "%Y-%m-%d").replace(tzinfo=UTC).timestamp()
            except ValueError:
                return self.refused(request, person, "the date must read YYYY-MM-DD, e.g. 2026-12-01", 400)
        tool = q.get("tool") or None
        recs = await self.db.run_read(
            lambda tx: listing.listed(tx, tenants, pending=False, tool=tool, status=status, since=since)
        )
        own = {f"{SurfaceType.DASHBOARD.value}:{i}" for i in person.ids}
        denials = [
            d
            for name, admin in tenants.items()
            for d in await self.denials.listed(name)
            if admin or f"{d.scope.surface.value}:{d.scope.approver}" in own
        ]
        return self.page(
            request,
            "history.html",
            person=person,
            items=[self.item(r) for r in recs],
            filters={"tool": tool or "", "status": status or "", "since": q.get("since", "")},
            statuses=[s.value for s in ApprovalStatus if s is not ApprovalStatus.PENDING],
            denials=denials,
        )

    async def trail(self, request: Request) -> Response:
        person = await self.who(request)
        if person is None:
            return RedirectResponse("/inbox/", status_code=303)
        tenants = tenants_of(self.policy, person)
        aid = request.path_params["approval_id"]
        try:
            rec = await self.engine.record(aid, None)
        except CosignerError:
            return self.refused(request, person, f"approval {aid} does not exist", 404)
        if rec.tenant not in tenants:
            return self.refused(request, person, f"approval {aid} does not exist", 404)
        rows = await self.engine.audit_trail(rec.tenant, aid)
        return self.page(request, "trail.html", person=person, item=self.item(rec), events=rows)

    # --- answering -----------------------------------------------------------------

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

    async def answer(self, request: Request) -> Response:
        signed = await self.signed_form(request)
        if isinstance(signed, Response):
            return signed
        person, form = signed
        length = choice_named(str(form.get("allow_for", ""))) if "allow_for" in form else None
        verdict = (
            Verdict.ALLOW_FOR if "allow_for" in form else FORM_VERDICTS.get(str(form.get("decision", "")))
        )
        if verdict is None or ("allow_for" in form and length is None):
            return self.refused(
                request, person, "answer approve, deny, always_deny or allow for 15m, 1h or 8h", 400
            )
        comment = str(form.get("comment", "")).strip()[:2000] or None
        tenants = set(tenants_of(self.policy, person))
        try:
            await answering.answer(
                self.engine,
                self.db,
                person,
                tenants,
                request.path_params["approval_id"],
                verdict,
                comment,
                seen_digest(form),
                allow_for=length.seconds if length is not None else None,
            )
        except CosignerError as exc:
            return self.refused(request, person, str(exc), exc.status)
        return RedirectResponse("/inbox/", status_code=303)

    # --- edit before approve ------------------------------------------------------------

    async def edit(self, request: Request) -> Response:
        """The edit form: one typed input per editable parameter, filled with its current value."""
        person = await self.who(request)
        if person is None:
            return RedirectResponse("/inbox/", status_code=303)
        tenants = set(tenants_of(self.policy, person))
        try:
            rec, fields = await answering.editable(
                self.engine, self.db, person, tenants, request.path_params["approval_id"]
            )
        except CosignerError as exc:
            return self.refused(request, person, str(exc), exc.status)
        inputs = [input_of(f, starting_text(f), None) for f in fields]
        return self.page(request, "edit.html", person=person, item=self.item(rec), inputs=inputs, others=[])

    async def review(self, request: Request) -> Response:
        """The review step: old → new for each changed parameter, or the form again with each
        problem under its field."""
        signed = await self.signed_form(request)
        if isinstance(signed, Response):
            return signed
        person, form = signed
        tenants = set(tenants_of(self.policy, person))
        aid = request.path_params["approval_id"]
        try:
            rec, fields = await answering.editable(self.engine, self.db, person, tenants, aid)
        except CosignerError as exc:
            return self.refused(request, person, str(exc), exc.status)
        offered = {f.name for f in fields}
        raw = {f.name: str(form.get(FIELD + f.name, ""))[: TEXT_MAX + 1] for f in fields}
        problems: dict[str, str] = {}
        others = [
            f"{k[len(FIELD) :][:100]} cannot be edited; editable here: {', '.join(sorted(offered))}"
            for k in form
            if k.startswith(FIELD) and k[len(FIELD) :] not in offered
        ]
        values: dict[str, object] = {}
        for f in fields:
            if len(raw[f.name]) > TEXT_MAX:
                problems[f.name] = f"is longer than {TEXT_MAX} characters"
                continue
            try:
                values[f.name] = parse_input(f, raw[f.name])
            except ValueError as exc:
                problems[f.name] = str(exc)
        if not problems and not others:
            try:
                rec, changes = await answering.review(self.engine, self.db, person, tenants, aid, values)
            except InvalidRequest as exc:
                for p in exc.details.get("problems") or [{"field": "", "message": exc.message}]:
                    name, said = str(p.get("field", "")), str(p.get("message", ""))
                    if name in offered:
                        problems[name] = f"{problems[name]}; {said}" if name in problems else said
                    else:
                        others.append(f"{name}: {said}" if name else said)
            except CosignerError as exc:
                return self.refused(request, person, str(exc), exc.status)
            else:
                rows = [{"name": c.name, "old": shown(c.old), "new": shown(c.new)} for c in changes]
                edit = json.dumps({c.name: c.new for c in changes}, ensure_ascii=False, separators=(",", ":"))
                return self.page(
                    request, "review.html", person=person, item=self.item(rec), changes=rows, edit=edit
                )
        inputs = [input_of(f, raw[f.name], problems.get(f.name)) for f in fields]
        return self.page(
            request, "edit.html", 400, person=person, item=self.item(rec), inputs=inputs, others=others
        )

    async def approve_edited(self, request: Request) -> Response:
        """Approve the edited call shown on the review step; the engine checks it all again."""
        signed = await self.signed_form(request)
        if isinstance(signed, Response):
            return signed
        person, form = signed
        reading = read(str(form.get("edit", "")))
        if reading.error is not None or reading.ambiguous or not isinstance(reading.value, dict):
            return self.refused(request, person, "the edit is not a JSON object; edit the request again", 400)
        comment = str(form.get("comment", "")).strip()[:2000] or None
        tenants = set(tenants_of(self.policy, person))
        try:
            rec = await answering.approve_edited(
                self.engine,
                self.db,
                person,
                tenants,
                request.path_params["approval_id"],
                reading.value,
                comment,
                seen_digest(form),
            )
        except CosignerError as exc:
            return self.refused(request, person, str(exc), exc.status)
        # Denied: the edited call met a deny rule. Still pending: the edit was one approval of
        # the edited call toward a quorum.
        if rec.closed and rec.status is not ApprovalStatus.APPROVED:
            return self.refused(request, person, f"The edited call was denied: {rec.comment}", 403)
        return RedirectResponse("/inbox/", status_code=303)

    async def lift(self, request: Request) -> Response:
        signed = await self.signed_form(request)
        if isinstance(signed, Response):
            return signed
        person, _ = signed
        denial_id = request.path_params["denial_id"]
        actor = {"kind": "person", "surface": SurfaceType.DASHBOARD.value, "userId": person.ids[0]}
        by = f"{SurfaceType.DASHBOARD.value}:{person.ids[0]}"
        denials = self.denials
        for tenant, admin in tenants_of(self.policy, person).items():
            try:
                if admin:  # a tenant admin may lift any of the tenant's standing denies
                    await denials.lift(tenant, denial_id, by, actor)
                    break
                for own in person.ids:
                    with contextlib.suppress(DenialNotFound):
                        await denials.lift_own(tenant, SurfaceType.DASHBOARD, own, denial_id)
                        break
                else:
                    continue
                break
            except DenialNotFound:
                continue
            except CosignerError as exc:
                return self.refused(request, person, str(exc), exc.status)
        else:
            return self.refused(request, person, f"no standing deny {denial_id} that you may lift", 404)
        return RedirectResponse("/inbox/history", status_code=303)

    # --- live updates ----------------------------------------------------------------

    async def events(self, request: Request) -> Response:
        signed = await self.signed(request)
        if signed is None:
            return self.refused(request, None, "sign in first", 401)
        return StreamingResponse(
            self._changes(request, signed.person, signed.id_hash),
            media_type="text/event-stream",
            headers=self.headers(),
        )

    async def _changes(
        self, request: Request, person: Person, session_hash: str | None = None
    ) -> AsyncIterator[str]:
        # Woken by the engine's notifier when a request is created here or closes here or on
        # another replica; the heartbeat keeps proxies from closing an idle stream and
        # re-reads the list, which also catches a request created on another replica.
        # A busy server changes many times a second: one stream reads at most once per
        # `min_interval`, and what changed meanwhile is in that read. Each read first asks
        # whether the session still lasts: signed out (here, in another tab, by the
        # operator), the stream says so and ends.
        notifier, loop = self.notifier, asyncio.get_running_loop()
        change = notifier.changes()  # before each read, so a change during it is not missed
        seen, read_at = await self._waiting_ids(person), loop.time()
        yield "retry: 5000\n\n"
        while not await request.is_disconnected():
            done, _ = await asyncio.wait({change}, timeout=self.heartbeat)
            if not done:
                yield ": heartbeat\n\n"
            elif (wait := read_at + self.min_interval - loop.time()) > 0:
                await self.pause(wait)
            change = notifier.changes()
            if session_hash is not None and not await self.sessions.alive(session_hash):
                yield "event: signed-out\ndata: {}\n\n"
                return
            now, read_at = await self._waiting_ids(person), loop.time()
            if now != seen:
                yield f"event: changed\ndata: {json.dumps({'waiting': len(now)})}\n\n"
            seen = now

    async def _waiting_ids(self, person: Person) -> tuple[str, ...]:
        mine, elsewhere = await self.waiting(person)
        return tuple(r.id for r in [*mine, *elsewhere])


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
    app = Starlette(
        routes=[
            Route("/", inbox.home, methods=["GET"]),
            Route("/login", inbox.login, methods=["GET"]),
            Route("/callback", inbox.callback, methods=["GET"]),
            Route("/logout", inbox.logout, methods=["POST"]),
            Route("/history", inbox.history, methods=["GET"]),
            Route("/events", inbox.events, methods=["GET"]),
            Route("/approvals/{approval_id}", inbox.trail, methods=["GET"]),
            Route("/approvals/{approval_id}/answer", inbox.answer, methods=["POST"]),
            Route("/approvals/{approval_id}/edit", inbox.edit, methods=["GET"]),
            Route("/approvals/{approval_id}/edit", inbox.review, methods=["POST"]),
            Route("/approvals/{approval_id}/edit/approve", inbox.approve_edited, methods=["POST"]),
            Route("/denials/{denial_id}/lift", inbox.lift, methods=["POST"]),
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
