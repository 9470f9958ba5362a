"""Answer several waiting requests at once in the inbox: the selection form's answer.

The form posts each selected request as `pick=<approval id>|<digest of the call as shown>`
with one decision for all (approve or deny). The whole selection is checked first, each
request exactly as its own Approve or Deny would be (tenant, approver, the call's digest,
separation of duties, a quorum's count); if any of them would be refused, nothing is decided
and the page says which and why (`409 PARAMETERS_MISMATCH` when a call changed since it was
shown). Then each request is answered on its own, through the one answer path: its own
decision, grant and audit events.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from bot.approvals import judging, lifecycle
from bot.inbox import answering
from bot.inbox.people import Person, tenants_of
from contracts.enums import Verdict
from contracts.errors import ApprovalNotFound, CosignerError, InvalidRequest
from storage import ledger
from storage.records import Record

if TYPE_CHECKING:
    from bot.inbox.site import Inbox

MAX_SELECTED = 50
SELECTION_VERDICTS = {"approve": Verdict.APPROVE, "deny": Verdict.DENY}
PICK_SEPARATOR = "|"


def picks_of(values: list[str]) -> list[tuple[str, str]]:
    """The (approval id, digest) pairs a selection form posted; `InvalidRequest` naming the fix."""
    if not values:
        raise InvalidRequest("select at least one request, then press Approve selected or Deny selected")
    if len(values) > MAX_SELECTED:
        raise InvalidRequest(f"select at most {MAX_SELECTED} requests at once")
    picks: list[tuple[str, str]] = []
    for value in values:
        approval_id, sep, digest = value.partition(PICK_SEPARATOR)
        if not sep or not approval_id or not digest.startswith("sha256:"):
            raise InvalidRequest("a selected request is malformed; reload the page and select again")
        picks.append((approval_id, digest))
    if len({a for a, _ in picks}) != len(picks):
        raise InvalidRequest("a request is selected twice; reload the page and select again")
    return picks


async def answer_selected(
    inbox: Inbox, person: Person, picks: list[tuple[str, str]], verdict: Verdict, comment: str | None
) -> list[Record]:
    """Check every selected request first, then answer each; the records after."""
    tenants = set(tenants_of(inbox.policy, person))
    ids = [a for a, _ in picks]
    loaded = await inbox.db.run_read(lambda tx: [ledger.load(tx, a) for a in ids])
    now, people = inbox.clock(), inbox.policy.people
    for (approval_id, digest), rec in zip(picks, loaded, strict=True):
        if rec is None or rec.tenant not in tenants:
            raise ApprovalNotFound(f"approval {approval_id} does not exist; nothing was decided")
        closing = answering.closing_of(rec, person, verdict, comment, digest)
        effect = judging.judge(rec, closing.asked, now, people, checked=lifecycle.checked(closing.check, rec))
        refusal = effect.error if isinstance(effect, judging.Refused) else None
        if isinstance(effect, judging.Transition) and effect.refusal is not None:
            refusal = effect.refusal
        if refusal is not None:
            raise type(refusal)(
                f"nothing was decided: {rec.tool_name} ({rec.id}) refuses this answer: {refusal.message}",
                **refusal.details,
            )
    done: list[Record] = []
    for (approval_id, digest), rec in zip(picks, loaded, strict=True):
        assert rec is not None  # checked above
        try:
            closing = answering.closing_of(rec, person, verdict, comment, digest)
            done.append(await inbox.engine.close(approval_id, closing))
        except CosignerError as exc:
            answered = ", ".join(r.id for r in done) or "none"
            raise type(exc)(
                f"{approval_id} changed while the selection was being answered: {exc.message}; "
                f"answered before it: {answered}",
                **exc.details,
            ) from exc
    return done


async def handle(inbox: Inbox, request: Request) -> Response:
    """`POST /inbox/answer-selected`: the selection form's answer."""
    signed = await inbox.signed_form(request)
    if isinstance(signed, Response):
        return signed
    person, form = signed
    verdict = SELECTION_VERDICTS.get(str(form.get("decision", "")))
    if verdict is None:
        return inbox.refused(request, person, "answer the selection with approve or deny", 400)
    comment = str(form.get("comment", "")).strip()[:2000] or None
    try:
        picks = picks_of([str(v) for v in form.getlist("pick")])
        await answer_selected(inbox, person, picks, verdict, comment)
    except CosignerError as exc:
        return inbox.refused(request, person, str(exc), exc.status)
    return RedirectResponse("/inbox/", status_code=303)
