"""Initial schema: tenants, approvals, run grants, audit events, jobs, flags.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "tenants",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("name", sa.String(100), nullable=False, unique=True),
        sa.Column("api_key_hash", sa.String(80), nullable=False, unique=True),
        sa.Column("created_at", sa.Double, nullable=False),
    )
    op.create_table(
        "approvals",
        sa.Column("id", sa.String(40), primary_key=True),
        sa.Column("tenant", sa.String(100), nullable=False),
        sa.Column("execution_id", sa.String(200), nullable=False),
        sa.Column("tool_call_id", sa.String(200), nullable=False),
        sa.Column("tool_name", sa.String(128), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("mode", sa.String(16), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("parameters", sa.Text, nullable=False),
        sa.Column("parameters_digest", sa.String(80), nullable=False),
        sa.Column("reason", sa.Text),
        sa.Column("surface", sa.Text, nullable=False),
        sa.Column("route", sa.Text),
        sa.Column("delivered", sa.Text),
        sa.Column("delivery_key", sa.String(120)),
        sa.Column("short_code", sa.String(8), nullable=False),
        sa.Column("policy_rule", sa.String(300), nullable=False),
        sa.Column("callback_url", sa.Text),
        sa.Column("created_at", sa.Double, nullable=False),
        sa.Column("expires_at", sa.Double, nullable=False),
        sa.Column("decided_at", sa.Double),
        sa.Column("decided_by", sa.Text),
        sa.Column("comment", sa.Text),
        sa.Column("audit_seq", sa.Integer, nullable=False),
        sa.Column("audit_head", sa.String(64), nullable=False),
        sa.UniqueConstraint("tenant", "execution_id", "tool_call_id", name="uq_approvals_call"),
    )
    op.create_index("ix_approvals_pending_expiry", "approvals", ["status", "expires_at"])
    op.create_index("ix_approvals_execution", "approvals", ["tenant", "execution_id"])
    op.create_index("ix_approvals_delivery", "approvals", ["delivery_key", "status"])
    op.create_table(
        "run_grants",
        sa.Column("tenant", sa.String(100), primary_key=True),
        sa.Column("execution_id", sa.String(200), primary_key=True),
        sa.Column("tool_name", sa.String(128), primary_key=True),
        sa.Column("approval_id", sa.String(40), nullable=False),
        sa.Column("granted_by", sa.String(200), nullable=False),
        sa.Column("created_at", sa.Double, nullable=False),
    )
    op.create_table(
        "audit_events",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("approval_id", sa.String(40), nullable=False),
        sa.Column("tenant", sa.String(100), nullable=False),
        sa.Column("seq", sa.Integer, nullable=False),
        sa.Column("at", sa.Double, nullable=False),
        sa.Column("event", sa.String(40), nullable=False),
        sa.Column("actor", sa.Text, nullable=False),
        sa.Column("data", sa.Text, nullable=False),
        sa.Column("prev_hash", sa.String(64), nullable=False),
        sa.Column("hash", sa.String(64), nullable=False),
        sa.UniqueConstraint("approval_id", "seq", name="uq_audit_seq"),
    )
    op.create_index("ix_audit_at", "audit_events", ["at"])
    op.create_table(
        "jobs",
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
        sa.Column("kind", sa.String(20), nullable=False),
        sa.Column("approval_id", sa.String(40), nullable=False),
        sa.Column("payload", sa.Text, nullable=False),
        sa.Column("due_at", sa.Double, nullable=False),
        sa.Column("deadline_at", sa.Double, nullable=False),
        sa.Column("attempts", sa.Integer, nullable=False, server_default="0"),
        sa.Column("locked_until", sa.Double, nullable=False, server_default="0"),
        sa.Column("done_at", sa.Double),
        sa.Column("last_error", sa.Text),
    )
    op.create_index("ix_jobs_due", "jobs", ["done_at", "due_at"])
    op.create_table(
        "flags",
        sa.Column("namespace", sa.String(40), primary_key=True),
        sa.Column("key", sa.String(200), primary_key=True),
        sa.Column("value", sa.Text, nullable=False),
        sa.Column("created_at", sa.Double, nullable=False),
    )


def downgrade() -> None:
    for table in ("flags", "jobs", "audit_events", "run_grants", "approvals", "tenants"):
        op.drop_table(table)
