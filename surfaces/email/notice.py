"""The words of a `notify` email: the request is asked on another surface, and only there
does an answer count; the email is a notice of it, never a way to answer.

When the request is asked in the inbox itself (a dashboard route), the inbox is where the
answer is given, by an approver of the request; a reader who is not one is told, not asked.
"""

from __future__ import annotations

from contracts.enums import SurfaceType
from surfaces.email.message import Where

PLACES = {
    SurfaceType.SLACK: "Slack",
    SurfaceType.SMS: "SMS",
    SurfaceType.WHATSAPP: "WhatsApp",
    SurfaceType.TEAMS: "Microsoft Teams",
    SurfaceType.DASHBOARD: "the inbox",
}


def asked_on(surface: SurfaceType) -> Where:
    """How a notice says where the request waits and where an answer counts."""
    place = PLACES.get(surface, str(surface))
    if surface is SurfaceType.DASHBOARD:
        return Where(
            waits="waits for an approver's answer in the inbox.",
            link="Open the request in the inbox",
            footer=(
                "This email is a notice: you are told because the policy notifies this tenant's "
                "admins. Only an approver of this request can answer, signed in to the inbox; the "
                "link is not an approval and signs nobody in. Replies to this email are not read."
            ),
            subject=" in the inbox",
        )
    return Where(
        waits=f"waits for an approver's answer in {place}.",
        link="See the request in the inbox",
        footer=(
            f"This email is a notice, not a way to answer: the request is asked in {place}, and an "
            f"answer counts only there, from an approver of the request. The link is not an "
            "approval and signs nobody in. Replies to this email are not read."
        ),
        subject=f" in {place}",
    )
