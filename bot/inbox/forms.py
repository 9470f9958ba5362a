"""The inbox's forms: an answer (Approve, Deny, Always deny), an edit with its review step and
the edited call's approval, lifting a standing deny, and signing out.

Every form is checked by `InboxBase.signed_form` (a live session and the session's CSRF
token) and answered with a redirect (303) to the page that shows what it did.
"""

from __future__ import annotations

import contextlib
import json
from urllib.parse import quote

from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from bot.inbox import answering, session
from bot.inbox.core import InboxBase, seen_digest
from bot.inbox.editing import FIELD, TEXT_MAX, input_of, shown, starting_text
from bot.inbox.people import tenants_of
from contracts.allowances import choice_named
from contracts.edits import parse_input
from contracts.enums import ApprovalStatus, SurfaceType, Verdict
from contracts.errors import CosignerError, DenialNotFound, InvalidRequest
from cosigner.strict_json import read

FORM_VERDICTS = {v.value: v for v in answering.VERDICTS}
COMMENT_MAX = 2000


def back_to(form: FormData, approval_id: str) -> str:
    """Where an answer's page goes next: the request's own page when answered there, else
    Waiting; either says what the answer did."""
    aid = quote(approval_id, safe="")
    if form.get("from") == "detail":
        return f"/inbox/approvals/{aid}?answered={aid}"
    return f"/inbox/?answered={aid}"


def comment_of(form: FormData) -> str | None:
    """The form's comment, trimmed and cut to COMMENT_MAX characters; None when empty."""
    return str(form.get("comment", "")).strip()[:COMMENT_MAX] or None


class Forms(InboxBase):
    """The forms a signed-in person posts."""

    async def logout(self, request: Request) -> Response:
        """Sign out: the session ends here and in every other tab."""
        form = await self.read_form(request, None)
        if isinstance(form, Response):
            return form
        if not session.csrf_ok(request, form.get("csrf")):
            return self.refused(request, None, "This form has expired; reload the page and try again.", 403)
        await self.sessions.end(request)
        return RedirectResponse("/inbox/", status_code=303)

    async def answer(self, request: Request) -> Response:
        """Approve, Deny or Always deny, from Waiting or the request's page: one code path
        (`answering.answer`) with the dashboard's checks."""
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
        comment = comment_of(form)
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
        return RedirectResponse(back_to(form, request.path_params["approval_id"]), status_code=303)

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
        comment = comment_of(form)
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
        return RedirectResponse(back_to(form, request.path_params["approval_id"]), status_code=303)

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
