"""The timeline says every audit event kind in words: a kind added to `AuditEvent` without a
sentence fails here rather than showing its raw fields to the people reading the trail."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from bot.inbox.timeline import actor as actor_of
from bot.inbox.timeline import has_sentence, pairs, timeline
from contracts.enums import ApprovalStatus, AuditEvent
from storage.audit import AuditRow

AT = datetime(2026, 12, 6, 9, 0, tzinfo=UTC).timestamp()
ALICE = {"kind": "person", "surface": "slack", "userId": "U0ALICE"}
SYSTEM = {"kind": "system"}
ALLOW = {"kind": "allowance", "allowanceId": "alw_7", "surface": "slack", "userId": "U0ALICE"}

# One event of each kind as the server records it (the data each writer stores).
SAMPLES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    AuditEvent.REQUESTED: (
        {"kind": "agent"},
        {"toolName": "issue_refund", "parameters": {"amountCents": 900}},
    ),
    AuditEvent.DECISION_REFUSED: (ALICE, {"wanted": "approve", "message": "not an approver"}),
    AuditEvent.DELIVERED: (SYSTEM, {"surface": "slack"}),
    AuditEvent.CALLBACK_ATTEMPT: (SYSTEM, {"delivery": "d1", "attempt": 1, "status": 200, "delivered": True}),
    AuditEvent.CALLBACK_REFUSED: (SYSTEM, {"delivery": "d1", "attempt": 1, "reason": "loopback"}),
    AuditEvent.CALLBACK_ABANDONED: (SYSTEM, {"delivery": "d1", "attempts": 8}),
    AuditEvent.RESULT: ({"kind": "agent"}, {"outcome": "ok"}),
    AuditEvent.SMS_STATUS: (SYSTEM, {"messageSid": "SM1", "status": "delivered", "errorCode": None}),
    AuditEvent.STANDING_DENY_SET: (ALICE, {"toolName": "issue_refund"}),
    AuditEvent.STANDING_DENY_LIFTED: (ALICE, {"toolName": "issue_refund"}),
    AuditEvent.ALLOWANCE_GRANTED: (
        ALICE,
        {
            "allowanceId": "alw_7",
            "toolName": "issue_refund",
            "requester": "slack:T1:U0BOT",
            "match": {"currency": "EUR"},
            "atMost": {"amountCents": 5000},
            "expiresAt": "2026-12-06T10:00:00Z",
            "maxUses": 3,
        },
    ),
    AuditEvent.ALLOWANCE_USED: (
        ALLOW,
        {
            "allowanceId": "alw_7",
            "use": 2,
            "maxUses": 3,
            "grantedOn": "apr_1",
            "expiresAt": "2026-12-06T10:00:00Z",
        },
    ),
    AuditEvent.ALLOWANCE_REVOKED: (ALICE, {"allowanceId": "alw_7", "by": "U0ALICE"}),
    AuditEvent.SIGNED_IN: (ALICE, {"issuer": "https://id.example", "subject": "s1"}),
    AuditEvent.PREPARED: (
        SYSTEM,
        {"operation": "refund", "preview": "Refund 9 EUR", "argumentsDigest": "ab"},
    ),
    AuditEvent.CLAIMED: (SYSTEM, {"argumentsDigest": "ab"}),
    AuditEvent.EXECUTE_SENT: (SYSTEM, {"send": 1, "idempotencyKey": "k"}),
    AuditEvent.STATUS_ASKED: (SYSTEM, {"answer": "succeeded"}),
    AuditEvent.OUTCOME: (
        {"kind": "application", "operation": "refund"},
        {"outcome": {"status": "succeeded"}},
    ),
    AuditEvent.RECONCILED: (
        {"kind": "application", "operation": "refund"},
        {"outcome": {"status": "failed"}},
    ),
    AuditEvent.HANDOFF_DONE: (ALICE, {"delivery": "d1"}),
    AuditEvent.HANDOFF_CHECK: (SYSTEM, {"status": 200}),
    AuditEvent.REMINDED: (SYSTEM, {"surface": "slack", "approvers": ["U0ALICE"], "sent": True, "why": None}),
    AuditEvent.ESCALATED: (
        SYSTEM,
        {
            "step": 1,
            "to": "oncall",
            "route": {"approvers": ["U0ADMIN"]},
            "oncall": {"rotations": ["payments"], "fallback": "PagerDuty did not answer"},
        },
    ),
    AuditEvent.ESCALATION_DELIVERED: (SYSTEM, {"step": 1, "surface": "teams"}),
    AuditEvent.ESCALATION_FAILED: (SYSTEM, {"step": 1, "why": "no channel", "retrying": False}),
    AuditEvent.APPROVAL_COUNTED: (ALICE, {"count": 1, "quorum": 2}),
    AuditEvent.CALL_EDITED: (
        ALICE,
        {"edited": {"changed": ["amountCents"], "parameters": {"amountCents": 5}}},
    ),
    AuditEvent.APPROVALS_SET_ASIDE: (
        SYSTEM,
        {"approvers": [{"by": "U0ALICE", "surface": "slack"}], "reason": "edit"},
    ),
    AuditEvent.EDIT_TEXTED: (SYSTEM, {"digest": "ab", "texted": ["+15550001"], "problems": []}),
    AuditEvent.PASSKEY_CONFIRMED: ({"kind": "passkey"}, {"credentialId": "cred-1", "userVerified": True}),
    AuditEvent.EMAIL_SENT: (SYSTEM, {"kind": "request", "to": ["ada@acme.example"], "messageId": "<m1>"}),
    AuditEvent.EMAIL_FAILED: (
        SYSTEM,
        {
            "attempt": 2,
            "reason": "the SMTP server answered 550 no",
            "retrying": False,
            "then": "denied: nobody was told",
        },
    ),
    AuditEvent.PUSH_SENT: (SYSTEM, {"sent": 2, "gone": 1, "failed": {}, "retrying": False}),
    AuditEvent.PUSH_FAILED: (
        SYSTEM,
        {"sent": 0, "gone": 0, "failed": {"fcm.googleapis.com": "HTTP 500"}, "retrying": True},
    ),
    AuditEvent.COALESCED: (
        {"kind": "agent", "tenant": "acme"},
        {"executionId": "run_2", "toolCallId": "t2", "reason": "again", "surface": {"type": "slack"}},
    ),
}


def row(seq: int, event: str, actor: dict[str, Any], data: dict[str, Any]) -> AuditRow:
    return AuditRow("apr_1", "acme", seq, AT + seq, event, json.dumps(actor), json.dumps(data), "", "")


def read(event: str) -> str:
    actor, data = SAMPLES[event]
    (entry,) = timeline([row(0, event, actor, data)])
    return " | ".join(p for p in [entry.what, entry.who, entry.where, *entry.details] if p)


def raw_fallback(event: str) -> str:
    return event.replace("_", " ").capitalize()


def test_every_audit_event_kind_has_a_sentence_of_its_own() -> None:
    kinds = [*AuditEvent, *ApprovalStatus]
    assert [k for k in kinds if not has_sentence(k)] == []
    # Each sample kind is said in words, never as the stored JSON nor the bare kind name.
    assert set(SAMPLES) == set(AuditEvent), "a new AuditEvent kind needs a sample here and a sentence"
    for kind in AuditEvent:
        actor, data = SAMPLES[kind]
        who, on = actor_of(actor)
        fallback = " | ".join(p for p in [raw_fallback(kind), who, on, *pairs(data)] if p)
        said = read(kind)
        assert "{" not in said and said != fallback, (kind, said)


def test_an_unknown_kind_is_still_said_in_words_with_its_fields() -> None:
    (entry,) = timeline([row(0, "later_kind", SYSTEM, {"note": "hello"})])
    assert not has_sentence("later_kind")
    assert (entry.what, entry.details) == ("Later kind", ["note: hello"])


@pytest.mark.parametrize(
    ("kind", "said"),
    [
        (
            AuditEvent.ALLOWANCE_GRANTED,
            "Allowed for 1h by U0ALICE — standing allow alw_7 | U0ALICE | Slack | Tool issue_refund"
            " | currency: EUR"
            " | amountCents: at most 5000 | At most 3 uses | For calls from slack:T1:U0BOT"
            " | Until 2026-12-06 10:00 UTC",
        ),
        (
            AuditEvent.ALLOWANCE_USED,
            "Approved at once by U0ALICE's standing allow alw_7 | U0ALICE's standing allow alw_7 | Slack"
            " | Use 2 of 3 | Granted on request apr_1 | In force until 2026-12-06 10:00 UTC",
        ),
        (
            AuditEvent.ALLOWANCE_REVOKED,
            "Revoked the standing allow alw_7 before it ran out | U0ALICE | Slack | Revoked by U0ALICE",
        ),
        (
            AuditEvent.PASSKEY_CONFIRMED,
            "Confirmed with a passkey (user verified) | a passkey | the inbox | Credential cred-1",
        ),
        (
            AuditEvent.COALESCED,
            "The same call asked again while this one waited: answered with this one | the agent"
            " | Execution run_2, tool call t2 | Agent's reason (its claim, not verified): again",
        ),
        (AuditEvent.EMAIL_SENT, "Emailed to ada@acme.example | Cosigner | Message <m1>"),
        (
            AuditEvent.EMAIL_FAILED,
            "Email not sent (attempt 2): denied: nobody was told | Cosigner"
            " | the SMTP server answered 550 no",
        ),
        (
            AuditEvent.PUSH_SENT,
            "Pushed to 2 device(s) | Cosigner | 1 device(s) no longer subscribed, removed",
        ),
        (AuditEvent.PUSH_FAILED, "Push not delivered | Cosigner | fcm.googleapis.com: HTTP 500 | Retried"),
        (
            AuditEvent.ESCALATED,
            "Escalated (step 1) to oncall | Cosigner | Asked of U0ADMIN | On call (payments) not reached:"
            " PagerDuty did not answer; the rule's other approvers asked instead",
        ),
    ],
)
def test_the_sentences_people_read(kind: AuditEvent, said: str) -> None:
    assert read(kind) == said


def test_an_on_call_request_names_who_was_on_call_and_who_is_unknown_here() -> None:
    data = {
        "toolName": "deploy",
        "parameters": {},
        "oncall": {
            "rotations": ["web"],
            "onCall": ["ada@acme.example", "x@acme.example"],
            "asked": ["U0ADA"],
            "unknown": ["x@acme.example"],
        },
    }
    (entry,) = timeline([row(0, AuditEvent.REQUESTED, {"kind": "agent"}, data)])
    assert entry.details[-2:] == [
        "On call (web): ada@acme.example, x@acme.example",
        "On call but unknown here: x@acme.example",
    ]


def test_a_request_a_standing_allow_approved_says_whose_allow_decided_it() -> None:
    rows = [
        row(0, AuditEvent.REQUESTED, {"kind": "agent"}, {"toolName": "issue_refund", "parameters": {}}),
        row(1, AuditEvent.ALLOWANCE_USED, *SAMPLES[AuditEvent.ALLOWANCE_USED]),
        row(2, ApprovalStatus.APPROVED, ALLOW, {}),
    ]
    closed = timeline(rows)[-1]
    assert (closed.what, closed.who, closed.where) == ("Approved", "U0ALICE's standing allow alw_7", "Slack")
