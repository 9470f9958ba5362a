"""The seams between the engine (`bot/`) and the surfaces (`surfaces/`).

A surface never imports the engine: it is handed an `ApprovalDesk` (SMS: an `SmsDesk`, and
the `SmsStore` of `contracts.sms` for its own state) and implements `SurfaceAdapter`. The
engine never sees Block Kit JSON or Twilio form fields: it sees the frozen dataclasses below.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, Protocol, runtime_checkable

from contracts.enums import (
    ApprovalMode,
    ApprovalStatus,
    ApproverKind,
    AuditEvent,
    SurfaceType,
    ToolKind,
    Verdict,
)
from contracts.handoff import HandoffCard
from contracts.operations import OperationOutcome, Preview


@dataclass(frozen=True)
class Ending:
    """How a closed approval ended, for showing on its card or in a text."""

    status: ApprovalStatus
    decided_at: datetime
    decider_kind: str  # person | timeout | policy | agent | system
    decider: str | None = None  # user id or phone of the person, rule, or error code
    surface: str | None = None
    comment: str | None = None


@dataclass(frozen=True)
class EscalationNote:
    """An escalation step taken, for the card: "Escalated to tenant admins at 10:52"."""

    to: ApproverKind
    at: datetime


@dataclass(frozen=True)
class ApprovalVote:
    """One approver's Approve counted toward the quorum: who, on which surface, when."""

    by: str
    surface: SurfaceType
    at: datetime


@dataclass(frozen=True)
class ApprovalCard:
    """Everything a surface may show about an approval; parameters are already redacted."""

    approval_id: str
    short_code: str
    tenant: str
    execution_id: str
    tool_call_id: str
    tool_name: str
    kind: ToolKind
    mode: ApprovalMode
    parameters: Mapping[str, Any]
    reason: str | None
    triggered_by: str  # e.g. "slack:U1", "sms:+15550001", "schedule"
    policy_rule: str  # e.g. "tools.issue_refund: danger → ask_always"
    created_at: datetime
    expires_at: datetime
    status: ApprovalStatus
    outcome: Ending | None = None
    handoff: HandoffCard | None = None  # a handoff: Done / Cancel instead of Approve / Deny
    # Whether the approver may answer "always deny" (see contracts.denials.scope_of).
    offers_always_deny: bool = False
    # An operation: the application's preview is the thing approved (the parameters are
    # then the agent's request, its claim), and `result` what executing it gave.
    preview: Preview | None = None
    result: OperationOutcome | None = None
    # Edits: the parameters an approver may change (only while pending, only when the agent
    # accepts edits), and once edited the edited call as shown: while pending (a quorum) the
    # call the approvers are now asked to approve, once approved the call that runs.
    editable: tuple[str, ...] = ()
    edited: Mapping[str, Any] | None = None
    edited_by: str | None = None  # who made the current version (their id on `edited_on`)
    edited_on: str | None = None
    # The RFC 8785 digest of the call the approvers are asked to approve (the edited one after
    # an edit) as the card shows it, hidden values hidden: an answer names the version it was
    # given for (`Answer.seen`), and nothing a surface carries can test a guess of what the
    # policy hides (the digest of the real call would).
    digest: str = ""
    # Escalation steps taken while nobody answered, oldest first.
    escalations: tuple[EscalationNote, ...] = ()
    # Four eyes: how many distinct approvers must approve, whether the requester's own
    # Approve is refused, and the approvals counted so far (oldest first).
    quorum: int = 1
    separate_duties: bool = False
    approvals: tuple[ApprovalVote, ...] = ()
    # Step-up: an Approve counts only once confirmed with a passkey in the inbox; a chat or
    # text offers a link there (`inbox_url`, the request's inbox page) instead of Approve.
    step_up: bool = False
    inbox_url: str | None = None
    # "Allow for …": the lengths an approver may allow calls like this one for (`1h`; see
    # contracts.allowances), none where the policy does not offer it.
    allow_for: tuple[str, ...] = ()

    def asked(self) -> Mapping[str, Any]:
        """The call the approvers are asked to approve, as shown: while pending, the edited
        call once an approver edited it (a quorum); else the call as the agent asked it."""
        if self.edited is not None and self.status is ApprovalStatus.PENDING:
            return self.edited
        return self.parameters

    def approved_by(self, person: str) -> bool:
        """True when `person` has approved already (their Approve is counted)."""
        return any(v.by == person for v in self.approvals)

    def progress(self) -> str:
        """`1 of 2` approvals so far."""
        return f"{len(self.approvals)} of {self.quorum}"


@dataclass(frozen=True)
class SlackRoute:
    """Where a Slack card goes and who may click it."""

    surface: Literal[SurfaceType.SLACK]
    team_id: str
    enterprise_id: str | None
    channel_id: str
    thread_ts: str | None
    approvers: tuple[str, ...]  # Slack user ids
    approver_teams: tuple[str, ...]  # workspaces (T…) or orgs (E…) whose users may click
    requester: str | None = None  # user id to mention as the trigger


@dataclass(frozen=True)
class SmsRoute:
    """Which numbers receive the text and from which number or Messaging Service.

    WhatsApp goes through the same Twilio messaging: its routes are these too, with
    `surface` WHATSAPP and every number written `whatsapp:+E164`, as Twilio writes them.
    """

    surface: Literal[SurfaceType.SMS, SurfaceType.WHATSAPP]
    from_number: str | None
    messaging_service_sid: str | None
    approvers: tuple[str, ...]  # E.164 numbers; each gets the text


@dataclass(frozen=True)
class TeamsRoute:
    """Which Teams conversation gets the card, in which AAD tenant, and who may click it."""

    surface: Literal[SurfaceType.TEAMS]
    tenant_id: str  # the Microsoft Entra (AAD) tenant id the clicks must come from
    conversation_id: str
    approvers: tuple[str, ...]  # AAD object ids
    requester: str | None = None  # AAD object id of who triggered the run


@dataclass(frozen=True)
class DashboardRoute:
    """The tenant's app decides through `POST /v1/approvals/{id}/decision`."""

    surface: Literal[SurfaceType.DASHBOARD]
    approvers: tuple[str, ...]  # the tenant app's user ids (the inbox's: Slack ids, emails)
    # Addresses told of the request by email (`admins.email`): each reads it there and
    # answers in the inbox, signed in as that verified address.
    email: tuple[str, ...] = ()


Route = SlackRoute | SmsRoute | TeamsRoute | DashboardRoute


@dataclass(frozen=True)
class Delivered:
    """Receipt of a delivery, stored with the approval and checked against every answer.

    `conversation` is the Slack channel id as returned by `chat.postMessage` (a `D…` id
    for DMs), or the number an SMS was sent from. `message_refs` are the Slack message ts
    or the Twilio MessageSids.
    """

    surface: SurfaceType
    conversation: str
    message_refs: tuple[str, ...] = ()
    app_id: str | None = None
    extra: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class Answer:
    """A person's answer as a surface verified and parsed it.

    `org` is where the answer happened (Slack `team.id`, or `enterprise.id` when there is
    no team; for SMS the number or Messaging Service SID the answer was sent to).
    `actor_org` is the answering person's own workspace (Slack `user.team_id`) or None
    where the surface has none. `conversation` and
    `message_ref` must equal what `Delivered` recorded.
    """

    approval_id: str
    surface: SurfaceType
    verdict: Verdict
    actor: str
    org: str | None
    actor_org: str | None
    conversation: str
    message_ref: str | None = None
    app_id: str | None = None
    enterprise_id: str | None = None
    comment: str | None = None
    # The inbound message that carried the answer (Twilio's MessageSid). The desk records
    # it as seen in the answer's own transaction, so a failed
    # attempt leaves no mark and a redelivery of an applied one changes nothing.
    message_id: str | None = None
    # An approval of an edited call: the changed parameters and their new values (only with
    # `Verdict.APPROVE`); the engine checks them again, whatever the surface checked before.
    edit: Mapping[str, Any] | None = None
    # Why the surface could not tie the answer to a message sent to this person (a WhatsApp
    # tap whose one-time nonce was not sent to this number, or that replies to another
    # message): the desk refuses it, and the refusal goes on the audit record.
    mismatch: str | None = None
    # The digest of the call the person was shown (`ApprovalCard.digest` when the card or
    # form was made); None: the agent's own call. An answer to a call edited since is refused.
    seen: str | None = None
    # Why the surface could not show this person the whole call (a text too long even for
    # MORE): the desk refuses an Approve, a Deny still counts. None: it was shown whole.
    unshown: str | None = None
    # With `Verdict.ALLOW_FOR`: how long the standing allow should last, in seconds (one of
    # contracts.allowances.CHOICES); the desk refuses it above the policy's cap.
    allow_for: float | None = None


@dataclass(frozen=True)
class Look:
    """A person asking to read a whole call (Slack's *See the full call*), as a surface parsed it.

    The same where-and-who fields as an `Answer`, checked the same way (tenant,
    conversation, app, message, approver), but it decides nothing.
    """

    approval_id: str
    surface: SurfaceType
    actor: str
    org: str | None
    actor_org: str | None
    conversation: str
    message_ref: str | None = None
    app_id: str | None = None
    enterprise_id: str | None = None


@dataclass(frozen=True)
class Placed:
    """An approval with the route it was given and, once delivered, its receipt."""

    card: ApprovalCard
    route: Route
    delivered: Delivered | None


class ApprovalDesk(Protocol):
    """What the engine offers every surface: apply an answer, and find a workspace's tenant."""

    async def answer(self, answer: Answer) -> ApprovalCard:
        """Check and apply an answer; on refusal audit it and raise a `CosignerError`."""
        ...

    def tenant_for_org(self, surface: SurfaceType, org: str) -> str | None:
        """The tenant whose policy names this Slack team/enterprise id or SMS number."""
        ...

    async def full_call(self, look: Look) -> ApprovalCard:
        """The card of an approval for one of its approvers where it was shown; raises a
        `CosignerError` naming why not. Its parameters are redacted, never cut."""
        ...


class SmsDesk(ApprovalDesk, Protocol):
    """What the SMS surface needs besides: replies are matched by phone number, delivery
    statuses arrive later, and a failed text closes its request. The surface keeps its own
    state (opt-outs, sent texts) through the `SmsStore` of `contracts.sms`, not here."""

    async def placed(self, approval_id: str) -> Placed | None:
        """Look an approval up by id, whatever its tenant (surfaces check tenancy)."""
        ...

    async def sending(self, approval_id: str, receipt: Delivered) -> None:
        """Record where a pending approval is being shown, before it is sent, so an answer
        that arrives before `deliver` returns is matched; the full receipt replaces it."""
        ...

    async def fail_closed(self, approval_id: str, code: str, message: str) -> None:
        """Deny a pending approval because its surface failed; no-op if already closed."""
        ...

    async def note(self, approval_id: str, event: AuditEvent, data: Mapping[str, Any]) -> None:
        """Append a surface event (a delivery status) to the audit chain."""
        ...

    async def pending_for_number(self, to_number: str, from_number: str) -> Sequence[Placed]:
        """Pending SMS approvals delivered from `to_number` to approver `from_number`."""
        ...

    async def latest_for_number(self, to_number: str, from_number: str) -> Placed | None:
        """The most recent SMS approval (any state) between these numbers."""
        ...


class SurfaceAdapter(Protocol):
    """What a surface offers the engine. `deliver` raises `SurfaceUnavailable` on failure."""

    name: str

    def routes(self) -> list[Any]:
        """Starlette routes this surface serves (webhooks)."""
        ...

    async def start(self) -> None:
        """Open clients inside the running loop."""
        ...

    async def stop(self) -> None:
        """Close clients."""
        ...

    async def deliver(self, card: ApprovalCard, route: Route) -> Delivered:
        """Show a pending approval to its approvers."""
        ...

    async def show_outcome(self, card: ApprovalCard, route: Route, delivered: Delivered) -> None:
        """Show that an approval closed: update the card in place, or text a confirmation."""
        ...


@runtime_checkable
class FollowUpSurface(Protocol):
    """What a surface that can nudge its approvers offers besides (`SurfaceAdapter`): a
    reminder where the request was asked, and showing an escalation on the card."""

    async def remind(
        self, card: ApprovalCard, route: Route, delivered: Delivered, approvers: Sequence[str]
    ) -> None:
        """Remind `approvers` (those still to answer) where the request was delivered."""
        ...

    async def show_escalated(self, card: ApprovalCard, route: Route, delivered: Delivered) -> None:
        """Show on the pending card, in place, that the request was escalated."""
        ...


@dataclass(frozen=True)
class Retexted:
    """What texting an edited call again did: the numbers texted it now, those whose first
    text of the request is still on its way (try again shortly), and why any other number
    that was shown an earlier version could not be texted."""

    texted: tuple[str, ...] = ()
    in_flight: tuple[str, ...] = ()
    problems: tuple[str, ...] = ()


@runtime_checkable
class RetextSurface(Protocol):
    """What a surface whose texts cannot change once sent (SMS, WhatsApp) offers besides: an
    edited call texted to the numbers that were texted an earlier version of it."""

    async def retext(self, card: ApprovalCard, route: Route, delivered: Delivered) -> Retexted:
        """Text the call on `card` (its current version) to each approver of `route` who was
        texted the request showing another version and has not opted out, once per number
        and version; each answer to it is then counted for this version."""
        ...
