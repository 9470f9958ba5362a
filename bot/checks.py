"""The checks a request or an answer must pass, and the refusals for closed approvals."""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Mapping
from typing import Any

from bot.egress import AllowList, EgressRefused, check_url
from bot.policy import Policy
from bot.redaction import measure
from contracts.digest import CanonicalFormError, canonical_json
from contracts.enums import ApprovalMode, ApprovalStatus, Verdict
from contracts.errors import (
    AlreadyDecided,
    ApprovalExpired,
    CosignerError,
    InvalidRequest,
    NotAnApprover,
    WrongConversation,
    WrongTenant,
)
from contracts.ports import Answer, SlackRoute, SmsRoute
from storage.records import Record

MAX_PARAMETER_BYTES = 64 * 1024
MAX_PARAMETER_DEPTH = 20


def closed_error(rec: Record) -> CosignerError:
    """The refusal for an answer that reached a closed approval, naming its state."""
    if rec.status is ApprovalStatus.EXPIRED:
        return ApprovalExpired(
            f"approval {rec.id} expired; expiry means deny and nothing "
            "was done. Ask the agent to request it again.",
            status="expired",
        )
    return AlreadyDecided(
        f"approval {rec.id} is already {rec.status.value}; a closed request never changes.",
        status=rec.status.value,
    )


def check_answer(rec: Record, a: Answer) -> None:
    """Tenant, conversation, app, message, approver (and Slack Connect) — in that order."""
    route, got = rec.route, rec.delivered
    if route is None or route.surface != a.surface:
        where = route.surface if route else "nobody"
        raise WrongConversation(f"approval {rec.id} was delivered to {where}, not {a.surface}")
    if isinstance(route, SlackRoute):
        orgs = {route.team_id, route.enterprise_id} - {None}
    elif isinstance(route, SmsRoute):
        orgs = {route.from_number, route.messaging_service_sid} - {None}
    else:
        orgs = set()
    if a.org not in orgs and (a.enterprise_id is None or a.enterprise_id not in orgs):
        raise WrongTenant(
            f"this answer came from {a.org}, which is not where approval {rec.id} was delivered"
        )
    if got is None:
        raise WrongConversation(f"approval {rec.id} has not been delivered yet")
    if got.app_id and a.app_id != got.app_id:
        raise WrongConversation("this answer came through another Slack app")
    if a.conversation != got.conversation:
        raise WrongConversation(f"approval {rec.id} was not posted in this conversation")
    if isinstance(route, SlackRoute) and a.message_ref not in got.message_refs:
        raise WrongConversation(f"this message is not the card of approval {rec.id}")
    if isinstance(route, SlackRoute):
        clicker_belongs(route, a)
    if a.actor not in route.approvers:
        raise NotAnApprover(f"{a.actor} is not an approver of approval {rec.id}")
    if a.verdict is Verdict.APPROVE_FOR_RUN and rec.mode is not ApprovalMode.ASK:
        raise InvalidRequest("approve for this run is offered only for tools in mode ask")


def clicker_belongs(route: SlackRoute, a: Answer) -> None:
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
    """A dashboard decision must be for a dashboard request, from one of its approvers."""
    if rec.route is None or rec.route.surface != "dashboard":
        where = rec.route.surface if rec.route else "nobody (decided by policy)"
        raise WrongConversation(
            f"approval {rec.id} was delivered to {where}; only dashboard "
            "requests are decided through this endpoint"
        )
    if user_id not in rec.route.approvers:
        raise NotAnApprover(f"user {user_id} is not an approver of {rec.id}")


def lookup(parameters: Mapping[str, Any], path: str) -> Any:
    """The value at a dotted path, or None."""
    value: Any = parameters
    for part in path.split("."):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def ambiguous(parameters: Mapping[str, Any], path: str) -> bool:
    """True if a level of `path` has keys equal to its segment but for case or width
    (`amountCents` beside `AmountCents`): an executor might read the other one, so no
    threshold may approve on it."""
    value: Any = parameters
    for part in path.split("."):
        if not isinstance(value, Mapping):
            return False
        wanted = unicodedata.normalize("NFKC", part).casefold()
        if sum(1 for k in value if unicodedata.normalize("NFKC", str(k)).casefold() == wanted) > 1:
            return True
        value = value.get(part)
    return False


def json_limits(parameters: Any, field: str = "parameters") -> None:
    """Refuse JSON nested deeper than 20 levels, over 64 KiB, or without an RFC 8785 form
    (NaN, Infinity, integers beyond ±(2^53−1)): the digest is computed over that form."""
    if measure(parameters, MAX_PARAMETER_DEPTH) > MAX_PARAMETER_DEPTH:
        raise InvalidRequest(
            f"{field} nest deeper than {MAX_PARAMETER_DEPTH} levels; flatten them", field=field
        )
    # The JCS writer is pure Python and ten times slower than json.dumps: bound the work with
    # a C-speed estimate first, far enough above the limit never to refuse what JCS would take.
    rough = len(
        json.dumps(parameters, separators=(",", ":"), ensure_ascii=False).encode(errors="surrogatepass")
    )
    if rough > 2 * MAX_PARAMETER_BYTES:
        raise InvalidRequest(f"{field} are {rough} bytes; the limit is {MAX_PARAMETER_BYTES}", field=field)
    try:
        size = len(canonical_json(parameters, field))
    except CanonicalFormError as exc:
        raise InvalidRequest(str(exc), field=exc.path) from exc
    if size > MAX_PARAMETER_BYTES:
        raise InvalidRequest(f"{field} are {size} bytes; the limit is {MAX_PARAMETER_BYTES}", field=field)


def surface_belongs(policy: Policy, tenant: str, surface: Any) -> None:
    """A Slack surface must name the tenant's own workspace (and org, if any)."""
    if surface.type != "slack":
        return
    tpol = policy.tenant(tenant)
    # The enterprise id is not decoration: the route accepts clicks from every workspace
    # of that org and may post with its org-wide install. So it must be this tenant's
    # own org, even when the team id alone would pass.
    if surface.enterpriseId is not None and surface.enterpriseId != tpol.slack_enterprise:
        raise WrongTenant(
            f"surface.enterpriseId {surface.enterpriseId} is not the Slack "
            f"org of tenant {tenant}; omit it, or set slack_enterprise in "
            f"[tenants.{tenant}]",
            field="surface.enterpriseId",
        )
    mine = {t for t in (tpol.slack_team, tpol.slack_enterprise) if t}
    if surface.teamId not in mine and (surface.enterpriseId or "") not in mine:
        raise WrongTenant(
            f"surface.teamId {surface.teamId} is not a Slack workspace of "
            f"tenant {tenant}; set slack_team (or slack_enterprise) in "
            f"[tenants.{tenant}]",
            field="surface.teamId",
        )


def callback_allowed(url: str, allow: AllowList) -> None:
    """Refuse a `callbackUrl` with a scheme or literal address the egress rules refuse."""
    try:
        check_url(url, allow)
    except EgressRefused as exc:
        raise InvalidRequest(str(exc), field="callbackUrl") from exc
