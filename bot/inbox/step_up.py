"""Step-up: an approver confirms the Approve of a `step_up` request with a passkey
(`/inbox/approvals/{id}/step-up`).

The page shows the call as every surface does. Its script asks for a challenge, which this
server makes for this person, this approval and the digest of the call the page showed, and
keeps until it is used once (`storage.passkeys`); the browser's passkey signs it with user
verification. The answer is checked in that order: the challenge was handed to this person,
for this approval (a signature for one call never approves another), the passkey is theirs
and still registered, the assertion verifies with its UV flag set and a counter that moved
on. Only then is the Approve put to the engine, with the digest bound to the challenge as
the call answered (`Closing.seen`) and the passkey on the closing (`Closing.passkey`), which
`bot.approvals.lifecycle` requires of every Approve of a step-up approval. The audit records
who signed in, and the credential id and UV flag of the passkey.

Requests asked in Slack, Teams or by text link here; whoever the request's route (or an
escalation's) names may confirm, matched by the ids their sign-in vouched for: the Slack
user in the request's workspace, the verified phone, the dashboard ids, and any id the
policy's `[people]` ties to them.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

from bot.approvals import Closing, Engine
from bot.approvals.judging import Passkeyed
from bot.inbox import session
from bot.inbox.answering import both, signed_in_event
from bot.inbox.passkeys import (
    CHALLENGE_SECONDS,
    PasskeyRefused,
    RelyingParty,
    authentication_options,
    challenge_of,
    check_assertion,
    person_key,
    read_json,
    refusal,
)
from bot.inbox.people import Person, tenants_of
from bot.policy.people import People
from contracts.answers import PersonDecider
from contracts.audit_events import PasskeyConfirmed, written
from contracts.enums import ApprovalStatus, AuditEvent, ErrorCode, SurfaceType
from contracts.errors import ApprovalNotFound, CosignerError, NotAnApprover, StepUpRequired
from contracts.ports import DashboardRoute, Route, SlackRoute, SmsRoute
from storage import ledger
from storage import passkeys as stored
from storage.audit import Event
from storage.database import Database
from storage.records import Record
from storage.work import Work

if TYPE_CHECKING:
    from bot.inbox.site import Inbox

log = logging.getLogger("cosigner.inbox")
AFTER_SIGNIN = "after_signin"  # the session key of the inbox page to return to after sign-in


def after_signin(value: object) -> str:
    """Where a sign-in returns to: the inbox page kept before it, else the inbox."""
    if isinstance(value, str) and value.startswith("/inbox/") and "//" not in value and "\\" not in value:
        return value
    return "/inbox/"


def named_on(route: Route, person: Person, people: People, member: bool) -> str | None:
    """The id by which `route` names this person as an approver, or None (a dashboard route
    only for a `member` of the request's tenant: an agent names its dashboard user freely)."""
    if isinstance(route, SlackRoute):
        if person.slack_user in route.approvers and person.slack_team in {
            route.team_id,
            *route.approver_teams,
        }:
            return person.slack_user
    elif isinstance(route, SmsRoute):
        number = person.phone if route.surface is SurfaceType.SMS else f"whatsapp:{person.phone}"
        if person.phone is not None and number in route.approvers:
            return number
    elif isinstance(route, DashboardRoute) and member:
        found = next((i for i in person.ids if i in route.approvers), None)
        if found is not None:
            return found
    # Teams names people by their Entra object id, which no sign-in here vouches for: only
    # the policy's `[people]` ties it (or any other id) to the person who signed in.
    vouched = person.vouched
    return next((a for a in route.approvers if vouched and people.same((a,), vouched)), None)


def approver_id(rec: Record, person: Person, people: People, tenants: Collection[str]) -> str | None:
    """The id by which the request (its route, or a route it was escalated to) names this
    person as an approver, or None: they may not answer it (`tenants`: the person's)."""
    routes = [rec.route, *(e.route for e in rec.escalated)]
    member = rec.tenant in tenants
    return next(
        (i for r in routes if r is not None and (i := named_on(r, person, people, member)) is not None), None
    )


def confirmed_event(credential_id: str, user_verified: bool) -> Callable[[Work, Record, float], list[Event]]:
    """The closing step that records the passkey that confirmed the Approve."""

    def step(tx: Work, rec: Record, now: float) -> list[Event]:
        data = PasskeyConfirmed(credentialId=credential_id, userVerified=user_verified)
        return [Event(AuditEvent.PASSKEY_CONFIRMED, {"kind": "passkey"}, written(data))]

    return step


class StepUp:
    """The step-up page and its two posts, over the inbox, the engine and the database."""

    def __init__(
        self,
        inbox: Inbox,
        engine: Engine,
        db: Database,
        rp: RelyingParty,
        people: People,
        clock: Callable[[], float],
    ) -> None:
        self.inbox, self.engine, self.db, self.rp = inbox, engine, db, rp
        self.people, self.clock = people, clock

    def tenants(self, person: Person) -> set[str]:
        """The tenants whose policy names this person now."""
        return set(tenants_of(self.inbox.policy, person))

    async def load(self, approval_id: str, person: Person) -> tuple[Record, str]:
        """The step-up request this person may confirm, with the id it names them by."""
        rec = await self.db.run_read(lambda tx: ledger.load(tx, approval_id))
        if rec is None:
            raise ApprovalNotFound(f"approval {approval_id} does not exist")
        user = approver_id(rec, person, self.people, self.tenants(person))
        if user is None:
            raise ApprovalNotFound(f"approval {approval_id} does not exist")  # nothing said to others
        if not rec.step_up:
            raise StepUpRequired(
                f"approval {rec.id} does not ask for a passkey: answer it where it was asked",
                approvalId=rec.id,
            )
        return rec, user

    async def page(self, request: Request) -> Response:
        person = await self.inbox.who(request)
        aid = request.path_params["approval_id"]
        if person is None:
            # Back here once signed in: the link from Slack, Teams or a text lands on sign-in.
            request.session[AFTER_SIGNIN] = f"/inbox/approvals/{aid}/step-up"
            return RedirectResponse("/inbox/", status_code=303)
        try:
            rec, _ = await self.load(aid, person)
        except CosignerError as exc:
            return self.inbox.refused(request, person, str(exc), exc.status)
        held = await self.db.run_read(lambda tx: stored.of(tx, person_key(person)))
        return self.inbox.page(
            request,
            "step_up.html",
            person=person,
            item=self.inbox.item(rec, person=person),
            has_passkey=bool(held),
            deny_here=isinstance(rec.route, DashboardRoute),
        )

    async def options(self, request: Request) -> Response:
        """Assertion options, the challenge bound to this approval and the call the page showed."""
        signed = await self.inbox.signed_form(request)
        if isinstance(signed, Response):
            return refusal("sign in again and reload the page", 401, ErrorCode.UNAUTHENTICATED)
        person, form = signed
        try:
            rec, _ = await self.load(request.path_params["approval_id"], person)
        except CosignerError as exc:
            return refusal(exc.message, exc.status, ErrorCode(exc.code))
        if rec.closed:
            return refusal(f"approval {rec.id} is already {rec.status.value}", 409, ErrorCode.ALREADY_DECIDED)
        shown = str(form.get("digest", ""))[:200]
        if shown not in (rec.call_tag, rec.call_digest):
            return refusal(
                "the call changed since this page was shown; reload it", 409, ErrorCode.PARAMETERS_MISMATCH
            )
        held = await self.db.run_read(lambda tx: stored.of(tx, person_key(person)))
        if not held:
            return refusal("add a passkey first, at /inbox/passkeys", 403, ErrorCode.STEP_UP_REQUIRED)
        challenge, options = authentication_options(self.rp, held)
        now = self.clock()
        hand = stored.Challenge(challenge, person_key(person), now + CHALLENGE_SECONDS, rec.id, shown)
        await self.db.run_write(lambda tx: stored.hand_out(tx, hand, now))
        return Response(options, media_type="application/json", headers=self.inbox.headers())

    async def answer(self, request: Request) -> Response:
        """Check the assertion, then put the Approve to the engine with the passkey on it."""
        person = await self.inbox.who(request)
        if person is None:
            return refusal("sign in first", 401, ErrorCode.UNAUTHENTICATED)
        aid = request.path_params["approval_id"]
        try:
            body = await read_json(request)
            if not session.csrf_ok(request, body.get("csrf")):
                return refusal("this page has expired; reload it and try again", 403)
            proof = await self.verified(person, aid, body["credential"])
        except PasskeyRefused as exc:
            log.info("step-up refused", extra={"approval_id": aid})
            return refusal(str(exc), 403, ErrorCode.STEP_UP_REQUIRED)
        key, digest, user_verified = proof
        comment = str(body.get("comment") or "").strip()[:2000] or None
        try:
            await self.close(person, aid, key.credential_id, user_verified, digest, comment)
        except CosignerError as exc:
            return refusal(exc.message, exc.status, ErrorCode(exc.code))
        return JSONResponse({"ok": True, "redirect": "/inbox/"}, headers=self.inbox.headers())

    async def verified(
        self, person: Person, approval_id: str, credential: object
    ) -> tuple[stored.Passkey, str, bool]:
        """The passkey, the call's digest the challenge was bound to and the UV flag, once the
        challenge, the passkey and the assertion check out; `PasskeyRefused` says which did not."""
        if not isinstance(credential, dict):
            raise PasskeyRefused("the browser's answer is not a credential")
        said, who, now = challenge_of(credential), person_key(person), self.clock()
        handed = await self.db.run_write(lambda tx: stored.take(tx, said, who, now))
        if handed is None or handed.approval_id is None:
            raise PasskeyRefused(
                "this signature's challenge was not handed to you, was used already or expired"
            )
        if handed.approval_id != approval_id or handed.digest is None:
            raise PasskeyRefused(
                f"this signature was made for approval {handed.approval_id}, not {approval_id}: "
                "a passkey confirms only the call it was shown"
            )
        cid = str(credential.get("id") or credential.get("rawId") or "")
        key = await self.db.run_read(lambda tx: stored.find(tx, who, cid))
        if key is None:
            raise PasskeyRefused("this passkey is not one of yours (removed, or never added): add it again")
        count, user_verified = check_assertion(self.rp, credential, handed, key)
        if not user_verified:
            raise PasskeyRefused(
                "the passkey did not verify you (user verification); unlock it and try again"
            )
        if not await self.db.run_write(lambda tx: stored.used(tx, key, count, now)):
            raise PasskeyRefused("this passkey was used at the same time elsewhere; try again")
        return key, handed.digest, user_verified

    async def close(
        self,
        person: Person,
        approval_id: str,
        cid: str,
        user_verified: bool,
        digest: str,
        comment: str | None,
    ) -> Record:
        rec = await self.db.run_read(lambda tx: ledger.load(tx, approval_id))
        if rec is None:
            raise ApprovalNotFound(f"approval {approval_id} does not exist")
        tenants = self.tenants(person)
        user = approver_id(rec, person, self.people, tenants)
        if user is None:
            raise ApprovalNotFound(f"approval {approval_id} does not exist")
        decider = PersonDecider(surface=SurfaceType.DASHBOARD, userId=user, teamId=person.slack_team)
        people = self.people

        def check(r: Record) -> None:
            if approver_id(r, person, people, tenants) is None:
                raise NotAnApprover(f"{user} is no longer an approver of {r.id}")
            if not r.step_up:
                raise StepUpRequired(f"approval {r.id} does not ask for a passkey", approvalId=r.id)

        closing = Closing(
            ApprovalStatus.APPROVED,
            decider,
            comment=comment,
            tenant=rec.tenant,
            check=check,
            audit_refusal=True,
            also=both(signed_in_event(person, decider), confirmed_event(cid, user_verified)),
            seen=digest,
            ids=person.vouched,
            passkey=Passkeyed(cid, user_verified),
        )
        return await self.engine.close(approval_id, closing)
