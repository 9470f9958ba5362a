"""The tables. Times are UNIX seconds (double precision) so SQLite and PostgreSQL agree."""

from __future__ import annotations

import sqlalchemy as sa

metadata = sa.MetaData()

tenants = sa.Table(
    "tenants",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("name", sa.String(100), nullable=False, unique=True),
    sa.Column("created_at", sa.Double, nullable=False),
)

api_keys = sa.Table(
    "api_keys",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),  # key_…: names a key to revoke, not a secret
    sa.Column("tenant", sa.String(100), nullable=False),
    sa.Column("scope", sa.String(16), nullable=False),  # KeyScope
    sa.Column("key_hash", sa.String(80), nullable=False, unique=True),
    sa.Column("created_at", sa.Double, nullable=False),
    sa.Index("ix_api_keys_tenant", "tenant"),
)

approvals = sa.Table(
    "approvals",
    metadata,
    sa.Column("id", sa.String(40), primary_key=True),
    sa.Column("tenant", sa.String(100), nullable=False),
    sa.Column("execution_id", sa.String(200), nullable=False),
    sa.Column("tool_call_id", sa.String(200), nullable=False),
    sa.Column("tool_name", sa.String(128), nullable=False),
    sa.Column("kind", sa.String(16), nullable=False),
    sa.Column("mode", sa.String(16), nullable=False),
    sa.Column("status", sa.String(16), nullable=False),
    sa.Column("parameters", sa.Text, nullable=False),  # redacted JSON
    sa.Column("parameters_digest", sa.String(80), nullable=False),
    sa.Column("reason", sa.Text),
    sa.Column("surface", sa.Text, nullable=False),  # JSON
    sa.Column("route", sa.Text),  # JSON
    sa.Column("delivered", sa.Text),  # JSON receipt
    sa.Column("delivery_key", sa.String(120)),  # "sms:+1555…" / "slack:C…" / "dashboard"
    sa.Column("short_code", sa.String(8), nullable=False),
    sa.Column("policy_rule", sa.String(300), nullable=False),
    sa.Column("callback_url", sa.Text),
    sa.Column("created_at", sa.Double, nullable=False),
    sa.Column("expires_at", sa.Double, nullable=False),
    sa.Column("decided_at", sa.Double),
    sa.Column("decided_by", sa.Text),  # JSON
    sa.Column("comment", sa.Text),
    sa.Column("audit_seq", sa.Integer, nullable=False),
    sa.Column("audit_head", sa.String(64), nullable=False),
    sa.Column("trace_id", sa.String(32)),  # W3C trace id (32 hex), when the approval has a trace
    sa.Column(
        "trace_context", sa.Text
    ),  # JSON: the approval span's ids and parent (bot.observability.trace_ids)
    sa.Column("operation", sa.Text),  # JSON: an operation's contract and execution (storage.operations)
    sa.Column("handoff", sa.Text),  # JSON: a handoff's steps, expect target and check (0004)
    sa.Column("edit", sa.Text),  # JSON: what an approver may edit, and the edited call (0012)
    sa.Column("follow_ups", sa.Text),  # JSON: the reminder and escalation steps taken (0010)
    sa.Column("quorum", sa.Integer, nullable=False, server_default="1"),  # distinct approvers needed (0011)
    sa.Column("separate_duties", sa.Boolean, nullable=False, server_default=sa.false()),
    # An Approve counts only once confirmed with a passkey in the inbox (0016).
    sa.Column("step_up", sa.Boolean, nullable=False, server_default=sa.false()),
    # One question, not two (0018): set on a pending tool call a person is asked about.
    sa.Column("coalesce_key", sa.String(64)),
    # The audit sink (0020): events accepted, when it may next be tried, failures in a row.
    sa.Column("sink_seq", sa.Integer, nullable=False, server_default="0"),
    sa.Column("sink_due_at", sa.Double, nullable=False, server_default="0"),
    sa.Column("sink_attempts", sa.Integer, nullable=False, server_default="0"),
    sa.UniqueConstraint("tenant", "execution_id", "tool_call_id", name="uq_approvals_call"),
    sa.Index("ix_approvals_pending_expiry", "status", "expires_at"),
    sa.Index("ix_approvals_execution", "tenant", "execution_id"),
    sa.Index("ix_approvals_delivery", "delivery_key", "status"),
    sa.Index(
        "uq_approvals_coalesce_pending",
        "coalesce_key",
        unique=True,
        sqlite_where=sa.text("status = 'pending' AND coalesce_key IS NOT NULL"),
        postgresql_where=sa.text("status = 'pending' AND coalesce_key IS NOT NULL"),
    ),
    sa.Index(
        "ix_approvals_sink_behind",
        "sink_due_at",
        sqlite_where=sa.text("audit_seq > sink_seq"),
        postgresql_where=sa.text("audit_seq > sink_seq"),
    ),
)

approval_votes = sa.Table(
    # Each approver's Approve toward a quorum above 1, at most once per person (0011).
    "approval_votes",
    metadata,
    sa.Column("approval_id", sa.String(40), primary_key=True),
    sa.Column("approver", sa.String(320), primary_key=True),
    sa.Column("surface", sa.String(16), nullable=False),
    sa.Column("at", sa.Double, nullable=False),
    # JSON: the approver's other ids an identity provider vouched for with the answer (0013).
    sa.Column("tied", sa.Text),
)

run_grants = sa.Table(
    "run_grants",
    metadata,
    sa.Column("tenant", sa.String(100), primary_key=True),
    sa.Column("execution_id", sa.String(200), primary_key=True),
    sa.Column("tool_name", sa.String(128), primary_key=True),  # folded (contracts.names.fold)
    sa.Column("requester", sa.String(320), primary_key=True),  # bot.approvals.run_grants.requester_key
    sa.Column("approval_id", sa.String(40), nullable=False),
    sa.Column("granted_by", sa.String(200), nullable=False),
    sa.Column("created_at", sa.Double, nullable=False),
)

audit_events = sa.Table(
    "audit_events",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("approval_id", sa.String(40), nullable=False),
    sa.Column("tenant", sa.String(100), nullable=False),
    sa.Column("seq", sa.Integer, nullable=False),
    sa.Column("at", sa.Double, nullable=False),
    sa.Column("event", sa.String(40), nullable=False),
    sa.Column("actor", sa.Text, nullable=False),  # JSON
    sa.Column("data", sa.Text, nullable=False),  # JSON, redacted
    sa.Column("prev_hash", sa.String(64), nullable=False),
    sa.Column("hash", sa.String(64), nullable=False),
    sa.UniqueConstraint("approval_id", "seq", name="uq_audit_seq"),
    sa.Index("ix_audit_at", "at"),
)

jobs = sa.Table(
    "jobs",
    metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    sa.Column("kind", sa.String(20), nullable=False),  # a JobKind
    sa.Column("approval_id", sa.String(40), nullable=False),
    sa.Column("payload", sa.Text, nullable=False),  # JSON
    sa.Column("due_at", sa.Double, nullable=False),
    sa.Column("deadline_at", sa.Double, nullable=False),
    sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
    sa.Column("locked_until", sa.Double, nullable=False, server_default="0"),
    sa.Column("done_at", sa.Double),
    sa.Column("last_error", sa.Text),
    sa.Index("ix_jobs_due", "done_at", "due_at"),
)

escalations = sa.Table(
    "escalations",
    metadata,
    sa.Column("approval_id", sa.String(40), primary_key=True),
    sa.Column("step", sa.Integer, primary_key=True),  # the index in the rule's `escalate`
    sa.Column("delivery_key", sa.String(120), nullable=False),  # as approvals.delivery_key
    sa.Column("at", sa.Double, nullable=False),
    sa.Index("ix_escalations_delivery", "delivery_key"),
)

sms_texts = sa.Table(
    "sms_texts",
    metadata,
    # When a text about a request last went to a number (the request, a reminder, MORE), so
    # a bare YES soon after another request's text is refused (storage.sms_state.texted_other).
    sa.Column("number", sa.String(40), primary_key=True),  # "+1555…" or "whatsapp:+1555…"
    sa.Column("approval_id", sa.String(40), primary_key=True),
    sa.Column("texted_at", sa.Double, nullable=False),
    sa.Index("ix_sms_texts_number_at", "number", "texted_at"),
)

push_subscriptions = sa.Table(
    # A browser that asked to be notified (Web Push), under each id its person's sign-in
    # vouched for; a request's approvers find it by id, a gone endpoint is deleted (0017).
    "push_subscriptions",
    metadata,
    sa.Column("approver", sa.String(320), primary_key=True),
    sa.Column("endpoint", sa.String(1000), primary_key=True),
    sa.Column("p256dh", sa.String(200), nullable=False),
    sa.Column("auth", sa.String(100), nullable=False),
    sa.Column("issuer", sa.String(500), nullable=False),
    sa.Column("subject", sa.String(500), nullable=False),
    sa.Column("created_at", sa.Double, nullable=False),
    sa.Index("ix_push_subscriptions_endpoint", "endpoint"),
)

flags = sa.Table(
    "flags",
    metadata,
    sa.Column("namespace", sa.String(40), primary_key=True),
    sa.Column("key", sa.String(200), primary_key=True),
    sa.Column("value", sa.Text, nullable=False),
    sa.Column("created_at", sa.Double, nullable=False),
)

inbox_sessions = sa.Table(
    # A signed-in inbox session, named by the SHA-256 of its random id (the cookie carries the
    # id; a copy of this table names no session anyone can use). Deleted at Sign out (0013).
    "inbox_sessions",
    metadata,
    sa.Column("id_hash", sa.String(64), primary_key=True),
    sa.Column("person", sa.Text, nullable=False),  # JSON: who signed in (bot.inbox.people.Person)
    sa.Column("tenants", sa.Text, nullable=False),  # JSON: the tenants the policy named them in then
    sa.Column("created_at", sa.Double, nullable=False),
    sa.Column("expires_at", sa.Double, nullable=False),
    sa.Index("ix_inbox_sessions_expiry", "expires_at"),
)

inbox_session_ids = sa.Table(
    # Each id a session's person holds (Slack user id, verified email and phone), case-folded:
    # how an operator ends every session of a person by any one of them (0013).
    "inbox_session_ids",
    metadata,
    sa.Column("session", sa.String(64), primary_key=True),  # inbox_sessions.id_hash
    sa.Column("person_id", sa.String(320), primary_key=True),
    sa.Index("ix_inbox_session_ids_person", "person_id"),
)

passkeys = sa.Table(
    # An approver's WebAuthn credential (a passkey) for step-up approvals (0016). `person` is
    # the issuer and subject of their inbox sign-in; the counter is the last one seen.
    "passkeys",
    metadata,
    sa.Column("credential_id", sa.String(1400), primary_key=True),  # base64url
    sa.Column("person", sa.String(700), nullable=False),
    sa.Column("name", sa.String(100), nullable=False),
    sa.Column("public_key", sa.LargeBinary, nullable=False),  # COSE
    sa.Column("sign_count", sa.BigInteger, nullable=False),
    sa.Column("created_at", sa.Double, nullable=False),
    sa.Column("used_at", sa.Double),
    sa.Index("ix_passkeys_person", "person"),
)

step_up_challenges = sa.Table(
    # A WebAuthn challenge handed to a browser, used once (0016): a registration's, or a
    # step-up's bound to the approval and the digest of the call the page showed.
    "step_up_challenges",
    metadata,
    sa.Column("challenge", sa.String(128), primary_key=True),  # base64url of 64 random bytes
    sa.Column("person", sa.String(700), nullable=False),
    sa.Column("approval_id", sa.String(40)),
    sa.Column("digest", sa.String(80)),
    sa.Column("expires_at", sa.Double, nullable=False),
    sa.Index("ix_step_up_challenges_expiry", "expires_at"),
)

batch_cards = sa.Table(
    # One card per group of requests offered together: where it is, what its buttons list (0018).
    "batch_cards",
    metadata,
    sa.Column("key", sa.String(64), primary_key=True),
    sa.Column("tenant", sa.String(100), nullable=False),
    sa.Column("surface", sa.String(16), nullable=False),
    sa.Column("conversation", sa.String(120), nullable=False),
    sa.Column("message_ref", sa.String(64), nullable=False),
    sa.Column("place", sa.String(120), nullable=False),  # the requests' delivery key (`slack:C…`)
    sa.Column("listed", sa.Text, nullable=False),  # JSON [[approval id, digest], ...]; [] withdrawn
    sa.Column("updated_at", sa.Double, nullable=False),
    sa.Index("ix_batch_cards_message", "conversation", "message_ref", unique=True),
)
