"""Where a request goes and who may answer it: from the policy, the tool rule and the surface.

Headless surfaces (api, schedule, batch, a web widget with a client token) cannot host a
person: they fail closed unless the tenant's `headless.route` names approvers who can be
reached. Everything that cannot be routed raises `ApprovalModeUnsupported` naming the rule
and the surface, before any row is written.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass

from bot.policy.email_approvers import emailed_route
from bot.policy.rules import Policy, TenantPolicy, ToolRule
from contracts.enums import ApproverKind, SurfaceType
from contracts.errors import ApprovalModeUnsupported
from contracts.ports import DashboardRoute, Route, SlackRoute, SmsRoute, TeamsRoute
from contracts.reach import Channel
from contracts.wire import (
    DashboardSurface,
    SlackSurface,
    SmsSurface,
    TeamsSurface,
    WebWidgetSurface,
    WhatsAppSurface,
)

HEADLESS = {SurfaceType.API, SurfaceType.SCHEDULE, SurfaceType.BATCH}
# Where a handoff's Done / Cancel can be shown and pressed. A Teams card and a WhatsApp
# template offer Approve / Deny only, so a handoff is never routed there: it goes to the
# next approver kind that can be reached, or is refused before any row is written.
HANDOFF_SURFACES = {SurfaceType.SLACK, SurfaceType.SMS, SurfaceType.DASHBOARD}


@dataclass(frozen=True)
class SmsSender:
    """The operator-wide sender, used when a tenant names none."""

    from_number: str | None = None
    messaging_service_sid: str | None = None
    whatsapp_from: str | None = None  # E.164; WhatsApp requests are sent from this number


def is_headless(surface: object) -> bool:
    """True for surfaces with no person who could answer."""
    kind = getattr(surface, "type", None)
    if isinstance(surface, WebWidgetSurface):
        return surface.tokenKind == "client"
    return kind in HEADLESS


def surface_label(surface: object) -> str:
    """`web_widget (client token)`, `schedule`…: how errors name a surface."""
    if isinstance(surface, WebWidgetSurface):
        return f"web_widget ({surface.tokenKind} token)"
    return str(getattr(surface, "type", "unknown"))


def route_for(
    policy: Policy,
    tenant: str,
    rule: ToolRule,
    surface: object,
    enabled: Collection[str],
    sms: SmsSender,
    oncall: Route | None = None,
) -> Route:
    """The one place this request is delivered, with its approver set; `oncall` is the route
    to the people on call (found by `bot.oncall`) of a rule that names a rotation."""
    tpol = policy.tenant(tenant)
    label = surface_label(surface)
    if oncall is not None and rule.oncall:
        return oncall  # headless runs too: the rotation names its people, not the run
    if is_headless(surface) and rule.oncall:
        # The rule names its people, whatever started the run: nobody on call reachable, its
        # other approvers but the requester (a headless run has none), else the admins.
        kinds: tuple[ApproverKind, ...] = tuple(k for k in rule.approvers if k is not ApproverKind.REQUESTER)
        kinds = kinds or (ApproverKind.TENANT_ADMINS,)
    elif is_headless(surface):
        if tpol.headless_route is None:
            raise ApprovalModeUnsupported(
                f"{rule.describe()} needs a person, and a {label} run cannot host one. "
                f'Add [tenants.{tenant}.headless] route = "tenant_admins" to route such runs '
                "to named approvers, or start the run from Slack, SMS or the dashboard.",
                policy=rule.source,
                surface=label,
                tool=rule.name,
            )
        kinds = (tpol.headless_route,)
    else:
        kinds = rule.approvers
    problems: list[str] = []
    for kind in kinds:
        route = _route_one(policy, tpol, kind, surface, enabled, sms, problems)
        if route is not None and rule.handoff is not None and route.surface not in HANDOFF_SURFACES:
            problems.append(
                f"{kind.value} would be asked on {route.surface}, where a handoff's Done and Cancel "
                "cannot be pressed yet (route handoffs to Slack, SMS or the dashboard)"
            )
            continue
        if route is not None:
            return _with_peers(policy, tpol, route, kinds, surface)
    raise ApprovalModeUnsupported(
        f"{rule.describe()} needs a person and none can be reached from a {label} run: "
        + "; ".join(problems),
        policy=rule.source,
        surface=label,
        tool=rule.name,
    )


def route_to(
    policy: Policy,
    tenant: str,
    kind: ApproverKind,
    surface: object,
    enabled: Collection[str],
    sms: SmsSender,
) -> Route | list[str]:
    """The route of one approver kind alone (an escalation's `to`), or why there is none."""
    problems: list[str] = []
    route = _route_one(policy, policy.tenant(tenant), kind, surface, enabled, sms, problems)
    return route if route is not None else problems


def _route_one(
    policy: Policy,
    tpol: TenantPolicy,
    kind: ApproverKind,
    surface: object,
    enabled: Collection[str],
    sms: SmsSender,
    problems: list[str],
) -> Route | None:
    if kind is ApproverKind.REQUESTER:
        return _requester(tpol, surface, enabled, sms, problems)
    if kind is ApproverKind.TENANT_ADMINS:
        return _admins(tpol, surface, enabled, sms, problems)
    if kind is ApproverKind.EMAIL:
        return emailed_route(tpol, enabled, problems)
    return _staff(policy, tpol, surface, enabled, sms, problems)


def _need(surface: SurfaceType | Channel, enabled: Collection[str], problems: list[str]) -> bool:
    if surface in enabled:
        return True
    fix = {
        SurfaceType.SLACK: "set SLACK_SIGNING_SECRET and SLACK_BOT_TOKEN (or SLACK_CLIENT_ID/SECRET)",
        SurfaceType.SMS: "set TWILIO_ACCOUNT_SID, TWILIO_AUTH_TOKEN and TWILIO_FROM_NUMBER",
        SurfaceType.WHATSAPP: "set TWILIO_WHATSAPP_FROM and TWILIO_WHATSAPP_CONTENT_SID",
        SurfaceType.TEAMS: "set MICROSOFT_APP_ID, MICROSOFT_APP_PASSWORD and MICROSOFT_APP_TENANT_ID",
        Channel.EMAIL: "set COSIGNER_SMTP_URL and COSIGNER_SMTP_FROM",
    }.get(surface, "")
    problems.append(f"{surface} is not configured on this server ({fix})")
    return False


def _sms_route(tpol: TenantPolicy, numbers: tuple[str, ...], sms: SmsSender) -> SmsRoute | None:
    from_number = tpol.sms_from or (None if tpol.sms_messaging_service else sms.from_number)
    service = tpol.sms_messaging_service or (None if tpol.sms_from else sms.messaging_service_sid)
    if not (from_number or service):
        return None
    return SmsRoute(
        surface=SurfaceType.SMS, from_number=from_number, messaging_service_sid=service, approvers=numbers
    )


def _whatsapp_route(
    tpol: TenantPolicy, numbers: tuple[str, ...], sms: SmsSender, problems: list[str]
) -> SmsRoute | None:
    """WhatsApp messages from the tenant's own sender, else the operator's, to `numbers`."""
    sender = tpol.whatsapp_from or sms.whatsapp_from
    if not sender:
        problems.append(f"no WhatsApp sender: set tenants.{tpol.name}.whatsapp_from or TWILIO_WHATSAPP_FROM")
        return None
    return SmsRoute(
        surface=SurfaceType.WHATSAPP,
        from_number=f"whatsapp:{sender}",
        messaging_service_sid=None,
        approvers=tuple(f"whatsapp:{n}" for n in numbers),
    )


def _requester(
    tpol: TenantPolicy, surface: object, enabled: Collection[str], sms: SmsSender, problems: list[str]
) -> Route | None:
    if isinstance(surface, SlackSurface):
        if not _need(SurfaceType.SLACK, enabled, problems):
            return None
        # On Enterprise Grid, Slack names the clicker's org (E…) as `user.team_id`, so the
        # tenant's org counts even when the agent named only the workspace.
        named = (surface.teamId, surface.enterpriseId, tpol.slack_enterprise)
        teams = tuple(dict.fromkeys(t for t in named if t))
        return SlackRoute(
            surface=SurfaceType.SLACK,
            team_id=surface.teamId,
            enterprise_id=surface.enterpriseId,
            channel_id=surface.channelId,
            thread_ts=surface.threadTs,
            approvers=(surface.userId,),
            approver_teams=teams,
            requester=surface.userId,
        )
    if isinstance(surface, SmsSurface):
        if not _need(SurfaceType.SMS, enabled, problems):
            return None
        route = _sms_route(tpol, (surface.phone,), sms)
        if route is None:
            problems.append(f"tenants.{tpol.name}.sms_from is not set and no TWILIO_FROM_NUMBER")
        return route
    if isinstance(surface, WhatsAppSurface):
        if not _need(SurfaceType.WHATSAPP, enabled, problems):
            return None
        return _whatsapp_route(tpol, (surface.phone,), sms, problems)
    if isinstance(surface, TeamsSurface):
        if not _need(SurfaceType.TEAMS, enabled, problems):
            return None
        return TeamsRoute(
            surface=SurfaceType.TEAMS,
            tenant_id=surface.tenantId,
            conversation_id=surface.conversationId,
            approvers=(surface.userId,),
            requester=surface.userId,
        )
    if isinstance(surface, DashboardSurface):
        return DashboardRoute(surface=SurfaceType.DASHBOARD, approvers=(surface.userId,))
    problems.append("the requester cannot be asked on this surface (no signed-in user)")
    return None


def _admins(
    tpol: TenantPolicy, surface: object, enabled: Collection[str], sms: SmsSender, problems: list[str]
) -> Route | None:
    a = tpol.admins
    trigger = getattr(surface, "type", "")
    order = [SurfaceType.SLACK, SurfaceType.SMS, SurfaceType.WHATSAPP, SurfaceType.DASHBOARD]
    if trigger in order:
        order.remove(SurfaceType(trigger))
        order.insert(0, SurfaceType(trigger))
    for name in order:
        if (
            name is SurfaceType.SLACK
            and a.slack
            and tpol.admin_channel
            and (tpol.slack_team or tpol.slack_enterprise)
        ):
            if _need(SurfaceType.SLACK, enabled, problems):
                return _channel_route(
                    tpol.slack_team, tpol.slack_enterprise, tpol.admin_channel, a.slack, _slack_user(surface)
                )
        if name is SurfaceType.SMS and a.sms and _need(SurfaceType.SMS, enabled, problems):
            route = _sms_route(tpol, a.sms, sms)
            if route is not None:
                return route
        if name is SurfaceType.WHATSAPP and a.whatsapp and _need(SurfaceType.WHATSAPP, enabled, problems):
            route = _whatsapp_route(tpol, a.whatsapp, sms, problems)
            if route is not None:
                return route
        if name is SurfaceType.DASHBOARD:
            # Admins told by email answer in the inbox like the dashboard's, as their address.
            mailed = a.email if a.email and _need(Channel.EMAIL, enabled, problems) else ()
            if a.dashboard or mailed:
                approvers = tuple(dict.fromkeys([*a.dashboard, *mailed]))
                return DashboardRoute(surface=SurfaceType.DASHBOARD, approvers=approvers, email=mailed)
    problems.append(f"tenants.{tpol.name} lists no reachable admins (set admins and admin_channel)")
    return None


def _staff(
    policy: Policy,
    tpol: TenantPolicy,
    surface: object,
    enabled: Collection[str],
    sms: SmsSender,
    problems: list[str],
) -> Route | None:
    s = policy.staff
    if s is None:
        problems.append("there is no [staff] section")
        return None
    if (
        s.users
        and s.channel
        and (s.slack_team or s.slack_enterprise)
        and _need(SurfaceType.SLACK, enabled, problems)
    ):
        return _channel_route(s.slack_team, s.slack_enterprise, s.channel, s.users, None)
    if s.sms and _need(SurfaceType.SMS, enabled, problems):
        route = _sms_route(tpol, s.sms, sms)
        if route is not None:
            return route
    if s.email and _need(Channel.EMAIL, enabled, problems):
        approvers = tuple(dict.fromkeys([*s.dashboard, *s.email]))
        return DashboardRoute(surface=SurfaceType.DASHBOARD, approvers=approvers, email=s.email)
    problems.append("[staff] has no reachable users (set slack_team, channel and users, sms, or email)")
    return None


def _slack_user(surface: object) -> str | None:
    return surface.userId if isinstance(surface, SlackSurface) else None


def _with_peers(
    policy: Policy, tpol: TenantPolicy, route: Route, kinds: tuple[ApproverKind, ...], surface: object
) -> Route:
    """Add approvers of the other listed kinds who can answer at the same place."""
    extra: list[str] = []
    for kind in kinds:
        if kind is ApproverKind.TENANT_ADMINS:
            extra += {
                SurfaceType.SLACK: tpol.admins.slack,
                SurfaceType.SMS: tpol.admins.sms,
                SurfaceType.WHATSAPP: tuple(f"whatsapp:{n}" for n in tpol.admins.whatsapp),
                SurfaceType.DASHBOARD: (*tpol.admins.dashboard, *tpol.admins.email),
                SurfaceType.TEAMS: tpol.admins.teams,
            }.get(route.surface, ())
        elif kind is ApproverKind.EMAIL and route.surface is SurfaceType.DASHBOARD:
            extra += tpol.admins.email
        elif kind is ApproverKind.STAFF and policy.staff is not None:
            extra += {
                SurfaceType.SLACK: policy.staff.users,
                SurfaceType.SMS: policy.staff.sms,
                SurfaceType.DASHBOARD: (*policy.staff.dashboard, *policy.staff.email),
            }.get(route.surface, ())
        elif kind is ApproverKind.REQUESTER and route.surface == getattr(surface, "type", None):
            ident = getattr(surface, "userId", None) or getattr(surface, "phone", None)
            if ident:
                extra.append(f"whatsapp:{ident}" if route.surface is SurfaceType.WHATSAPP else ident)
    merged = tuple(dict.fromkeys([*route.approvers, *extra]))
    if isinstance(route, SlackRoute):
        return SlackRoute(
            surface=SurfaceType.SLACK,
            team_id=route.team_id,
            enterprise_id=route.enterprise_id,
            channel_id=route.channel_id,
            thread_ts=route.thread_ts,
            approvers=merged,
            approver_teams=route.approver_teams,
            requester=route.requester,
        )
    if isinstance(route, SmsRoute):
        return SmsRoute(
            surface=route.surface,
            from_number=route.from_number,
            messaging_service_sid=route.messaging_service_sid,
            approvers=merged,
        )
    if isinstance(route, TeamsRoute):
        return TeamsRoute(
            surface=SurfaceType.TEAMS,
            tenant_id=route.tenant_id,
            conversation_id=route.conversation_id,
            approvers=merged,
            requester=route.requester,
        )
    return DashboardRoute(surface=SurfaceType.DASHBOARD, approvers=merged, email=route.email)


def _channel_route(
    team: str | None, enterprise: str | None, channel: str, approvers: tuple[str, ...], requester: str | None
) -> SlackRoute:
    """A card in a named channel (the tenant's admin channel, the staff channel), answered by
    the listed people from the workspace or organisation the policy names."""
    return SlackRoute(
        surface=SurfaceType.SLACK,
        team_id=team or enterprise or "",
        enterprise_id=enterprise,
        channel_id=channel,
        thread_ts=None,
        approvers=approvers,
        approver_teams=tuple(t for t in (team, enterprise) if t),
        requester=requester,
    )
