"""Closed sets of the system, as string enums whose values are the wire spelling."""

from __future__ import annotations

from enum import StrEnum


class ApprovalStatus(StrEnum):
    """Where an approval is in its lifecycle; every state but `pending` is final."""

    PENDING = "pending"
    APPROVED = "approved"
    DENIED = "denied"
    EXPIRED = "expired"
    CANCELLED = "cancelled"
    COMPLETED = "completed"  # a handoff whose step the application confirmed
    FAILED = "failed"  # a handoff whose step the application did not confirm


class ToolKind(StrEnum):
    """A tool's blast radius, as the policy states it."""

    READ = "read"
    WRITE = "write"
    DANGER = "danger"


class ApprovalMode(StrEnum):
    """Whether a person must approve: never, once per execution, or every call."""

    NONE = "none"
    ASK = "ask"
    ASK_ALWAYS = "ask_always"
    HANDOFF = "handoff"  # a person does a step themselves; Done is checked against the application


class ApproverKind(StrEnum):
    """Who may answer a request."""

    REQUESTER = "requester"
    TENANT_ADMINS = "tenant_admins"
    STAFF = "staff"
    EMAIL = "email"  # the tenant's `admins.email` addresses: told by email, answered in the inbox


class SurfaceType(StrEnum):
    """Where a run was triggered."""

    SLACK = "slack"
    SMS = "sms"
    WHATSAPP = "whatsapp"
    DASHBOARD = "dashboard"
    TEAMS = "teams"
    API = "api"
    SCHEDULE = "schedule"
    BATCH = "batch"
    WEB_WIDGET = "web_widget"


class Verdict(StrEnum):
    """What a person answered."""

    APPROVE = "approve"
    APPROVE_FOR_RUN = "approve_for_run"
    DENY = "deny"
    ALWAYS_DENY = "always_deny"  # deny, and refuse this tool for requests this person approves
    ALLOW_FOR = "allow_for"  # approve, and allow calls like it for a while (a standing allow)
    DONE = "done"  # a handoff's step is done (checked before it counts)
    CANCEL = "cancel"  # a handoff is called off


class DeciderKind(StrEnum):
    """Who or what closed an approval."""

    PERSON = "person"
    TIMEOUT = "timeout"
    POLICY = "policy"
    AGENT = "agent"
    SYSTEM = "system"
    ALLOWANCE = "allowance"  # a standing allow a person gave ("Allow for 1h")


class JobKind(StrEnum):
    """Work the outbox carries out after the transaction that queued it."""

    DELIVER = "deliver"  # post the card or send the text
    SHOW = "show"  # update the card, or text the outcome
    CALLBACK = "callback"  # POST the decision to the agent's callbackUrl
    EXECUTE = "execute"  # carry out an approved operation at its application
    RECONCILE = "reconcile"  # ask the application's status until the outcome is final
    VERIFY = "verify"  # ask a handoff's `expect` endpoint whether the step really happened
    REMIND = "remind"  # remind the approvers still to answer, where the request was asked
    ESCALATE = "escalate"  # deliver a still-pending request to an escalation step's route too
    RETEXT = "retext"  # text an edited call to the numbers an earlier version of it was texted to
    PUSH = "push"  # tell the approvers' subscribed browsers that the request waits (Web Push)
    NOTIFY = "notify"  # email a tool's `notify` addresses that the request waits elsewhere


class AuditEvent(StrEnum):
    """Audit event names other than the statuses (a closing is recorded under its status)."""

    REQUESTED = "requested"
    DECISION_REFUSED = "decision_refused"
    DELIVERED = "delivered"
    CALLBACK_ATTEMPT = "callback_attempt"
    CALLBACK_REFUSED = "callback_refused"
    CALLBACK_ABANDONED = "callback_abandoned"
    RESULT = "result"
    SMS_STATUS = "sms_status"
    STANDING_DENY_SET = "standing_deny_set"
    STANDING_DENY_LIFTED = "standing_deny_lifted"
    ALLOWANCE_GRANTED = "allowance_granted"  # an "Allow for …" put a standing allow in force
    ALLOWANCE_USED = "allowance_used"  # a call was allowed at once by a standing allow
    ALLOWANCE_REVOKED = "allowance_revoked"  # a standing allow was revoked before it ran out
    SIGNED_IN = "signed_in"  # an inbox answer: the OpenID issuer and subject of who answered
    PREPARED = "prepared"  # the application's contract, frozen under its digest
    CLAIMED = "claimed"  # the approved operation is now executing, once
    EXECUTE_SENT = "execute_sent"
    STATUS_ASKED = "status_asked"
    OUTCOME = "outcome"
    RECONCILED = "reconciled"
    HANDOFF_DONE = "handoff_done"  # Done was pressed; the check against `expect` is queued
    HANDOFF_CHECK = "handoff_check"  # what the `expect` endpoint answered
    REMINDED = "reminded"  # the one reminder went out, to the approvers still to answer
    ESCALATED = "escalated"  # an escalation step: the request goes to its route too
    ESCALATION_DELIVERED = "escalation_delivered"  # where the escalated request was shown
    ESCALATION_FAILED = "escalation_failed"  # the step's route could not be reached
    APPROVAL_COUNTED = "approval_counted"  # one approver's Approve toward a quorum above 1
    CALL_EDITED = "call_edited"  # an approver edited a call a quorum must approve: a new version
    APPROVALS_SET_ASIDE = "approvals_set_aside"  # Approves of a version an edit replaced, no longer counted
    EDIT_TEXTED = "edit_texted"  # the edited call texted to the numbers shown an earlier version
    PASSKEY_CONFIRMED = "passkey_confirmed"  # step-up: the passkey (credential id, UV flag) of an Approve
    EMAIL_SENT = "email_sent"  # the SMTP server accepted the request's email for these addresses
    EMAIL_FAILED = "email_failed"  # the SMTP server refused or could not be reached: why, and whether retried
    PUSH_SENT = "push_sent"  # a Web Push message accepted by the push service for a device
    PUSH_FAILED = "push_failed"  # a push service refused a message: its status, and what follows
    COALESCED = "coalesced"  # an identical request while this one was pending: answered with it


class OperationState(StrEnum):
    """Where an operation's execution is: prepared until approved, then executing until an
    outcome; `reconciling` while the application still settles it; `done` once final."""

    PREPARED = "prepared"
    EXECUTING = "executing"
    RECONCILING = "reconciling"
    DONE = "done"


class AddressClass(StrEnum):
    """Why an address is not on the public internet, so no callback goes there unless allowed."""

    LOOPBACK = "loopback"
    PRIVATE = "private"
    LINK_LOCAL = "link-local"
    SHARED = "shared (CGNAT)"
    MULTICAST = "multicast"
    UNSPECIFIED = "unspecified"
    RESERVED = "reserved"


class KeyScope(StrEnum):
    """What a tenant API key may do: an agent's calls, or an approval app's decisions."""

    AGENT = "agent"  # create, read, wait, cancel, report results, admit runs
    APPROVER = "approver"  # decide dashboard requests, list and lift standing denies


class ErrorCode(StrEnum):
    """Every error code an API caller or approver can see."""

    APPROVAL_MODE_UNSUPPORTED = "APPROVAL_MODE_UNSUPPORTED"
    PERMISSION_DENIED = "PERMISSION_DENIED"
    TOOL_CALL_CAP_EXCEEDED = "TOOL_CALL_CAP_EXCEEDED"
    PARAMETERS_MISMATCH = "PARAMETERS_MISMATCH"
    APPROVAL_NOT_FOUND = "APPROVAL_NOT_FOUND"
    APPROVAL_EXPIRED = "APPROVAL_EXPIRED"
    APPROVAL_PENDING = "APPROVAL_PENDING"
    ALREADY_DECIDED = "ALREADY_DECIDED"
    NOT_AN_APPROVER = "NOT_AN_APPROVER"
    WRONG_CONVERSATION = "WRONG_CONVERSATION"
    WRONG_TENANT = "WRONG_TENANT"
    INVALID_SIGNATURE = "INVALID_SIGNATURE"
    INVALID_REQUEST = "INVALID_REQUEST"
    SURFACE_UNAVAILABLE = "SURFACE_UNAVAILABLE"
    UNAUTHENTICATED = "UNAUTHENTICATED"
    DENIAL_NOT_FOUND = "DENIAL_NOT_FOUND"
    ALLOWANCE_NOT_FOUND = "ALLOWANCE_NOT_FOUND"
    OPERATION_REJECTED = "OPERATION_REJECTED"
    OPERATION_UNAVAILABLE = "OPERATION_UNAVAILABLE"
    HANDOFF_FAILED = "HANDOFF_FAILED"
    HANDOFF_CANCELLED = "HANDOFF_CANCELLED"
    HANDOFF_TIMEOUT = "HANDOFF_TIMEOUT"
    TOOL_DEFINITION_CHANGED = "TOOL_DEFINITION_CHANGED"
    STEP_UP_REQUIRED = "STEP_UP_REQUIRED"
    KEY_SCOPE = "KEY_SCOPE"
    INTERNAL = "INTERNAL"
