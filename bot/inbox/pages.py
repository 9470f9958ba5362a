"""The inbox's pages: sign-in, Waiting (with what an answer just did), one request with its
timeline and its answer form, and History with its filters."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from bot.inbox import items, step_up
from bot.inbox.core import InboxBase, answers_here, not_configured_message
from bot.inbox.people import Person, SignInRefused, tenants_of
from bot.inbox.timeline import timeline
from contracts.enums import ApprovalStatus, SurfaceType
from contracts.errors import CosignerError
from storage import inbox as listing
from storage.records import Record

log = logging.getLogger("cosigner.inbox")
OUTCOMES = [s.value for s in ApprovalStatus if s is not ApprovalStatus.PENDING]
FILTER_MAX = 200  # characters of a tool or person filter


class FilterRefused(ValueError):
    """A History filter that cannot be read; the message names the fix."""


@dataclass(frozen=True)
class Filters:
    """History's filters, as its form sends them."""

    tool: str = ""
    person: str = ""
    status: str = ""
    since: str = ""
    until: str = ""

    @classmethod
    def read(cls, q: QueryParams) -> Filters:
        """The query's filters; `FilterRefused` names the one that cannot be read."""
        f = cls(*(q.get(k, "").strip()[:FILTER_MAX] for k in ("tool", "person", "status", "since", "until")))
        if f.status not in {"", *OUTCOMES}:
            raise FilterRefused(f"unknown outcome {f.status!r}; pick one of {', '.join(OUTCOMES)}")
        for name in ("since", "until"):
            day = getattr(f, name)
            if day and _day(day) is None:
                raise FilterRefused(f"the {name} date must read YYYY-MM-DD, e.g. 2026-12-01 (it is {day!r})")
        since, until = _day(f.since), _day(f.until)
        if since is not None and until is not None and until < since:
            raise FilterRefused(f"the until date ({f.until}) is before the since date ({f.since})")
        return f

    def bounds(self) -> tuple[float | None, float | None]:
        """Since the start of `since` up to the end of `until`, as timestamps."""
        since, until = _day(self.since), _day(self.until)
        return (
            since.timestamp() if since is not None else None,
            (until + timedelta(days=1)).timestamp() if until is not None else None,
        )


def _day(text: str) -> datetime | None:
    try:
        return datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=UTC) if text else None
    except ValueError:
        return None


class Pages(InboxBase):
    """The pages a person reads."""

    async def login(self, request: Request) -> Response:
        """Off, or off to the issuer."""
        if self.signin is None:
            return self.page(request, "off.html", 503, message=not_configured_message())
        back_to = f"{self.settings.public_url.rstrip('/')}/inbox/callback"
        try:
            return await self.signin.redirect(request, back_to)
        except SignInRefused as exc:
            return self.refused(request, None, f"Sign-in is unavailable: {exc}", 502)

    async def callback(self, request: Request) -> Response:
        """Back from the issuer: a session, or why not."""
        if self.signin is None:
            return self.page(request, "off.html", 503, message=not_configured_message())
        try:
            person = await self.signin.finish(request)
        except SignInRefused as exc:
            log.warning("inbox sign-in refused", extra={"code": type(exc.__cause__).__name__})
            return self.refused(request, None, f"Sign-in refused: {exc}", 401)
        back = step_up.after_signin(request.session.get(step_up.AFTER_SIGNIN))
        await self.sessions.start(request, person)
        return RedirectResponse(back, status_code=303)

    async def home(self, request: Request) -> Response:
        """Waiting: what this person may answer here, and what waits for them elsewhere."""
        if self.signin is None:
            return self.page(request, "off.html", 200, message=not_configured_message())
        person = await self.who(request)
        if person is None:
            return self.page(request, "signin.html", 200, issuer=self.signin.display_name)
        mine, elsewhere = await self.waiting(person)
        done = await self.answered(person, request.query_params.get("answered", ""))
        return self.page(
            request,
            "inbox.html",
            person=person,
            tenants=tenants_of(self.policy, person),
            waiting_count=len(mine) + len(elsewhere),
            done=done,
            mine=[self.item(r, person=person) for r in mine],
            elsewhere=[self.item(r, await self.link(r), person) for r in elsewhere],
        )

    async def answered(self, person: Person, approval_id: str) -> dict[str, str] | None:
        """What the person's answer to `approval_id` did, for the page they are sent back to."""
        if not approval_id:
            return None
        try:
            rec = await self.visible(person, approval_id[:100])
        except CosignerError:
            return None
        return {"id": rec.id, "said": items.confirmation(rec, person), "status": rec.status.value}

    async def detail(self, request: Request) -> Response:
        """One request: the call, its answer form when the person may answer it, the timeline."""
        person = await self.who(request)
        if person is None:
            return RedirectResponse("/inbox/", status_code=303)
        aid = request.path_params["approval_id"]
        try:
            rec = await self.visible(person, aid)
        except CosignerError as exc:
            return self.refused(request, person, str(exc), exc.status)
        rows = await self.engine.audit_trail(rec.tenant, aid)
        item = self.item(rec, await self.link(rec) if rec.route is not None else None, person)
        return self.page(
            request,
            "detail.html",
            person=person,
            item=item,
            answerable=answerable(person, rec) and not item["you_approved"],
            done=await self.answered(person, request.query_params.get("answered", "")),
            events=timeline(rows),
            waiting_count=await self.waiting_count(person),
        )

    async def history(self, request: Request) -> Response:
        """Decided requests of the person's tenants, filtered, and the standing denies."""
        person = await self.who(request)
        if person is None:
            return RedirectResponse("/inbox/", status_code=303)
        try:
            filters = Filters.read(request.query_params)
        except FilterRefused as exc:
            return self.refused(request, person, str(exc), 400)
        tenants = tenants_of(self.policy, person)
        since, until = filters.bounds()
        recs = await self.db.run_read(
            lambda tx: listing.listed(
                tx,
                tenants,
                pending=False,
                tool=filters.tool or None,
                status=filters.status or None,
                since=since,
                until=until,
                decided_by=filters.person or None,
            )
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
            filters=filters,
            filtered=any(vars(filters).values()),
            statuses=OUTCOMES,
            denials=denials,
            waiting_count=await self.waiting_count(person),
        )


def answerable(person: Person, rec: Record) -> bool:
    """True if the detail page offers this person the answer form: a pending request asked on
    the dashboard that names them (the answer's own checks still decide)."""
    return not rec.closed and answers_here(person, rec)
