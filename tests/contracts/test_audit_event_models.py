"""Every audit event is written from its model in `contracts.audit_events`, and the model's
written form is byte for byte the data its writer stored before it had one: the chain's
hashes and every export stay as they were.

Each fixture is the dict a writer built (the same values, built the same way), beside the model
the writer builds now. A kind added to `AuditEvent` without a model fails here.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from typing import Any

import pytest

from bot.oncall.directory import Asked, Fallback
from contracts import audit_events as ev
from contracts.audit_events import (
    KINDS,
    MODELS,
    AuditEventModel,
    UnknownEvent,
    event_data,
    parse_event,
    written,
)
from contracts.digest import canonical_json
from contracts.enums import ApprovalStatus, AuditEvent, SurfaceType
from contracts.ports import SlackRoute
from storage.audit import recordable

ROUTE = SlackRoute(SurfaceType.SLACK, "T1", None, "C1", None, ("U1", "U2"), ("T1",), "U1")
OUTCOME = {"outcome": "succeeded", "final": True, "result": {"id": "re_1"}}

# kind: (the dict written before, the model written now)
FIXTURES: dict[str, tuple[dict[str, Any], AuditEventModel]] = {
    "standing_deny_set": (
        {"denialId": "den_1", "toolName": "refund", "requester": "slack:U1", "alreadyInForce": False},
        ev.StandingDenySet(denialId="den_1", toolName="refund", requester="slack:U1", alreadyInForce=False),
    ),
    "standing_deny_lifted": (
        {"denialId": "den_1", "by": "slack:U2"},
        ev.StandingDenyLifted(denialId="den_1", by="slack:U2"),
    ),
    "allowance_granted": (
        {
            "allowanceId": "alw_1",
            "toolName": "refund",
            "requester": "slack:U1",
            "match": {"customer": "cus_1"},
            "atMost": {"amount": 50.0},
            "expiresAt": "2026-01-01T00:15:00Z",
            "maxUses": None,
        },
        ev.AllowanceGranted(
            allowanceId="alw_1",
            toolName="refund",
            requester="slack:U1",
            match={"customer": "cus_1"},
            atMost={"amount": 50.0},
            expiresAt="2026-01-01T00:15:00Z",
            maxUses=None,
        ),
    ),
    "allowance_revoked": (
        {"allowanceId": "alw_1", "by": "api"},
        ev.AllowanceRevoked(allowanceId="alw_1", by="api"),
    ),
    "allowance_used": (
        {
            "allowanceId": "alw_1",
            "use": 2,
            "maxUses": 5,
            "grantedOn": "apr_1",
            "expiresAt": "2026-01-01T00:15:00Z",
        },
        ev.AllowanceUsed(
            allowanceId="alw_1", use=2, maxUses=5, grantedOn="apr_1", expiresAt="2026-01-01T00:15:00Z"
        ),
    ),
    "delivered": (
        {"surface": SurfaceType.SLACK, "conversation": "C1", "messages": ["1.2"]},
        ev.Delivered(surface=SurfaceType.SLACK, conversation="C1", messages=["1.2"]),
    ),
    "result": (
        {"outcome": "success", "result": {"id": 1, "card": "[REDACTED]"}, "error": None},
        ev.Result(outcome="success", result={"id": 1, "card": "[REDACTED]"}, error=None),
    ),
    "handoff_done": ({"delivery": "dlv_1"}, ev.HandoffDone(delivery="dlv_1")),
    "handoff_check": (
        {"delivery": "dlv_1", "status": 200, "done": True, "error": None, "detail": "done"},
        ev.HandoffCheck(delivery="dlv_1", status=None, done=None, error=None).model_copy(
            update={"status": 200, "done": True, "detail": "done"}
        ),
    ),
    "signed_in": (
        {"issuer": "https://id.example", "subject": "s1"},
        ev.SignedIn(issuer="https://id.example", subject="s1"),
    ),
    "passkey_confirmed": (
        {"credentialId": "cred", "userVerified": True},
        ev.PasskeyConfirmed(credentialId="cred", userVerified=True),
    ),
    "reminded": (
        {"surface": "slack", "approvers": ["U1"], "sent": False, "why": "gone"},
        ev.Reminded(surface="slack", approvers=["U1"], sent=False, why="gone"),
    ),
    "escalated": (
        {"step": 1, "to": "route", "route": asdict(ROUTE), "oncall": {"rotations": ["r"], "onCall": ["U2"]}},
        ev.Escalated(step=1, to="route", route=asdict(ROUTE)).model_copy(
            update={"oncall": ev.OnCallNote(rotations=["r"], onCall=["U2"])}
        ),
    ),
    "escalation_delivered": (
        {"step": 1, "surface": "slack", "conversation": "C2", "messages": ["3.4"]},
        ev.EscalationDelivered(step=1, surface="slack", conversation="C2", messages=["3.4"]),
    ),
    "escalation_failed": (
        {"step": 1, "why": "down", "retrying": True},
        ev.EscalationFailed(step=1, why="down", retrying=True),
    ),
    "edit_texted": (
        {"digest": "sha256:ab", "texted": ["+15550001"], "problems": []},
        ev.EditTexted(digest="sha256:ab", texted=["+15550001"], problems=[]),
    ),
    "email_sent": (
        {"kind": "request", "to": ["a@example.com"], "messageId": "<m@x>", "refused": {"b@x": "550"}},
        ev.EmailSent(email="request", to=["a@example.com"], messageId="<m@x>").model_copy(
            update={"refused": {"b@x": "550"}}
        ),
    ),
    "email_failed": (
        {"kind": "notice", "attempt": 1, "reason": "421", "retrying": True, "then": "retried"},
        ev.EmailFailed(email="notice", attempt=1, reason="421", retrying=True, then="retried"),
    ),
    "push_sent": (
        {"sent": 1, "gone": 0, "failed": {}, "retrying": False},
        ev.PushSent(sent=1, gone=0, failed={}, retrying=False),
    ),
    "push_failed": ({"error": "TimeoutError"}, ev.PushFailed(error="TimeoutError")),
    "sms_status": (
        {"messageSid": "SM1", "status": "failed", "errorCode": None},
        ev.SmsStatus(messageSid="SM1", status="failed", errorCode=None),
    ),
    "callback_attempt": (
        {"delivery": "dlv_2", "attempt": 1, "status": None, "error": "Unreached", "delivered": False},
        ev.CallbackAttempt(delivery="dlv_2", attempt=1, status=None, error="Unreached", delivered=False),
    ),
    "callback_refused": (
        {"delivery": "dlv_2", "attempt": 1, "reason": "private address"},
        ev.CallbackRefused(delivery="dlv_2", attempt=1, reason="private address"),
    ),
    "callback_abandoned": (
        {"delivery": "dlv_2", "attempts": 8},
        ev.CallbackAbandoned(delivery="dlv_2", attempts=8),
    ),
    "prepared": (
        {"operation": "refund", "preview": {"title": "Refund"}, "argumentsDigest": "sha256:cd"},
        ev.Prepared(operation="refund", preview={"title": "Refund"}, argumentsDigest="sha256:cd"),
    ),
    "claimed": ({"argumentsDigest": "sha256:cd"}, ev.Claimed(argumentsDigest="sha256:cd")),
    "execute_sent": (
        {"send": 1, "idempotencyKey": "apr_1:1"},
        ev.ExecuteSent(send=1, idempotencyKey="apr_1:1"),
    ),
    "status_asked": ({"answer": "in_progress"}, ev.StatusAsked(answer="in_progress")),
    "outcome": ({"outcome": OUTCOME}, ev.Outcome(outcome=OUTCOME)),
    "reconciled": ({"outcome": OUTCOME}, ev.Reconciled(outcome=OUTCOME)),
}

# Written in bot/approvals/engine.py, lifecycle.py, intake.py and coalescing.py, from their models.
WRITTEN_ELSEWHERE = {
    "requested",
    "approval_counted",
    "call_edited",
    "approvals_set_aside",
    "decision_refused",
    "coalesced",
    *(s.value for s in ApprovalStatus if s is not ApprovalStatus.PENDING),
}


def stored(data: Any) -> bytes:
    """What the chain stores (and hashes) of an event's data."""
    return canonical_json(recordable(data))


def test_every_kind_has_a_model() -> None:
    kinds = {e.value for e in AuditEvent} | {
        s.value for s in ApprovalStatus if s is not ApprovalStatus.PENDING
    }
    assert kinds <= KINDS, f"kinds without a model: {sorted(kinds - KINDS)}"
    for kind in kinds:
        assert MODELS[kind].model_fields["kind"].default == kind


def test_every_kind_written_here_has_a_fixture() -> None:
    kinds = {e.value for e in AuditEvent}
    assert kinds - WRITTEN_ELSEWHERE == set(FIXTURES), "a kind's model has no check of its written form"


@pytest.mark.parametrize("kind", sorted(FIXTURES))
def test_the_written_form_is_the_data_written_before(kind: str) -> None:
    before, model = FIXTURES[kind]
    assert type(model).model_fields["kind"].default == kind
    assert stored(written(model)) == stored(before)


@pytest.mark.parametrize("kind", sorted(FIXTURES))
def test_stored_data_reads_back_as_its_model_and_dumps_as_stored(kind: str) -> None:
    data = json.loads(stored(FIXTURES[kind][0]))
    event = parse_event(kind, data)
    assert isinstance(event, MODELS[kind]), event
    assert stored(event_data(event)) == stored(data)


def test_an_emails_own_kind_is_read_from_its_data() -> None:
    event = parse_event("email_failed", {"kind": "notice", "attempt": 2})
    assert isinstance(event, ev.EmailFailed) and event.email == "notice" and event.attempt == 2
    assert event_data(event) == {"kind": "notice", "attempt": 2}
    assert isinstance(parse_event("email_sent", {"to": "not a list"}), UnknownEvent)


def test_on_call_is_written_as_it_was() -> None:
    asked = Asked(ROUTE, ("oncall:pagerduty:P1",), ("a@x", "b@x"), ("b@x",))
    assert stored(written(ev.Requested(toolName="t", oncall=asked.audit()))) == stored(
        {
            "toolName": "t",
            "oncall": {
                "rotations": ["oncall:pagerduty:P1"],
                "onCall": ["a@x", "b@x"],
                "asked": ["U1", "U2"],
                "unknown": ["b@x"],
            },
        }
    )
    everyone = Asked(ROUTE, ("r",), ("a@x",), ())
    assert stored(written(ev.Escalated(step=0, oncall=everyone.audit()))) == stored(
        {"step": 0, "oncall": {"rotations": ["r"], "onCall": ["a@x"], "asked": ["U1", "U2"]}}
    )
    fallback = Fallback(("r",), "PagerDuty answered 503")
    assert stored(written(ev.Escalated(oncall=fallback.audit()))) == stored(
        {"oncall": {"rotations": ["r"], "fallback": "PagerDuty answered 503"}}
    )
