"""Who an "Approve for this run" covers: the same requester, in the same conversation.

A run grant lets later calls of one tool in one execution pass without a person, so it must
not reach further than the person who was asked meant: Alice approving Bob's run in #support
does not approve what Mallory, another channel or another phone sends under the same
execution id. The grant is keyed by tenant, execution, folded tool name and this key.
"""

from __future__ import annotations

from contracts.enums import SurfaceType
from contracts.surfaces import SurfaceLike, surface_fields


def requester_key(surface: SurfaceLike) -> str:
    """The requester and conversation of a call, from its surface, as one comparable string.

    Slack: workspace (and org), channel, thread and user; SMS and WhatsApp: the phone number
    (each under its own surface); Teams: the Microsoft Entra tenant, conversation and user;
    dashboard: the tenant app's user id. A surface without a person is keyed by its type
    alone (there is nobody more specific to name, and a person-triggered call never matches
    it).
    """
    surface = surface_fields(surface)
    kind = str(surface.get("type", ""))
    if kind == SurfaceType.SLACK:
        parts = [surface.get(k) or "" for k in ("enterpriseId", "teamId", "channelId", "threadTs", "userId")]
        return "slack:" + "/".join(str(p) for p in parts)
    if kind in (SurfaceType.SMS, SurfaceType.WHATSAPP):
        return f"{kind}:{surface.get('phone', '')}"
    if kind == SurfaceType.TEAMS:
        parts = [surface.get(k) or "" for k in ("tenantId", "conversationId", "userId")]
        return "teams:" + "/".join(str(p) for p in parts)
    if kind == SurfaceType.DASHBOARD:
        return f"dashboard:{surface.get('userId', '')}"
    if kind == SurfaceType.WEB_WIDGET:
        return f"web_widget:{surface.get('tokenKind', '')}"
    return kind
