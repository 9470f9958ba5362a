"""Who may answer an approval, and where: the checks every answer passes before it is judged.

Each is a pure function of the approval as loaded and the answer (or look) as the surface
handed it in; a refusal is raised as the `CosignerError` that says why. The step that closes
runs them on the approval as loaded in its transaction (`bot.approvals.lifecycle.close`, a
`Closing.check`) and hands what they refused to `bot.approvals.judging.judge`; reading the
whole call (`check_reader`) and the batch and inbox pre-checks run the same ones.
"""

from __future__ import annotations

from bot.approvals.judging import HANDOFF_VERDICTS
from contracts.enums import ApprovalMode, Verdict
from contracts.errors import (
    ApprovalModeUnsupported,
    CosignerError,
    InvalidRequest,
    NotAnApprover,
    WrongConversation,
    WrongTenant,
)
from contracts.ports import (
    Answer,
    DashboardRoute,
    Delivered,
    Look,
    Route,
    SlackRoute,
    SmsRoute,
    TeamsRoute,
)
from storage.records import Record


def check_answer(rec: Record, a: Answer) -> None:
    """Tenant, conversation, app, message, approver (and Slack Connect) — in that order; then
    what the surface found wrong with the message that carried the answer."""
    check_reader(rec, a)
    if a.mismatch is not None:
        raise WrongConversation(
            f"this answer does not come from a message of approval {rec.id}: {a.mismatch}"
        )
    check_shown(rec, a)
    check_verdict(rec, a.verdict)


APPROVING = frozenset({Verdict.APPROVE, Verdict.APPROVE_FOR_RUN, Verdict.ALLOW_FOR})


def check_shown(rec: Record, a: Answer) -> None:
    """A call the surface could not show this person whole is not approvable there; a Deny
    still counts (it runs nothing)."""
    if a.unshown is not None and a.verdict in APPROVING:
        raise ApprovalModeUnsupported(
            f"approval {rec.id} cannot be approved on {a.surface}: {a.unshown}; nothing unseen "
            "is approved. Read it whole where it can be shown; a deny still counts here"
        )


def check_reader(rec: Record, a: Answer | Look) -> None:
    """Who may answer may also read the whole call: the checks of `check_answer` but the verdict.

    Once the request was escalated, the approvers of each route it was escalated to may
    answer where it was delivered to them (and only there), as if it had been asked there."""
    places = [(rec.route, rec.delivered), *((e.route, e.delivered) for e in rec.escalated)]
    refusals: list[tuple[bool, CosignerError]] = []
    for route, got in places:
        try:
            check_at(rec.id, route, got, a)
        except CosignerError as exc:
            refusals.append((_shown_there(route, got, a), exc))
            continue
        return
    # The refusal of the card or text the answer came from says why; else the request's own.
    raise next((exc for there, exc in refusals if there), refusals[0][1])


def _shown_there(route: Route | None, got: Delivered | None, a: Answer | Look) -> bool:
    """Whether the answer came from where this route's card or text was shown."""
    if route is None or got is None or route.surface != a.surface or a.conversation != got.conversation:
        return False
    return not isinstance(route, SlackRoute | TeamsRoute) or a.message_ref in got.message_refs


def check_at(approval_id: str, route: Route | None, got: Delivered | None, a: Answer | Look) -> None:
    """The checks of one place the request was delivered to: its route and its receipt."""
    if route is None or route.surface != a.surface:
        where = route.surface if route else "nobody"
        raise WrongConversation(f"approval {approval_id} was delivered to {where}, not {a.surface}")
    if isinstance(route, SlackRoute):
        orgs = {route.team_id, route.enterprise_id} - {None}
    elif isinstance(route, SmsRoute):
        orgs = {route.from_number, route.messaging_service_sid} - {None}
    elif isinstance(route, TeamsRoute):
        orgs = {route.tenant_id}
    else:
        orgs = set()
    if a.org not in orgs and (a.enterprise_id is None or a.enterprise_id not in orgs):
        raise WrongTenant(
            f"this answer came from {a.org}, which is not where approval {approval_id} was delivered"
        )
    if got is None:
        raise WrongConversation(f"approval {approval_id} has not been delivered yet")
    if got.app_id and a.app_id != got.app_id:
        raise WrongConversation(
            f"this answer came through another {route.surface} app, not the one that showed it"
        )
    if a.conversation != got.conversation:
        raise WrongConversation(f"approval {approval_id} was not posted in this conversation")
    if isinstance(route, SlackRoute | TeamsRoute) and a.message_ref not in got.message_refs:
        raise WrongConversation(f"this message is not the card of approval {approval_id}")
    if isinstance(route, SlackRoute):
        clicker_belongs(route, a)
    if a.actor not in route.approvers:
        raise NotAnApprover(f"{a.actor} is not an approver of approval {approval_id}")


def check_verdict(rec: Record, verdict: Verdict) -> None:
    """A handoff is done or cancelled, never approved or denied; an approval the reverse."""
    if rec.mode is ApprovalMode.HANDOFF and verdict not in HANDOFF_VERDICTS:
        raise InvalidRequest(
            f"approval {rec.id} is a handoff: answer done or cancel (by SMS: DONE or NO); "
            "a handoff is never approved or denied"
        )
    if rec.mode is not ApprovalMode.HANDOFF and verdict in HANDOFF_VERDICTS:
        raise InvalidRequest(f"approval {rec.id} is not a handoff: answer approve or deny")
    if verdict is Verdict.APPROVE_FOR_RUN and rec.mode is not ApprovalMode.ASK:
        raise InvalidRequest("approve for this run is offered only for tools in mode ask")
    if verdict is Verdict.APPROVE_FOR_RUN and rec.quorum > 1:
        # One person's "for this run" would let later calls through without the quorum.
        raise InvalidRequest(
            f"approve for this run is not offered when {rec.quorum} approvers must approve; answer approve"
        )


def clicker_belongs(route: SlackRoute, a: Answer | Look) -> None:
    """Slack Connect: the clicker's own workspace or org (`user.team_id`) must be the route's.

    The installation's org (`team.enterprise_id`, `enterprise.id`) says where the card
    lives, not who clicked: Slack sends it with every click on that org's cards, including
    clicks by people of another organization in a shared channel.
    """
    if a.actor_org is None:
        raise NotAnApprover("Slack did not say which workspace the clicker belongs to (user.team_id)")
    if a.actor_org in route.approver_teams:
        return
    fix = ""
    if a.actor_org.startswith("E"):
        # On Enterprise Grid, Slack sends the org id as `user.team_id`.
        fix = f"; if {a.actor_org} is this tenant's own Enterprise Grid org, set slack_enterprise for it"
    raise NotAnApprover(
        f"people from workspace {a.actor_org} cannot approve requests of this tenant (Slack Connect){fix}"
    )


def check_dashboard(rec: Record, user_id: str) -> None:
    """A dashboard decision must be for a dashboard request, from one of its approvers (or
    one escalated to the dashboard, from an approver of that step)."""
    for e in rec.escalated:
        if isinstance(e.route, DashboardRoute) and user_id in e.route.approvers:
            return
    if rec.route is None or not isinstance(rec.route, DashboardRoute):
        where = rec.route.surface if rec.route else "nobody (decided by policy)"
        raise WrongConversation(
            f"approval {rec.id} was delivered to {where}; only dashboard "
            "requests are decided through this endpoint"
        )
    if user_id not in rec.route.approvers:
        raise NotAnApprover(f"user {user_id} is not an approver of {rec.id}")
